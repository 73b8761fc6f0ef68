"""Rewrites a CUDA source's kernel launches for the host (cuda_runtime.h
here): ``kernel<<<grid, block, shared, stream>>>(args)`` becomes
``cepam_on_host::launch(grid, block, shared, stream, kernel, args)``, and
the file starts by including this folder's cuda_runtime.h.  Nothing else
changes: the kernels and the host code are compiled as they are written.

Usage: python translate.py SOURCE.cu OUTPUT.cpp
"""

import re
import sys

# A kernel's name (with its template arguments), then the launch's
# configuration up to the first ">>>(".
_LAUNCH = re.compile(r"([A-Za-z_]\w*(?:<[^<>;()]*>)?)<<<(.*?)>>>\(", re.S)


def _closing(text: str, start: int) -> int:
    """The index of the parenthesis that closes the one before ``start``."""
    depth = 1
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    raise SystemExit(f"translate.py: unbalanced parentheses after offset {start}")


def translate(text: str, source: str) -> str:
    out, at = [], 0
    for launch in _LAUNCH.finditer(text):
        if launch.start() < at:
            raise SystemExit("translate.py: a launch inside a launch's arguments")
        end = _closing(text, launch.end())
        args = text[launch.end():end].strip()
        kernel, config = launch.group(1), launch.group(2)
        out.append(text[at:launch.start()])
        out.append(f"::cepam_on_host::launch({config}, {kernel}{', ' + args if args else ''})")
        at = end + 1
    out.append(text[at:])
    result = "".join(out)
    if "<<<" in result:
        raise SystemExit("translate.py: a launch it could not rewrite")
    return ("#include <cuda_runtime.h>  // (the host's: tests/native/cuda_on_host)\n"
            f'#line 1 "{source}"\n' + result)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        raise SystemExit(__doc__)
    with open(argv[1], encoding="utf-8") as f:
        text = f.read()
    with open(argv[2], "w", encoding="utf-8") as f:
        f.write(translate(text, argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
