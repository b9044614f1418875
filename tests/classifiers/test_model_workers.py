"""Model stages on real worker processes: pickled without the model, set up once per worker."""

from __future__ import annotations

import json

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from curator_dask.classifiers import HFSequenceClassifier

pytest.importorskip("torch")
distributed = pytest.importorskip("distributed")

TEXTS = [
    "the cat sat on the mat",
    "a dog ran over the rug",
    "good data is very big",
    "bad text was not small",
    "the bird flew under the tree",
    "red and blue and green",
] * 5


def _ready_stages() -> int:
    from curator_dask import stage

    return sum(type(s).__name__ == "HFSequenceClassifier" for s in stage._READY.values())


@pytest.mark.integration
def test_classifier_on_worker_processes(tmp_path, tiny_classifier_dir):
    from curator_dask.executor import DaskExecutor
    from curator_dask.io import JsonlReader, JsonlWriter
    from curator_dask.pipeline import Pipeline

    frame = pd.DataFrame({"id": [f"d{i:02d}" for i in range(len(TEXTS))], "text": TEXTS})
    src = tmp_path / "in"
    src.mkdir()
    for k in range(3):  # three input files -> three partitions
        chunk = frame.iloc[k * 10 : (k + 1) * 10]
        chunk.to_json(src / f"part-{k}.jsonl", orient="records", lines=True)
    clf = HFSequenceClassifier(model_dir=tiny_classifier_dir, model_inference_batch_size=4)
    local = clf.__class__(**clf.__getstate__())
    local.setup()
    expected = local.process(frame)

    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            memory_limit="2GB",
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        # the lazy dask path
        out = clf(dd.from_pandas(frame, npartitions=4)).compute()
        assert out["id"].tolist() == frame["id"].tolist()
        np.testing.assert_allclose(out["label_prob"], expected["label_prob"], atol=1e-5)
        # four tasks; each worker process holds at most one set-up instance of the stage
        per_worker = client.run(_ready_stages)
        # the pipeline path: statistics carry the stage's oom_retries counter
        result = Pipeline(
            "classify",
            [
                JsonlReader(str(src), files_per_partition=1),
                clf,
                JsonlWriter(str(tmp_path / "out")),
            ],
        ).run(DaskExecutor(client=client, progress=False))
    assert result.read == result.kept == len(frame)
    stats = next(s for s in result.stages if s.name == "HFSequenceClassifier")
    assert stats.extra == {"oom_retries": 0}
    assert stats.partitions == 3
    assert set(per_worker.values()) <= {0, 1}
    assert sum(per_worker.values()) >= 1
    written = [
        json.loads(line)
        for f in sorted((tmp_path / "out").glob("*.jsonl"))
        for line in f.read_text().splitlines()
    ]
    by_id = {r["id"]: r for r in written}
    for _, row in expected.iterrows():
        assert by_id[row["id"]]["label"] == row["label"]
        assert by_id[row["id"]]["label_prob"] == pytest.approx(row["label_prob"], abs=1e-5)
