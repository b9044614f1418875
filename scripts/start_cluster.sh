#!/usr/bin/env bash
# Start a dask scheduler plus CPU and/or GPU workers on this machine, and return once the
# workers have joined (distributed.Client.wait_for_workers, not sleep).
#
#   scripts/start_cluster.sh --scheduler-file /shared/sched.json --cpu-workers 4
#   scripts/start_cluster.sh --scheduler-file /shared/sched.json --gpu-workers 8 \  # one per GPU
#       --rmm-pool-size 70GB --no-scheduler      # more workers for a running scheduler
#   scripts/start_cluster.sh --stop --run-dir RUN_DIR
#
# Then: curator-dask run pipeline.yaml --scheduler-file /shared/sched.json
#
# CPU workers advertise resources CPU=<threads>; GPU workers (dask-cuda, one per GPU, from
# the curator_dask[gpu] extra) advertise GPU=1 and GPU_MEMORY_GB=<device memory>, so stages
# declaring Resources(gpus=...) are placed on them. Process ids and logs go to --run-dir.
set -euo pipefail

SCHEDULER_FILE=""
CPU_WORKERS=0
GPU_WORKERS=0
NTHREADS=1
MEMORY_LIMIT="auto"
LOCAL_DIRECTORY="${TMPDIR:-/tmp}"
HOST="127.0.0.1"
RMM_POOL_SIZE=""
START_SCHEDULER=1
TIMEOUT=120
RUN_DIR=""
STOP=0
PYTHON="${PYTHON:-python3}"

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --scheduler-file) SCHEDULER_FILE="$2"; shift 2 ;;
    --cpu-workers) CPU_WORKERS="$2"; shift 2 ;;
    --gpu-workers) GPU_WORKERS="$2"; shift 2 ;;
    --nthreads) NTHREADS="$2"; shift 2 ;;
    --memory-limit) MEMORY_LIMIT="$2"; shift 2 ;;
    --local-directory) LOCAL_DIRECTORY="$2"; shift 2 ;;
    --host) HOST="$2"; shift 2 ;;
    --rmm-pool-size) RMM_POOL_SIZE="$2"; shift 2 ;;
    --no-scheduler) START_SCHEDULER=0; shift ;;
    --timeout) TIMEOUT="$2"; shift 2 ;;
    --run-dir) RUN_DIR="$2"; shift 2 ;;
    --stop) STOP=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "start_cluster.sh: unknown option $1" >&2; usage 2 ;;
  esac
done

if [[ "$STOP" == 1 ]]; then
  [[ -n "$RUN_DIR" && -f "$RUN_DIR/pids" ]] || { echo "--stop needs --run-dir with a pids file" >&2; exit 2; }
  pids=$(tac "$RUN_DIR/pids")  # workers first, the scheduler last
  for pid in $pids; do kill "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 300); do  # up to 30 s for a clean shutdown, then SIGKILL
    alive=0
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [[ "$alive" == 0 ]] && break
    sleep 0.1
  done
  for pid in $pids; do kill -9 "$pid" 2>/dev/null || true; done
  rm -f "$RUN_DIR/pids"
  exit 0
fi

[[ -n "$SCHEDULER_FILE" ]] || { echo "start_cluster.sh: --scheduler-file is required" >&2; exit 2; }
RUN_DIR="${RUN_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/curator-cluster-XXXXXX")}"
mkdir -p "$RUN_DIR"
: >> "$RUN_DIR/pids"

start() {  # start NAME CMD...: run in the background, log to RUN_DIR, remember the pid
  local name="$1"; shift
  "$@" > "$RUN_DIR/$name.log" 2>&1 &
  echo $! >> "$RUN_DIR/pids"
}

if [[ "$START_SCHEDULER" == 1 ]]; then
  rm -f "$SCHEDULER_FILE"
  start scheduler dask scheduler --host "$HOST" --port 0 --dashboard-address "$HOST:0" \
    --scheduler-file "$SCHEDULER_FILE"
  for _ in $(seq 1 "$((TIMEOUT * 10))"); do [[ -s "$SCHEDULER_FILE" ]] && break; sleep 0.1; done
  [[ -s "$SCHEDULER_FILE" ]] || { echo "scheduler did not start; see $RUN_DIR/scheduler.log" >&2; exit 1; }
fi

common=(--scheduler-file "$SCHEDULER_FILE" --host "$HOST" --memory-limit "$MEMORY_LIMIT"
        --local-directory "$LOCAL_DIRECTORY")
if [[ "$CPU_WORKERS" -gt 0 ]]; then
  start cpu-workers dask worker "${common[@]}" --nworkers "$CPU_WORKERS" \
    --nthreads "$NTHREADS" --resources "CPU=$NTHREADS"
fi
if [[ "$GPU_WORKERS" -gt 0 ]]; then
  gpu_gb=$("$PYTHON" -c "from dask_cuda.utils import get_device_total_memory as m; print(round(m(0) / 1e9, 1))") \
    || { echo "GPU workers need dask-cuda: pip install 'curator_dask[gpu]'" >&2; exit 1; }
  rmm=()
  [[ -n "$RMM_POOL_SIZE" ]] && rmm=(--rmm-pool-size "$RMM_POOL_SIZE")
  start gpu-workers dask cuda worker "${common[@]}" "${rmm[@]}" \
    --resources "GPU=1,GPU_MEMORY_GB=$gpu_gb"
fi

expected=$((CPU_WORKERS + GPU_WORKERS))
if [[ "$expected" -gt 0 ]]; then
  "$PYTHON" - "$SCHEDULER_FILE" "$expected" "$TIMEOUT" <<'EOF'
import sys
from distributed import Client

sfile, n, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
with Client(scheduler_file=sfile, timeout=f"{timeout}s") as client:
    client.wait_for_workers(n, timeout=timeout)
    print(f"{len(client.scheduler_info(n_workers=-1)['workers'])} workers ready; "
          f"scheduler {client.scheduler.address}, dashboard {client.dashboard_link}")
EOF
fi
echo "run dir: $RUN_DIR (logs, pids); stop with: $0 --stop --run-dir $RUN_DIR"
