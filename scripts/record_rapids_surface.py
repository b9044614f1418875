#!/usr/bin/env python3
"""Record the pinned RAPIDS release's public surface into tests/data/rapids_surface.json.

Run it when RAPIDS is bumped (after changing the pins in tests/_rapids_surface.py and
setup.cfg), then `pytest tests/test_rapids_surface.py`:

    python scripts/record_rapids_surface.py            # downloads the wheels with pip
    python scripts/record_rapids_surface.py DIR        # or reads the wheels already in DIR

The wheels are read, never installed or imported; no GPU is needed.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from _rapids_surface import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], ROOT))
