#!/usr/bin/env bash
# Same bytes on every platform: builds the native core with
# tests/native/golden_digest.cpp four ways and compares their output.
#
#   gcc      x86-64, GCC, SIMD dispatch (also run with CEPAM_SIMD=portable
#            and CEPAM_SIMD=avx2, the capped levels)
#   clang    x86-64, Clang, SIMD dispatch
#   nosimd   x86-64, GCC, -DCEPAM_NO_SIMD=ON (portable kernels only)
#   aarch64  Debian's g++-aarch64-linux-gnu, static, run under qemu-aarch64
#            (NEON level; also run with CEPAM_SIMD=portable)
#
# Every run must print the same lines (one digest of the body and one of the
# decoded values per case); the first is kept as reference.  First,
# tools/msvc_guard_scan.py checks that the GCC/x86-only code compiles out
# under MSVC's macros (preprocessor only: there is no MSVC here).
#
# Needs cmake, g++, clang++, aarch64-linux-gnu-g++ and qemu-aarch64
# (Debian: apt-get install clang g++-aarch64-linux-gnu qemu-user).
# Usage: tools/cross_check.sh [WORKDIR]   (default: a fresh temporary folder)
# Exit status: 0 when every build agrees, 1 when one differs or fails,
# 2 when a tool is missing.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-$(mktemp -d)}"
mkdir -p "$work"
jobs="${CEPAM_JOBS:-2}"

for tool in cmake g++ clang++ aarch64-linux-gnu-g++ qemu-aarch64; do
  if ! command -v "$tool" >/dev/null; then
    echo "cross_check: $tool not found (apt-get install clang g++-aarch64-linux-gnu qemu-user)" >&2
    exit 2
  fi
done
python3 "$root/tools/msvc_guard_scan.py"

generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi

# build NAME [CMAKE ARGS...]: configures and builds golden_digest in $work/NAME.
build() {
  local name="$1"
  shift
  local start=$SECONDS
  cmake -S "$root" -B "$work/$name" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCEPAM_PYTHON=OFF -DCEPAM_NATIVE_TESTS=ON "$@" >"$work/$name.configure.log" 2>&1 ||
    { cat "$work/$name.configure.log" >&2; return 1; }
  cmake --build "$work/$name" --parallel "$jobs" >"$work/$name.build.log" 2>&1 ||
    { cat "$work/$name.build.log" >&2; return 1; }
  echo "built $name in $((SECONDS - start)) s"
}

# run NAME COMMAND...: runs a digest program, output to $work/NAME.txt.
run() {
  local name="$1"
  shift
  local start=$SECONDS
  "$@" >"$work/$name.txt"
  echo "ran $name in $((SECONDS - start)) s ($(grep -c . "$work/$name.txt") lines)"
}

build gcc -DCMAKE_CXX_COMPILER=g++
build clang -DCMAKE_CXX_COMPILER=clang++
build nosimd -DCMAKE_CXX_COMPILER=g++ -DCEPAM_NO_SIMD=ON
build aarch64 -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
  -DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++ -DCMAKE_EXE_LINKER_FLAGS=-static
# e_machine (ELF header bytes 18-19) is 183 (0xb7) for aarch64.
if ! od -An -tx1 -j18 -N2 "$work/aarch64/golden_digest" | grep -q 'b7 00'; then
  echo "cross_check: the aarch64 build is not an aarch64 executable" >&2
  exit 1
fi

run gcc "$work/gcc/golden_digest"
run gcc-portable env CEPAM_SIMD=portable "$work/gcc/golden_digest"
run gcc-avx2 env CEPAM_SIMD=avx2 "$work/gcc/golden_digest"
run clang "$work/clang/golden_digest"
run nosimd "$work/nosimd/golden_digest"
run aarch64 qemu-aarch64 "$work/aarch64/golden_digest"
run aarch64-portable env CEPAM_SIMD=portable qemu-aarch64 "$work/aarch64/golden_digest"

status=0
for other in gcc-portable gcc-avx2 clang nosimd aarch64 aarch64-portable; do
  if cmp -s "$work/gcc.txt" "$work/$other.txt"; then
    echo "$other: identical to gcc ($(tail -n1 "$work/$other.txt"))"
  else
    echo "$other: DIFFERS from gcc" >&2
    diff "$work/gcc.txt" "$work/$other.txt" | head -n 20 >&2 || true
    status=1
  fi
done
cases=$(($(grep -c . "$work/gcc.txt") - 1))
if [ "$status" -eq 0 ]; then
  echo "cross_check: $cases cases, 7 runs (x86-64 gcc at 3 SIMD levels, clang, no-SIMD, aarch64/qemu at 2 levels): all identical"
  echo "cross_check: took $SECONDS s"
fi
exit "$status"
