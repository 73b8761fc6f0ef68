"""The ``cepam`` command line.

Each sub-command lives next to the code it drives and contributes a
``register(subparsers)`` function that adds its parser and sets
``func=handler`` (a callable taking the parsed namespace and returning an exit
code).  Heavy imports (torch, scipy, matplotlib) happen inside the handlers,
so ``cepam --help`` stays fast and works with numpy alone.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from .errors import CepamError

__all__ = ["main", "build_parser"]

# Modules that provide a ``register(subparsers)`` function, in help order.
_COMMAND_MODULES = (
    "cepam.cli",
    "cepam.demo",
    "cepam.bitrate_cli",
    "cepam.accounting.cli",
    "cepam.fl.cli",
)


def _inspect(args: argparse.Namespace) -> int:
    import json

    from .codec import inspect

    with open(args.payload, "rb") as f:
        info = inspect(f.read())
    print(json.dumps(info.as_dict(), indent=2))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="print a payload's header and bit counts (no secret)")
    p.add_argument("payload", help="file holding one payload")
    p.set_defaults(func=_inspect)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cepam",
        description="Private, compressed federated-learning updates (LRSUQ / CEPAM).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


# Nested commands whose parent command has required options of its own
# (so argparse cannot nest them): the module, with COMMAND (the words that
# select it) and main(rest).
_NESTED_MODULES = ("cepam.accounting.ledger_cli",)


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    for name in _NESTED_MODULES:
        module = importlib.import_module(name)
        if tuple(words[:len(module.COMMAND)]) == module.COMMAND:
            command = " ".join(module.COMMAND)
            try:
                return module.main(words[len(module.COMMAND):])
            except CepamError as exc:
                print(f"cepam {command}: error: {exc}", file=sys.stderr)
                return 2
    parser = build_parser()
    args = parser.parse_args(words)
    try:
        return int(args.func(args) or 0)
    except CepamError as exc:
        print(f"cepam {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
