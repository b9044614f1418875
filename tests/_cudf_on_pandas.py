"""A stand-in ``cudf`` module built on pandas, to drive the package's cudf code paths on a CPU.

Its Series and DataFrame are pandas subclasses whose ``__module__`` starts with ``cudf``,
so :func:`curator_dask.text.is_cudf` takes them for cudf objects and every ``if cudf``
branch runs. Their ``.str`` accessor records each pattern the package sends to a regex
method, read with cudf 26.10's defaults (``contains`` and ``replace`` treat the pattern
as a regex unless ``regex=False``; ``split`` does when the pattern is longer than one
character), then computes the result with pandas. The results are pandas' (RE2), not
libcudf's: this checks what is sent, the ``gpu`` tests check what comes back.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd
from pandas.core.strings.accessor import StringMethods

# method -> (position of the pattern, regex when the caller does not say)
_REGEX_METHODS = {
    "contains": True,
    "count": True,
    "match": True,
    "fullmatch": True,
    "extract": True,
    "extractall": True,
    "findall": True,
    "find_re": True,
    "replace": True,
    "replace_with_backrefs": True,
    "split": None,
    "rsplit": None,
}


class Recorder:
    """Patterns sent to regex methods, and ``replace`` calls that leave ``regex`` unsaid."""

    def __init__(self) -> None:
        self.patterns: list[tuple[str, str]] = []
        self.implicit: list[tuple[str, str]] = []

    def seen(self, method: str, args: tuple, kwargs: dict) -> None:
        pat = args[0] if args else kwargs.get("pat")
        if not isinstance(pat, str):
            return
        regex = kwargs.get("regex", _REGEX_METHODS[method])
        if method == "replace" and "regex" not in kwargs:
            # pandas reads the pattern literally by default, cudf as a regex
            self.implicit.append((method, pat))
        if regex is None:
            regex = len(pat) > 1
        if regex:
            self.patterns.append((method, pat))


RECORDER = Recorder()


class _Str:
    def __init__(self, series: pd.Series) -> None:
        self._acc = StringMethods(series)
        self._series = series

    def split(self, pat: Any = None, *args: Any, **kwargs: Any) -> Any:
        if pat is None and not args:
            # cudf splits on ASCII whitespace only (characters up to U+0020), not on
            # Python's (no-break space, U+3000, NEL...)
            return self._acc.split(r"[\x00-\x20]+", regex=True, **kwargs)
        return self.__getattr__("split")(pat, *args, **kwargs)

    def code_points(self) -> pd.Series:
        """cudf's: a row per character, its UTF-8 bytes packed big-endian (int32)."""
        units = [int.from_bytes(c.encode(), "big") for t in self._series.fillna("") for c in t]
        return Series(np.array(units, dtype=np.uint32).view(np.int32))

    def __getattr__(self, name: str) -> Any:
        meth = getattr(self._acc, name, None)
        if name == "replace_with_backrefs":  # cudf only; RE2 reads \1 the same way

            def meth(pat: str, repl: str) -> Any:
                return self._acc.replace(pat, repl, regex=True)

        if meth is None:
            raise AttributeError(name)
        if name not in _REGEX_METHODS:
            return meth

        def call(*args: Any, **kwargs: Any) -> Any:
            RECORDER.seen(name, args, kwargs)
            return meth(*args, **kwargs)

        return call


class Series(pd.Series):
    @property
    def _constructor(self) -> type:
        return Series

    @property
    def _constructor_expanddim(self) -> type:
        return DataFrame

    @property
    def str(self) -> _Str:  # type: ignore[override]
        return _Str(self)

    def to_pandas(self) -> pd.Series:
        return pd.Series(self)

    def where(self, cond: Any, other: Any = np.nan, **kwargs: Any) -> Any:  # type: ignore[override]
        # cudf does not align ``other`` by index: it needs a column of the same length
        if isinstance(other, pd.Series) and len(other) != len(self):
            raise ValueError("Both columns must be of the same size (cudf's where)")
        return super().where(cond, other, **kwargs)


class DataFrame(pd.DataFrame):
    @property
    def _constructor(self) -> type:
        return DataFrame

    @property
    def _constructor_sliced(self) -> type:
        return Series

    def to_pandas(self) -> pd.DataFrame:
        return pd.DataFrame(self)


Series.__module__ = "cudf.core.series"
DataFrame.__module__ = "cudf.core.dataframe"


def from_pandas(obj: Any) -> Any:
    return DataFrame(obj) if isinstance(obj, pd.DataFrame) else Series(obj)


@contextmanager
def cudf_on_pandas() -> Iterator[Recorder]:
    """Install the stand-in as ``cudf`` and yield a fresh recorder."""
    global RECORDER
    mod = types.ModuleType("cudf")
    mod.Series, mod.DataFrame, mod.from_pandas = Series, DataFrame, from_pandas
    mod.concat = lambda objs, **kw: from_pandas(pd.concat(objs, **kw))
    RECORDER = Recorder()
    saved = sys.modules.get("cudf")
    sys.modules["cudf"] = mod
    try:
        yield RECORDER
    finally:
        if saved is None:
            sys.modules.pop("cudf", None)
        else:
            sys.modules["cudf"] = saved
