"""Simple content filters: a substring at a position, pornographic URLs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from curator_dask import text as S
from curator_dask.stage import Filter

_POSITIONS = ("any", "prefix", "suffix")


@dataclass(kw_only=True)
class SubstringFilter(Filter):
    """Keep documents containing ``substring`` (anywhere, at the start or at the end).

    Parameters
    ----------
    substring : str
        Matched literally and case-sensitively.
    position : {"any", "prefix", "suffix"}
        Where it must be.

    Examples
    --------
    >>> import pandas as pd
    >>> f = SubstringFilter(substring="ab", position="prefix")
    >>> f.process(pd.DataFrame({"text": ["abc", "cab"]}))["text"].tolist()
    ['abc']
    """

    substring: str = ""
    position: str = "any"

    def __post_init__(self) -> None:
        if self.position not in _POSITIONS:
            raise ValueError(f"position must be one of {_POSITIONS}, got {self.position!r}")

    def keep(self, text: Any) -> Any:
        t = S.as_text(text)
        if self.position == "prefix":
            hit = t.str.startswith(self.substring)
        elif self.position == "suffix":
            hit = t.str.endswith(self.substring)
        else:
            hit = t.str.contains(self.substring, regex=False)
        return S.restore_index(hit.astype(bool), text.index)


@dataclass(kw_only=True)
class PornographicUrlsFilter(Filter):
    """Drop documents whose URL column contains ``porn`` (case-insensitive).

    Set ``text_column`` to the column holding the URL (default ``"url"``).
    """

    text_column: str = "url"

    def keep(self, text: Any) -> Any:
        t = S.as_text(text)
        return S.restore_index(~t.str.lower().str.contains("porn", regex=False), text.index)
