from __future__ import annotations

import dask.dataframe as dd
import networkx as nx
import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_dask.dedup.components import (
    components_distributed,
    components_in_memory,
    connected_components,
)

EDGES = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), min_size=0, max_size=60)


def _oracle(edges: list[tuple[int, int]]) -> dict[int, int]:
    g = nx.Graph()
    g.add_edges_from(edges)
    return {v: min(c) for c in nx.connected_components(g) for v in c}


def _as_dict(frame: pd.DataFrame) -> dict[int, int]:
    assert not frame["uid"].duplicated().any()
    return dict(zip(frame["uid"].tolist(), frame["label"].tolist(), strict=False))


@settings(max_examples=30, deadline=None)
@given(EDGES)
def test_in_memory_matches_networkx(edges):
    u = np.array([e[0] for e in edges], dtype=np.int64)
    v = np.array([e[1] for e in edges], dtype=np.int64)
    assert _as_dict(components_in_memory(u, v)) == _oracle(edges)


@settings(max_examples=8, deadline=None)
@given(EDGES.map(lambda es: [e for e in es if e[0] != e[1]]).filter(bool), st.integers(1, 3))
def test_distributed_matches_networkx(tmp_path_factory, edges, nparts):
    # the workflows never make self-loops; the distributed path ignores them
    # a long chain too: many rounds of large-star/small-star
    scale = 1 << 33  # uids as the workflows make them (partition << 32 | row)
    pdf = pd.DataFrame(edges, columns=["u", "v"]).astype("int64") * scale
    df = dd.from_pandas(pdf, npartitions=nparts)
    work = str(tmp_path_factory.mktemp("cc"))
    got = _as_dict(components_distributed(df, work).compute())
    assert got == {k * scale: v * scale for k, v in _oracle(edges).items()}


def test_distributed_long_chain(tmp_path):
    n = 64
    rng = np.random.default_rng(0)
    perm = rng.permutation(n)
    pdf = pd.DataFrame({"u": perm[:-1], "v": perm[1:]}).astype("int64")
    labels = connected_components(
        dd.from_pandas(pdf, npartitions=3), str(tmp_path), max_in_memory_edges=0
    ).compute()
    assert set(labels["label"]) == {0}
    assert len(labels) == n


@settings(max_examples=8, deadline=None)
@given(
    EDGES.map(lambda es: [e for e in es if e[0] != e[1]]).filter(bool),
    st.integers(1, 3),
    st.sampled_from([0, 10**9]),
)
def test_connected_components_matches_networkx(tmp_path_factory, edges, nparts, limit):
    # each partition is first reduced to its local stars, then solved distributed (limit 0)
    # or in memory
    pdf = pd.DataFrame(edges, columns=["u", "v"]).astype("int64")
    df = dd.from_pandas(pdf, npartitions=nparts)
    work = str(tmp_path_factory.mktemp("cc"))
    got = connected_components(df, work, max_in_memory_edges=limit).compute()
    assert _as_dict(got) == _oracle(edges)
