"""Modifiers that remove lines: by a pattern, or by C4's line rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from curator_dask import text as textkit
from curator_dask.filters.c4 import c4_line_keep
from curator_dask.stage import Modifier


@dataclass
class LineRemover(Modifier):
    """Remove every line that matches a regular expression.

    Parameters
    ----------
    pattern : str
        Searched in each line (RE2 syntax on pandas, libcudf's on cudf). Other lines,
        blank ones included, are kept unchanged and in order.
    case_sensitive : bool
        With False, the line is lower-cased before matching (write ``pattern`` in lower
        case).

    Examples
    --------
    >>> import pandas as pd
    >>> LineRemover(pattern="^Advertisement$").modify(pd.Series(["a\\nAdvertisement\\nb"])).tolist()
    ['a\\nb']
    """

    pattern: str = ""
    case_sensitive: bool = True

    def __post_init__(self) -> None:
        if not self.pattern:
            raise ValueError("LineRemover needs a non-empty pattern")

    def modify(self, text: Any) -> Any:
        t = textkit.as_text(text)
        rows = textkit.split_rows(t, "\n", drop_empty=False)
        lines = rows["piece"] if self.case_sensitive else rows["piece"].str.lower()
        rows = rows[~lines.str.contains(self.pattern)]
        return textkit.restore_index(textkit.join_rows(rows, len(t)), text.index)


@dataclass
class C4LineModifier(Modifier):
    """Keep only the lines C4 keeps (see :func:`curator_dask.filters.c4.c4_line_keep`).

    Lines are stripped; kept lines are joined with ``\\n``; a document with no kept line
    becomes ``""`` (drop it with :class:`~curator_dask.filters.WordCountFilter` or
    :class:`~curator_dask.filters.C4QualityFilter`).

    Parameters
    ----------
    min_words_per_line : int
        Fewest words in a kept line.
    remove_javascript_lines : bool
        Remove lines that mention "javascript".
    remove_policy_lines : bool
        Remove lines that mention a site policy (privacy, cookies, terms of use).

    Examples
    --------
    >>> import pandas as pd
    >>> text = "Menu\\nThis line has enough words to stay.\\nPlease enable JavaScript to see it."
    >>> C4LineModifier().modify(pd.Series([text])).tolist()
    ['This line has enough words to stay.']
    """

    min_words_per_line: int = 5
    remove_javascript_lines: bool = True
    remove_policy_lines: bool = True

    def modify(self, text: Any) -> Any:
        t = textkit.as_text(text)
        rows = textkit.split_rows(t, "\n", strip=True)
        keep = c4_line_keep(
            rows["piece"],
            min_words_per_line=self.min_words_per_line,
            remove_javascript_lines=self.remove_javascript_lines,
            remove_policy_lines=self.remove_policy_lines,
        )
        return textkit.restore_index(textkit.join_rows(rows[keep], len(t)), text.index)


#: Wikipedia-style citation and edit markers: ``[1]``, ``[12, 13]``, ``[a]``,
#: ``[citation needed]``, ``[edit]`` (case-insensitive for the words).
CITATION_PATTERN = (
    r"\[(?:\d+(?: *[,"
    + "\u2013"
    + r"\-] *\d+)*|[a-z]|"
    + textkit.ascii_nocase("citation needed")
    + "|"
    + textkit.ascii_nocase("edit")
    + r")\]"
)


@dataclass
class CitationRemover(Modifier):
    """Remove citation and edit markers left in scraped encyclopedia text (C4's cleaning).

    Parameters
    ----------
    pattern : str
        The markers to remove; default :data:`CITATION_PATTERN`. Everything else,
        whitespace included, is kept.

    Examples
    --------
    >>> import pandas as pd
    >>> CitationRemover().modify(pd.Series(["Paris[1] is big.[citation needed][edit]"])).tolist()
    ['Paris is big.']
    """

    pattern: str = CITATION_PATTERN

    def modify(self, text: Any) -> Any:
        t = textkit.as_text(text)
        return textkit.restore_index(t.str.replace(self.pattern, "", regex=True), text.index)
