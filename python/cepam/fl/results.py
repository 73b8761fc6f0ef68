"""Reading finished runs and summarising them over seeds.

:func:`load_runs` finds every run under a directory: each ``rounds.json``
that ``cepam fl run`` writes, and each per-round CSV file named
``<run name>-seed<k>.csv`` (as shipped in ``docs/experiments/runs``), read
as a complete run of the rounds it holds with the configuration its name
spells out (:meth:`FLConfig.from_run_name`);
:func:`summarize` groups runs that differ only in their seed (every other
setting a run uses tells configurations apart: :meth:`FLConfig.group_settings`;
of two or more runs of one seed it keeps the newest, :attr:`Group.dropped`
the others)
and gives the mean, the sample standard deviation over seeds and the 95%
confidence interval of the mean (Student t, n - 1 degrees of freedom) of the
test accuracy (at the last round, or at the round of best validation
accuracy), with the mean bits per client per round, the bits per coordinate
and the final eps with what it is for (level, relation and delta:
:func:`cepam.fl.privacy.epsilon_scope`); :func:`format_table` prints the
paper-style table (methods by rows, models by columns; accuracy as mean ±
standard deviation, which, unlike the t interval, stays readable with 2 or 3
seeds: with 2 seeds the interval's half-width is 9 standard deviations; one
eps column per level, relation and delta).  :func:`run_label` names a
configuration among others (its method, then the settings in which the
configurations differ), in the table's rows and the figures' legends alike.

Accuracies are fractions in [0, 1] wherever they are data (the rows, the
statistics of :meth:`Group.stats`, every JSON output); the text tables and
the figures show them in percent.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Iterable, Sequence

from .._checks import check_items
from ..errors import (InvalidArgumentError, InvalidTypeError, MissingPathError,
                      NotADirectoryPathError)
from .config import METHODS, MODEL_NAMES, FLConfig
from .privacy import (ACCOUNTING_VIEW, CLIENT_THREAT_MODEL, EpsilonScope, epsilon_at,
                      epsilon_scope)

__all__ = ["Run", "Group", "load_runs", "read_rounds_csv", "summarize", "format_table", "mean_ci",
           "mean_sd", "t_quantile", "varying_settings", "run_label"]

# Two-sided 95% Student t quantiles t_{0.975, df}, df = 1..30.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)


def t_quantile(df: int) -> float:
    """t_{0.975} with ``df`` degrees of freedom (normal approximation above 30)."""
    if df < 1:
        return math.nan
    if df <= len(_T975):
        return _T975[df - 1]
    return 1.959964 + 2.4 / df  # within 0.002 of the exact value for df > 30


def _mean_var(values: Sequence[float]) -> tuple[float, float, int]:
    """Mean, sample variance (n - 1 in the denominator; NaN for n < 2) and
    number n of the values that are not NaN (NaN mean for none)."""
    vals = [float(v) for v in values if not math.isnan(float(v))]
    n = len(vals)
    if n == 0:
        return math.nan, math.nan, 0
    # math.fsum: exactly rounded sums, the same bits on every Python (3.12's
    # sum() of floats is compensated, 3.11's is not: the shipped tables'
    # last digits would depend on the interpreter).
    mean = math.fsum(vals) / n
    if n == 1:
        return mean, math.nan, 1
    return mean, math.fsum((v - mean) ** 2 for v in vals) / (n - 1), n


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (n - 1 in the denominator) of the
    values that are not NaN; NaN for the deviation of one value, and for
    both of none."""
    mean, var, _ = _mean_var(values)
    return mean, math.sqrt(var)


def mean_ci(values: Sequence[float]) -> tuple[float, float]:
    """Mean and half-width of its 95% confidence interval (NaN for one value)."""
    mean, var, n = _mean_var(values)
    return mean, (math.nan if n < 2 else t_quantile(n - 1) * math.sqrt(var / n))


def _from_json(v: Any) -> Any:
    if v is None:
        return math.nan
    if v == "inf":
        return math.inf
    if v == "-inf":
        return -math.inf
    return v


@dataclass
class Run:
    """One run read back from its ``rounds.json`` or per-round CSV file
    (``path``: the run's directory, or the CSV file); ``modified``: when that
    file was last written (seconds since the epoch), which picks the newest
    of two runs of one seed."""

    config: FLConfig
    rows: list[dict[str, Any]]
    complete: bool
    path: Path
    modified: float = 0.0

    def value_at(self, column: str, at: str = "final") -> float:
        """``column`` at the last round, or at the round of best validation
        accuracy (``at="best-val"``, the first such round)."""
        rows = self.rows[1:] or self.rows
        if at == "final":
            return float(rows[-1][column])
        if at == "best-val":
            best = max(rows, key=lambda r: r["val_acc"])
            return float(best[column])
        raise InvalidArgumentError(f"at must be 'final' or 'best-val', got {at!r}")

    def mean_over_rounds(self, column: str) -> float:
        vals = [float(r[column]) for r in self.rows[1:]]
        return math.fsum(vals) / len(vals) if vals else math.nan  # (see _mean_var)


_CSV_RUN = re.compile(r"(?P<name>.+)-seed(?P<seed>\d+)\.csv")


def _csv_cell(column: str, text: str) -> Any:
    if text == "":
        return math.nan
    if text in ("true", "false"):
        return text == "true"
    return int(text) if column == "round" else float(text)


def read_rounds_csv(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a per-round CSV file (``rounds.csv``): empty cells as NaN,
    ``true``/``false`` as bools, ``round`` as an int, the rest as floats.

    Raises:
        InvalidArgumentError: the file has no ``round`` column or no rows.
    """
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if not reader.fieldnames or "round" not in reader.fieldnames:
            raise InvalidArgumentError(f"{path}: not a per-round CSV (no 'round' column)")
        rows = [{k: _csv_cell(k, v) for k, v in r.items()} for r in reader]
    if not rows:
        raise InvalidArgumentError(f"{path}: no rows")
    return rows


def load_runs(directory: str | Path, *, include_incomplete: bool = False) -> list[Run]:
    """Every run under ``directory`` (searched recursively): the runs of
    ``cepam fl run`` (``rounds.json``) and per-round CSV files named
    ``<run name>-seed<k>.csv``.

    CSV files whose name does not start with a model and a method are
    skipped.

    Raises:
        InvalidTypeError: ``directory`` is not a path (a str or an
            os.PathLike).
        MissingPathError: ``directory`` does not exist (an
            InvalidArgumentError).
        NotADirectoryPathError: ``directory`` is not a directory (an
            InvalidArgumentError).
        InvalidArgumentError: a CSV file named like a run cannot be read as
            one (a hashed run name, whose settings only its ``config.json``
            holds).
    """
    if not isinstance(directory, (str, os.PathLike)):
        raise InvalidTypeError(f"directory must be a path (str or os.PathLike), got "
                               f"{type(directory).__name__}")
    root = Path(directory)
    if not root.exists():
        raise MissingPathError(f"{root} does not exist")
    if not root.is_dir():
        raise NotADirectoryPathError(f"{root} is not a directory")
    runs = []
    for path in sorted(root.rglob("rounds.json")):
        doc = json.loads(path.read_text())
        rows = [{k: _from_json(v) for k, v in r.items()} for r in doc["rows"]]
        run = Run(FLConfig.from_dict(doc["config"]), rows, bool(doc["complete"]), path.parent,
                  path.stat().st_mtime)
        if run.complete or include_incomplete:
            runs.append(run)
    for path in sorted(root.rglob("*.csv")):
        found = _CSV_RUN.fullmatch(path.name)
        model, _, rest = found["name"].partition("-") if found else ("", "", "")
        if model not in MODEL_NAMES or not any(rest == m or rest.startswith(m + "-")
                                               for m in METHODS):
            continue  # not named like a run: some other CSV file
        rows = read_rounds_csv(path)
        config = FLConfig.from_run_name(found["name"], seed=int(found["seed"]),
                                        rounds=int(rows[-1]["round"]))
        runs.append(Run(config, rows, True, path, path.stat().st_mtime))
    return runs


def _max_eps(values: Iterable[float]) -> float:
    """The largest of the eps that are not NaN (NaN for none): the bound that
    holds for each of them."""
    vals = [float(v) for v in values if not math.isnan(float(v))]
    return max(vals) if vals else math.nan


@dataclass
class Group:
    """Runs that differ only in their seed, one run per seed (``dropped``:
    older runs of a seed that another run of the group has, left out)."""

    config: FLConfig  # the first run's (its seed is meaningless here)
    runs: list[Run]
    dropped: list[Run] = field(default_factory=list)

    @property
    def seeds(self) -> list[int]:
        """The seeds of the runs, distinct, in increasing order."""
        return sorted({r.config.seed for r in self.runs})

    @property
    def epsilon_scope(self) -> EpsilonScope:
        """What the group's ``epsilon`` is for (its level, relation and delta;
        :func:`cepam.fl.privacy.epsilon_scope`); :meth:`epsilon_at` is for
        the same level and relation at its delta."""
        return epsilon_scope(self.config)

    @property
    def rounds(self) -> int:
        """Rounds actually run (the most of any seed's run)."""
        return max(len(r.rows) - 1 for r in self.runs)

    def epsilon_at(self, delta: float) -> float:
        """eps after :attr:`rounds` rounds of this group's setting at
        ``delta`` (:func:`cepam.fl.privacy.epsilon_at`).

        Raises:
            InvalidArgumentError: ``delta`` not in (0, 1), or non-IID runs.
        """
        return epsilon_at(self.config, delta=delta, rounds=self.rounds)

    def stats(self, at: str = "final", *, deltas: Sequence[float] = ()) -> dict[str, Any]:
        """The group's summary: accuracies as fractions in [0, 1] (mean, the
        sample standard deviation over seeds and the half-width of the 95% CI
        of the mean), bits, settings (a few by name, all of them in
        ``config``: :meth:`FLConfig.group_settings`, which tell groups
        apart), the number of distinct seeds, and eps
        after the rounds run (``epsilon``: the largest over the seeds' runs)
        with what it is for (``epsilon_level``, ``epsilon_relation``,
        ``epsilon_delta``: :attr:`epsilon_scope`); with ``deltas``,
        ``epsilon_at_delta`` too: :meth:`epsilon_at` at each delta (keys
        ``f"{delta:g}"``; the same level and relation).

        Raises:
            InvalidArgumentError: ``at`` not "final" or "best-val", a delta not
                in (0, 1), or ``deltas`` with non-IID runs.
        """
        tests = [r.value_at("test_acc", at) for r in self.runs]
        vals = [r.value_at("val_acc", at) for r in self.runs]
        (acc, acc_ci), (_, acc_sd) = mean_ci(tests), mean_sd(tests)
        (val, val_ci), (_, val_sd) = mean_ci(vals), mean_sd(vals)
        bits, _ = mean_ci([r.mean_over_rounds("bits_per_client") for r in self.runs])
        bpc, _ = mean_ci([r.mean_over_rounds("bits_per_coordinate") for r in self.runs])
        stats = {
            "label": self.config.label,
            "method": self.config.method,
            "model": self.config.model,
            "dim": self.config.dim,
            "lattice": self.config.lattice,
            "sigma": self.config.sigma,
            "b": self.config.b,
            "config": self.config.group_settings(),
            "rounds": self.rounds,
            "seeds": len(self.seeds),
            "test_acc": acc, "test_acc_ci95": acc_ci, "test_acc_sd": acc_sd,
            "val_acc": val, "val_acc_ci95": val_ci, "val_acc_sd": val_sd,
            "bits_per_client": bits, "bits_per_coordinate": bpc,
            "bits_measured": bool(self.runs[0].rows[-1]["bits_measured"]),
            "epsilon": _max_eps(r.value_at("epsilon", "final") for r in self.runs),
            **self.epsilon_scope.as_dict(),
            "delta": self.config.delta,
            "at": at,
        }
        if deltas:
            stats["epsilon_at_delta"] = {f"{d:g}": self.epsilon_at(d) for d in deltas}
        return stats


def _order(config: FLConfig) -> tuple:
    return (METHODS.index(config.method), config.lattice, config.dim, config.sigma, config.b,
            config.group_key())


def summarize(runs: Iterable[Run]) -> list[Group]:
    """Groups runs by configuration without seed (:meth:`FLConfig.group_key`:
    every setting the runs use but the seed), in the paper's method order.

    Two or more runs of one configuration and seed (a run copied, or kept
    both as ``rounds.json`` and as a CSV file) count once: the newest
    (:attr:`Run.modified`; of equal times the last path) is kept, the others
    go to :attr:`Group.dropped`.

    Raises:
        InvalidTypeError: ``runs`` is not an iterable of :class:`Run`.
    """
    runs = check_items("runs", runs, Run)
    by_seed: dict[str, dict[int, list[Run]]] = {}
    for run in runs:
        by_seed.setdefault(run.config.group_key(), {}).setdefault(run.config.seed, []).append(run)
    groups = []
    for seeds in by_seed.values():
        kept, dropped = [], []
        for same in seeds.values():
            same = sorted(same, key=lambda r: (r.modified, str(r.path)))
            kept.append(same[-1])
            dropped += same[:-1]
        groups.append(Group(kept[0].config, kept, dropped))
    return sorted(groups, key=lambda g: (_order(g.config), g.config.model))


def varying_settings(configs: Iterable[FLConfig]) -> set[str]:
    """The settings in which the configurations differ (their
    :meth:`FLConfig.group_settings`: the seed and the settings a run does not
    use aside)."""
    settings = [c.group_settings() for c in configs]
    return {k for s in settings[1:] for k, v in s.items() if v != settings[0][k]}


def run_label(config: FLConfig, varying: Collection[str]) -> str:
    """``config``'s name among configurations that differ in ``varying``
    (:func:`varying_settings`): its :attr:`FLConfig.label` (the method, its
    lattice or dimension, the engine), then ``name=value`` for each other
    setting of ``varying`` that the run uses, noise scales first, such as
    ``CEPAM-Gaussian (n=1), sigma=0.05, clip=0.5``.  The model is left to
    the caller (a column, a panel, a legend's part)."""
    # The label names the method, the lattice (Z's dimension, or the lattice
    # that fixes it) and the engine.
    named = {"model", "method", "engine", "seed", "lattice", "dim"}
    names = sorted(set(varying) - named, key=lambda n: (n not in ("sigma", "b"), n))
    extras = []
    for name in names:
        if config.uses(name):
            value = getattr(config, name)
            extras.append(f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}")
    return ", ".join([config.label, *extras])


def _fmt_percent(mean: float, spread: float, digits: int = 2) -> str:
    """A fraction and its spread (mean ± spread), in percent."""
    if math.isnan(mean):
        return "-"
    if math.isnan(spread):
        return f"{100 * mean:.{digits}f}"
    return f"{100 * mean:.{digits}f} ± {100 * spread:.{digits}f}"


def _fmt_num(v: float, digits: int = 2) -> str:
    if math.isnan(v):
        return "-"
    if math.isinf(v):
        return "inf"
    return f"{v:.{digits}f}"


def _sigma_of(config: FLConfig) -> float | None:
    return config.sigma if config.uses("sigma") else None


def format_table(groups: Sequence[Group], *, at: str = "final", markdown: bool = False,
                 deltas: Sequence[float] = ()) -> str:
    """The paper-style table: one row per configuration (named by
    :func:`run_label`), for each model the test accuracy in % (mean ± sample
    standard deviation over seeds) and the bits per coordinate, then eps and
    the number of distinct seeds.

    eps has one column per scope (level, relation and delta, named in its
    header: :attr:`Group.epsilon_scope`); a row fills its own scope's column,
    so that values of different scopes are never in one column.  A row's
    eps is the largest of its models' (the Laplace methods' grows with the
    model's size; the note says where they differ).

    Bits marked ``*`` are not measured: methods without a payload are charged
    32 bits per float32 coordinate.

    With ``deltas`` (a privacy-accuracy sweep) the columns are the method,
    sigma (its own column, not in the method's name), eps recomputed at each
    delta (:meth:`Group.epsilon_at`, after the rounds run; a column per
    level, relation and delta), then accuracy and bits per model and the
    seeds; the run's own eps column is left out.

    Raises:
        InvalidTypeError: ``groups`` is not a sequence of :class:`Group`
            (:func:`summarize`'s).
        InvalidArgumentError: a delta not in (0, 1), or ``deltas`` with
            non-IID runs (:func:`cepam.fl.privacy.client_dataset_size`).
    """
    groups = check_items("groups", groups, Group)
    if not groups:
        return "no complete runs found\n"
    models = [m for m in ("mlp", "cnn") if any(g.config.model == m for g in groups)]
    varying = varying_settings(g.config for g in groups)
    if deltas:
        varying.discard("sigma")  # sigma has its own column
    # A row: a label (and, with deltas, sigma) and the scope of its eps.
    rows: dict[tuple[str, float | None, EpsilonScope], dict[str, Group]] = {}
    for g in groups:
        key = (run_label(g.config, varying), _sigma_of(g.config) if deltas else None,
               g.epsilon_scope)
        rows.setdefault(key, {})[g.config.model] = g
    at_deltas: list[float | None] = list(deltas) or [None]
    columns = list(dict.fromkeys(scope.at(d) for (_, _, scope) in rows for d in at_deltas))
    per_model_header = []
    for m in models:
        per_model_header += [f"{m.upper()} test acc (%, mean ± sd)", f"{m.upper()} bits/coord"]
    eps_header = [f"eps ({c.describe()})" for c in columns]
    if deltas:
        header = ["Method", "sigma", *eps_header, *per_model_header, "seeds"]
    else:
        header = ["Method", *per_model_header, *eps_header, "seeds"]
    body, models_differ = [], False
    for (label, sigma, scope), per_model in rows.items():
        cells, seeds = [], []
        stats = {m: g.stats(at) for m, g in per_model.items()}
        for m in models:
            s = stats.get(m)
            if s is None:
                cells += ["", ""]
                continue
            cells.append(_fmt_percent(s["test_acc"], s["test_acc_sd"]))
            cells.append(_fmt_num(s["bits_per_coordinate"]) + ("" if s["bits_measured"] else "*"))
            seeds.append(str(s["seeds"]))
        eps_cells = [""] * len(columns)
        for d in at_deltas:
            values = [stats[m]["epsilon"] if d is None else g.epsilon_at(d)
                      for m, g in per_model.items()]
            known = {v for v in values if not math.isnan(v)}
            models_differ = models_differ or len(known) > 1
            eps_cells[columns.index(scope.at(d))] = _fmt_num(_max_eps(values))
        if deltas:
            body.append([label, "-" if sigma is None else f"{sigma:g}", *eps_cells, *cells,
                         "/".join(seeds)])
        else:
            body.append([label, *cells, *eps_cells, "/".join(seeds)])
    note = (f"test accuracy at the {'last round' if at == 'final' else 'round of best validation accuracy'}; "
            "mean ± sample standard deviation over seeds (the 95% CI of the mean, in --json's "
            "test_acc_ci95, is t times sd / sqrt(seeds): 9.0 sd with 2 seeds, 2.5 with 3); "
            "* = not measured, 32 bits per float32 coordinate (no payload); "
            "eps after the rounds run, "
            + ("recomputed at each delta, " if deltas else "")
            + "for the level, relation and delta its column names (record-level: one training "
              "example replaced, for the paper's local loop only; client-level: one client's "
              f"whole data, any local loop; {ACCOUNTING_VIEW}"
            + ("; Laplace methods: pure DP, the same at every delta)" if deltas else ")"))
    if any(c.threat_model != CLIENT_THREAT_MODEL for c in columns):
        note += ("; a column naming its threat model (released model: central DP-FedAvg, "
                 "dp-accounting's PLD) is against an adversary who sees the released model "
                 "only, the others against a curious client")
    if models_differ:
        note += "; where a row's models' eps differ, the largest"
    dropped = sum(len(g.dropped) for g in groups)
    if dropped:
        note += (f"; {dropped} older {'run' if dropped == 1 else 'runs'} of a seed left out (a "
                 "newer run of the same setting and seed is used)")
    if markdown:
        out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        out += ["| " + " | ".join(line) + " |" for line in body]
        return "\n".join(out) + f"\n\n{note}\n"
    widths = [max(len(str(r[i])) for r in [header] + body) for i in range(len(header))]
    fmt = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    out = [fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in body]
    return "\n".join(out) + f"\n\n{note}\n"
