"""``nemo_curator.utils.script_utils``: :class:`ArgumentHelper`, NeMo scripts' flags.

The flags, their defaults and :meth:`ArgumentHelper.parse_client_args` are NeMo's, so a
script's command line and its ``get_client(**ArgumentHelper.parse_client_args(args))``
carry over unchanged.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

#: get_client's keywords that parse_client_args passes on when the script defines them.
_CLIENT_ARGS = (
    "scheduler_address",
    "scheduler_file",
    "n_workers",
    "threads_per_worker",
    "nvlink_only",
    "protocol",
    "rmm_pool_size",
    "enable_spilling",
    "set_torch_to_use_rmm",
)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("curator_dask")
    except PackageNotFoundError:
        return "unknown"


class ArgumentHelper:
    """Adds NeMo Curator's common command-line flags to an ``argparse`` parser.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The script's parser (``--version`` is added at once).

    Examples
    --------
    >>> parser = argparse.ArgumentParser()
    >>> helper = ArgumentHelper(parser)
    >>> _ = helper.add_distributed_args()
    >>> helper.add_arg_input_data_dir(required=True)
    >>> args = parser.parse_args(["--input-data-dir", "in", "--n-workers", "2"])
    >>> ArgumentHelper.parse_client_args(args)["n_workers"]
    2
    """

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser
        self.attach_version_arg()

    def attach_version_arg(self) -> None:
        """``--version`` / ``-v``."""
        self.parser.add_argument(
            "--version",
            "-v",
            action="version",
            version=f"curator_dask {_version()} (NeMo Curator compatibility layer)",
            help="Print the version and exit.",
        )

    @staticmethod
    def attach_bool_arg(
        parser: argparse.ArgumentParser,
        flag_name: str,
        default: bool = False,
        help: str | None = None,
    ) -> None:
        """``--<flag>`` and ``--no-<flag>``, stored as ``<flag>`` with dashes as underscores."""
        dest = flag_name.replace("-", "_")
        text = help if help is not None else flag_name.replace("-", " ")
        parser.add_argument(f"--{flag_name}", dest=dest, action="store_true", help=text)
        parser.add_argument(f"--no-{flag_name}", dest=dest, action="store_false", help=text)
        parser.set_defaults(**{dest: default})

    def _add(self, *flags: str, **kwargs: Any) -> None:
        self.parser.add_argument(*flags, **kwargs)

    def add_arg_batch_size(
        self,
        default: int = 64,
        help: str = "Files read into memory at a time.",
    ) -> None:
        """``--batch-size`` (int)."""
        self._add("--batch-size", type=int, default=default, help=help)

    def add_arg_device(self) -> None:
        """``--device`` ("cpu" or "gpu", default "gpu")."""
        self._add("--device", type=str, default="gpu", help="'cpu' or 'gpu'.")

    def add_arg_enable_spilling(self) -> None:
        """``--enable-spilling``."""
        self._add("--enable-spilling", action="store_true")

    def add_arg_language(self, help: str) -> None:
        """``--language`` (default "en")."""
        self._add("--language", type=str, default="en", help=help)

    def add_arg_log_dir(self, default: str) -> None:
        """``--log-dir``."""
        self._add("--log-dir", type=str, default=default, help="Directory for log files.")

    def add_arg_input_data_dir(
        self,
        required: bool = False,
        help: str = "Directory of input files every worker can read.",
    ) -> None:
        """``--input-data-dir``."""
        self._add("--input-data-dir", type=str, default=None, required=required, help=help)

    def add_arg_input_file_type(
        self,
        choices: Any = None,
        required: bool = False,
        help: str = "Input format: 'jsonl' (default), 'parquet' or 'pickle'.",
    ) -> None:
        """``--input-file-type`` (default "jsonl")."""
        self._add(
            "--input-file-type",
            type=str,
            default="jsonl",
            required=required,
            choices=choices,
            help=help,
        )

    def add_arg_input_file_extension(
        self,
        help: str = "Extension of the input files (default: the input file type).",
    ) -> None:
        """``--input-file-extension``."""
        self._add("--input-file-extension", type=str, default=None, help=help)

    def add_arg_input_local_data_dir(self) -> None:
        """``--input-local-data-dir``."""
        self._add("--input-local-data-dir", type=str, default=None, help="Local input directory.")

    def add_arg_input_meta(self) -> None:
        """``--input-meta``: the JSON text of ``{"field": "dtype"}``."""
        self._add("--input-meta", type=str, default=None, help='JSON of {"field": "dtype"}.')

    def add_arg_input_text_field(self) -> None:
        """``--input-text-field`` (default "text")."""
        self._add("--input-text-field", type=str, default="text", help="The text field.")

    def add_arg_id_column(self) -> None:
        """``--id-column`` (default "id")."""
        self._add("--id-column", type=str, default="id", help="The id field.")

    def add_arg_minhash_length(self) -> None:
        """``--minhash-length`` (default 260)."""
        self._add("--minhash-length", type=int, default=260, help="MinHash signature length.")

    def add_arg_nvlink_only(self) -> None:
        """``--nvlink-only``."""
        self._add("--nvlink-only", action="store_true", help="NVLink only (GPU clusters).")

    def add_arg_output_data_dir(self, help: str) -> None:
        """``--output-data-dir`` (required)."""
        self._add("--output-data-dir", type=str, required=True, help=help)

    def add_arg_output_dir(
        self,
        required: bool = False,
        help: str = "Directory for the results.",
    ) -> None:
        """``--output-dir``."""
        self._add("--output-dir", type=str, required=required, help=help)

    def add_arg_output_file_type(
        self,
        choices: Any = None,
        help: str = "Output format: 'jsonl' (default), 'parquet' or 'pickle'.",
    ) -> None:
        """``--output-file-type`` (default "jsonl")."""
        self._add("--output-file-type", type=str, default="jsonl", choices=choices, help=help)

    def add_arg_output_train_file(self, help: str, default: str | None = None) -> None:
        """``--output-train-file``."""
        self._add("--output-train-file", type=str, default=default, help=help)

    def add_arg_protocol(self) -> None:
        """``--protocol`` (default "ucx")."""
        self._add("--protocol", type=str, default="ucx", help="Protocol of a local GPU cluster.")

    def add_arg_rmm_pool_size(self) -> None:
        """``--rmm-pool-size`` (default "14GB")."""
        self._add("--rmm-pool-size", type=str, default="14GB", help="RMM pool of a GPU worker.")

    def add_arg_scheduler_address(self) -> None:
        """``--scheduler-address``."""
        self._add("--scheduler-address", type=str, default=None, help="A running scheduler.")

    def add_arg_scheduler_file(self) -> None:
        """``--scheduler-file``."""
        self._add("--scheduler-file", type=str, default=None, help="A scheduler file.")

    def add_arg_seed(
        self,
        default: int = 42,
        help: str = "Random seed.",
    ) -> None:
        """``--seed`` (default 42)."""
        self._add("--seed", type=int, default=default, help=help)

    def add_arg_set_torch_to_use_rmm(self) -> None:
        """``--set-torch-to-use-rmm``."""
        self._add("--set-torch-to-use-rmm", action="store_true")

    def add_arg_shuffle(self, help: str) -> None:
        """``--shuffle`` / ``--no-shuffle``."""
        ArgumentHelper.attach_bool_arg(self.parser, "shuffle", help=help)

    def add_arg_text_ddf_blocksize(self) -> None:
        """``--text-ddf-blocksize`` (MB, default 256)."""
        self._add("--text-ddf-blocksize", type=int, default=256, help="Block size in MB.")

    def add_arg_model_path(self, help: str = "The model's path.") -> None:
        """``--pretrained-model-name-or-path``."""
        self._add("--pretrained-model-name-or-path", type=str, required=False, help=help)

    def add_arg_autocast(self, help: str = "Use autocast.") -> None:
        """``--autocast`` / ``--no-autocast`` (default on)."""
        ArgumentHelper.attach_bool_arg(self.parser, "autocast", default=True, help=help)

    def add_arg_max_chars(self, default: int = 2000) -> None:
        """``--max-chars`` (default 2000)."""
        self._add("--max-chars", type=int, default=default, help="Characters per document.")

    def add_distributed_args(self) -> argparse.ArgumentParser:
        """The cluster flags: ``--device`` (cpu), ``--files-per-partition``, ``--n-workers``..."""
        self._add("--device", type=str, default="cpu", help="'cpu' or 'gpu'.")
        self._add("--files-per-partition", type=int, default=2, help="Files per partition.")
        self._add("--n-workers", type=int, default=os.cpu_count(), help="Local workers.")
        self._add("--num-files", type=int, default=None, help="Read at most this many files.")
        self._add("--nvlink-only", action="store_true", help="NVLink only (GPU clusters).")
        self._add("--protocol", type=str, default="tcp", help="Protocol of a local cluster.")
        self._add("--rmm-pool-size", type=str, default=None, help="RMM pool of a GPU worker.")
        self._add("--scheduler-address", type=str, default=None, help="A running scheduler.")
        self._add("--scheduler-file", type=str, default=None, help="A scheduler file.")
        self._add("--threads-per-worker", type=int, default=1, help="Threads per worker.")
        return self.parser

    def add_distributed_classifier_cluster_args(self) -> None:
        """The cluster flags of NeMo's classifier scripts (GPU by default)."""
        self.add_distributed_args()
        self.parser.set_defaults(device="gpu")

    def set_default_n_workers(self, max_mem_gb_per_worker: float) -> None:
        """Default ``--n-workers``: as many as the cores and ``max_mem_gb_per_worker`` allow."""
        import psutil

        memory_gb = psutil.virtual_memory().total / 1024**3
        n = min(os.cpu_count() or 1, int(memory_gb // max_mem_gb_per_worker))
        self.parser.set_defaults(n_workers=max(1, n))

    @staticmethod
    def parse_client_args(args: argparse.Namespace) -> dict[str, Any]:
        """The ``get_client`` keywords among ``args`` (``--device`` as ``cluster_type``)."""
        values = vars(args)
        out = {name: values[name] for name in _CLIENT_ARGS if name in values}
        if "device" in values:
            out["cluster_type"] = values["device"]
        return out

    @staticmethod
    def parse_distributed_classifier_args(
        description: str = "Distributed classifier arguments", max_chars_default: int = 2000
    ) -> argparse.ArgumentParser:
        """A parser with the flags of NeMo's classifier scripts."""
        parser = argparse.ArgumentParser(
            description, formatter_class=argparse.ArgumentDefaultsHelpFormatter
        )
        helper = ArgumentHelper(parser)
        helper.add_distributed_classifier_cluster_args()
        helper.add_arg_input_data_dir(required=True)
        helper.add_arg_output_data_dir(help="Directory of the output files.")
        helper.add_arg_input_file_type()
        helper.add_arg_input_file_extension()
        helper.add_arg_output_file_type()
        helper.add_arg_input_text_field()
        helper.add_arg_batch_size(help="Documents per inference batch.")
        helper.add_arg_model_path()
        helper.add_arg_autocast()
        helper.add_arg_max_chars(default=max_chars_default)
        return helper.parser


__all__ = ["ArgumentHelper"]
