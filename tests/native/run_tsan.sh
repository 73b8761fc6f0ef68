#!/bin/sh
# Builds the native core and tests/native/threads_driver.cpp with
# ThreadSanitizer and runs the driver; exits non-zero on a data race or a
# failed check.  Needs g++ (or CXX) with libtsan.  Usage, from the
# repository root:  sh tests/native/run_tsan.sh [build-dir]
set -eu
CXX=${CXX:-g++}
OUT=${1:-build/tsan}
mkdir -p "$OUT"
# The native core (every folder but the bindings and the CUDA module).
SOURCES="$(ls csrc/common/*.cpp csrc/random/*.cpp csrc/lattice/*.cpp csrc/lrsuq/*.cpp \
  csrc/coding/*.cpp csrc/payload/*.cpp) tests/native/threads_driver.cpp"
# (-g1: line tables only, enough for the reports' file:line; a third less
# compile time than -g.)
# shellcheck disable=SC2086
$CXX -std=c++17 -O1 -g1 -fsanitize=thread -ffp-contract=off -fno-fast-math -fno-math-errno \
  -Icsrc $SOURCES -o "$OUT/threads_driver" -pthread
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" "$OUT/threads_driver"
