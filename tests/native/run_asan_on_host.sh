#!/bin/sh
# The GPU's whole-body decoders fed hostile bodies under AddressSanitizer,
# without a GPU: builds cepam with its CUDA kernels on the host
# (CEPAM_CUDA_ON_HOST, tests/native/cuda_on_host), the whole-body ANS
# coder included (CEPAM_CUDA_EXPERIMENTAL, which the default build leaves
# out) unless EXPERIMENTAL=OFF, and -fsanitize=address into OUT, then runs
# the tests that decode valid and corrupted ANS and Golomb bodies with them
# (tests/core/test_cuda.py, "host"; the ANS ones skip with
# EXPERIMENTAL=OFF), the valid ones checked against the CPU's values, the
# corrupted ones against the CPU decoder's errors.  Exits non-zero on a
# failed test or an AddressSanitizer report (an out-of-bounds read or write
# of a kernel or of its host side).  Needs gcc with libasan.  Usage, from
# the repository root:
#     [EXPERIMENTAL=OFF] sh tests/native/run_asan_on_host.sh [out-dir]
# (.ci/run runs it with EXPERIMENTAL=OFF: the Golomb decoder, which
# decode(device="cuda") uses for large bodies.)
set -eu
OUT=${1:-build/asan-on-host}
EXPERIMENTAL=${EXPERIMENTAL:-ON}
mkdir -p "$OUT"
rm -rf "$OUT/site"  # (pip install --target keeps what it finds there)
python -m pip install --quiet --no-deps --target "$OUT/site" . \
  -C build-dir="$OUT/build" -C cmake.define.CEPAM_CUDA=OFF \
  -C cmake.define.CEPAM_CUDA_ON_HOST=ON -C "cmake.define.CEPAM_CUDA_EXPERIMENTAL=$EXPERIMENTAL" \
  -C cmake.build-type=RelWithDebInfo \
  -C "cmake.define.CMAKE_CXX_FLAGS=-fsanitize=address -fno-omit-frame-pointer" \
  -C cmake.define.CMAKE_MODULE_LINKER_FLAGS=-fsanitize=address
# Python itself is not instrumented: the runtime is preloaded (libstdc++
# too, so that the runtime finds the C++ exception functions it wraps),
# and the site-packages of this Python come after the instrumented cepam
# (-S: no .pth file may put an installed cepam first).
site="$(python -c 'import numpy, os; print(os.path.dirname(os.path.dirname(numpy.__file__)))')"
rm -f "$OUT"/asan.*
status=0
LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)" \
  ASAN_OPTIONS="detect_leaks=0:log_path=$OUT/asan" PYTHONPATH="$OUT/site:$site" \
  python -S -m pytest -q -p no:cacheprovider tests/core/test_cuda.py \
  -k "host and (decodes_bodies or decodes_golomb or refuses_corrupted)" || status=$?
# Each report is a file (pytest captures the tests' stderr); the runtime's
# one warning about swapcontext, which cuda_runtime.h annotates, is not one.
for log in "$OUT"/asan.*; do
  [ -e "$log" ] || continue
  if grep -q "ERROR: AddressSanitizer\|CHECK failed" "$log"; then
    cat "$log"
    status=1
  fi
done
exit "$status"
