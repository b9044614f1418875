"""dask's HTML widgets load Jinja2 when one is first drawn, not with ``import dask``.

``import dask`` imports ``dask.widgets`` (through ``dask.highlevelgraph``), which imports Jinja2
to draw the HTML of graphs, collections, clients and clusters in a notebook: about 0.04 CPU-s
and 2 MB of every process that imports curator_dask, a command run included, which draws none
(issue 22; ``bench/bench_fuzzy_cost.py``). dask already runs without Jinja2 (``dask.widgets``
then holds functions that raise ImportError when called). :func:`import_dask` imports dask
that way, then puts functions that import the real widgets on first call where dask holds
the raising ones: ``dask.widgets`` itself (for modules imported later: ``dask.array``,
``dask.dataframe``, ``distributed``) and the dask modules already imported from it
(``dask.highlevelgraph``). So every HTML repr draws as before; distributed's dashboard is
untouched (bokeh imports Jinja2 itself). Where dask was imported first, nothing changes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

_WIDGETS = "dask.widgets.widgets"  # the module that imports Jinja2
_NAMES = ("get_template", "get_environment")


class _NotNow:
    """A meta path finder that refuses :data:`_WIDGETS` (only while dask imports)."""

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name == _WIDGETS:
            raise ImportError(f"{name}: imported when a widget is first drawn")
        return None


def import_dask() -> None:
    """Import dask without Jinja2; its widgets import it when one is first drawn."""
    if "dask" in sys.modules:
        return
    finder = _NotNow()
    sys.meta_path.insert(0, finder)  # type: ignore[arg-type]
    try:
        import dask  # noqa: F401
    finally:
        sys.meta_path.remove(finder)  # type: ignore[arg-type]
    widgets = sys.modules.get("dask.widgets")
    if widgets is None or _WIDGETS in sys.modules:
        return  # this dask imports no widgets, or imported them some other way
    raising = {name: getattr(widgets, name, None) for name in _NAMES}
    on_call = {"get_template": _get_template, "get_environment": _get_environment}
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").partition(".")[0] != "dask":
            continue
        for name, function in raising.items():
            if function is not None and vars(module).get(name) is function:
                setattr(module, name, on_call[name])


def _widgets() -> Any:
    """The real ``dask.widgets.widgets``, put in ``dask.widgets`` for later callers, with
    the template folders and filters that others added to ``dask.widgets`` meanwhile
    (``distributed.widgets`` adds its own on import)."""
    import dask.widgets.widgets as real

    widgets = sys.modules["dask.widgets"]
    if widgets.TEMPLATE_PATHS is not real.TEMPLATE_PATHS:
        real.TEMPLATE_PATHS.extend(
            p for p in widgets.TEMPLATE_PATHS if p not in real.TEMPLATE_PATHS
        )
        real.FILTERS.update(widgets.FILTERS)
        for name in ("FILTERS", "TEMPLATE_PATHS", *_NAMES):
            setattr(widgets, name, getattr(real, name))
    return real


def _get_template(name: str) -> Any:
    return _widgets().get_template(name)


def _get_environment() -> Any:
    return _widgets().get_environment()
