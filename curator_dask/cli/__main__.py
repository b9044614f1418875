"""``python -m curator_dask.cli``: the ``curator-dask`` command."""

from curator_dask.cli import console_main

if __name__ == "__main__":  # importing it (a module walk, doctests) runs nothing
    console_main()
