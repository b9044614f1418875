"""``python -m curator_dask``: the ``curator-dask`` command."""

import sys

from curator_dask.cli import main

if __name__ == "__main__":  # importing it (a module walk, doctests) runs nothing
    sys.exit(main())
