"""What the dedup workflows share after finding duplicates: groups, outputs, removal."""

from __future__ import annotations

import contextlib
import functools
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import dask
import numpy as np
import pandas as pd

from curator_dask import config
from curator_dask.dedup._runtime import (
    DedupInput,
    DedupResult,
    Reporter,
    StepCache,
    active_client,
    join,
    local_directories,
    resolve_path,
)
from curator_dask.hooks import RunInfo
from curator_dask.io.layout import OutputLease, RunLayout, lease_timeout
from curator_dask.io.parquet_dir import (
    Staged,
    commit,
    discard,
    get_fs,
    read_parquet_dir,
    remove_tree,
    stage,
    write_frame,
)
from curator_dask.monitoring import hooks as _monitoring  # noqa: F401  (registers its hooks)
from curator_dask.stage import release_freed_memory

UID_SHIFT = 32  # uid = partition << 32 | row


def shuffle_method(client: Any = None) -> str:
    """The dask shuffle method: ``curator.shuffle.method``, p2p only with a distributed client.

    p2p spills to disk but needs a distributed scheduler; with the local (synchronous or
    threaded) scheduler ``"p2p"`` falls back to ``"tasks"``.
    """
    method = str(config.get("shuffle.method", "p2p"))
    if method == "p2p" and active_client(client) is None:
        return "tasks"
    return method


def with_uid(part: pd.DataFrame, partition_info: dict | None = None) -> pd.DataFrame:
    """Add ``_uid = partition << 32 | row``: unique, and the partition is recoverable."""
    i = (partition_info or {}).get("number", 0)
    uid = (np.int64(i) << UID_SHIFT) + np.arange(len(part), dtype=np.int64)
    return part.assign(_uid=uid)


def group_members(part: pd.DataFrame, keep: str) -> pd.DataFrame:
    """Rows ``label, id[, n_chars], _uid`` of whole groups -> ``id, group, _uid, removed``.

    One row per member of every group of two or more. ``group`` is the id of the document
    kept: ``keep="first"`` keeps the smallest id, ``"last"`` the largest, ``"longest"`` the
    most characters (ties: smallest id); ``removed`` is False for that document only.
    """
    if keep == "first":
        part = part.sort_values(["label", "id"], kind="stable")
    elif keep == "last":
        part = part.sort_values(["label", "id"], ascending=[True, False], kind="stable")
    elif keep == "longest":
        part = part.sort_values(["label", "n_chars", "id"], ascending=[True, False, True])
    else:
        raise ValueError(f"keep must be 'first', 'last' or 'longest', got {keep!r}")
    first = ~part["label"].duplicated()
    size = part.groupby("label")["label"].transform("size").to_numpy()
    part, first = part[size > 1], first[size > 1]
    kept_id = part["id"].where(first).ffill()
    out = pd.DataFrame(
        {
            "id": part["id"].to_numpy(),
            "group": kept_id.to_numpy(),
            "_uid": part["_uid"].to_numpy(np.int64),
            "removed": ~first.to_numpy(),
        }
    )
    return out.astype({"id": part["id"].dtype, "group": part["id"].dtype})


def choose_keepers(part: pd.DataFrame, keep: str) -> pd.DataFrame:
    """The removed rows ``id, group, _uid`` of :func:`group_members`."""
    m = group_members(part, keep)
    return m[m["removed"].to_numpy()].drop(columns="removed").reset_index(drop=True)


def members_meta(id_dtype: Any) -> pd.DataFrame:
    """Empty ``id, group, _uid, removed`` frame."""
    return pd.DataFrame(
        {
            "id": pd.Series([], dtype=id_dtype),
            "group": pd.Series([], dtype=id_dtype),
            "_uid": pd.Series([], dtype="int64"),
            "removed": pd.Series([], dtype=bool),
        }
    )


def removed_meta(id_dtype: Any) -> pd.DataFrame:
    """Empty ``id, group, _uid`` frame."""
    return members_meta(id_dtype).drop(columns="removed")


def remove_documents(df: Any, removed_uids: Any) -> Any:
    """``df`` without the documents in ``removed_uids`` (dask frame ``_uid``); lazy.

    ``df`` may also be a list of pandas frames (an in-memory run's partitions, with
    ``removed_uids`` a pandas frame): the list of what each keeps, computed now.

    ``df`` is the input (partition ``i`` holds uids ``i << 32 | row``), or documents a step
    kept with their ``_uid`` column, one partition per input partition.

    The removed uids are routed to the partition they came from (``uid >> 32``) by a
    range shuffle, then each input partition drops its own: no broadcast of the id list.
    """
    if isinstance(df, list):  # an in-memory run's partitions (pandas frames): now
        gone = removed_uids["_uid"].to_numpy(np.int64)
        return [
            _drop_removed(part, gone, "_uid" in part.columns, {"number": i})
            for i, part in enumerate(df)
        ]
    n = df.npartitions
    rm = removed_uids.assign(_part=removed_uids["_uid"] // (1 << UID_SHIFT))
    rm = rm.set_index(
        "_part", divisions=[*list(range(n)), n], sort=True, shuffle_method=shuffle_method()
    )
    stored = "_uid" in df.columns  # documents kept by a step with their uid

    def _drop(part: pd.DataFrame, gone: pd.DataFrame, partition_info: dict | None = None):
        return _drop_removed(part, gone["_uid"].to_numpy(), stored, partition_info)

    meta = df._meta.drop(columns="_uid") if stored else df._meta
    return df.map_partitions(_drop, rm, meta=meta, align_dataframes=False)


def _drop_removed(
    part: pd.DataFrame, gone: np.ndarray, stored: bool, partition_info: dict | None = None
) -> pd.DataFrame:
    """One partition of :func:`remove_documents`: its rows whose ``_uid`` is not in ``gone``."""
    if not stored:
        part = with_uid(part, partition_info)
    keep = ~part["_uid"].isin(gone)
    return part[keep.to_numpy()].drop(columns="_uid")


def scheduler_for(client: Any = None) -> Any:
    """A context manager running dask computations on ``client`` (or the active scheduler)."""
    import contextlib

    if client is None:
        return contextlib.nullcontext()
    return dask.config.set(scheduler=client)


@dataclass
class Run:
    """One run of a workflow: resolved paths, the input, the step cache, progress."""

    method: str
    output_path: str
    work_path: str
    input: DedupInput
    steps: StepCache
    reporter: Reporter
    client: Any
    storage_options: dict[str, Any] | None


class DedupWorkflow:
    """Base of the dedup workflows (dataclasses): the run skeleton around their steps.

    A subclass sets ``method`` (its name in messages and results), has the fields
    ``input_path, df, text_column, id_column, blocksize, input_format,
    storage_options, output_path, perform_removal, duplicate_groups, client`` and implements
    ``run()`` with :meth:`_begin`, its steps, and :meth:`_finish`.
    """

    method: ClassVar[str] = "dedup"

    def _work_root(self, output_path: str) -> str:
        """Where the steps are cached; default ``<output>/_work``."""
        return RunLayout.for_output(output_path).work_dir(self.method)

    def _check_apart(self, inp: DedupInput, written: dict[str, str | None] | None = None) -> None:
        """io's one overlap rule, as pipelines have it: the output, the quarantine directory
        (``curator.io.quarantine-dir``), the cache and what else the run writes
        (``written``, e.g. the local cluster's ``local directory``; by default the local
        directories of the workflow's client's workers when they are a local cluster's,
        :func:`curator_dask.cluster.local_directories`) apart from the input and each other."""
        if written is None:
            client = active_client(getattr(self, "client", None))
            written = local_directories(client) if client is not None else {}
        cache = getattr(self, "cache_path", None)
        so = getattr(self, "storage_options", None)
        output = RunLayout.for_output(self.output_path, storage_options=so)  # type: ignore[attr-defined]
        output.check_not_overlapping(
            inp.input_locations(),
            {"cache directory": resolve_path(cache) if cache else None, **(written or {})},
        )

    @contextlib.contextmanager
    def _leases(self) -> Iterator[None]:
        """Hold the lease of the output and of the cache directory (io's
        :class:`~curator_dask.io.layout.OutputLease`) while the workflow runs: a second run
        on either is refused with ``OutputInUseError`` naming the first."""
        so = getattr(self, "storage_options", None)
        places = {"output": resolve_path(self.output_path)}  # type: ignore[attr-defined]
        cache = getattr(self, "cache_path", None)
        if cache:
            places["cache directory"] = resolve_path(cache)
        self._check_apart(DedupInput.of(self))  # before a lease file is written
        run_id = f"{self.method}-{uuid.uuid4().hex[:12]}"
        with contextlib.ExitStack() as held:
            for what, root in places.items():
                layout = RunLayout(root, storage_options=so)
                held.enter_context(OutputLease(layout, run_id, lease_timeout(), what=what))
            yield

    def _in_memory_reads(self, run: Run) -> tuple[Any, list[Any]] | None:
        """``(read, specs)`` when this run keeps its partitions as pandas frames in this
        process, without a dask dataframe: input files whose estimated in-memory size
        (:func:`curator_dask.sizing.input_bytes`) is below ``curator.dedup.in-memory-below``,
        no distributed client, the pandas backend. ``read(spec)`` reads the partition
        ``spec`` of ``specs`` as the input frame's task does (the reader's
        :meth:`~curator_dask.io.file_reader.FileReader.read_task`: the same partitions, the
        same quarantine). None otherwise."""
        from dask.utils import parse_bytes

        from curator_dask import _backend, sizing

        below = config.get("dedup.in-memory-below", None)
        reader = run.input.reader()
        if below is None or run.client is not None or not hasattr(reader, "read_task"):
            return None
        if _backend.backend_name() != "pandas":
            return None
        specs = reader.partitions(sizing.workers_of(None))  # as DedupInput.frame lists them
        nbytes = sizing.input_bytes(reader, specs)
        if not specs or nbytes is None or nbytes >= parse_bytes(str(below)):
            return None
        return reader.read_task(specs), specs

    def _begin(self, quarantine_step: str | None = None) -> Run:
        so = getattr(self, "storage_options", None)
        output = resolve_path(self.output_path)  # type: ignore[attr-defined]
        work = self._work_root(output)
        inp = DedupInput.of(self)
        self._check_apart(inp)
        client = active_client(getattr(self, "client", None))
        reporter = Reporter(self.method, client, run=RunInfo("dedup", self.method, output, client))
        self._reporter = reporter  # the run hooks hear of a failure through it (leased)
        reporter.start()
        return Run(self.method, output, work, inp, StepCache(work, so), reporter, client, so)

    def _finish(
        self,
        run: Run,
        members: Any,
        documents: int,
        work_dir: str,
        details: dict[str, Any] | None = None,
        stats: dict[str, Any] | None = None,
        documents_frame: Any = None,
    ) -> DedupResult:
        """Write the outputs from the lazy ``members`` frame (``id, group, _uid, removed``).

        An in-memory run gives ``members`` as one pandas frame and ``documents_frame`` as a
        list of pandas frames (its partitions): the same outputs, written in this process.

        ``<output>/removed_ids/`` (``id, group``: one row per removed document),
        ``<output>/duplicate_groups/`` (``id, group``: every member, when
        ``duplicate_groups``), ``<output>/deduplicated/`` (``perform_removal``) and
        ``<output>.curator/_quarantine/``; each directory is published whole (temporary
        name, rename, ``<dir>.curator/_SUCCESS``). The removal reads ``documents_frame`` (the
        documents a step kept, see :func:`remove_documents`) instead of the input when given.
        """
        so, r = run.storage_options, run.reporter
        in_memory = isinstance(members, pd.DataFrame)  # an in-memory run: pandas frames
        if in_memory:  # the outputs are built on top of what the steps before freed
            release_freed_memory()
        with r.step("output"):
            mdir = join(work_dir, "members")
            write_frame([members] if in_memory else members, mdir, r, "duplicate groups", so)
            if in_memory:
                allm = members
            else:
                allm = read_parquet_dir(mdir, so, members_meta(members._meta["id"].dtype))
            removed = allm[allm["removed"]]
            one = (lambda f: [f]) if in_memory else (lambda f: f)
            paths: dict[str, str] = {}
            # every output is written before any is put in place: removed_ids is never
            # published without the deduplicated/ it goes with
            staged: dict[str, Staged] = {}
            try:
                if getattr(self, "perform_removal", False):
                    docs = run.input.frame() if documents_frame is None else documents_frame
                    kept = remove_documents(docs, removed[["_uid"]])
                    # input files may type a column differently: the run's one schema
                    staged["deduplicated"] = stage(
                        kept, run.output_path, "deduplicated", r, so, unify=True
                    )
                if getattr(self, "duplicate_groups", False):
                    staged["duplicate_groups"] = stage(
                        one(allm[["id", "group"]]), run.output_path, "duplicate_groups", r, so
                    )
                staged["removed_ids"] = stage(
                    one(removed[["id", "group"]]), run.output_path, "removed_ids", r, so
                )
            except BaseException:
                for s in staged.values():
                    discard(s, so)
                raise
            for name, s in staged.items():
                paths[name], _ = commit(s, so)
            n_removed = staged["removed_ids"].rows
            groups = allm["group"].nunique()
            n_groups = int(groups if in_memory else groups.compute()) if n_removed else 0
            out = RunLayout.for_output(run.output_path, storage_options=so)
            qdir, n_quarantined = out.copy_quarantine(run.input.quarantine_path)
            if qdir is not None:
                paths["quarantine"] = qdir
        seconds = {k: round(v, 3) for k, v in r.seconds.items()}
        seconds["total"] = round(r.total(), 3)
        # part of the steps' times: a kernel's first call on a machine compiles it
        seconds["compile"] = round(r.compile_seconds, 3)
        result = DedupResult(
            method=run.method,
            documents=int(documents),
            removed=int(n_removed),
            duplicate_groups=n_groups,
            quarantined=n_quarantined,
            seconds=seconds,
            paths=paths,
            stats=dict(stats or {}),
            details=dict(details or {}),
        )
        r.finish(result)
        if r.enabled and config.get("dedup.summary", True):  # the command line prints its own
            r.say("summary")
            print(repr(result), file=r.stream, flush=True)
        return result


def leased(run: Callable[[Any], DedupResult]) -> Callable[[Any], DedupResult]:
    """Decorate a workflow's ``run``: it holds :meth:`DedupWorkflow._leases` throughout."""

    @functools.wraps(run)
    def wrapper(self: Any) -> DedupResult:
        self._reporter = None
        try:
            with self._leases():
                return run(self)
        except BaseException:
            if self._reporter is not None:  # it started: the run hooks hear it failed
                self._reporter.failed()
            raise

    return wrapper


def remove_duplicates(
    dataset: Any,
    duplicates: Any,
    keep: str | None = "first",
    id_column: str = "id",
    group_column: str = "group",
    duplicates_id_column: str = "id",
    storage_options: dict[str, Any] | None = None,
) -> Any:
    """Drop duplicates listed in a table from a dataset, keeping exactly one per group; lazy.

    Parameters
    ----------
    dataset : dask.dataframe.DataFrame
        The documents.
    duplicates : dask.dataframe.DataFrame, pandas.DataFrame or str
        A duplicates table (or a directory of its Parquet files): ``duplicates_id_column``
        and ``group_column``. Either every member of every group (a workflow's
        ``duplicate_groups/`` output, or any table made elsewhere) with ``keep`` choosing the
        survivor, or only the documents to remove (``removed_ids/``) with ``keep=None``.
    keep : {"first", "last", None}
        Within each group keep the member with the smallest (``"first"``) or largest
        (``"last"``) id; None removes every listed id.
    id_column : str
        The id column of ``dataset``.
    storage_options : dict, optional
        fsspec options of the filesystem a ``duplicates`` directory is on (e.g. S3
        credentials or endpoint), as the workflows take them.

    Returns
    -------
    dask.dataframe.DataFrame
        ``dataset`` without the removed documents, in the same partitions and order. The ids
        to remove are routed by a hash shuffle to the partitions of a hashed copy of the
        dataset's ids; the table is never broadcast to every partition.

    Examples
    --------
    >>> import dask.dataframe as dd, pandas as pd
    >>> docs = dd.from_pandas(pd.DataFrame({"id": list("abcd"), "text": list("xyxy")}), 2)
    >>> groups = pd.DataFrame({"id": list("abcd"), "group": [0, 1, 0, 1]})
    >>> sorted(remove_duplicates(docs, groups, keep="first")["id"].compute())
    ['a', 'b']
    """
    import dask.dataframe as dd

    if isinstance(duplicates, (str, os.PathLike)):
        duplicates = dd.read_parquet(os.fspath(duplicates), storage_options=storage_options)
    if isinstance(duplicates, pd.DataFrame):
        duplicates = dd.from_pandas(duplicates, npartitions=1)
    dup = duplicates.rename(columns={duplicates_id_column: "_rid"})
    if keep is None:
        gone = dup[["_rid"]]
    else:
        if keep not in ("first", "last"):
            raise ValueError(f"keep must be 'first', 'last' or None, got {keep!r}")
        dup = dup[["_rid", group_column]].rename(columns={group_column: "_grp"})
        method = shuffle_method()

        def _losers(part: pd.DataFrame) -> pd.DataFrame:
            part = part.sort_values(["_grp", "_rid"], ascending=[True, keep == "first"])
            return part[part["_grp"].duplicated().to_numpy()][["_rid"]]

        gone = dup.shuffle(on="_grp", shuffle_method=method).map_partitions(
            _losers, meta=dup._meta[["_rid"]]
        )
    # Each dataset partition's ids, tagged with where they live, meet the ids to remove in
    # a shuffle on the id; the hits go back to their partition by a range shuffle.
    n = dataset.npartitions

    def _locate(part: pd.DataFrame, partition_info: dict | None = None) -> pd.DataFrame:
        i = (partition_info or {}).get("number", 0)
        return pd.DataFrame(
            {"_rid": part[id_column].to_numpy(), "_part": np.full(len(part), i, np.int64)}
        ).astype({"_rid": part[id_column].dtype})

    where = dataset.map_partitions(
        _locate,
        meta=pd.DataFrame(
            {
                "_rid": pd.Series([], dtype=dataset._meta[id_column].dtype),
                "_part": pd.Series([], dtype="int64"),
            }
        ),
    )
    gone = gone.astype({"_rid": dataset._meta[id_column].dtype})
    hits = where.merge(
        gone.drop_duplicates(), on="_rid", how="inner", shuffle_method=shuffle_method()
    )
    hits = hits.set_index(
        "_part", divisions=[*range(n), n], sort=True, shuffle_method=shuffle_method()
    )

    def _drop(part: pd.DataFrame, rm: pd.DataFrame) -> pd.DataFrame:
        return part[~part[id_column].isin(rm["_rid"].to_numpy()).to_numpy()]

    return dataset.map_partitions(_drop, hits, meta=dataset._meta, align_dataframes=False)


__all__ = [
    "UID_SHIFT",
    "DedupWorkflow",
    "Run",
    "choose_keepers",
    "get_fs",
    "group_members",
    "members_meta",
    "remove_documents",
    "remove_duplicates",
    "remove_tree",
    "removed_meta",
    "scheduler_for",
    "shuffle_method",
    "with_uid",
]
