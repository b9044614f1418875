"""FileReader, the extension point for a new file format, lives in a public module; its old
private path still imports."""

from __future__ import annotations

import curator_dask.io
import curator_dask.io._common
import curator_dask.io.file_reader


def test_file_reader_has_a_public_home_and_the_old_path_works() -> None:
    reader = curator_dask.io.file_reader.FileReader
    assert reader is curator_dask.io.FileReader
    assert reader is curator_dask.io._common.FileReader
    assert reader.__module__ == "curator_dask.io.file_reader"
    from curator_dask.io._common import STRING_DTYPE, byte_ranges

    assert STRING_DTYPE is curator_dask.io.file_reader.STRING_DTYPE
    assert byte_ranges is curator_dask.io.file_reader.byte_ranges
