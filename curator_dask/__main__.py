"""``python -m curator_dask``: the ``curator-dask`` command."""

import sys

from curator_dask.cli import main

sys.exit(main())
