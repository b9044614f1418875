from __future__ import annotations

import os
import re

import dask.dataframe as dd
import networkx as nx
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_dask.dedup.components import (
    components_distributed,
    components_in_memory,
    connected_components,
    streamed_union_find,
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
        dd.from_pandas(pdf, npartitions=3), str(tmp_path), max_in_memory_vertices=0
    ).compute()
    assert set(labels["label"]) == {0}
    assert len(labels) == n


def _uid(x: int) -> int:
    """Vertex ``x`` as a workflow uid: partition ``x % 3``, row ``x // 3``."""
    return ((x % 3) << 32) | (x // 3)


@settings(max_examples=12, deadline=None)
@given(
    EDGES.map(lambda es: [e for e in es if e[0] != e[1]]).filter(bool),
    st.integers(1, 3),
    st.sampled_from([0, None, 10**9]),
    st.booleans(),
)
def test_connected_components_matches_networkx(tmp_path_factory, edges, nparts, limit, counts):
    # each partition is first reduced to its local stars, then solved by the distributed
    # rounds (limit 0) or by the streamed union-find, with the row counts given or found
    uid_edges = [(_uid(a), _uid(b)) for a, b in edges]
    pdf = pd.DataFrame(uid_edges, columns=["u", "v"]).astype("int64")
    df = dd.from_pandas(pdf, npartitions=nparts)
    work = str(tmp_path_factory.mktemp("cc"))
    got = connected_components(
        df,
        work,
        max_in_memory_vertices=limit,
        vertex_counts=np.array([14, 14, 14]) if counts else None,
    ).compute()
    assert _as_dict(got) == _oracle(uid_edges)
    streamed = limit != 0
    assert os.path.isdir(os.path.join(work, "labels")) == streamed
    assert any(n.startswith("round-") for n in os.listdir(work)) != streamed


def test_union_find_streams_files_and_writes_labels_in_pieces(tmp_path):
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 300, 400), rng.integers(0, 300, 400)
    files = []
    for k in range(4):  # the edges in four files, read one at a time
        piece = pd.DataFrame({"u": [_uid(x) for x in a[k::4]], "v": [_uid(x) for x in b[k::4]]})
        files.append(str(tmp_path / f"e{k}.parquet"))
        piece.to_parquet(files[-1])
    paths = streamed_union_find(files, np.array([100, 100, 100]), str(tmp_path / "out"), None, 50)
    assert len(paths) > 1
    got = pd.concat([pd.read_parquet(p) for p in paths])
    assert _as_dict(got) == _oracle([(_uid(x), _uid(y)) for x, y in zip(a, b, strict=True)])


def test_union_find_refuses_a_vertex_outside_the_given_rows(tmp_path):
    pd.DataFrame({"u": [_uid(1)], "v": [_uid(400)]}).to_parquet(tmp_path / "e.parquet")
    with pytest.raises(ValueError, match=re.escape("is not partition << 32 | row")):
        streamed_union_find([str(tmp_path / "e.parquet")], np.array([10, 10, 10]), str(tmp_path))


def test_vertices_that_are_not_uids_take_the_distributed_rounds(tmp_path):
    pdf = pd.DataFrame({"u": [-5, -3, 7], "v": [-3, 2, 9]}).astype("int64")
    got = connected_components(dd.from_pandas(pdf, npartitions=2), str(tmp_path)).compute()
    assert _as_dict(got) == _oracle([(-5, -3), (-3, 2), (7, 9)])
    assert not (tmp_path / "labels").exists()
