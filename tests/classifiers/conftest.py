"""A tiny BERT sequence classifier built and saved (safetensors) by the tests themselves."""

from __future__ import annotations

from pathlib import Path

import pytest

WORDS = [
    "the",
    "a",
    "an",
    "cat",
    "dog",
    "bird",
    "sat",
    "ran",
    "flew",
    "on",
    "over",
    "under",
    "mat",
    "rug",
    "tree",
    "good",
    "bad",
    "fine",
    "very",
    "quite",
    "text",
    "data",
    "model",
    "is",
    "was",
    "and",
    "or",
    "not",
    "big",
    "small",
    "red",
    "blue",
    "green",
]
LABELS = ("low", "medium", "high")


@pytest.fixture(scope="session")
def tiny_classifier_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Directory with a 2-layer, 16-wide BERT classifier (3 labels) and its tokenizer."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    path = tmp_path_factory.mktemp("tiny_bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    tokenizer = transformers.BertTokenizer(vocab={w: i for i, w in enumerate(vocab)})
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        num_labels=len(LABELS),
        id2label=dict(enumerate(LABELS)),
        label2id={name: i for i, name in enumerate(LABELS)},
        # large random weights, so the three labels are all predicted somewhere
        initializer_range=0.5,
    )
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    assert (path / "model.safetensors").is_file()
    return path
