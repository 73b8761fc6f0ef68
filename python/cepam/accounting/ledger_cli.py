"""``cepam privacy ledger PATH``: what a privacy ledger holds.

Prints the ledger's events as a table (the ``noise`` column names its
parameter: ``sigma=`` a CEPAM-Gaussian round's per-coordinate std, ``b=`` a
Laplace round's scale, ``z=`` a Gaussian mechanism's noise multiplier) and
the total epsilon at the ledger's delta (or ``--delta``), with what it is
stated for (the events' neighbouring relation, level and threat model), or,
with ``--json``, the report of
:meth:`cepam.accounting.Ledger.report` (total epsilon under the key
``epsilon``, ``null`` if no finite epsilon is certified; those words under
``terms``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

__all__ = ["COMMAND", "build_parser", "handler", "main"]

# The words that select this command (see cepam.cli: "privacy" has required
# options of its own, so the nested command is dispatched before it).
COMMAND = ("privacy", "ledger")
_HELP = "print a privacy ledger (cepam.accounting.Ledger): its events and total epsilon"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cepam privacy ledger", description=_HELP + ".")
    p.add_argument("path", help="the ledger's SQLite file")
    p.add_argument("--delta", type=float, default=None,
                   help="delta of the total epsilon (default: the ledger's)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=handler)
    return p


#: The noise parameter of each kind of event, by its description's key, and
#: how the table's ``noise`` column shows it: a CEPAM round's per-coordinate
#: std (sigma) or Laplace scale (b), or a bare Gaussian mechanism's noise
#: multiplier (z = std over the l2 sensitivity: no unit of the update).
_NOISE_KEYS = (("sigma", "sigma"), ("scale", "b"), ("noise_multiplier", "z"))


def _cell(value: Any) -> str:
    """A table cell: None as ``-``, a float to 6 digits, text escaped (a
    ledger is a file that may come from elsewhere: no name in it may write
    a line or a terminal sequence of its own)."""
    from ..cli import printable

    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return printable(str(value))


def _noise(event: dict[str, Any]) -> str | None:
    """The event's noise parameter, named (``sigma=0.5``, ``b=0.2``,
    ``z=1.1``; escaped with the rest of its row), or None for an event
    without one."""
    for key, shown in _NOISE_KEYS:
        value = event.get(key)
        if value is not None:
            return f"{shown}={value:.6g}" if isinstance(value, float) else f"{shown}={value}"
    return None


def handler(args: argparse.Namespace) -> int:
    """Print the ledger; return the exit code (0)."""
    import time

    from .ledger import Ledger

    with Ledger(args.path, create=False) as ledger:
        report = ledger.report(delta=args.delta)
    if args.json:
        json.dump(report, sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
        return 0
    columns = ("id", "time", "run_id", "round", "rounds", "event", "bound", "noise", "clip",
               "clients", "samples_per_round", "dataset_size", "threat_model")
    rows = []
    for e in report["events"]:
        rows.append([
            e["id"], time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(e["time"])), e["run_id"],
            e["round"], e["rounds"], e["event"], e.get("bound"), _noise(e), e.get("clip"),
            e.get("clients"), e.get("samples_per_round"), e.get("dataset_size"), e.get("threat_model")])
    cells = [list(columns)] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    out = sys.stdout
    out.write(f"ledger {report['name']!r} ({report['path']})\n")
    for r in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n")
    eps = report["epsilon"]
    out.write(f"total: {report['rounds']} rounds in {len(report['runs'])} runs, "
              f"epsilon = {'inf' if eps is None else f'{eps:.6g}'} at delta = {report['delta']:g}"
              + (f" ({report['terms']})" if report["terms"] else "") + "\n")
    return 0


def main(argv: Sequence[str]) -> int:
    """Run the command on ``argv`` (the words after ``privacy ledger``)."""
    args = build_parser().parse_args(list(argv))
    return int(args.func(args) or 0)
