"""``nemo_curator.modules.meta``: :class:`Sequential`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from curator_dask.nemo.datasets import DocumentDataset


class Sequential:
    """Apply ``modules`` one after the other."""

    def __init__(self, modules: Sequence[Callable[[DocumentDataset], DocumentDataset]]) -> None:
        self.modules = list(modules)

    def __call__(self, dataset: DocumentDataset) -> DocumentDataset:
        for module in self.modules:
            dataset = module(dataset)
        return dataset


__all__ = ["Sequential"]
