"""The ``cepam`` command line.

Each sub-command lives next to the code it drives and contributes a
``register(subparsers)`` function that adds its parser and sets
``func=handler`` (a callable taking the parsed namespace and returning an exit
code).  Heavy imports (torch, scipy, matplotlib) happen inside the handlers,
so ``cepam --help`` stays fast and works with numpy alone.

A command declares the optional modules it cannot run without with
:func:`requires`; :func:`main` checks them before the handler runs and, when
one is missing, prints one line naming what to install.

Exit codes: 0 success; 1 an error (a missing path or a file that cannot be
read, in every command; a missing or corrupt data set, a malformed payload,
a missing optional dependency, a failure while running); 2 a usage error (a
bad option or value, from argparse or from cepam's argument checks);
130 interrupted (Ctrl-C).  Errors are one line on stderr; ``cepam --debug``
shows the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
from typing import Any, Sequence

from . import __version__
from .errors import (CepamError, FormatError, InvalidArgumentError, InvalidTypeError,
                     MissingPathError, NotADirectoryPathError, NotAFileError)
from .keys import SECRET_BYTES

__all__ = ["main", "build_parser", "requires", "HelpFormatter", "install_hint", "read_secret_file",
           "json_text", "printable"]

# Modules that provide a ``register(subparsers)`` function, in help order.
_COMMAND_MODULES = (
    "cepam.cli",
    "cepam.demo",
    "cepam.bitrate.cli",
    "cepam.accounting.cli",
    "cepam.fl.cli",
)

#: The command that installs torch.  torch is never a declared dependency of
#: cepam: this pinned version installs a local CPU wheel on the project's
#: machines, where any other torch requirement downloads CUDA packages.
TORCH_INSTALL = "pip install torch==2.13.0"

# The optional modules commands use, by import name -> the name to show.
_MODULE_NAMES = {"dp_accounting": "dp-accounting"}
_EXTRA_MODULES = ("scipy", "matplotlib", "tqdm", "dp_accounting")
# What `cepam inspect` reads at most: of a file (8 GiB), of a stream (256 MiB).
_INSPECT_MAX_BYTES = 2**33
_INSPECT_MAX_STREAM_BYTES = 2**28


def install_hint(module: str, extra: str) -> str:
    """The command that installs ``module`` for a command of the ``extra`` extra."""
    if module.split(".")[0] == "torch":
        return TORCH_INSTALL
    return f'pip install "cepam[{extra}]"'


def requires(parser: argparse.ArgumentParser, *modules: str, extra: str) -> None:
    """Declares that ``parser``'s command needs ``modules`` (import names),
    which the optional dependency group ``extra`` provides (torch excepted:
    see :data:`TORCH_INSTALL`)."""
    parser.set_defaults(requires=modules, extra=extra)


class HelpFormatter(argparse.HelpFormatter):
    """Appends ``(default ...)`` to every option whose help does not already
    state its default (options whose default is None or False have none to
    show)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("default" in text or default is None or default is False
                or default is argparse.SUPPRESS or not action.option_strings):
            return text
        if isinstance(default, (list, tuple)):
            shown = " ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in default)
        elif isinstance(default, float):
            shown = f"{default:g}"
        else:
            shown = str(default)
        return f"{text} (default {shown.replace('%', '%%')})"


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose sub-parsers (of any depth) use :class:`HelpFormatter`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def _finite_or_null(value: Any) -> Any:
    """``value`` with every float that is not finite (inf, NaN), in nested
    dicts, lists and tuples too, replaced by None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_null(v) for v in value]
    return value


def json_text(value: Any) -> str:
    """``value`` as indented, strict JSON: a float that is not finite (a
    payload of no coordinates has infinite bits per coordinate) is ``null``,
    where ``json.dumps`` would write ``Infinity`` or ``NaN``, which JSON has
    not.  (``cepam privacy`` writes its unbounded eps as ``null`` too.)"""
    return json.dumps(_finite_or_null(value), indent=2, allow_nan=False)


def printable(text: str) -> str:
    """``text`` safe to print on a terminal, for names read from a payload
    (which anyone may have written): every character that is not printable
    (``str.isprintable``: control characters such as a newline or the ESC
    of a terminal sequence, format characters such as the bidirectional
    override U+202E, separators other than the space) is shown as its
    Python escape (``\\n``, ``\\x1b``, ``\\u202e``), and a backslash as two,
    so no name can forge a line or recolour the terminal, and an escape
    shown is never a name's own text.  Ordinary names (letters of any
    script, digits, dots, underscores) come out unchanged."""
    return "".join(c if c.isprintable() and c != "\\" else
                   c.encode("unicode_escape").decode("ascii") for c in text)


def _describe(info: dict[str, Any]) -> str:
    """``cepam inspect``'s text: one ``name: value`` line per field (every
    string escaped by :func:`printable`)."""
    lines = []
    for key, value in info.items():
        if key == "entries":
            lines.append(f"entries ({len(value)}):")
            for e in value:
                shape = "x".join(str(d) for d in e["shape"]) or "scalar"
                name = printable(e["name"]) or "-"
                lines.append(f"  {name}  {printable(e['kind'])} {printable(e['dtype'])} {shape}")
        elif isinstance(value, dict):
            lines.append(f"{key}:")
            lines += [f"  {k}: {_text(v)}" for k, v in value.items()]
        else:
            lines.append(f"{key}: {_text(value)}")
    return "\n".join(lines)


def _text(value: Any) -> str:
    """One value of :func:`_describe`: a float to 6 digits, None as ``-``, a
    string escaped by :func:`printable`."""
    if isinstance(value, float):
        return f"{value:.6g}"
    return "-" if value is None else printable(str(value))


def read_secret_file(path: str) -> bytes:
    """The secret in file ``path``: its 32 raw bytes.

    Raises:
        InvalidArgumentError: the file does not hold exactly 32 bytes (the
            message says how to convert a file of 64 hex digits), or it is
            a symbolic link, owned by another user, or readable or writable
            by group or others (``chmod 600``; docs/guide/security.md).
        NotAFileError: ``path`` is a directory or another thing that is not
            a regular file (an InvalidArgumentError and an OSError).
        MissingPathError: no file at ``path`` (an InvalidArgumentError and
            a FileNotFoundError).
        OSError: the file cannot be read.
    """
    from ._files import read_key_file

    try:
        data = read_key_file(path, what="secret file")
    except FileNotFoundError:  # (which file, in a command that reads two)
        raise MissingPathError(f"no secret file at {path!r}") from None
    if len(data) == SECRET_BYTES:
        return data
    text = data.strip()
    hint = ""
    if len(text) == 2 * SECRET_BYTES and all(c in b"0123456789abcdefABCDEF" for c in text):
        hint = (" (this one holds 64 hex digits; convert it with: python3 -c \"import sys; "
                "sys.stdout.buffer.write(bytes.fromhex(sys.stdin.read()))\" < HEXFILE > KEYFILE; "
                "chmod 600 KEYFILE)")
    raise InvalidArgumentError(
        f"{path} holds {len(data)} bytes; a secret file must hold the {SECRET_BYTES} raw bytes "
        f"of the secret, as cepam.new_secret() returns them{hint}")


def _inspect(args: argparse.Namespace) -> int:
    from .inspection import inspect

    secret = None
    if args.secret_file is not None:
        secret = read_secret_file(args.secret_file)
    with open(args.payload, "rb") as f:
        # (a bound first: /dev/zero, or a large file that is no payload, must
        # not be read into memory whole; a file's size is known, a stream's not)
        regular = os.path.isfile(args.payload)
        limit = _INSPECT_MAX_BYTES if regular else _INSPECT_MAX_STREAM_BYTES
        size = os.fstat(f.fileno()).st_size if regular else 0
        data = b"" if size > limit else f.read(limit + 1)
        if size > limit or len(data) > limit:
            raise FormatError(f"{args.payload} holds more than {limit} bytes, the most "
                              f"`cepam inspect` reads from {'a file' if regular else 'a stream'}")
        info = inspect(data, secret=secret).as_dict()
    print(json_text(info) if args.json else _describe(info))
    return 0


def _info(args: argparse.Namespace) -> int:
    from .runtime import describe

    info = describe()
    print(json_text(info) if args.json else _describe(info))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="print what cepam runs here: version, SIMD level, "
                       "threads, CUDA path",
                       description="Prints cepam's version, the SIMD level its native "
                                   "kernels run at (avx512, avx2 or portable; the "
                                   "environment variable CEPAM_SIMD caps it), the native "
                                   "threads an encode or decode uses by default, and "
                                   "whether the CUDA path can run (and why not).")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=_info)

    p = sub.add_parser("inspect", help="print a payload's public header and bit counts; "
                       "with --secret-file, also its sealed part",
                       description="Reads a payload's public header and its bit counts "
                                   "without the secret (the tag is not checked); with "
                                   "--secret-file, verifies the tag and shows the sealed "
                                   "lattice, dimension and body parts.")
    p.add_argument("payload", help="file holding one payload")
    p.add_argument("--secret-file", default=None,
                   help="file holding the 32-byte secret: verify the tag and show the sealed "
                        "lattice, dimension and body parts")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=_inspect)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cepam",
        description="Private, compressed federated-learning updates (LRSUQ / CEPAM).",
        epilog="Exit codes: 0 success, 1 error, 2 usage error, 130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"cepam {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback when a command fails")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def _command(args: argparse.Namespace) -> str:
    """The command's name as typed, e.g. ``fl run``."""
    words = [args.command]
    for attr in ("fl_command", "benchmark"):
        if getattr(args, attr, None):
            words.append(getattr(args, attr))
    return " ".join(words)


def _missing(modules: Sequence[str]) -> str | None:
    """The first of ``modules`` that cannot be imported, or None."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            return module
    return None


def _missing_message(module: str, extra: str | None) -> str:
    root = module.split(".")[0]
    name = _MODULE_NAMES.get(root, root)
    if root == "torch":
        return f"needs torch, which is not installed; install it with: {TORCH_INSTALL}"
    hint = install_hint(root, extra) if extra else f"pip install {name}"
    return f"needs {name}, which is not installed; install it with: {hint}"


# Nested commands whose parent command has required options of its own (so
# argparse cannot nest them): the module, with COMMAND (the words that select
# it) and build_parser() (whose parsed arguments carry func).
_NESTED_MODULES = ("cepam.accounting.ledger_cli",)


def _parse(words: list[str]) -> argparse.Namespace:
    """The parsed command line; a nested command (``_NESTED_MODULES``) is
    parsed by its own parser (so that, as for the others, ``--help`` and
    usage errors need none of its extras), then runs under the same error
    handling as the others."""
    debug = words[:1] == ["--debug"]
    rest = words[1:] if debug else words
    for name in _NESTED_MODULES:
        module = importlib.import_module(name)
        if tuple(rest[:len(module.COMMAND)]) == module.COMMAND:
            nested = module.build_parser().parse_args(rest[len(module.COMMAND):])
            return argparse.Namespace(command=" ".join(module.COMMAND), debug=debug,
                                      requires=("scipy",), extra="privacy",
                                      func=lambda _args: nested.func(nested))
    return build_parser().parse_args(words)


def _is_data_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a missing path (:class:`cepam.errors.
    MissingPathError`: ``cepam fl table DIR``, ``cepam privacy ledger
    PATH``), a path that is not a file (:class:`cepam.errors.NotAFileError`:
    a directory given as ``--secret-file`` or ledger), a path that is not a
    directory (:class:`cepam.errors.NotADirectoryPathError`: a file given
    to ``cepam fl table``) or a missing or corrupt data set (``cepam.fl``'s
    DatasetError): an error (exit 1), like a file that cannot be read
    (``cepam inspect PATH``), not a usage error, though it is an
    InvalidArgumentError to callers."""
    if isinstance(exc, (FileNotFoundError, NotAFileError, NotADirectoryPathError)):
        return True
    data = sys.modules.get("cepam.fl.data")  # loaded by whatever raised it
    return data is not None and isinstance(exc, data.DatasetError)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the ``cepam`` command line; returns the exit code."""
    args = _parse(list(sys.argv[1:] if argv is None else argv))
    where = f"cepam {_command(args)}"
    extra = getattr(args, "extra", None)
    try:
        missing = _missing(getattr(args, "requires", ()))
        if missing is not None:
            print(f"{where}: error: {_missing_message(missing, extra)}", file=sys.stderr)
            return 1
        return int(args.func(args) or 0)
    except BrokenPipeError:  # the reader went away (``cepam ... | head``): stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        if args.debug:
            raise
        print(f"{where}: interrupted{getattr(args, 'on_interrupt', '')}", file=sys.stderr)
        return 130
    except (InvalidArgumentError, InvalidTypeError) as exc:
        if args.debug:
            raise
        print(f"{where}: error: {exc}", file=sys.stderr)
        return 1 if _is_data_error(exc) else 2
    except ModuleNotFoundError as exc:
        root = (exc.name or "").split(".")[0]
        if args.debug:
            raise
        if root == "torch" or root in _EXTRA_MODULES:
            print(f"{where}: error: {_missing_message(root, extra)}", file=sys.stderr)
        else:
            print(f"{where}: error: {exc} (run cepam --debug ... for the traceback)",
                  file=sys.stderr)
        return 1
    except (CepamError, OSError) as exc:
        if args.debug:
            raise
        text = str(exc)
        if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
            # (an empty path, as given: '', not nothing before the colon)
            text = f"{exc.filename if exc.filename != '' else repr('')}: {exc.strerror}"
        print(f"{where}: error: {text}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - a bug or an unforeseen failure: one line
        if args.debug:
            raise
        print(f"{where}: error: {type(exc).__name__}: {exc} "
              "(run cepam --debug ... for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
