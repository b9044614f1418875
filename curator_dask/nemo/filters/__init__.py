"""``nemo_curator.filters``: :class:`DocumentFilter` and the heuristic filters, NeMo's names.

Each heuristic filter takes NeMo Curator's constructor arguments (the repetition filters'
``max_repeated_*`` names, ``lang=``) and runs curator_dask's vectorised filter of the same
name: ``score_document`` and ``keep_document`` are batched (one call per partition).
NeMo's repetition thresholds are the smallest kept share of *unique* lines/paragraphs
(``max_repeated_line_fraction=0.7`` keeps a document whose unique-line share is at least
0.7), exactly what curator_dask's ``min_unique_*`` arguments mean, so values carry over.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from curator_dask import filters as native
from curator_dask import text as text_kit
from curator_dask.filters.content import BUNDLED_HISTOGRAMS
from curator_dask.nemo.utils.decorators import batched
from curator_dask.stage import Filter


def _char_class(chars: str) -> str:
    """A regex character class matching any of ``chars``.

    In the syntax RE2 and libcudf share: ``\\ ] ^ -`` escaped with a backslash, ASCII
    control characters and ``[`` as ``\\xHH`` (libcudf's parser stops at a literal NUL),
    every other character as itself (libcudf reads ``\\xHH`` as a bare number, which no
    non-ASCII character of a text is: it compares UTF-8 bytes).
    """

    def member(c: str) -> str:
        if c in "\\]^-":
            return "\\" + c
        if c == "[" or ord(c) < 0x20 or ord(c) == 0x7F:
            return f"\\x{ord(c):02x}"
        return c

    return "[" + "".join(member(c) for c in chars) + "]"


#: What Python's ``str.strip()`` removes from the ends of a text (ASCII and Unicode spaces).
_WHITESPACE = "".join(c for c in map(chr, range(0x3000 + 1)) if c.isspace())
_STRIP = f"^{_char_class(_WHITESPACE)}+|{_char_class(_WHITESPACE)}+$"


class DocumentFilter:
    """Base of NeMo-style filters: implement ``score_document`` and ``keep_document``.

    Both are called once per document, or once per partition with a Series when
    decorated with :func:`curator_dask.nemo.utils.decorators.batched`.
    """

    _name: str | None = None

    def score_document(self, text: Any) -> Any:
        """The score of one document (or of a Series of documents when batched)."""
        raise NotImplementedError(f"{type(self).__name__} must implement score_document")

    def keep_document(self, score: Any) -> Any:
        """True to keep the document with this score (a bool Series when batched)."""
        raise NotImplementedError(f"{type(self).__name__} must implement keep_document")

    @property
    def name(self) -> str:
        """The filter's name (NeMo's ``_name``, else the class name)."""
        return self._name or type(self).__name__


class _NativeFilter(DocumentFilter):
    """A DocumentFilter running a curator_dask filter, built from NeMo's arguments."""

    _native: ClassVar[Callable[..., Filter]]
    #: NeMo argument -> curator_dask argument
    _rename: ClassVar[dict[str, str]] = {}
    #: NeMo's defaults where they differ from ours, or arguments ours does not have
    _defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, **kwargs: Any) -> None:
        self.lang = kwargs.pop("lang", "en")
        args = {**self._defaults, **kwargs}
        if "lang" in getattr(self._native, "__dataclass_fields__", {}):
            args["lang"] = self.lang
        self.filter = self._native(**{self._rename.get(k, k): v for k, v in args.items()})

    @batched
    def score_document(self, text: Any) -> Any:
        if not self.filter.has_score():  # a keep rule: the score is 1 to keep, 0 to drop
            return self.filter.keep(text).astype("int64")
        return self.filter.score(text)

    @batched
    def keep_document(self, score: Any) -> Any:
        if not self.filter.has_score():
            return score.astype(bool)
        return self.filter.keep_score(score)


def _nemo(
    native_cls: Callable[..., Filter], rename: dict[str, str] | None = None, **defaults: Any
) -> type:
    cls = type(
        getattr(native_cls, "__name__", "Filter"),
        (_NativeFilter,),
        {
            "_native": staticmethod(native_cls),
            "_rename": rename or {},
            "_defaults": defaults,
            "__doc__": f"NeMo's ``{getattr(native_cls, '__name__', '')}`` arguments, "
            f"run by :class:`curator_dask.filters.{getattr(native_cls, '__name__', '')}`.",
            "__module__": __name__,
        },
    )
    return cls


WordCountFilter = _nemo(native.WordCountFilter)
NonAlphaNumericFilter = _nemo(native.NonAlphaNumericFilter)
SymbolsToWordsFilter = _nemo(native.SymbolsToWordsFilter)
NumbersFilter = _nemo(native.NumbersFilter)
UrlsFilter = _nemo(native.UrlsFilter)
BulletsFilter = _nemo(native.BulletsFilter)
WhiteSpaceFilter = _nemo(native.WhiteSpaceFilter)
ParenthesesFilter = _nemo(native.ParenthesesFilter)
LongWordFilter = _nemo(native.LongWordFilter)
MeanWordLengthFilter = _nemo(native.MeanWordLengthFilter)
EllipsisFilter = _nemo(native.EllipsisFilter)
PunctuationFilter = _nemo(native.PunctuationFilter)
WordsWithoutAlphabetsFilter = _nemo(native.WordsWithoutAlphabetsFilter)
BoilerPlateStringFilter = _nemo(native.BoilerPlateStringFilter)


class CommonEnglishWordsFilter(_nemo(native.CommonEnglishWordsFilter)):  # type: ignore[misc]
    """NeMo's ``CommonEnglishWordsFilter(min_num_common_words=2, stop_at_false=True)``.

    ``stop_at_false`` (stop counting at the first miss) only changes how NeMo counted, not
    whether the count reaches the minimum, so it is accepted and ignored.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.pop("stop_at_false", None)
        super().__init__(**kwargs)


RepeatedLinesFilter = _nemo(
    native.RepeatedLinesFilter, {"max_repeated_line_fraction": "min_unique_line_fraction"}
)
RepeatedParagraphsFilter = _nemo(
    native.RepeatedParagraphsFilter,
    {"max_repeated_paragraphs_ratio": "min_unique_paragraph_fraction"},
)
RepeatedLinesByCharFilter = _nemo(
    native.RepeatedLinesByCharFilter,
    {"max_repeated_lines_char_ratio": "min_unique_line_char_fraction"},
)
RepeatedParagraphsByCharFilter = _nemo(
    native.RepeatedParagraphsByCharFilter,
    {"max_repeated_paragraphs_char_ratio": "min_unique_paragraph_char_fraction"},
)
# NeMo's n-gram filters default to n=2 with a 0.2 ratio whatever n is.
RepeatingTopNGramsFilter = _nemo(
    native.RepeatingTopNGramsFilter, n=2, max_repeating_ngram_ratio=0.2
)
RepeatingDuplicateNGramsFilter = _nemo(
    native.RepeatingDuplicateNGramsFilter, n=2, max_repeating_duplicate_ngram_ratio=0.2
)

XMLHeaderFilter = _nemo(native.XMLHeaderFilter)
AlphaFilter = _nemo(native.AlphaFilter)
HTMLBoilerplateFilter = _nemo(native.HTMLBoilerplateFilter)
NumberOfLinesOfCodeFilter = _nemo(native.NumberOfLinesOfCodeFilter)
PythonCommentToCodeFilter = _nemo(native.PythonCommentToCodeFilter)
SubstringFilter = _nemo(native.SubstringFilter)
TokenizerFertilityFilter = _nemo(
    native.TokenizerFertilityFilter, {"path_to_tokenizer": "tokenizer_path"}
)

#: NeMo's ``language`` values (MIME types) -> :data:`curator_dask.filters.code.COMMENT_SYNTAX`
MIME_LANGUAGES = {
    "text/x-c": "c",
    "text/x-c++": "cpp",
    "text/x-java": "java",
    "text/javascript": "javascript",
    "text/x-go": "go",
    "text/x-rust": "rust",
    "text/x-sql": "sql",
    "text/x-lua": "lua",
    "text/x-haskell": "haskell",
    "text/x-shellscript": "shell",
    "text/x-ruby": "ruby",
    "text/x-r": "r",
    "text/x-python": "python",
}


class GeneralCommentToCodeFilter(_nemo(native.GeneralCommentToCodeFilter)):  # type: ignore[misc]
    """NeMo's ``GeneralCommentToCodeFilter(language, ...)``; ``language`` may be a MIME type."""

    def __init__(self, language: str, **kwargs: Any) -> None:
        super().__init__(language=MIME_LANGUAGES.get(language, language), **kwargs)


PornographicUrlsFilter = _nemo(native.PornographicUrlsFilter)


class PerExtensionFilter(_nemo(native.PerExtensionFilter)):  # type: ignore[misc]
    """NeMo's ``PerExtensionFilter(lang, extension, metadata_file="code_meta.csv")``.

    The metadata file has NeMo's columns; none ships with curator_dask, so the default
    name must exist where the script runs (it is read there, once).
    """

    def __init__(self, lang: str, extension: str, metadata_file: str = "code_meta.csv") -> None:
        super().__init__(lang=lang, extension=extension, metadata_file=metadata_file)


class TokenCountFilter(_nemo(native.TokenCountFilter)):  # type: ignore[misc]
    """NeMo's ``TokenCountFilter(tokenizer, hf_model_name, hf_token, min_tokens, max_tokens)``.

    ``hf_model_name`` must be a local directory holding ``tokenizer.json`` (a model saved
    with ``save_pretrained``) or that file: curator_dask does not download models, so
    ``hf_token`` has nothing to do and is refused. ``tokenizer`` may be a
    ``tokenizers.Tokenizer`` or a Hugging Face fast tokenizer (its ``backend_tokenizer``);
    it travels in the task graph as its JSON. Tokens are counted as NeMo counts them
    (``tokenizer.encode(text)``): with the special tokens the tokenizer adds.
    """

    def __init__(
        self,
        tokenizer: Any = None,
        hf_model_name: str | None = None,
        hf_token: str | None = None,
        min_tokens: int = 0,
        max_tokens: float = float("inf"),
    ) -> None:
        if (tokenizer is None) == (hf_model_name is None):
            raise ValueError("give either tokenizer or hf_model_name (a local directory)")
        if hf_token is not None:
            raise ValueError("hf_token: curator_dask loads tokenizers from local files only")
        args: dict[str, Any] = {"min_tokens": min_tokens, "add_special_tokens": True}
        if max_tokens != float("inf"):
            args["max_tokens"] = int(max_tokens)
        self._encoder = None
        self._bounds = (min_tokens, max_tokens)
        if tokenizer is not None:
            backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
            if not hasattr(backend, "to_str"):
                if not callable(getattr(tokenizer, "encode", None)):
                    raise TypeError(
                        "tokenizer must have an encode(text) method (NeMo's contract), or be "
                        "a tokenizers.Tokenizer or a Hugging Face fast tokenizer"
                    )
                # Any object with encode(): counted as NeMo counts, len(encode(text)), one
                # document at a time (it travels in the task graph, pickled).
                self._encoder = tokenizer
                self.lang = "en"
                return
            args["tokenizer_json"] = backend.to_str()
        else:
            path = Path(str(hf_model_name))
            if not (path / "tokenizer.json").is_file() and not (
                path.suffix == ".json" and path.is_file()
            ):
                raise ValueError(
                    f"hf_model_name={hf_model_name!r}: not a local directory with tokenizer.json "
                    "(curator_dask does not download models; save the tokenizer there first)"
                )
            args["tokenizer_path"] = str(path.resolve())
        super().__init__(**args)

    @batched
    def score_document(self, text: Any) -> Any:
        if self._encoder is None:
            return super().score_document(text)
        encode = self._encoder.encode
        counts = [len(encode(t)) if isinstance(t, str) else 0 for t in text.astype(object)]
        return pd.Series(counts, index=text.index, dtype="int64")

    @batched
    def keep_document(self, score: Any) -> Any:
        if self._encoder is None:
            return super().keep_document(score)
        low, high = self._bounds
        return (score >= low) & (score <= high)


def _nemo_cache_dir(cache_dir: str | None) -> Path:
    """NeMo's cache directory: ``cache_dir``, else the user's cache folder (platformdirs)."""
    if cache_dir:
        return Path(cache_dir)
    try:
        from platformdirs import user_cache_dir
    except ImportError:  # platformdirs' answer on Linux
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(user_cache_dir())


class HistogramFilter(DocumentFilter):
    """NeMo's ``HistogramFilter(lang="en", threshold=0.8, cache_dir="", threshold_char="]")``.

    NLLB's character-histogram check: the share of a document's characters that are in
    the language's histogram. Scored as NeMo scores it: on the text stripped of leading
    and trailing whitespace, characters in the histogram over all characters (inner
    whitespace included), 0 for an empty text; kept when the score is *above*
    ``threshold``. The histogram is read as NeMo reads it, from
    ``<cache_dir>/histograms/<lang>`` or the layout of M2M-100's ``histograms.tar.gz``
    extracted there (``.../checkpoint/edunov/cc60_multilingual/clean_hists/<lang>``):
    the first character of each line, up to the line starting with ``threshold_char``.
    curator_dask downloads nothing: without such a file, ``lang="en"`` uses the English
    histogram bundled with :class:`curator_dask.filters.HistogramFilter` (visible
    characters only, so whitespace counts as in it), and other languages raise
    ``FileNotFoundError``. ``cache_dir=""`` is NeMo's default, the user's cache folder.
    Runs vectorised, once per partition.
    """

    _name = "histogram"

    def __init__(
        self,
        lang: str | None = "en",
        threshold: float | None = 0.8,
        cache_dir: str | None = "",
        threshold_char: str | None = "]",
    ) -> None:
        self.lang = lang or "en"
        self.threshold = 0.8 if threshold is None else float(threshold)
        self.threshold_char = threshold_char or "]"
        root = _nemo_cache_dir(cache_dir) / "histograms"
        candidates = [
            root / self.lang,
            root / "checkpoint" / "edunov" / "cc60_multilingual" / "clean_hists" / self.lang,
        ]
        path = next((c for c in candidates if c.is_file()), None)
        if path is not None:
            chars = []
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if line[:1] == self.threshold_char:
                        break
                    chars.append(line[:1])
            self.histogram = "".join(sorted(set(chars) - {""}))
            self.source = str(path)
        elif self.lang in BUNDLED_HISTOGRAMS:
            bundled = native.HistogramFilter(lang=self.lang).histogram
            self.histogram = "".join(sorted({*str(bundled), *_WHITESPACE}))
            self.source = f"bundled:{self.lang}"
        else:
            raise FileNotFoundError(
                f"HistogramFilter(lang={self.lang!r}): no histogram at {candidates[0]} or "
                f"{candidates[1]}; curator_dask downloads nothing: extract M2M-100's "
                f"histograms.tar.gz under {root} (bundled: {BUNDLED_HISTOGRAMS})"
            )
        self._pattern = _char_class(self.histogram)

    @batched
    def score_document(self, text: Any) -> Any:
        t = text_kit.as_text(text)
        stripped = t.str.replace(_STRIP, "", regex=True)
        total = stripped.str.len()
        inside = stripped.str.count(self._pattern) if self.histogram else total * 0
        score = (inside / total.where(total > 0, 1)).where(total > 0, 0.0).astype("float64")
        return text_kit.restore_index(score, text.index)

    @batched
    def keep_document(self, score: Any) -> Any:
        return score > self.threshold


__all__ = [
    "AlphaFilter",
    "BoilerPlateStringFilter",
    "BulletsFilter",
    "CommonEnglishWordsFilter",
    "DocumentFilter",
    "EllipsisFilter",
    "GeneralCommentToCodeFilter",
    "HTMLBoilerplateFilter",
    "HistogramFilter",
    "LongWordFilter",
    "MeanWordLengthFilter",
    "NonAlphaNumericFilter",
    "NumberOfLinesOfCodeFilter",
    "NumbersFilter",
    "ParenthesesFilter",
    "PerExtensionFilter",
    "PornographicUrlsFilter",
    "PunctuationFilter",
    "PythonCommentToCodeFilter",
    "RepeatedLinesByCharFilter",
    "RepeatedLinesFilter",
    "RepeatedParagraphsByCharFilter",
    "RepeatedParagraphsFilter",
    "RepeatingDuplicateNGramsFilter",
    "RepeatingTopNGramsFilter",
    "SubstringFilter",
    "SymbolsToWordsFilter",
    "TokenCountFilter",
    "TokenizerFertilityFilter",
    "UrlsFilter",
    "WhiteSpaceFilter",
    "WordCountFilter",
    "WordsWithoutAlphabetsFilter",
    "XMLHeaderFilter",
]
