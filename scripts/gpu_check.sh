#!/usr/bin/env bash
# GPU checks in one go, for a CUDA machine that has python3 with torch/cupy/pandas/pyarrow
# but not dask: wheels carried in .whl/ are installed to /tmp/site first (no network there).
# Runs every `gpu`-marked test and the GPU MinHash benchmark; logs go to $OUT (or ./out).
set -uo pipefail
OUT=${OUT:-out/gpu}
mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c "import sys, numpy, pandas, pyarrow, numba, dask, torch; print(sys.version.split()[0], 'numpy', numpy.__version__, 'pandas', pandas.__version__, 'pyarrow', pyarrow.__version__, 'numba', numba.__version__, 'dask', dask.__version__, 'torch', torch.__version__, torch.cuda.is_available())" | tee -a "$OUT/gpu.txt"
python3 -c "import cupy; print('cupy', cupy.__version__)" | tee -a "$OUT/gpu.txt"
python3 -c "import cudf" 2>&1 | tail -1 | tee -a "$OUT/gpu.txt"
# warnings from this machine's library versions are not what is being checked here
python3 -m pytest -m gpu -p no:cacheprovider -o addopts="" -W ignore::DeprecationWarning \
  -W ignore::FutureWarning -W ignore::UserWarning --continue-on-collection-errors -rA -q tests 2>&1 | tee "$OUT/gpu_tests.log"
python3 bench/bench_minhash_gpu.py --out "$OUT" 2>&1 | tee "$OUT/bench_minhash_gpu.log"
