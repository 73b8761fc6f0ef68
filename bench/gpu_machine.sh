#!/usr/bin/env bash
# Every check and measurement that needs a GPU machine, in one command, for
# a machine lent for minutes (an image with CUDA torch, nvcc, numpy,
# pybind11, scikit-build-core and pytest; no network):
#
#     bash bench/gpu_machine.sh [LOG_DIR]
#
# 1. builds cepam with its CUDA module for the card found (sm from
#    nvidia-smi; CMAKE_BUILD_PARALLEL_LEVEL = the cores);
# 2. the CUDA tests, the GPU-flow tests and the suite's checks that differ on
#    a GPU machine (tests/core/test_cuda.py, test_gpu_flow.py,
#    tests/fl/test_fl_results.py); if one fails, the cuda tests again under
#    compute-sanitizer's memcheck, stopping at the first failure;
# 3. bench/gpu_check.py at m = 10^6 (every sub-vector compared, three launch
#    chunks, the symbol kernel symbol by symbol; differing inputs saved to
#    LOG_DIR): correctness, quickly;
# 4. bench/throughput.py at m = 10^7 (best of 3) and 10^8 (one run) on 1, 2
#    and all threads (the CPU's scaling; needs no GPU, but needs the cores);
# 5. bench/gpu_check.py at m = 10^8, best of 2 (the GPU table), and where
#    one encode and decode spend their time (--profile);
# 6. (memcheck, only when named) the cuda tests under compute-sanitizer's
#    memcheck, all of them, whether or not the tests passed: the six of
#    corrupted bodies first, then the others.
# STEPS (default "tests gpu_1e6 throughput_1e7 gpu_1e8 throughput_1e8")
# picks steps after the build.  Measured on an H200 with 16 cores
# (2026-11-30): the machine's start about 30 s, the build 38 to 47 s, tests
# 29 s, gpu_1e8 95 to 103 s, throughput_1e7 24 s, gpu_check.py at 10^6 and
# 10^7 together about 55 s; memcheck over 270 s (27 tests of decoding in
# 70 s, 186 of the other 191 in 200 s); throughput_1e8 not yet timed.
# Within a 15-minute lease (the machine's start, every call and the idle
# time between calls counted) the first call should be the GPU's:
#     STEPS="tests gpu_1e8" bash bench/gpu_machine.sh $OUT      (about 175 s)
# then, if the tests passed, the rest on a second call (about 380 s;
# throughput_1e8, up to 300 s more, where the lease has room):
#     STEPS="memcheck throughput_1e7" bash bench/gpu_machine.sh $OUT
# (gpu_1e6, with its dumps, only where gpu_1e8 or the tests find a
# difference).  gpu_small times 10^6 and 10^7 (best of 3, no dumps), and
# memcheck_corrupted runs memcheck's first part alone, so that one call can
# hold STEPS="tests gpu_1e8 gpu_small memcheck_corrupted throughput_1e7"
# (569 s on the H200, 2026-11-30, the corrupted ANS bodies' memcheck cut at
# its 300 s; memcheck_point_model runs that last test alone, golomb_sizes
# times Z between 10^6 and 2^24, where the Golomb decode's default path
# changes).  The machine is given back 30 s after a call: a second call
# prepared in advance keeps it warm.
# Each step has its own time limit so that a hang costs one step, not the
# machine; logs go to LOG_DIR (default: a new temporary folder), the
# summary to standard output.  Exits non-zero if any step failed.
set -u
cd "$(dirname "$0")/.."
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" CEPAM_REQUIRE_CUDA_MODULE=1
py="${PYTHON:-python3}"
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
status=0
step() {  # step NAME LIMIT_S LOG COMMAND...: runs into LOG, prints its tail and the time
  local name="$1" limit="$2" log="$3" t0 rc
  shift 3
  t0=$(date +%s)
  echo "== $name (limit ${limit} s)"
  timeout "$limit" "$@" >"$out/$log" 2>&1
  rc=$?
  tail -n "${TAIL:-25}" "$out/$log"
  echo "== $name: exit $rc, $(( $(date +%s) - t0 )) s"
  [ "$rc" = 0 ] || status=1
  return "$rc"
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
nvcc --version | tail -n 2
lscpu 2>/dev/null | grep -E "^(Model name|Socket|Core|Thread)" || true  # cores or SMT threads
"$py" -c 'import sys, torch, numpy; print(sys.version.split()[0], "torch", torch.__version__, "numpy", numpy.__version__, "cpus", __import__("os").cpu_count())'
arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d .)"

# (with the whole-body coders, which the default build leaves out, so that
# their tests and gpu_check.py's rows run on the GPU)
TAIL=15 step build 180 build.log "$py" -m pip install --no-build-isolation --no-deps \
  -C cmake.define.CEPAM_CUDA=ON -C cmake.define.CEPAM_CUDA_EXPERIMENTAL=ON \
  -C "cmake.define.CMAKE_CUDA_ARCHITECTURES=${arch:-90}" . \
  || { echo "build failed: see $out/build.log"; exit 1; }
"$py" -c 'import cepam.cuda; print("cuda path:", cepam.cuda.status())'

for s in ${STEPS:-tests gpu_1e6 throughput_1e7 gpu_1e8 throughput_1e8}; do
  case "$s" in
  tests)
    parallel=()  # the host-twin tests are CPU-bound: on the machine's cores
    "$py" -c 'import xdist' 2>/dev/null && parallel=(-n "$(( ($(nproc) + 1) / 2 ))")
    if ! TAIL=40 step tests 180 tests.log "$py" -m pytest -q -rs -p no:cacheprovider \
        ${parallel[@]+"${parallel[@]}"} tests/core/test_cuda.py tests/core/test_gpu_flow.py \
        tests/fl/test_fl_results.py; then
      command -v compute-sanitizer >/dev/null && TAIL=60 step memcheck 120 memcheck.log \
        compute-sanitizer --tool memcheck --print-limit 20 "$py" -m pytest -x -q -m cuda \
        -p no:cacheprovider tests/core/test_cuda.py
    fi ;;
  gpu_1e6) TAIL=40 step gpu_check_1e6 120 gpu_check_1e6.log "$py" bench/gpu_check.py --no-tests \
    --sizes 1e6 --dump "$out" ;;
  gpu_1e8) TAIL=30 step gpu_check_1e8 300 gpu_check_1e8.log "$py" bench/gpu_check.py --no-tests \
    --sizes 1e8 --repeat 2 --profile ;;
  throughput_1e7) TAIL=20 step throughput_1e7 120 throughput_1e7.log "$py" bench/throughput.py \
    --m 1e7 --repeat 3 --threads 1 2 "$(nproc)" ;;
  throughput_1e8) TAIL=20 step throughput_1e8 300 throughput_1e8.log "$py" bench/throughput.py \
    --m 1e8 --repeat 1 --threads 1 2 "$(nproc)" ;;
  gpu_small) TAIL=40 step gpu_check_small 150 gpu_check_small.log "$py" bench/gpu_check.py \
    --no-tests --sizes 1e6 1e7 --repeat 3 ;;
  memcheck|memcheck_corrupted)  # the corrupted bodies first: the hostile input a time limit must not cut
    parts=("corrupted" "not corrupted")
    [ "$s" = memcheck ] || parts=("corrupted")
    for part in "${parts[@]}"; do
      TAIL=20 step "memcheck (${part})" 300 "memcheck_${part// /_}.log" compute-sanitizer \
        --tool memcheck --print-limit 20 "$py" -m pytest -v -m cuda -p no:cacheprovider \
        -k "$part" tests/core/test_cuda.py
    done ;;
  memcheck_point_model)  # E8's corrupted ANS bodies of the point model alone: memcheck_corrupted's
    # 300 s ran out on them (2026-11-30), after the two of the box model
    TAIL=20 step "memcheck (corrupted, point model)" 480 memcheck_point_model.log \
      compute-sanitizer --tool memcheck --print-limit 20 "$py" -m pytest -v -m cuda \
      -p no:cacheprovider -k "corrupted_bodies and 0.0003" tests/core/test_cuda.py ;;
  golomb_sizes) TAIL=40 step golomb_sizes 200 golomb_sizes.log "$py" bench/gpu_check.py \
    --no-tests --sizes 2e6 4e6 1.6e7 --lattices Z --repeat 3 ;;  # where Golomb's decode turns
  *) echo "unknown step $s"; status=1 ;;
  esac
done
echo "logs: $out; exit $status"
exit "$status"
