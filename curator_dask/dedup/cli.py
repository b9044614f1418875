"""The ``exact-dedup`` and ``fuzzy-dedup`` subcommands of ``curator-dask``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

# curator_dask.dedup.exact.HASH_METHODS, written out so `--help` does not import numba
# (tests/test_cli.py checks they agree).
HASH_METHODS = ("md5", "xxh128", "fast128")


def register(
    subparsers: Any,
    add_cluster_args: Callable[[argparse.ArgumentParser], None],
    client_from_args: Callable[[argparse.Namespace], Any],
) -> None:
    """Add ``exact-dedup`` and ``fuzzy-dedup`` to ``subparsers``.

    ``add_cluster_args(parser)`` adds the cluster flags; ``client_from_args(args)`` is a
    context manager yielding a distributed Client (or None for the local scheduler).
    """
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("input", nargs="+", help="JSONL/Parquet files, a directory or a glob")
    common.add_argument("--output", required=True, help="output directory")
    common.add_argument("--text-column", default="text", help="column holding the text")
    common.add_argument("--id-column", default="id", help="column holding the document id")
    common.add_argument(
        "--blocksize",
        default=None,
        help="input partition size, e.g. 256MB (default: curator.io.blocksize)",
    )
    common.add_argument(
        "--perform-removal",
        action="store_true",
        help="also write the deduplicated dataset to OUTPUT/deduplicated/",
    )

    ex = subparsers.add_parser(
        "exact-dedup", parents=[common], help="remove documents with identical text"
    )
    ex.add_argument(
        "--hash-method", choices=HASH_METHODS, default="md5", help="hash of the normalised text"
    )
    ex.add_argument(
        "--keep", choices=("first", "last"), default="first", help="which copy of a group stays"
    )
    add_cluster_args(ex)
    ex.set_defaults(func=lambda a: _run_exact(a, client_from_args))

    fz = subparsers.add_parser(
        "fuzzy-dedup", parents=[common], help="remove near-duplicates (MinHash + LSH)"
    )
    fz.add_argument("--cache-dir", required=True, help="checkpoint directory (resumable)")
    shingles = fz.add_mutually_exclusive_group()
    shingles.add_argument(
        "--char-ngrams", type=int, default=None, help="shingle on N characters (default: 24)"
    )
    shingles.add_argument(
        "--word-ngrams", type=int, default=None, help="shingle on N words instead"
    )
    fz.add_argument("--num-bands", type=int, default=20, help="LSH bands (b)")
    fz.add_argument("--minhashes-per-band", type=int, default=13, help="MinHashes per band (r)")
    fz.add_argument(
        "--bands-per-iteration",
        type=int,
        default=None,
        help="bands shuffled together (default: planned from the cluster's memory)",
    )
    fz.add_argument(
        "--jaccard-threshold", type=float, default=0.8, help="similarity that makes a duplicate"
    )
    fz.add_argument("--seed", type=int, default=42, help="seed of the MinHash permutations")
    fz.add_argument(
        "--use-64-bit-hash", action="store_true", help="64-bit instead of 32-bit MinHashes"
    )
    fz.add_argument(
        "--false-positive-check",
        action="store_true",
        help="compute the exact Jaccard of candidate pairs and drop those below the threshold",
    )
    fz.add_argument(
        "--keep",
        choices=("first", "longest"),
        default="first",
        help="which document of a group stays",
    )
    add_cluster_args(fz)
    fz.set_defaults(func=lambda a: _run_fuzzy(a, client_from_args))


def _print(summary: dict[str, Any]) -> None:
    print(
        f"documents read: {summary['documents']}  duplicate groups: "
        f"{summary['duplicate_groups']}  removed: {summary['removed']}"
    )
    print(f"removed ids: {summary['removed_ids']}")
    print(json.dumps({"seconds": summary.get("seconds")}))


def _run_exact(args: argparse.Namespace, client_from_args: Callable[..., Any]) -> int:
    from curator_dask.dedup.exact import ExactDeduplicationWorkflow

    with client_from_args(args) as client:
        summary = ExactDeduplicationWorkflow(
            input_path=args.input,
            output_path=args.output,
            text_column=args.text_column,
            id_column=args.id_column,
            input_blocksize=args.blocksize,
            hash_method=args.hash_method,
            keep=args.keep,
            perform_removal=args.perform_removal,
            client=client,
        ).run()
    _print(summary)
    return 0


def _run_fuzzy(args: argparse.Namespace, client_from_args: Callable[..., Any]) -> int:
    from curator_dask.dedup.fuzzy import FuzzyDeduplicationWorkflow

    char = args.char_ngrams if args.word_ngrams is None else None
    with client_from_args(args) as client:
        summary = FuzzyDeduplicationWorkflow(
            input_path=args.input,
            cache_path=args.cache_dir,
            output_path=args.output,
            text_column=args.text_column,
            id_column=args.id_column,
            input_blocksize=args.blocksize,
            char_ngrams=char if char is not None else 24,
            word_ngrams=args.word_ngrams,
            num_bands=args.num_bands,
            minhashes_per_band=args.minhashes_per_band,
            bands_per_iteration=args.bands_per_iteration,
            use_64_bit_hash=args.use_64_bit_hash,
            seed=args.seed,
            jaccard_threshold=args.jaccard_threshold,
            false_positive_check=args.false_positive_check,
            keep=args.keep,
            perform_removal=args.perform_removal,
            client=client,
        ).run()
    _print(summary)
    return 0
