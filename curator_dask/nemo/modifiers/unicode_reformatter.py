"""``nemo_curator.modifiers.unicode_reformatter``: :class:`UnicodeReformatter`."""

from __future__ import annotations

from typing import Any, Literal

import pandas as pd

from curator_dask.nemo.modifiers.doc_modifier import DocumentModifier
from curator_dask.nemo.utils.decorators import batched


class UnicodeReformatter(DocumentModifier):
    """Repair each document with ftfy, configured as NeMo's ``UnicodeReformatter``.

    Takes a ``ftfy.TextFixerConfig`` (``config``) or its fields as keyword arguments, with
    NeMo's defaults (mojibake repair, HTML entities, terminal escapes, C1 controls,
    surrogates and control characters fixed; ligatures, widths, quotes, line breaks and
    Unicode normalisation left alone). Runs ``ftfy.fix_text`` once per document, in one
    task per partition (ftfy has no vectorised form).
    """

    def __init__(
        self,
        config: Any = None,
        unescape_html: str | bool = "auto",
        remove_terminal_escapes: bool = True,
        fix_encoding: bool = True,
        restore_byte_a0: bool = True,
        replace_lossy_sequences: bool = True,
        decode_inconsistent_utf8: bool = True,
        fix_c1_controls: bool = True,
        fix_latin_ligatures: bool = False,
        fix_character_width: bool = False,
        uncurl_quotes: bool = False,
        fix_line_breaks: bool = False,
        fix_surrogates: bool = True,
        remove_control_chars: bool = True,
        normalization: Literal["NFC", "NFD", "NFKC", "NFKD"] | None = None,
        max_decode_length: int = 1_000_000,
        explain: bool = True,
    ) -> None:
        import ftfy

        if config is None:
            config = ftfy.TextFixerConfig(
                unescape_html=unescape_html,
                remove_terminal_escapes=remove_terminal_escapes,
                fix_encoding=fix_encoding,
                restore_byte_a0=restore_byte_a0,
                replace_lossy_sequences=replace_lossy_sequences,
                decode_inconsistent_utf8=decode_inconsistent_utf8,
                fix_c1_controls=fix_c1_controls,
                fix_latin_ligatures=fix_latin_ligatures,
                fix_character_width=fix_character_width,
                uncurl_quotes=uncurl_quotes,
                fix_line_breaks=fix_line_breaks,
                fix_surrogates=fix_surrogates,
                remove_control_chars=remove_control_chars,
                normalization=normalization,
                max_decode_length=max_decode_length,
                explain=explain,
            )
        self.config = config

    @batched
    def modify_document(self, text: Any) -> Any:
        import ftfy

        series = text if isinstance(text, pd.Series) else text.to_pandas()
        fixed = [t if not isinstance(t, str) else ftfy.fix_text(t, config=self.config)
                 for t in series.astype(object)]  # fmt: skip
        out = pd.Series(fixed, index=series.index, dtype=series.dtype)
        return out if isinstance(text, pd.Series) else type(text).from_pandas(out)


__all__ = ["UnicodeReformatter"]
