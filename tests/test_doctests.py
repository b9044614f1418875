"""Every docstring example in the package runs (numpydoc Examples sections)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import curator_dask

MODULES = sorted(
    m.name for m in pkgutil.walk_packages(curator_dask.__path__, prefix="curator_dask.")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
