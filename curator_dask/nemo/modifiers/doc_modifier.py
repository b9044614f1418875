"""``nemo_curator.modifiers.doc_modifier``: :class:`DocumentModifier`."""

from __future__ import annotations

from typing import Any

from curator_dask.nemo.utils.decorators import batched
from curator_dask.stage import Modifier


class DocumentModifier:
    """Base of NeMo-style modifiers: implement ``modify_document(text) -> text``.

    Called once per document, or once per partition with a Series when decorated with
    :func:`curator_dask.nemo.utils.decorators.batched`.
    """

    def modify_document(self, text: Any) -> Any:
        """The rewritten document (or Series of documents when batched)."""
        raise NotImplementedError(f"{type(self).__name__} must implement modify_document")


class NativeModifier(DocumentModifier):
    """A DocumentModifier running a curator_dask modifier once per partition."""

    def __init__(self, modifier: Modifier) -> None:
        self.modifier = modifier

    @batched
    def modify_document(self, text: Any) -> Any:
        return self.modifier.modify(text)


__all__ = ["DocumentModifier"]
