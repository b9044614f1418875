"""Hugging Face sequence classifiers as stages: one model per worker process.

:class:`HFSequenceClassifier` runs any model that
``transformers.AutoModelForSequenceClassification`` loads from a local directory of
safetensors weights. The model and tokenizer are loaded in :meth:`~HFSequenceClassifier.setup`,
once per worker process, into ``_``-prefixed attributes, so they never travel inside a task
graph. :class:`QualityClassifier` and :class:`DomainClassifier` are the same stage with the
column names NeMo Curator users know.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from curator_dask import models
from curator_dask.stage import Resources


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
        files (what ``save_pretrained`` writes). Pickle weights (``.bin``) are refused and
        nothing is downloaded.
    text_column : str
        Column holding the text.
    label_column : str
        Output column: the predicted label's name.
    score_column : str
        Output column: the probability (softmax) of the predicted label.
    labels : sequence of str, optional
        Label names in the order of the model's outputs; default: the model's
        ``config.json`` ``id2label``. Needed only when ``model_dir`` is not readable where
        the stage is built (it exists on the workers alone).
    write_all_probs : bool
        Also write one probability column per label, named ``<score_column>_<label>``.
    filter_by : str or sequence of str, optional
        Keep only documents whose predicted label is one of these (one string is one
        label). Checked against the label names when the stage is built: an unknown label
        raises ``ValueError`` there, never on a worker.
    model_inference_batch_size : int
        Documents per forward pass. On a GPU out-of-memory error the batch is halved and
        retried; the number of retries is reported as ``oom_retries`` in the statistics.
    max_chars : int, optional
        Characters of each document kept before tokenising (None: all).
    max_tokens : int, optional
        Tokens per document; default and upper bound: the model's maximum length.
    sort_by_length : bool
        Batch documents in order of length (the output order never changes).
    device : str
        ``"auto"`` (CUDA if the stage's resources ask for a GPU and one is visible, else
        CPU), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
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
    >>> df = clf(df)  # doctest: +SKIP
    """

    model_dir: str
    text_column: str = "text"
    label_column: str = "label"
    score_column: str = "label_prob"
    labels: Sequence[str] | None = None
    write_all_probs: bool = False
    filter_by: Sequence[str] | None = None
    model_inference_batch_size: int = 256
    max_chars: int | None = 2000
    max_tokens: int | None = None
    sort_by_length: bool = True
    device: str = "auto"
    resources: Resources = field(default_factory=models.default_model_resources)

    def __post_init__(self) -> None:
        # Everything is checked here, on the client, so a mistake never reaches a worker.
        self.model_dir = str(self.model_dir)
        self._check_batching()
        self.labels = models.as_names(self.labels, f"{self.stage_name}: labels")
        self.filter_by = models.as_names(self.filter_by, f"{self.stage_name}: filter_by")
        names = self.label_names()
        config = self._local_config()
        if self.labels is not None and config is not None:
            n_out = _num_outputs(config)
            if n_out is not None and n_out != len(self.labels):
                raise ValueError(
                    f"{self.stage_name}: {len(self.labels)} labels {list(self.labels)} for a "
                    f"model with {n_out} outputs ({self.model_dir}/config.json)"
                )
        if self.filter_by is not None:
            source = "labels=" if self.labels is not None else f"{self.model_dir}/config.json"
            models.check_known(self.filter_by, names, f"{self.stage_name}: filter_by", source)

    def _local_config(self) -> dict[str, Any] | None:
        path = Path(self.model_dir) / "config.json"
        return models.read_json(path) if path.is_file() else None

    # -- worker-side state ---------------------------------------------------------------
    def setup(self) -> None:
        """Load the tokenizer and model once per worker process."""
        self._load_model(self.model_dir, "AutoModelForSequenceClassification")
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
            raise FileNotFoundError(
                f"{self.stage_name}: {path} not found; pass labels=[...] if the model "
                "directory exists only on the workers. curator_dask never downloads models: "
                "for a hub id, download it once (e.g. `huggingface-cli download <repo> "
                "--local-dir <dir>`) and pass that directory."
            )
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

        return self._infer(texts, int(self._model.config.num_labels), softmax)

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
        cols = {
            self.label_column: models.new_column(part, label_values, "str"),
            self.score_column: models.new_column(
                part, probs[np.arange(len(pred)), pred].astype(np.float32), "float32"
            ),
        }
        if self.write_all_probs:
            for j, name in enumerate(names):
                cols[f"{self.score_column}_{name}"] = models.new_column(
                    part, probs[:, j].astype(np.float32), "float32"
                )
        out = part.assign(**cols)
        if self.filter_by is not None:
            out = out[np.isin(label_values, list(self.filter_by))]
        return out


@dataclass(kw_only=True)
class QualityClassifier(HFSequenceClassifier):
    """A document quality classifier (e.g. labels ``High``, ``Medium``, ``Low``).

    The same stage as :class:`HFSequenceClassifier`, writing ``quality_pred`` and
    ``quality_prob``. ``model_dir`` is a local directory; nothing is fetched from the hub.

    Examples
    --------
    >>> clf = QualityClassifier(
    ...     model_dir="models/quality", filter_by=["High", "Medium"]
    ... )  # doctest: +SKIP
    """

    label_column: str = "quality_pred"
    score_column: str = "quality_prob"


@dataclass(kw_only=True)
class DomainClassifier(HFSequenceClassifier):
    """A document domain classifier, writing ``domain_pred`` and ``domain_prob``.

    ``model_dir`` is a local directory; nothing is fetched from the hub.

    Examples
    --------
    >>> clf = DomainClassifier(model_dir="models/domain", filter_by=["Science"])  # doctest: +SKIP
    """

    label_column: str = "domain_pred"
    score_column: str = "domain_prob"


def _num_outputs(config: dict[str, Any]) -> int | None:
    """The number of model outputs a ``config.json`` declares (None: it does not say)."""
    if config.get("id2label"):
        return len(config["id2label"])
    if "num_labels" in config:
        return int(config["num_labels"])
    return None
