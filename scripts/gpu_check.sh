#!/usr/bin/env bash
# The GPU proof in one call, on a CUDA machine (docs/gpu.md, "Running the GPU checks"):
#   1. RAPIDS: used if `import cudf` works; otherwise installed, with no network, from
#      wheels carried to /var/tmp/wheels or .gpuwheels (the whole dependency closure of
#      `curator_dask[gpu-cu13]`, e.g. made elsewhere with `pip download -d .gpuwheels
#      --only-binary=:all: --platform manylinux_2_28_x86_64 --python-version 3.12
#      -r <(python3 scripts/gpu_requirements.py)`) into a venv that sees the system's
#      packages (torch, CuPy), or from the older .whl/ set (dask only) into /tmp/site;
#   2. every `gpu`-marked test;
#   3. bench/gpu_check.py: run, exact-dedup, fuzzy-dedup --perform-removal and
#      semantic-dedup with --gpu on the cudf backend against the same commands on CPU,
#      outputs compared by hash, then the GPU MinHash benchmark, and one summary table.
# Logs and JSON go to $OUT (default out/gpu). Exit status: failures (0 = all equal).
set -uo pipefail
OUT=${OUT:-out/gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
if ! "$PY" -c "import cudf" >/dev/null 2>&1; then
  WHEELS=""
  for d in /var/tmp/wheels .gpuwheels; do
    if [ -d "$d" ] && ls "$d"/cudf_cu1*.whl >/dev/null 2>&1; then WHEELS=$d; break; fi
  done
  if [ -n "$WHEELS" ]; then
    VENV=${VENV:-/var/tmp/curator-gpu-venv}
    "$PY" -m venv --system-site-packages "$VENV" || exit 1
    "$PY" scripts/gpu_requirements.py > "$OUT/requirements.txt" || exit 1
    "$VENV/bin/python" -m pip install -q --no-index --find-links "$WHEELS" \
      -r "$OUT/requirements.txt" 2>&1 | tail -5 | tee "$OUT/install.log"
    # optional parts of the extra (crossfit, NVML bindings): best effort
    "$VENV/bin/python" -m pip install -q --no-index --find-links "$WHEELS" crossfit nvidia-ml-py \
      >>"$OUT/install.log" 2>&1 || true
    PY=$VENV/bin/python
  elif [ -d .whl ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
  else
    echo "gpu_check: cudf is not importable and no wheels in /var/tmp/wheels or .gpuwheels" | tee "$OUT/install.log"
  fi
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
"$PY" -c "import sys, numpy, pandas, pyarrow, numba, dask; print(sys.version.split()[0], 'numpy', numpy.__version__, 'pandas', pandas.__version__, 'pyarrow', pyarrow.__version__, 'numba', numba.__version__, 'dask', dask.__version__)" | tee -a "$OUT/gpu.txt"
for mod in cupy cudf dask_cudf dask_cuda rmm cuml torch; do
  "$PY" -c "import $mod; print('$mod', $mod.__version__)" 2>&1 | tail -1 | tee -a "$OUT/gpu.txt"
done
# warnings from this machine's library versions are not what is being checked here
"$PY" -m pytest -m gpu -p no:cacheprovider -o addopts="" -W ignore::DeprecationWarning \
  -W ignore::FutureWarning -W ignore::UserWarning --continue-on-collection-errors -rA -q tests \
  2>&1 | tee "$OUT/gpu_tests.log"
"$PY" bench/gpu_check.py --out "$OUT" --tests-log "$OUT/gpu_tests.log" 2>&1 | tee "$OUT/gpu_check.log"
exit "${PIPESTATUS[0]}"
