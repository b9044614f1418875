"""PiiModifier on Presidio: pattern entities offline, names refused without a model."""

from __future__ import annotations

import socket

import dask
import dask.dataframe as dd
import pandas as pd
import pytest

pytest.importorskip("presidio_analyzer")  # the pii extra
pytest.importorskip("presidio_anonymizer")

from curator_dask.nemo import Modify
from curator_dask.nemo.datasets import DocumentDataset
from curator_dask.nemo.modifiers import PiiModifier
from curator_dask.nemo.modifiers.pii_modifier import available_entities

PATTERN = ["EMAIL_ADDRESS", "PHONE_NUMBER", "IP_ADDRESS", "CREDIT_CARD", "URL", "US_SSN"]

# (text, what must disappear, what must stay) written for this test
DOCS = [
    ("Write to jane.doe@example.com before Friday.", ["jane.doe@example.com"], ["Friday"]),
    ("Call me at 212-555-0199 tonight.", ["212-555-0199"], ["tonight"]),
    ("The server 192.168.10.20 answered.", ["192.168.10.20"], ["server"]),
    ("Card 4111 1111 1111 1111 was charged.", ["4111 1111 1111 1111"], ["charged"]),
    ("Docs at https://example.org/guide for all.", ["https://example.org/guide"], ["Docs"]),
    ("SSN 078-05-1120 on file.", ["078-05-1120"], ["file"]),
    ("Nothing personal in this sentence at all.", [], ["Nothing personal"]),
    ("", [], []),
    (None, [], []),
]


@pytest.fixture
def no_network(monkeypatch):
    """Fail any attempt to open a network connection."""

    def refuse(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture
def dataset() -> DocumentDataset:
    frame = pd.DataFrame({"id": [f"d{i}" for i in range(len(DOCS))], "text": [d[0] for d in DOCS]})
    return DocumentDataset(dd.from_pandas(frame, npartitions=3))


def test_pattern_entities_are_redacted_offline(dataset, no_network):
    assert set(PATTERN) <= available_entities("en")
    modifier = PiiModifier(
        language="en", supported_entities=PATTERN, anonymize_action="redact", batch_size=2
    )
    with dask.config.set(scheduler="sync"):
        out = Modify(modifier)(dataset).df.compute()
    assert out["id"].tolist() == [f"d{i}" for i in range(len(DOCS))]  # nothing lost
    for text, (_, gone, kept) in zip(out["text"], DOCS, strict=True):
        for g in gone:
            assert g not in text
        for k in kept:
            assert k in text
    assert out["text"].iloc[6] == DOCS[6][0]  # untouched
    assert out["text"].iloc[7] == ""
    assert pd.isna(out["text"].iloc[8])


def test_replace_and_mask_actions(dataset, no_network):
    replace = PiiModifier(supported_entities=["EMAIL_ADDRESS", "PHONE_NUMBER"],
                          anonymize_action="replace")  # fmt: skip
    mask = PiiModifier(supported_entities=["CREDIT_CARD"], anonymize_action="mask",
                       masking_char="*", chars_to_mask=12, from_end=False)  # fmt: skip
    with dask.config.set(scheduler="sync"):
        replaced = Modify(replace)(dataset).df.compute()["text"].tolist()
        masked = Modify(mask)(dataset).df.compute()["text"].tolist()
    assert replaced[0] == "Write to <EMAIL_ADDRESS> before Friday."
    assert replaced[1] == "Call me at <PHONE_NUMBER> tonight."
    assert replaced[4] == DOCS[4][0]  # URLs were not asked for
    assert masked[3] == "Card ************11 1111 was charged."  # spaces count


def test_names_need_a_spacy_model(no_network):
    from curator_dask.nemo.modifiers.pii_modifier import spacy_model_installed

    absent = "xx_no_such_pipeline"
    assert not spacy_model_installed(absent)
    with pytest.raises(ValueError, match=r"PERSON.*spaCy named-entity model"):
        PiiModifier(supported_entities=["PERSON", "EMAIL_ADDRESS"], spacy_model=absent)
    with pytest.raises(ValueError, match="ADDRESS is NeMo's own"):
        PiiModifier(supported_entities=["ADDRESS"])
    with pytest.warns(UserWarning, match=r"LOCATION.*not anonymised"):
        default = PiiModifier(spacy_model=absent)
    assert "EMAIL_ADDRESS" in default.supported_entities
    assert "PERSON" not in default.supported_entities
    with pytest.raises(ValueError, match="anonymize_action"):
        PiiModifier(supported_entities=["URL"], anonymize_action="scramble")


def test_engines_are_built_once_per_process_not_shipped(dataset):
    import pickle

    from curator_dask.nemo.modifiers import pii_modifier

    modifier = PiiModifier(supported_entities=["EMAIL_ADDRESS"])
    blob = pickle.dumps(modifier)
    assert len(blob) < 2000  # configuration only: no analyzer, no spaCy pipeline
    assert ("en", None) in pii_modifier._ENGINES
    engines = pii_modifier._ENGINES[("en", None)]
    with dask.config.set(scheduler="sync"):
        Modify(pickle.loads(blob))(dataset).df.compute()
    assert pii_modifier._ENGINES[("en", None)] is engines
