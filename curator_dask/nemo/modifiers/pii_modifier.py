"""``nemo_curator.modifiers.pii_modifier``: :class:`PiiModifier`, on Microsoft Presidio.

Presidio (``presidio-analyzer``, ``presidio-anonymizer``: the ``pii`` extra) finds and
anonymises personal information. Its pattern recognizers (e-mail addresses, phone
numbers, IP addresses, credit cards, URLs, dates, US SSNs, IBANs, ...) need no model and
run offline: the text is tokenised by a blank spaCy pipeline. Names of people, places and
organisations come from a spaCy named-entity model, which must be installed as a package
(``en_core_web_lg``, NeMo's, by default); nothing is downloaded.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Sequence
from typing import Any

import pandas as pd

from curator_dask.nemo.modifiers.doc_modifier import DocumentModifier
from curator_dask.nemo.utils.decorators import batched

PII_EXTRA = "pip install 'curator_dask[pii]'"
DEFAULT_BATCH_SIZE = 2000
DEFAULT_LANGUAGE = "en"
DEFAULT_SPACY_MODEL = "en_core_web_lg"
#: What NeMo's PiiModifier redacts when ``supported_entities`` is None.
NEMO_DEFAULT_ENTITIES = (
    "ADDRESS",
    "CREDIT_CARD",
    "EMAIL_ADDRESS",
    "DATE_TIME",
    "IP_ADDRESS",
    "LOCATION",
    "PERSON",
    "URL",
    "US_SSN",
    "US_PASSPORT",
    "US_DRIVER_LICENSE",
    "PHONE_NUMBER",
)
#: Found only by a spaCy named-entity model.
NER_ENTITIES = frozenset({"PERSON", "LOCATION", "NRP", "ORGANIZATION"})
#: NeMo's street-address recognizer (usaddress); Presidio has none.
UNSUPPORTED = frozenset({"ADDRESS"})
ACTIONS = ("redact", "replace", "mask", "hash", "encrypt")

_ENGINES: dict[tuple[str, str | None], Any] = {}
_LOCK = threading.Lock()


def _require_presidio() -> None:
    for module in ("presidio_analyzer", "presidio_anonymizer"):
        try:
            __import__(module)
        except ImportError as err:
            raise ImportError(
                f"PiiModifier needs Microsoft Presidio ({module}); install the pii extra: "
                f"{PII_EXTRA}"
            ) from err


def spacy_model_installed(name: str) -> bool:
    """True when the spaCy pipeline ``name`` is installed as a package."""
    import spacy

    return bool(spacy.util.is_package(name))


def _offline_tldextract() -> None:
    """Have Presidio's e-mail check use tldextract's bundled suffix list.

    tldextract fetches the public suffix list from the internet on first use; with no
    network it logs a traceback and falls back to its snapshot. Only the e-mail
    recognizer's reference is replaced, not tldextract's own default.
    """
    import sys

    import tldextract
    from presidio_analyzer.predefined_recognizers import EmailRecognizer

    # its module moved between Presidio releases: take it from the class
    email_recognizer = sys.modules[EmailRecognizer.__module__]

    class _Offline:
        extract = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)

    email_recognizer.tldextract = _Offline  # type: ignore[attr-defined]


def _engines(language: str, spacy_model: str | None) -> Any:
    """The analyzer and anonymizer for ``language``, built once per process."""
    key = (language, spacy_model)
    with _LOCK:
        if key not in _ENGINES:
            import spacy
            from presidio_analyzer import AnalyzerEngine, BatchAnalyzerEngine, RecognizerRegistry
            from presidio_analyzer.nlp_engine import SpacyNlpEngine
            from presidio_anonymizer import AnonymizerEngine

            _offline_tldextract()
            name = spacy_model or f"blank:{language}"
            nlp_engine = SpacyNlpEngine(models=[{"lang_code": language, "model_name": name}])
            if spacy_model is None:  # tokens only: the pattern recognizers need no model
                nlp_engine.nlp = {language: spacy.blank(language)}  # type: ignore[assignment]
            else:
                nlp_engine.load()
            registry = RecognizerRegistry(supported_languages=[language])
            registry.load_predefined_recognizers(languages=[language], nlp_engine=nlp_engine)
            analyzer = AnalyzerEngine(
                nlp_engine=nlp_engine, registry=registry, supported_languages=[language]
            )
            _ENGINES[key] = (BatchAnalyzerEngine(analyzer), AnonymizerEngine(), registry)
        return _ENGINES[key]


def available_entities(
    language: str = DEFAULT_LANGUAGE, spacy_model: str | None = None
) -> set[str]:
    """The entity types Presidio finds here in ``language`` (names only with a model)."""
    _require_presidio()
    registry = _engines(language, spacy_model)[2]
    return {
        entity
        for recognizer in registry.recognizers
        # with a blank pipeline the spaCy recognizer finds nothing
        if spacy_model is not None or type(recognizer).__name__ != "SpacyRecognizer"
        for entity in recognizer.supported_entities
    }


class PiiModifier(DocumentModifier):
    """Find and anonymise personal information in each document, as NeMo's ``PiiModifier``.

    Use it with :class:`~curator_dask.nemo.modules.modify.Modify`. Each partition is one
    call (``@batched``); Presidio's analyzer reads its documents ``batch_size`` at a time,
    and the engines are built once per worker process (never shipped in the graph).

    Parameters
    ----------
    language : str
        Language of the documents (Presidio's recognizers for it are used).
    supported_entities : list of str, optional
        Entity types to anonymise (``"EMAIL_ADDRESS"``, ``"PHONE_NUMBER"``,
        ``"IP_ADDRESS"``, ``"CREDIT_CARD"``, ``"URL"``, ``"DATE_TIME"``, ``"US_SSN"``,
        ``"PERSON"``, ``"LOCATION"``, ...). None: NeMo's list, less the entities this
        installation cannot find (``ADDRESS``, and the names when no spaCy model is
        installed), with a warning naming them.
    anonymize_action : {"redact", "replace", "mask", "hash", "encrypt"}
        Presidio's operator: ``"redact"`` deletes the span, ``"replace"`` writes
        ``<ENTITY_TYPE>`` (or ``new_value=``), ``"mask"`` masks characters
        (``masking_char=``, ``chars_to_mask=``, ``from_end=``), ``"hash"`` a digest
        (``hash_type=``), ``"encrypt"`` AES (``key=``).
    batch_size : int
        Documents the analyzer reads at a time.
    device : str
        Accepted for NeMo's signature; Presidio runs on the CPU here.
    **kwargs
        The operator's parameters (as above). ``spacy_model=`` names the installed spaCy
        pipeline that finds names (default ``en_core_web_lg`` for English).

    Raises
    ------
    ValueError
        An entity type needs a spaCy model that is not installed (``PERSON``, ``LOCATION``,
        ...), or no recognizer here finds it (``ADDRESS``), or the action is unknown.
    """

    def __init__(
        self,
        language: str = DEFAULT_LANGUAGE,
        supported_entities: Sequence[str] | None = None,
        anonymize_action: str = "redact",
        batch_size: int = DEFAULT_BATCH_SIZE,
        device: str = "gpu",
        **kwargs: Any,
    ) -> None:
        _require_presidio()
        if anonymize_action not in ACTIONS:
            raise ValueError(f"anonymize_action must be one of {ACTIONS}, got {anonymize_action!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        model = kwargs.pop("spacy_model", DEFAULT_SPACY_MODEL if language == "en" else None)
        if model is not None and not spacy_model_installed(model):
            model = None
        known = available_entities(language, model)
        if supported_entities is None:
            missing = [e for e in NEMO_DEFAULT_ENTITIES if e not in known]
            if missing:
                warnings.warn(
                    f"PiiModifier: {missing} are not anonymised: " + _why(missing, language),
                    stacklevel=2,
                )
            entities = [e for e in NEMO_DEFAULT_ENTITIES if e in known]
        else:
            entities = [str(e) for e in supported_entities]
            missing = [e for e in entities if e not in known]
            if missing:
                raise ValueError(f"PiiModifier: cannot find {missing}: " + _why(missing, language))
        self.language = language
        self.supported_entities = entities
        self.anonymize_action = anonymize_action
        self.batch_size = batch_size
        self.device = device
        self.spacy_model = model
        self.kwargs = kwargs

    @batched
    def modify_document(self, text: Any) -> Any:
        from presidio_anonymizer.entities import OperatorConfig

        series = text if isinstance(text, pd.Series) else text.to_pandas()
        values = series.astype(object).tolist()
        present = [i for i, t in enumerate(values) if isinstance(t, str) and t]
        batch, anonymizer, _ = _engines(self.language, self.spacy_model)
        found = batch.analyze_iterator(
            [values[i] for i in present],
            language=self.language,
            batch_size=self.batch_size,
            entities=self.supported_entities,
        )
        operators = {"DEFAULT": OperatorConfig(self.anonymize_action, dict(self.kwargs))}
        out = list(values)
        for i, results in zip(present, found, strict=True):
            if results:
                out[i] = anonymizer.anonymize(values[i], results, operators=operators).text
        result = pd.Series(out, index=series.index, dtype=series.dtype)
        return result if isinstance(text, pd.Series) else type(text).from_pandas(result)


def _why(missing: Sequence[str], language: str) -> str:
    parts = []
    ner = [e for e in missing if e in NER_ENTITIES]
    if ner:
        parts.append(
            f"{ner} need a spaCy named-entity model installed as a package (for English "
            f"{DEFAULT_SPACY_MODEL!r}, as NeMo uses; pass spacy_model= to name another); "
            "none is installed and nothing is downloaded"
        )
    if any(e in UNSUPPORTED for e in missing):
        parts.append("ADDRESS is NeMo's own street-address recognizer, which Presidio lacks")
    other = [e for e in missing if e not in NER_ENTITIES and e not in UNSUPPORTED]
    if other:
        parts.append(f"Presidio has no recognizer for {other} in language {language!r}")
    return "; ".join(parts)


__all__ = ["DEFAULT_BATCH_SIZE", "PiiModifier", "available_entities"]
