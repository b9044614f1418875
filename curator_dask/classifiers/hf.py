"""Hugging Face sequence classifiers as stages: one model per worker process.

:class:`HFSequenceClassifier` runs a classifier from a local directory of safetensors
weights: any checkpoint that ``transformers.AutoModelForSequenceClassification`` loads, and
NVIDIA's published DeBERTa classifiers, whose custom head it does not load (see
:mod:`curator_dask.classifiers._checkpoints`). The model and tokenizer are loaded in
:meth:`~HFSequenceClassifier.setup`, once per worker process, and never travel inside a task
graph. :class:`QualityClassifier`, :class:`DomainClassifier`,
:class:`MultilingualDomainClassifier` and :class:`ContentTypeClassifier` are the same stage
with NeMo Curator's column names and ``max_chars``; :class:`FineWebEduClassifier` scores
with a one-output regression head.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from curator_dask import models
from curator_dask.classifiers import _checkpoints
from curator_dask.stage import Resources

_NOT_LOCAL = (
    "{what}: {path} not found; pass labels=[...] if the model directory exists only on the "
    "workers. curator_dask never downloads models: for a hub id, download it once (e.g. "
    "`huggingface-cli download <repo> --local-dir <dir>`) and pass that directory."
)


@dataclass(kw_only=True)
class HFSequenceClassifier(models.ModelStage):
    """Label each document with a Hugging Face sequence classification model.

    Each partition is tokenised on the CPU, its documents are ordered by token count
    (longest first) so a forward pass sees documents of similar length, the model runs
    ``model_inference_batch_size`` documents per pass, and the predictions are written back
    in the partition's original row order.

    Parameters
    ----------
    model_dir : str
        Local directory with ``config.json``, ``*.safetensors`` weights and the tokenizer
        files. Two layouts load: a ``transformers`` checkpoint (what ``save_pretrained``
        writes) and NVIDIA's DeBERTa classifiers (``config.json`` with ``base_model``;
        weights ``model.*`` and ``fc.*``). Pickle weights (``.bin``) are refused and nothing
        is downloaded; a directory of neither layout is refused when the stage is built.
    text_column : str
        Column holding the text.
    pred_column : str
        Output column: the predicted label's name (NeMo Curator's name).
    score_column : str, optional
        Output column: the probability of the predicted label (None: not written).
    prob_column : str, optional
        Output column: the whole probability vector, an Arrow ``list<float32>`` in the order
        of the labels (NeMo Curator's ``prob_column``; None: not written).
    labels : str or sequence of str, optional
        Label names in the order of the model's outputs; default: the model's
        ``config.json`` ``id2label``. Needed only when ``model_dir`` is not readable where
        the stage is built (it exists on the workers alone).
    write_all_probs : bool
        Also write one probability column per label, named ``<score_column>_<label>``
        (``<pred_column>_prob_<label>`` without a ``score_column``).
    filter_by : str or sequence of str, optional
        Keep only documents whose predicted label is one of these (one string is one
        label). Checked against the label names when the stage is built: an unknown label
        raises ``ValueError`` there, never on a worker.
    model_inference_batch_size : int, optional
        Documents per forward pass; default (None): the stage's size for the device the
        worker runs on (``default_batch_sizes``: 32 on a CPU, 256 on a GPU). After an
        out-of-memory error the batch that failed is halved and retried, and the smaller
        size is kept by that worker process; retries are reported as ``oom_retries``.
    max_chars : int, optional
        Characters of each document kept before tokenising (None: all).
    max_tokens : int, optional
        Tokens per document; default and upper bound: the model's maximum length.
    sort_by_length : bool
        Batch documents in order of length (the output order never changes).
    device : str
        ``"auto"`` (CUDA if the stage's resources ask for a GPU and one is visible, else
        CPU), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    autocast : bool
        Run the model under ``torch.autocast`` (half precision) on a GPU, as NeMo Curator
        does; never on a CPU. Probabilities are computed in float32 either way.
    backbone_config : str, optional
        For NVIDIA's layout: the backbone's ``config.json`` (or its directory) when
        ``base_model`` is neither a local directory nor a known DeBERTa-v3 checkpoint.
    resources : Resources
        Default: ``Resources(gpus=1)`` if dask's ``dataframe.backend`` is ``cudf`` when the
        stage is built, else CPU. ``.with_(resources=Resources(gpus=0.25))`` lets four
        tasks share a GPU.

    Examples
    --------
    ``labels`` is needed only when ``model_dir`` exists on the workers alone:

    >>> clf = HFSequenceClassifier(
    ...     model_dir="models/quality", labels=["Low", "Medium", "High"], filter_by="High"
    ... )
    >>> clf.filter_by
    ('High',)
    """

    model_dir: str
    text_column: str = "text"
    pred_column: str = "label"
    score_column: str | None = "label_prob"
    prob_column: str | None = None
    labels: Sequence[str] | None = None
    write_all_probs: bool = False
    filter_by: Sequence[str] | None = None
    model_inference_batch_size: int | None = None
    max_chars: int | None = 2000
    max_tokens: int | None = None
    sort_by_length: bool = True
    device: str = "auto"
    autocast: bool = True
    backbone_config: str | None = None
    resources: Resources = field(default_factory=models.default_model_resources)

    default_batch_sizes: ClassVar[dict[str, int]] = {"cpu": 32, "cuda": 256}

    def __post_init__(self) -> None:
        # Everything is checked here, on the client, so a mistake never reaches a worker.
        self.model_dir = str(self.model_dir)
        self._check_batching()
        self.labels = models.as_names(self.labels, f"{self.stage_name}: labels")
        self.filter_by = models.as_names(self.filter_by, f"{self.stage_name}: filter_by")
        if self.backbone_config is not None:
            self.backbone_config = str(self.backbone_config)
        names = self.label_names()
        config = self._local_config()
        if config is not None:
            self._check_layout(config)
        n_out = _num_outputs(config) if config is not None else None
        if self.labels is not None and n_out is not None and n_out != len(self.labels):
            raise ValueError(
                f"{self.stage_name}: {len(self.labels)} labels {list(self.labels)} for a "
                f"model with {n_out} outputs ({self.model_dir}/config.json)"
            )
        if len(names) < 2:
            raise ValueError(
                f"{self.stage_name}: {self.model_dir} has {len(names)} output; a one-output "
                "(regression) model is scored with FineWebEduClassifier"
            )
        if self.filter_by is not None:
            source = "labels=" if self.labels is not None else f"{self.model_dir}/config.json"
            models.check_known(self.filter_by, names, f"{self.stage_name}: filter_by", source)
        self._own_model(self.model_dir)

    def _local_config(self) -> dict[str, Any] | None:
        path = Path(self.model_dir) / "config.json"
        return models.read_json(path) if path.is_file() else None

    def _check_layout(self, config: dict[str, Any]) -> str:
        path = Path(self.model_dir)
        layout = _checkpoints.checkpoint_layout(path, config, self.stage_name)
        if layout == _checkpoints.NVIDIA_DEBERTA:
            _checkpoints.backbone_config(path, config, self.backbone_config, self.stage_name)
        return layout

    def _model_key(self, model_dir: str) -> tuple[Any, ...]:
        return (*super()._model_key(model_dir), self.backbone_config)

    # -- worker-side state ---------------------------------------------------------------
    def load_checkpoint(self, path: Path, device: str) -> Any:
        """Load the classifier in ``path`` onto ``device`` in eval mode, by its layout."""
        config = models.read_json(path / "config.json")
        layout = _checkpoints.checkpoint_layout(path, config, self.stage_name)
        if layout == _checkpoints.NVIDIA_DEBERTA:
            backbone = _checkpoints.backbone_config(
                path, config, self.backbone_config, self.stage_name
            )
            return _checkpoints.load_nvidia_deberta(path, config, backbone, device, self.stage_name)
        return models.load_model("AutoModelForSequenceClassification", path, device)

    def setup(self) -> None:
        """Load the tokenizer and model once per worker process."""
        self._load_model(self.model_dir)
        self._max_length = models.token_limit(self._tokenizer, self._model.config, self.max_tokens)
        names = self.label_names()
        n_out = int(self._model.config.num_labels)
        if len(names) != n_out:
            raise ValueError(
                f"{self.stage_name}: {len(names)} label names {list(names)} for a model with "
                f"{n_out} outputs"
            )

    def label_names(self) -> tuple[str, ...]:
        """The label names, from ``labels`` or the model's ``config.json``."""
        if self.labels is not None:
            return tuple(self.labels)
        path = Path(self.model_dir) / "config.json"
        if not path.is_file():
            raise FileNotFoundError(_NOT_LOCAL.format(what=self.stage_name, path=path))
        config = models.read_json(path)
        id2label = config.get("id2label")
        if not id2label:
            n = _num_outputs(config) or 2
            return tuple(f"LABEL_{i}" for i in range(n))
        return tuple(str(id2label[k]) for k in sorted(id2label, key=int))

    # -- the partition transform ---------------------------------------------------------
    def predict_proba(self, texts: list[str]) -> tuple[np.ndarray, int]:
        """Class probabilities for ``texts`` (in their order) and the OOM retry count.

        Needs :meth:`setup` to have run.
        """
        torch = self._torch

        def softmax(outputs: Any, batch: dict[str, Any]) -> np.ndarray:
            return torch.softmax(outputs.logits.float(), dim=-1).cpu().numpy()

        return self._infer(texts, len(self.label_names()), softmax)

    def process_with_stats(self, part: Any) -> tuple[Any, dict[str, int]]:
        texts = models.texts_of(part[self.text_column], self.max_chars) if len(part) else []
        probs, retries = self.predict_proba(texts)
        return self._attach(part, probs), {"oom_retries": retries}

    def output_meta(self, meta: Any) -> Any:
        # Built from the label names alone (config.json), so dask never needs the model.
        return self._attach(meta.iloc[:0], np.zeros((0, len(self.label_names())), np.float32))

    def _attach(self, part: Any, probs: np.ndarray) -> Any:
        names = self.label_names()
        pred = probs.argmax(axis=1)
        label_values = np.asarray(names, dtype=object)[pred]
        cols = {self.pred_column: models.new_column(part, label_values, "str")}
        if self.score_column:
            cols[self.score_column] = models.new_column(
                part, probs[np.arange(len(pred)), pred].astype(np.float32), "float32"
            )
        if self.prob_column:
            cols[self.prob_column] = models.vector_column(part, probs)
        if self.write_all_probs:
            prefix = self.score_column or f"{self.pred_column}_prob"
            for j, name in enumerate(names):
                cols[f"{prefix}_{name}"] = models.new_column(
                    part, probs[:, j].astype(np.float32), "float32"
                )
        out = part.assign(**cols)
        if self.filter_by is not None:
            out = out[np.isin(label_values, list(self.filter_by))]
        return out


@dataclass(kw_only=True)
class QualityClassifier(HFSequenceClassifier):
    """NVIDIA's quality classifier (labels ``High``, ``Medium``, ``Low``), NeMo's columns.

    The same stage as :class:`HFSequenceClassifier`, writing ``quality_pred`` and the
    probability vector ``quality_prob`` and reading 6,000 characters per document, as
    NeMo Curator's ``QualityClassifier`` does. ``model_dir`` is a local copy of e.g.
    ``nvidia/quality-classifier-deberta``; nothing is fetched from the hub.

    Examples
    --------
    >>> clf = QualityClassifier(
    ...     model_dir="models/quality", filter_by=["High", "Medium"]
    ... )  # doctest: +SKIP
    """

    pred_column: str = "quality_pred"
    score_column: str | None = None
    prob_column: str | None = "quality_prob"
    max_chars: int | None = 6000


@dataclass(kw_only=True)
class DomainClassifier(HFSequenceClassifier):
    """NVIDIA's domain classifier (26 domains), writing ``domain_pred`` as NeMo does.

    ``max_chars`` 2,000 and no probability column by default, as NeMo Curator's
    ``DomainClassifier``; ``prob_column="domain_prob"`` adds the vector. ``model_dir`` is a
    local copy of e.g. ``nvidia/domain-classifier``.

    Examples
    --------
    >>> clf = DomainClassifier(model_dir="models/domain", filter_by=["Science"])  # doctest: +SKIP
    """

    pred_column: str = "domain_pred"
    score_column: str | None = None
    max_chars: int | None = 2000


@dataclass(kw_only=True)
class MultilingualDomainClassifier(HFSequenceClassifier):
    """NVIDIA's multilingual domain classifier (mDeBERTa-v3), ``multilingual_domain_pred``.

    ``model_dir`` is a local copy of e.g. ``nvidia/multilingual-domain-classifier``.
    """

    pred_column: str = "multilingual_domain_pred"
    score_column: str | None = None
    max_chars: int | None = 2000


@dataclass(kw_only=True)
class ContentTypeClassifier(HFSequenceClassifier):
    """NVIDIA's content-type classifier (11 speech types), writing ``content_pred``.

    ``max_chars`` 5,000 as NeMo Curator's ``ContentTypeClassifier``. ``model_dir`` is a
    local copy of e.g. ``nvidia/content-type-classifier-deberta``.
    """

    pred_column: str = "content_pred"
    score_column: str | None = None
    max_chars: int | None = 5000


@dataclass(kw_only=True)
class FineWebEduClassifier(models.ModelStage):
    """An educational-value score (0-5) from a FineWeb-Edu-style regression classifier.

    The model is a ``transformers`` sequence classifier with one output (e.g.
    ``HuggingFaceFW/fineweb-edu-classifier`` or NVIDIA's
    ``nemocurator-fineweb-mixtral-edu-classifier``). Writes the raw score
    (``pred_column``), the score rounded and clipped to 0..5 (``int_column``) and, with
    ``label_column``, ``"high_quality"`` when the rounded score is at least
    ``min_high_quality_score`` (FineWeb-Edu's threshold, 3), else ``"low_quality"``.

    Parameters
    ----------
    model_dir : str
        Local checkpoint directory (safetensors), one output.
    text_column, pred_column, int_column : str
        Input and output columns (NeMo Curator's names by default).
    label_column : str, optional
        Output column for the quality label (None: not written).
    filter_by : str or sequence of str, optional
        Keep only documents with these labels (``"high_quality"``, ``"low_quality"``).
    min_high_quality_score : int
        Rounded score from which a document is ``"high_quality"``.
    model_inference_batch_size, max_chars, max_tokens, sort_by_length, device, autocast, resources
        As for :class:`HFSequenceClassifier` (``max_chars`` None: whole documents, as NeMo).
    """

    model_dir: str
    text_column: str = "text"
    pred_column: str = "fineweb-edu-score"
    int_column: str = "fineweb-edu-score-int"
    label_column: str | None = None
    filter_by: Sequence[str] | None = None
    min_high_quality_score: int = 3
    model_inference_batch_size: int | None = None
    max_chars: int | None = None
    max_tokens: int | None = None
    sort_by_length: bool = True
    device: str = "auto"
    autocast: bool = True
    resources: Resources = field(default_factory=models.default_model_resources)

    default_batch_sizes: ClassVar[dict[str, int]] = {"cpu": 32, "cuda": 256}
    quality_labels: ClassVar[tuple[str, str]] = ("high_quality", "low_quality")

    def __post_init__(self) -> None:
        self.model_dir = str(self.model_dir)
        self._check_batching()
        self.filter_by = models.as_names(self.filter_by, f"{self.stage_name}: filter_by")
        if self.filter_by is not None:
            models.check_known(
                self.filter_by, self.quality_labels, f"{self.stage_name}: filter_by", "the stage"
            )
        path = Path(self.model_dir) / "config.json"
        if not path.is_file():
            raise FileNotFoundError(
                f"{self.stage_name}: {path} not found; the model directory must be readable "
                "where the stage is built. curator_dask never downloads models: download it "
                "once (`huggingface-cli download <repo> --local-dir <dir>`)."
            )
        config = models.read_json(path)
        layout = _checkpoints.checkpoint_layout(Path(self.model_dir), config, self.stage_name)
        if layout != _checkpoints.TRANSFORMERS or _num_outputs(config) != 1:
            raise ValueError(
                f"{self.stage_name}: {self.model_dir} is not a one-output (regression) "
                "transformers classifier; use HFSequenceClassifier for a classifier"
            )
        self._own_model(self.model_dir)

    def load_checkpoint(self, path: Path, device: str) -> Any:
        """The regression classifier in ``path``, in eval mode."""
        return models.load_model("AutoModelForSequenceClassification", path, device)

    def setup(self) -> None:
        """Load the tokenizer and model once per worker process."""
        self._load_model(self.model_dir)
        self._max_length = models.token_limit(self._tokenizer, self._model.config, self.max_tokens)

    def predict_scores(self, texts: list[str]) -> tuple[np.ndarray, int]:
        """The raw scores of ``texts`` (in their order) and the OOM retry count."""

        def score(outputs: Any, batch: dict[str, Any]) -> np.ndarray:
            return outputs.logits.float().reshape(-1, 1).cpu().numpy()

        out, retries = self._infer(texts, 1, score)
        return out[:, 0], retries

    def process_with_stats(self, part: Any) -> tuple[Any, dict[str, int]]:
        texts = models.texts_of(part[self.text_column], self.max_chars) if len(part) else []
        scores, retries = self.predict_scores(texts)
        return self._attach(part, scores), {"oom_retries": retries}

    def output_meta(self, meta: Any) -> Any:
        return self._attach(meta.iloc[:0], np.zeros(0, np.float32))

    def _attach(self, part: Any, scores: np.ndarray) -> Any:
        ints = np.clip(np.round(scores), 0, 5).astype(np.int64)
        high, low = self.quality_labels
        labels = np.where(ints >= self.min_high_quality_score, high, low).astype(object)
        cols = {
            self.pred_column: models.new_column(part, scores.astype(np.float32), "float32"),
            self.int_column: models.new_column(part, ints, "int64"),
        }
        if self.label_column:
            cols[self.label_column] = models.new_column(part, labels, "str")
        out = part.assign(**cols)
        if self.filter_by is not None:
            out = out[np.isin(labels, list(self.filter_by))]
        return out


def _num_outputs(config: dict[str, Any]) -> int | None:
    """The number of model outputs a ``config.json`` declares (None: it does not say)."""
    if config.get("id2label"):
        return len(config["id2label"])
    if "num_labels" in config:
        return int(config["num_labels"])
    return None
