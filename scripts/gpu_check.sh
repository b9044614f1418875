#!/usr/bin/env bash
# The GPU proof in one call, on a CUDA machine (docs/gpu.md, "Running the GPU checks"):
#   1. RAPIDS: used if `import cudf` works; otherwise installed, with no network and no
#      resolver, from the wheels carried to /var/tmp/wheels, .gpuwheels/wheels or .whl
#      (what the machine lacks of `curator_dask[gpu-cu13]`'s closure, e.g. the lists
#      ../shared/tools/rapids-cu13-py312.txt and scripts/cuml-cu13-py312.txt packed by
#      wheel_chunks.sh) into a folder put first on PYTHONPATH;
#   2. every `gpu`-marked test, beside
#   3. bench/gpu_check.py: run, exact-dedup, fuzzy-dedup --perform-removal (also with the
#      shingles hashed on the GPU) and semantic-dedup with --gpu on the cudf backend against
#      the same commands on CPU, outputs compared by hash; semantic dedup's k-means (cuML)
#      against the CPU's clustering; then the GPU MinHash benchmark and cuML's k-means on
#      1M vectors against all cores, and one summary table.
# Logs and JSON go to $OUT (default out/gpu). Exit status: failures (0 = all equal).
set -uo pipefail
OUT=${OUT:-out/gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
# cuML (semantic dedup's GPU k-means) is carried the same way, in the same folder
# (scripts/cuml-cu13-py312.txt): the folder is installed when cudf does not import, or
# when cuML does not and its wheels were carried (not again when only cuML is missing).
WHEELS=""
for d in /var/tmp/wheels .gpuwheels/wheels .gpuwheels .whl; do
  if [ -d "$d" ] && { compgen -G "$d/cudf_cu1*.whl" || compgen -G "$d/cuml_cu1*.whl"; } >/dev/null; then
    WHEELS=$d; break
  fi
done
if ! "$PY" -c "import cudf" >/dev/null 2>&1 \
   || { ! "$PY" -c "import cuml" >/dev/null 2>&1 && [ -n "$WHEELS" ] && compgen -G "$WHEELS/cuml_cu1*.whl" >/dev/null; }; then
  if [ -n "$WHEELS" ]; then
    # The wheels are installed as they are (no resolver, no network) into a target folder
    # put first on the path: the machine's own torch, CuPy and pyarrow stay in use, and the
    # carried numpy (< 2.4, which numba-cuda needs) wins over the machine's.
    SITE=${SITE:-/var/tmp/curator-gpu-site}
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$SITE" "$WHEELS"/*.whl 2>&1 | tail -5 | tee "$OUT/install.log"
    export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
  else
    echo "gpu_check: cudf is not importable and no wheels in /var/tmp/wheels or .gpuwheels" | tee "$OUT/install.log"
  fi
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
# cuML's libcuvs needs a newer libnvJitLink.so.13 than torch cu130 brings, and a process
# loads one library of a name: where the carried one is in the site folder, every process
# (the commands' workers too) preloads it, before torch can load its own.
JITLINK=${SITE:-/var/tmp/curator-gpu-site}/nvidia/cu13/lib/libnvJitLink.so.13
if [ -f "$JITLINK" ]; then
  export LD_PRELOAD=$JITLINK${LD_PRELOAD:+:$LD_PRELOAD}
  echo "gpu_check: preloading $JITLINK"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
"$PY" -c "import sys, numpy, pandas, pyarrow, numba, dask; print(sys.version.split()[0], 'numpy', numpy.__version__, 'pandas', pandas.__version__, 'pyarrow', pyarrow.__version__, 'numba', numba.__version__, 'dask', dask.__version__)" | tee -a "$OUT/gpu.txt"
for mod in cupy cudf dask_cudf dask_cuda rmm cuml torch; do
  "$PY" -c "import $mod; print('$mod', $mod.__version__)" 2>&1 | tail -1 | tee -a "$OUT/gpu.txt"
done
# The gpu tests run beside the command comparison (no RMM pool is taken by default, so
# both fit on one device); the table waits for them. Warnings from this machine's library
# versions are not what is being checked here.
rm -f "$OUT/gpu_tests.rc"
( timeout "${TESTS_TIMEOUT:-300}" "$PY" -m pytest -m gpu -p no:cacheprovider -o addopts="" \
    -W ignore::DeprecationWarning -W ignore::FutureWarning -W ignore::UserWarning \
    --continue-on-collection-errors -rfE -q $(grep -rl "mark.gpu" tests --include="test_*.py") \
    >"$OUT/gpu_tests.log" 2>&1
  echo $? >"$OUT/gpu_tests.rc" ) &
"$PY" bench/gpu_check.py --out "$OUT" --tests-log "$OUT/gpu_tests.log" "$@" 2>&1 | tee "$OUT/gpu_check.log"
status=${PIPESTATUS[0]}
wait
tail -25 "$OUT/gpu_tests.log"
exit "$status"
