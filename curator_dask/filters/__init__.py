"""Document filters: subclass :class:`Filter` and implement ``keep`` or ``score``.

The heuristic set (Gopher, C4, NeMo Curator) is in :mod:`curator_dask.filters.heuristics`
and :func:`heuristic_filters` returns it with its default thresholds; the C4 and FineWeb
rule sets are :class:`C4QualityFilter` and :class:`FineWebQualityFilter`.
"""

from __future__ import annotations

from curator_dask.filters.bitext import LengthRatioFilter
from curator_dask.filters.c4 import C4BadWordsFilter, C4QualityFilter
from curator_dask.filters.code import (
    AlphaFilter,
    GeneralCommentToCodeFilter,
    HTMLBoilerplateFilter,
    NumberOfLinesOfCodeFilter,
    PerExtensionFilter,
    PythonCommentToCodeFilter,
    XMLHeaderFilter,
)
from curator_dask.filters.content import HistogramFilter, PornographicUrlsFilter, SubstringFilter
from curator_dask.filters.fineweb import FineWebQualityFilter
from curator_dask.filters.heuristics import (
    BoilerPlateStringFilter,
    BulletsFilter,
    CommonEnglishWordsFilter,
    EllipsisFilter,
    LongWordFilter,
    MeanWordLengthFilter,
    NonAlphaNumericFilter,
    NumbersFilter,
    ParenthesesFilter,
    PunctuationFilter,
    RepeatedLinesByCharFilter,
    RepeatedLinesFilter,
    RepeatedParagraphsByCharFilter,
    RepeatedParagraphsFilter,
    RepeatingDuplicateNGramsFilter,
    RepeatingTopNGramsFilter,
    SymbolsToWordsFilter,
    UrlsFilter,
    WhiteSpaceFilter,
    WordCountFilter,
    WordsWithoutAlphabetsFilter,
    heuristic_filters,
)
from curator_dask.filters.tokens import TokenCountFilter, TokenizerFertilityFilter
from curator_dask.stage import Filter

__all__ = [
    "AlphaFilter",
    "BoilerPlateStringFilter",
    "BulletsFilter",
    "C4BadWordsFilter",
    "C4QualityFilter",
    "CommonEnglishWordsFilter",
    "EllipsisFilter",
    "Filter",
    "FineWebQualityFilter",
    "GeneralCommentToCodeFilter",
    "HTMLBoilerplateFilter",
    "HistogramFilter",
    "LengthRatioFilter",
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
    "heuristic_filters",
]
