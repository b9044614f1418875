"""Filters that count tokens with a Hugging Face tokenizer loaded from a local directory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from curator_dask import text as textkit
from curator_dask.stage import Filter


@dataclass(kw_only=True)
class _TokenizerFilter(Filter):
    tokenizer_path: str = ""
    tokenizer_json: str | None = None
    add_special_tokens: bool = False

    def __post_init__(self) -> None:
        if not self.tokenizer_path and self.tokenizer_json is None:
            raise ValueError("give tokenizer_path (a local directory) or tokenizer_json")

    def setup(self) -> None:
        # Loaded once per worker process (never pickled: the attribute starts with "_").
        from tokenizers import Tokenizer

        if self.tokenizer_json is not None:
            self._tokenizer = Tokenizer.from_str(self.tokenizer_json)
            return
        path = self.tokenizer_path
        file = path if path.endswith(".json") else f"{path.rstrip('/')}/tokenizer.json"
        self._tokenizer = Tokenizer.from_file(file)

    def _counts(self, text: Any) -> Any:
        if getattr(self, "_tokenizer", None) is None:
            self.setup()
        t = textkit.as_text(text)
        encodings = self._tokenizer.encode_batch(
            t.tolist(), add_special_tokens=self.add_special_tokens
        )
        counts = np.fromiter((len(e.ids) for e in encodings), np.int64, len(t))
        return t, pd.Series(counts)


@dataclass(kw_only=True)
class TokenCountFilter(_TokenizerFilter):
    """Keep documents with between ``min_tokens`` and ``max_tokens`` tokens.

    Parameters
    ----------
    tokenizer_path : str
        A directory holding ``tokenizer.json`` (or the file itself), e.g. a model saved
        with ``save_pretrained``; read with the ``tokenizers`` package (models extra).
        Every worker must be able to read it.
    tokenizer_json : str, optional
        Instead of ``tokenizer_path``: the tokenizer itself, as ``Tokenizer.to_str()``
        gives it (it travels in the task graph).
    add_special_tokens : bool
        Count the special tokens the tokenizer's post-processor adds (BOS, EOS...).
    min_tokens, max_tokens : int
        Bounds.
    """

    min_tokens: int = 0
    max_tokens: int = 2**63 - 1

    def score(self, text: Any) -> Any:
        _, counts = self._counts(text)
        return textkit.restore_index(counts, text.index)

    def keep_score(self, score: Any) -> Any:
        return (score >= self.min_tokens) & (score <= self.max_tokens)


@dataclass(kw_only=True)
class TokenizerFertilityFilter(_TokenizerFilter):
    """Keep documents with at least ``min_char_to_token_ratio`` characters per token.

    Score: characters / tokens (0 for a document without tokens).
    """

    min_char_to_token_ratio: float = 2.5

    def score(self, text: Any) -> Any:
        t, counts = self._counts(text)
        return textkit.restore_index(textkit.ratio(textkit.nchars(t), counts), text.index)

    def keep_score(self, score: Any) -> Any:
        return score >= self.min_char_to_token_ratio
