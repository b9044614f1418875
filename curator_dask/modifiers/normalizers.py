"""Text normalisers: Unicode normal forms, whitespace, mojibake."""

from __future__ import annotations

import typing
import unicodedata
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from curator_dask import text as textkit
from curator_dask._backend import frame_module, to_pandas
from curator_dask.stage import Modifier

_FORMS = ("NFC", "NFKC", "NFD", "NFKD")


def _as_strings(text: Any) -> Any:
    """Arrow-backed strings on pandas (missing values stay missing)."""
    if textkit.is_cudf(text) or textkit._is_arrow_string(text.dtype):
        return text
    return text.astype(textkit.STR_DTYPE)


@dataclass
class UnicodeNormalizer(Modifier):
    """Rewrite the text in a Unicode normal form.

    Parameters
    ----------
    form : {"NFC", "NFKC", "NFD", "NFKD"}
        ``NFC`` composes characters (``e`` + combining acute -> ``é``); ``NFKC`` also
        folds compatibility characters (ligatures, full-width forms, ``①`` -> ``1``).

    Only documents with a non-ASCII character can change (found with one vectorised
    regex). ``NFD``/``NFKD`` run pyarrow's ``utf8_normalize`` kernel on the column;
    ``NFC``/``NFKC`` call :func:`unicodedata.normalize` per document, because pyarrow's
    kernel does not compose (it returns the decomposed form for every ``form``:
    apache/arrow#51225, fixed after pyarrow 22). On cudf, which has no normalisation
    kernel, the changed documents make a round trip through host memory.

    Examples
    --------
    >>> import pandas as pd
    >>> UnicodeNormalizer(form="NFKC").modify(pd.Series(["ﬁne ①"])).tolist()
    ['fine 1']
    """

    form: str = "NFC"

    def __post_init__(self) -> None:
        if self.form not in _FORMS:
            raise ValueError(f"form must be one of {_FORMS}, got {self.form!r}")

    def modify(self, text: Any) -> Any:
        t = _as_strings(text)
        todo = t.str.contains(_NON_ASCII).fillna(False).astype(bool)
        if not bool(todo.any()):
            return t
        subset = to_pandas(t[todo])
        if self.form in ("NFD", "NFKD"):
            fixed = pc.utf8_normalize(pa.array(subset), self.form).to_pylist()
        else:
            # Per-document loop (C implementation): see apache/arrow#51225 above.
            form = typing.cast("typing.Literal['NFC', 'NFKC']", self.form)
            fixed = [unicodedata.normalize(form, s) for s in subset.tolist()]
        return _patch(t, todo, fixed)


def _patch(text: Any, todo: Any, values: list[str]) -> Any:
    """Replace the rows of ``text`` selected by ``todo`` with ``values``, in row order.

    cudf's ``where`` does not align ``other`` by index (it wants a column of the same
    length), so the patch is spread over the whole length first, by position.
    """
    cudf = textkit.is_cudf(text)
    mod = frame_module("cudf") if cudf else pd
    index = text.index
    text = text.reset_index(drop=True)
    todo = todo.reset_index(drop=True)
    patch = mod.Series(values, index=todo[todo].index, dtype=None if cudf else textkit.STR_DTYPE)
    out = text.where(~todo, patch.reindex(text.index))
    out.index = index
    return out


# libcudf's regex parser (tests/_libcudf_regex.py has its rules): a NUL is written as the
# escape \x00 (a literal one ends the pattern there); a range's END is read as the
# character after a backslash, unconverted, so it is the character itself; a non-ASCII
# character is itself too (an escape gives the bare number, not its UTF-8 bytes). RE2
# reads both spellings alike.
_NON_ASCII = "[^\\x00-\x7f]"
# Line breaks other than "\n" (Windows, old Mac, Unicode line/paragraph separators, form
# feed, vertical tab, NEL, file/group/record separators) become "\n".
_LINE_BREAKS = "\\r\\n|[\\r\\x0b\\x0c\\x1c\\x1d\\x1e\x85\u2028\u2029]"
# Control characters other than "\t" and "\n" (C0, DEL, C1) are removed.
_CONTROLS = "[\\x00-\x08\\x0e-\x1b\\x1f\\x7f-\x84\x86-\x9f]"
# Unicode space separators become an ASCII space.
_SPACES = "[\xa0\u1680\u2000-\u200a\u202f\u205f\u3000]"


@dataclass
class WhitespaceNormalizer(Modifier):
    """Normalise line breaks, control characters and runs of spaces.

    In order: every line break (``\\r\\n``, ``\\r``, vertical tab, form feed, NEL,
    U+2028/2029, ASCII separators) becomes ``\\n``; other control characters except
    ``\\t`` are removed; Unicode spaces (no-break, em, ideographic...) become ``" "``;
    inside a line, a run of two or more spaces/tabs becomes one space (indentation at the
    start of a line is kept); whitespace at the end of a line is removed; more than
    ``max_consecutive_newlines`` line breaks in a row are cut to that many; the text is
    stripped.

    Parameters
    ----------
    max_consecutive_newlines : int
        Longest kept run of ``\\n`` (2 keeps paragraph breaks).

    Examples
    --------
    >>> import pandas as pd
    >>> WhitespaceNormalizer().modify(pd.Series(["a  b\\r\\n\\r\\n\\r\\nc\\x00 "])).tolist()
    ['a b\\n\\nc']
    """

    max_consecutive_newlines: int = 2

    def __post_init__(self) -> None:
        if self.max_consecutive_newlines < 1:
            raise ValueError(
                f"max_consecutive_newlines must be >= 1, got {self.max_consecutive_newlines}"
            )

    def modify(self, text: Any) -> Any:
        # Piece by piece: each step below copies the text.
        return textkit.map_pieces(_as_strings(text), self._normalise)

    def _normalise(self, t: Any) -> Any:
        t = t.str.replace(_LINE_BREAKS, "\n", regex=True)
        t = t.str.replace(_CONTROLS, "", regex=True)
        t = t.str.replace(_SPACES, " ", regex=True)
        t = _replace_with_backrefs(t, r"([^ \t\n])[ \t]{2,}", "\\1 ")
        t = t.str.replace(r"[ \t]+\n", "\n", regex=True)
        k = self.max_consecutive_newlines
        t = t.str.replace(rf"\n{{{k + 1},}}", "\n" * k, regex=True)
        return t.str.strip()


def _replace_with_backrefs(text: Any, pattern: str, repl: str) -> Any:
    if textkit.is_cudf(text):
        return text.str.replace_with_backrefs(pattern, repl)
    return text.str.replace(pattern, repl, regex=True)


@dataclass
class MojibakeFixer(Modifier):
    """Repair text decoded with the wrong encoding (``Ã©`` -> ``é``) with ftfy.

    Parameters
    ----------
    encoding_only : bool
        Only undo encoding mix-ups (ftfy's ``fix_encoding`` and related fixes). With
        False, apply all of ftfy's default fixes (HTML entities, curly quotes, ligatures,
        full-width characters, line breaks, NFC).

    ftfy is a Python library with no vectorised form, so this stage loops over
    documents in Python. With ``encoding_only`` it only visits documents that contain a
    non-ASCII character (found with one vectorised regex), since pure ASCII cannot hold
    mojibake. On cudf the visited documents make a round trip through host memory.

    Examples
    --------
    >>> import pandas as pd
    >>> MojibakeFixer().modify(pd.Series(["cafÃ©", "plain"])).tolist()
    ['café', 'plain']
    """

    encoding_only: bool = True

    def _config(self) -> Any:
        import ftfy

        if not self.encoding_only:
            return ftfy.TextFixerConfig()
        return ftfy.TextFixerConfig(
            unescape_html=False,
            remove_terminal_escapes=False,
            fix_latin_ligatures=False,
            fix_character_width=False,
            uncurl_quotes=False,
            fix_line_breaks=False,
            remove_control_chars=False,
            normalization=None,
            explain=False,
        )

    def modify(self, text: Any) -> Any:
        import ftfy

        t = _as_strings(text)
        if self.encoding_only:
            todo = t.str.contains(_NON_ASCII).fillna(False).astype(bool)
        else:
            todo = t.notna()
        if not bool(todo.any()):
            return t
        config = self._config()
        subset = to_pandas(t[todo])
        # Per-document Python loop: ftfy has no vectorised form.
        fixed = [ftfy.fix_text(s, config) for s in subset.tolist()]
        return _patch(t, todo, fixed)
