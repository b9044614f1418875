"""``nemo_curator.modules.modify``: :class:`Modify`."""

from __future__ import annotations

from typing import Any

import pandas as pd

from curator_dask.nemo.datasets import DocumentDataset
from curator_dask.nemo.modules._base import call, map_parts


def _modify_part(part: pd.DataFrame, modifier: Any, text_field: str) -> pd.DataFrame:
    return part.assign(**{text_field: call(modifier.modify_document, part[text_field])})


class Modify:
    """Rewrite ``text_field`` with ``modifier.modify_document`` (lazy).

    Parameters
    ----------
    modifier : DocumentModifier
        Implements ``modify_document``; once per partition when it is ``@batched``.
    text_field : str
        Column holding the text.
    """

    def __init__(self, modifier: Any, text_field: str = "text") -> None:
        self.modifier = modifier
        self.text_field = text_field

    def __call__(self, dataset: DocumentDataset) -> DocumentDataset:
        return DocumentDataset(map_parts(dataset.df, _modify_part, self.modifier, self.text_field))


__all__ = ["Modify"]
