"""Which layout a classifier checkpoint has, and loading NVIDIA's DeBERTa classifier layout.

Two layouts are known:

``transformers``
    ``config.json`` names a ``model_type``; ``AutoModelForSequenceClassification`` loads it
    (any Hugging Face classifier; the FineWeb-Edu classifiers are this layout with one
    regression output).
``nvidia-deberta``
    What NVIDIA publishes for its quality, domain, multilingual domain and content-type
    classifiers (saved with ``huggingface_hub``'s ``PyTorchModelHubMixin``): ``config.json``
    holds ``base_model`` (the backbone's hub id, e.g. ``microsoft/deberta-v3-base``),
    ``fc_dropout`` and ``id2label``, and the weights are the backbone under ``model.`` plus
    one linear layer ``fc`` applied to the first token's final hidden state. The backbone's
    own configuration is not in the directory: it comes from ``backbone_config=``, from a
    local directory named by ``base_model``, or from the published configurations of the
    DeBERTa-v3 family below.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from curator_dask import models

TRANSFORMERS = "transformers"
NVIDIA_DEBERTA = "nvidia-deberta"

_DEBERTA_V3 = {
    "model_type": "deberta-v2",
    "attention_probs_dropout_prob": 0.1,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-7,
    "max_position_embeddings": 512,
    "max_relative_positions": -1,
    "norm_rel_ebd": "layer_norm",
    "pos_att_type": ["p2c", "c2p"],
    "position_biased_input": False,
    "position_buckets": 256,
    "relative_attention": True,
    "share_att_key": True,
    "type_vocab_size": 0,
    "vocab_size": 128100,
}


def _deberta(hidden: int, layers: int, heads: int, **extra: Any) -> dict[str, Any]:
    return {
        **_DEBERTA_V3,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": 4 * hidden,
        **extra,
    }


#: Backbone configurations of the published DeBERTa-v3 checkpoints (their config.json values).
KNOWN_BACKBONES: dict[str, dict[str, Any]] = {
    "microsoft/deberta-v3-xsmall": _deberta(384, 12, 6),
    "microsoft/deberta-v3-small": _deberta(768, 6, 12),
    "microsoft/deberta-v3-base": _deberta(768, 12, 12),
    "microsoft/deberta-v3-large": _deberta(1024, 24, 16),
    "microsoft/mdeberta-v3-base": _deberta(768, 12, 12, vocab_size=251000),
}


def checkpoint_layout(path: Path, config: dict[str, Any], what: str) -> str:
    """The layout of the checkpoint in ``path`` (whose ``config.json`` is ``config``).

    Raises
    ------
    ValueError
        The checkpoint matches no known layout; the message says what was found.
    """
    if "model_type" in config:
        return TRANSFORMERS
    keys = models.safetensors_keys(path) if any(path.glob("*.safetensors")) else None
    head = keys is None or (
        {"fc.weight", "fc.bias"} <= set(keys) and any(k.startswith("model.") for k in keys)
    )
    if "base_model" in config and config.get("id2label") and head:
        return NVIDIA_DEBERTA
    found = sorted({k.split(".")[0] for k in keys or ()})
    raise ValueError(
        f"{what}: {path} matches no checkpoint layout curator_dask knows. config.json keys: "
        f"{sorted(config)}; weight name prefixes: {found or 'none read'}. Known layouts: a "
        "transformers checkpoint (config.json with model_type, loaded with "
        "AutoModelForSequenceClassification) and NVIDIA's DeBERTa classifiers (config.json "
        "with base_model and id2label; weights model.* and fc.weight/fc.bias)."
    )


def backbone_config(
    path: Path, config: dict[str, Any], given: str | None, what: str
) -> dict[str, Any]:
    """The backbone configuration of an ``nvidia-deberta`` checkpoint, as a dict.

    From ``given`` (a ``config.json`` or a directory holding one), else from ``base_model``
    when it names a local directory (absolute, or relative to ``path``), else from
    :data:`KNOWN_BACKBONES`.
    """
    if given is not None:
        file = Path(given).expanduser()
        file = file / "config.json" if file.is_dir() else file
        if not file.is_file():
            raise FileNotFoundError(f"{what}: backbone_config {given!r} has no config.json")
        return models.read_json(file)
    base = str(config.get("base_model", ""))
    for folder in (Path(base).expanduser(), path / base):
        if base and (folder / "config.json").is_file():
            return models.read_json(folder / "config.json")
    if base in KNOWN_BACKBONES:
        return dict(KNOWN_BACKBONES[base])
    raise ValueError(
        f"{what}: {path}/config.json names the backbone {base!r}, which is neither a local "
        f"directory nor one of {sorted(KNOWN_BACKBONES)}. Pass backbone_config= (the "
        "backbone's config.json, e.g. from `huggingface-cli download <base_model> "
        "config.json`)."
    )


def load_nvidia_deberta(
    path: Path, config: dict[str, Any], backbone: dict[str, Any], device: str, what: str
) -> Any:
    """Build NVIDIA's DeBERTa classifier (backbone + ``fc`` on the first token) from ``path``.

    Returns a ``torch.nn.Module`` in eval mode whose call returns an object with
    ``.logits`` and whose ``.config`` is the backbone's, with ``num_labels`` set.
    """
    torch = models.require("torch", what)
    transformers = models.require("transformers", what)
    st = models.require("safetensors.torch", what)
    n_labels = len(config["id2label"])
    options = {k: v for k, v in backbone.items() if k != "model_type"}
    bb_config = transformers.AutoConfig.for_model(backbone["model_type"], **options)
    bb_config.num_labels = n_labels

    class FirstTokenClassifier(torch.nn.Module):  # type: ignore[name-defined,misc]
        def __init__(self) -> None:
            super().__init__()
            self.model = transformers.AutoModel.from_config(bb_config)
            self.fc = torch.nn.Linear(bb_config.hidden_size, n_labels)
            self.config = bb_config

        def forward(self, input_ids: Any, attention_mask: Any = None, **_: Any) -> Any:
            hidden = self.model(input_ids=input_ids, attention_mask=attention_mask)
            logits = self.fc(hidden.last_hidden_state[:, 0, :])
            return transformers.modeling_outputs.SequenceClassifierOutput(logits=logits)

    module = FirstTokenClassifier()
    state: dict[str, Any] = {}
    for file in sorted(path.glob("*.safetensors")):
        state.update(st.load_file(str(file), device="cpu"))
    try:
        result = module.load_state_dict(state, strict=False)
    except RuntimeError as err:  # a shape mismatch
        raise ValueError(
            f"{what}: the weights in {path} do not fit the backbone configuration "
            f"{backbone.get('_name_or_path') or config.get('base_model')!r}: {err}"
        ) from err
    unexpected = [k for k in result.unexpected_keys if not k.endswith("position_ids")]
    if result.missing_keys or unexpected:
        raise ValueError(
            f"{what}: the weights in {path} do not fit an NVIDIA DeBERTa classifier with this "
            f"backbone configuration: missing {result.missing_keys[:5]}, unexpected "
            f"{unexpected[:5]} (is backbone_config right?)"
        )
    return module.to(device).eval()
