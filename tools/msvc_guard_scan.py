"""Checks that the native core's GCC/Clang and x86-only code compiles out
under MSVC, without MSVC: each core source (csrc/, not the Python binding)
is preprocessed by g++ as MSVC would see it (__GNUC__ undefined, _MSC_VER and
_WIN64 defined; an empty <intrin.h> stands in for MSVC's), and what is left
of the core's own lines must hold no GCC builtin, attribute, 128-bit
integer, inline assembly or x86 intrinsic.  The system headers (libstdc++)
are not checked: MSVC brings its own.

This checks the preprocessor guards only, not that MSVC compiles the rest;
the Windows wheels of the release workflow do that.

Usage: python tools/msvc_guard_scan.py   (from anywhere; exit status 1 when
something is left, 2 when the preprocessor fails)
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"
GCC_ONLY = re.compile(r"__builtin_|__attribute__|__int128|__asm|__restrict__|"
                      r"\b_mm\d*_\w+|\b__m(?:128|256|512)\w*|\b__cpuid")
LINEMARKER = re.compile(r'^# \d+ "([^"]+)"')


def leftovers(source: pathlib.Path, stub_dir: str) -> list[str]:
    """The core's preprocessed lines of `source` that MSVC would reject."""
    out = subprocess.run(
        ["g++", "-std=c++17", "-E", "-U__GNUC__", "-U__GNUC_MINOR__", "-D_MSC_VER=1930",
         "-D_WIN64", f"-I{stub_dir}", f"-I{CSRC}", str(source)],
        capture_output=True, text=True, check=False)
    if out.returncode != 0:
        print(out.stderr, file=sys.stderr)
        sys.exit(2)
    found, current = [], ""
    for line in out.stdout.splitlines():
        marker = LINEMARKER.match(line)
        if marker:
            current = marker.group(1)
        elif current.startswith(str(CSRC)) and GCC_ONLY.search(line):
            found.append(f"{source.relative_to(ROOT)} ({current}): {line.strip()[:100]}")
    return found


def main() -> int:
    sources = sorted(p for p in CSRC.rglob("*.cpp") if "python" not in p.relative_to(CSRC).parts)
    with tempfile.TemporaryDirectory() as stub_dir:
        (pathlib.Path(stub_dir) / "intrin.h").write_text("")
        found = [hit for source in sources for hit in leftovers(source, stub_dir)]
    for hit in found:
        print(hit)
    print(f"msvc_guard_scan: {len(sources)} core sources, {len(found)} GCC/x86-only constructs "
          "left under MSVC's macros")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
