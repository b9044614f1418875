#!/usr/bin/env python3
"""Print the requirements of curator_dask with its `gpu-cu13` extra (or the extra named).

    python3 scripts/gpu_requirements.py [gpu-cu12]

For `pip download`/`pip install --no-index --find-links` on a machine with no network
(scripts/gpu_check.sh). The optional part (nvidia-ml-py) is left out.
"""

from __future__ import annotations

import configparser
import sys
from pathlib import Path

OPTIONAL = ("nvidia-ml-py",)

if __name__ == "__main__":
    cfg = configparser.ConfigParser()
    cfg.read(Path(__file__).resolve().parent.parent / "setup.cfg")
    extra = sys.argv[1] if len(sys.argv) > 1 else "gpu-cu13"
    lines = cfg["options"]["install_requires"].split("\n")
    lines += cfg["options.extras_require"][extra].split("\n")
    for line in lines:
        line = line.strip()
        if line and not line.startswith("#") and not line.startswith(OPTIONAL):
            print(line)
