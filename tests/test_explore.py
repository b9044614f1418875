"""The notebook helpers: plots on real data, documents side by side, rich display."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from curator_dask.explore import (
    compare_documents,
    duplicate_group,
    pipeline_html,
    plot_group_sizes,
    plot_jaccard,
    plot_lsh_curve,
    plot_memory,
    plot_scores,
    thresholds_of,
)
from curator_dask.filters import WordCountFilter

mpl = pytest.importorskip("matplotlib")
mpl.use("Agg")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def test_score_histogram_colours_the_kept_side_and_marks_thresholds() -> None:
    flt = WordCountFilter(min_words=50, max_words=1000)
    scores = pd.Series([10, 20, 49, 50, 60, 500, 999, 1000, 1001, 5000], dtype=float)
    ax = plot_scores(scores, flt, bins=20)
    kept, removed = ax.containers  # the two stacked series
    assert sum(p.get_height() for p in kept) == int(flt.keep_score(scores).sum()) == 5
    assert sum(p.get_height() for p in removed) == 5
    assert thresholds_of(flt) == {"min_words": 50.0, "max_words": 1000.0}
    assert sorted(line.get_xdata()[0] for line in ax.lines) == [50.0, 1000.0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["kept (5)", "removed (5)"]


def test_lsh_curve_is_the_formula() -> None:
    from curator_dask.dedup import candidate_probability

    ax = plot_lsh_curve(20, 13, 0.8, others=[(30, 8)])
    s, p = ax.lines[0].get_data()
    i = int(np.argmin(np.abs(s - 0.8)))
    assert p[i] == pytest.approx(candidate_probability(0.8, 20, 13))
    assert p[i] == pytest.approx(1 - (1 - 0.8**13) ** 20)
    assert len(ax.lines) == 3  # two shapes and the threshold


def test_jaccard_and_group_size_plots_count_what_they_are_given() -> None:
    ax = plot_jaccard([0.5, 0.79, 0.8, 0.9, 1.0], threshold=0.8)
    above, below = ax.containers
    assert sum(p.get_height() for p in above) == 3
    assert sum(p.get_height() for p in below) == 2
    ax = plot_group_sizes([2, 2, 2, 3, 7])
    assert [p.get_height() for p in ax.patches] == [3, 1, 1]


def test_memory_plot_from_a_timeline_frame() -> None:
    from curator_dask.monitoring.timeline import timeline_frame

    rows = [
        {"time": t, "worker": w, "rss": 3e8, "managed": 1e8, "unmanaged": 2e8, "spilled": 0.0}
        for t in (0.0, 1.0, 2.0)
        for w in ("a", "b")
    ]
    ax = plot_memory(timeline_frame(rows))
    assert "2 workers" in ax.get_title()


def test_compare_documents_marks_the_differences() -> None:
    cmp = compare_documents({"k": "one two three four", "r": "one two THREE four five"})
    ops = [(op, t.strip()) for op, t in cmp.differences(1) if op != "equal"]
    assert ("delete", "three") in ops
    assert ("insert", "THREE") in ops
    assert ("insert", "five") in ops
    html = cmp._repr_html_()
    assert "<del" in html
    assert "<ins" in html
    assert "removed &middot;" in html
    assert str(cmp).splitlines()[0] == "=== k (kept)"


def test_duplicate_group_shows_the_kept_document_first() -> None:
    docs = pd.DataFrame({"text": ["a b c", "a b c d", "x y", "a b c"]}, index=["1", "2", "3", "4"])
    removed = pd.DataFrame({"id": ["2", "4"], "group": ["1", "1"]})
    cmp = duplicate_group(docs, removed, "1")
    assert cmp.ids == ["1", "2", "4"]
    assert cmp.labels == ["kept", "removed", "removed"]
    assert cmp.similarity(2) == 1.0
    assert "removed 2" in cmp.title


def test_pipeline_and_result_display_as_html(tmp_path) -> None:
    from curator_dask.executor import SequentialExecutor
    from curator_dask.io import JsonlReader, JsonlWriter
    from curator_dask.pipeline import Pipeline

    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "a", "text": "one two three"}\n{"id": "b", "text": "one"}\n')
    p = Pipeline(
        "html",
        [JsonlReader(str(src)), WordCountFilter(min_words=2), JsonlWriter(str(tmp_path / "o"))],
    )
    html = p._repr_html_()
    assert html == pipeline_html(p)
    assert "WordCountFilter" in html
    assert "min_words=2" in html
    result = p.run(SequentialExecutor(progress=False))
    html = result._repr_html_()
    assert "read 2 = kept 1 + removed 1 + quarantined 0" in html
    assert "&#10003;" in html
