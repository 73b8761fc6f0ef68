"""The two figures of the paper's experiments, drawn from finished runs.

Figures are written as PNG, PDF or SVG (by the file's suffix), with
Okabe and Ito's colour-blind-safe palette, a distinct line style per method
and readable fonts.

* :func:`plot_convergence` -- validation accuracy over the rounds, mean over
  seeds with error bars of one standard deviation over seeds; small multiples: one row per model, one
  panel per kind of noise (none, Gaussian, Laplace), a few series each (the
  paper's Figures for CEPAM-Gaussian and CEPAM-Laplace), one per
  configuration.
* :func:`plot_privacy_accuracy` -- final test accuracy against the privacy
  budget eps (from the runs' eps column, or recomputed at each of several
  deltas) for the Gaussian methods run at several noise levels (the paper's
  Section VI-C: CEPAM-Gaussian against Gaussian+SDQ; FL+Gaussian too where
  it was run), one line per configuration but its sigma, model and eps
  scope (level, relation, delta: points of different scopes are never
  joined), each scope stated on the axis or in the legend.  Where the runs
  have no eps (no accountant installed) the x axis is the noise sigma
  instead.

A series is one configuration: runs that differ in a setting other than
the seed (the clip, the sample rate, the lattice...) are never averaged into
one line, as ``cepam fl table`` gives them rows of their own (the groups of
:func:`cepam.fl.results.summarize`); seeds of one configuration are averaged.
Each line is named as the table names its row
(:func:`cepam.fl.results.run_label`: the method, then only the settings in
which the lines differ).

matplotlib is imported inside the functions, with the Agg backend.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

from ..errors import InvalidArgumentError
from .config import FLConfig
from .privacy import ACCOUNTING_VIEW, CLIENT_THREAT_MODEL, LEVELS, EpsilonScope
from .results import Group, mean_sd, run_label, t_quantile, varying_settings

__all__ = ["plot_convergence", "convergence_figure", "plot_privacy_accuracy",
           "privacy_accuracy_figure", "seeds_text", "OKABE_ITO"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: Okabe and Ito's colour-blind-safe palette (black first).
OKABE_ITO = ("#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00",
             "#CC79A7")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h")
_LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 1)))
# A fixed colour and line style per method of the paper, the same in every
# panel and figure; other series cycle through the palette and the styles.
_METHOD_STYLES = {
    "FL": ("#000000", "-"),
    "FL+SDQ": ("#000000", "--"),
    "FL+Gaussian": ("#0072B2", "-"),
    "FL+Gaussian+SDQ": ("#56B4E9", "--"),
    "FL+Laplace": ("#0072B2", "-"),
    "FL+Laplace+SDQ": ("#56B4E9", "--"),
    "CEPAM-Gaussian (n=1)": ("#D55E00", "-"),
    "CEPAM-Gaussian (n=2)": ("#E69F00", "-."),
    "CEPAM-Gaussian (n=3)": ("#CC79A7", ":"),
    "CEPAM-Gaussian (E8)": ("#009E73", (0, (5, 1, 1, 1, 1, 1))),
    "CEPAM-Laplace (n=1)": ("#D55E00", "-"),
}
# Panels of the convergence figure: methods grouped by the noise they add.
_FAMILIES = (("no privacy", ("fl", "fl-sdq")),
             ("Gaussian noise", ("fl-gaussian", "fl-gaussian-sdq", "cepam-gaussian")),
             ("Laplace noise", ("fl-laplace", "fl-laplace-sdq", "cepam-laplace")))
_RC = {"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 8.5,
       "xtick.labelsize": 9, "ytick.labelsize": 9}


def _styles(labels: Sequence[str]) -> dict[str, tuple[str, Any]]:
    """A (colour, line style) per label: the paper's methods keep theirs."""
    styles, free = {}, 0
    for label in labels:
        if label in _METHOD_STYLES:
            styles[label] = _METHOD_STYLES[label]
        else:
            styles[label] = (OKABE_ITO[1 + free % 7], _LINESTYLES[(free // 7) % len(_LINESTYLES)])
            free += 1
    return styles


def seeds_text(n: int) -> str:
    """``1 seed``, ``3 seeds``."""
    return f"{n} seed" if n == 1 else f"{n} seeds"


def _clamp_percent(ax) -> None:
    lo, hi = ax.get_ylim()
    ax.set_ylim(max(lo, 0.0), min(hi, 100.0))


def _curve(group: Group, column: str) -> tuple[list[int], list[float], list[float], list[float]]:
    """Rounds, mean and mean -/+ one standard deviation over the group's
    seeds (in %, within [0, 100]) of ``column``."""
    n = min(len(r.rows) for r in group.runs)
    rounds, mean, lo, hi = [], [], [], []
    for i in range(n):
        m, sd = mean_sd([100.0 * float(r.rows[i][column]) for r in group.runs])
        sd = 0.0 if math.isnan(sd) else sd
        rounds.append(int(group.runs[0].rows[i]["round"]))
        mean.append(m)
        lo.append(max(0.0, m - sd))
        hi.append(min(100.0, m + sd))
    return rounds, mean, lo, hi


def convergence_figure(groups: Sequence[Group], *, column: str = "val_acc"):
    """The convergence figure (a matplotlib Figure): ``column`` in % over the
    rounds, mean over seeds, with error bars of one standard deviation over
    seeds every eighth of the rounds (dodged sideways per series so that they
    stay apart); one row of panels per model, one column per kind of noise
    (none, Gaussian, Laplace), so that no panel holds more than a few series;
    each column's legend below it, outside the data.  A series is a group
    (one configuration, its seeds averaged), named by
    :func:`cepam.fl.results.run_label` among all the groups drawn.  The y
    axis starts below the lowest error bar and the lowest point of any
    series after the first eighth of the rounds (earlier rounds of slow
    series run off the bottom; every error bar is inside the axes).

    Raises:
        InvalidArgumentError: no group to plot.
    """
    from matplotlib.ticker import MaxNLocator

    plt = _pyplot()
    models = [m for m in ("mlp", "cnn") if any(g.config.model == m for g in groups)]
    if not models:
        raise InvalidArgumentError("no runs to plot")
    families = [(title, methods) for title, methods in _FAMILIES
                if any(g.config.method in methods for g in groups)]
    varying = varying_settings(g.config for g in groups)
    labels = {id(g): run_label(g.config, varying) for g in groups}
    styles = _styles(list(dict.fromkeys(labels.values())))
    with plt.rc_context(_RC):
        fig, axes = plt.subplots(len(models), len(families), squeeze=False, sharex=True,
                                 sharey="row", layout="constrained",
                                 figsize=(3.9 * len(families) + 0.6, 3.3 * len(models) + 1.4))
        legends: list[dict[str, Any]] = [{} for _ in families]  # per column: label -> handle
        for row, model in enumerate(models):
            low = math.inf
            for col, (title, methods) in enumerate(families):
                ax = axes[row][col]
                panel = [g for g in groups
                         if g.config.model == model and g.config.method in methods]
                for i, g in enumerate(panel):
                    label = labels[id(g)]
                    colour, style = styles[label]
                    marker = _MARKERS[i % len(_MARKERS)]
                    rounds, mean, lo, hi = _curve(g, column)
                    # The CI as error bars every few rounds, dodged sideways per
                    # series, so that overlapping intervals stay apart.
                    step = max(1, rounds[-1] // 8)
                    at = [j for j, r in enumerate(rounds) if r > 0 and r % step == 0]
                    (line,) = ax.plot(rounds, mean, color=colour, linestyle=style,
                                      linewidth=1.5, marker=marker, markevery=at,
                                      markersize=4.5,
                                      markerfacecolor="white" if i % 2 else colour)
                    legends[col].setdefault(f"{label} ({seeds_text(len(g.runs))})", line)
                    dodge = (i - (len(panel) - 1) / 2) * max(rounds[-1], 1) / 110
                    ax.errorbar([rounds[j] + dodge for j in at], [mean[j] for j in at],
                                yerr=[[mean[j] - lo[j] for j in at], [hi[j] - mean[j] for j in at]],
                                fmt="none", ecolor=colour, capsize=2, elinewidth=1.0)
                    settled = [m for r, m in zip(rounds, mean) if r >= max(1, rounds[-1] // 8)]
                    low = min(low, min(settled or mean), min((lo[j] for j in at), default=low))
                ax.set_title(f"{model.upper()}, {title}")
                ax.grid(True, alpha=0.3, linewidth=0.6)
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))
                if row == len(models) - 1:
                    ax.set_xlabel("communication round")
            name = "validation accuracy (%)" if column == "val_acc" else f"{column} (%)"
            axes[row][0].set_ylabel(name)
            if math.isfinite(low):
                top = min(100.0, axes[row][0].get_ylim()[1])
                axes[row][0].set_ylim(max(0.0, low - 0.05 * (top - low)), top)
        for col, handles in enumerate(legends):
            axes[-1][col].legend(list(handles.values()), list(handles), loc="upper center",
                                 bbox_to_anchor=(0.5, -0.17), frameon=False)
    return fig


def plot_convergence(groups: Sequence[Group], path: str | Path, *,
                     column: str = "val_acc") -> Path:
    """Writes :func:`convergence_figure` to ``path`` (PNG, PDF or SVG, by its
    suffix) and returns the path.

    Raises:
        InvalidArgumentError: no group to plot.
    """
    plt = _pyplot()
    fig = convergence_figure(groups, column=column)
    path = Path(path)
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path


_PRIVATE_GAUSSIAN = ("cepam-gaussian", "fl-gaussian-sdq", "fl-gaussian")


def _number(v: Any) -> float:
    """A number from a statistics dict, as JSON writes it (null, "inf")."""
    if v is None:
        return math.nan
    return float(v)


def _test_acc_sd(stats: dict[str, Any]) -> float:
    """The standard deviation over seeds of a group's test accuracy: its
    ``test_acc_sd``, or, in statistics written before that key, from the
    95% CI half-width (``test_acc_ci95 * sqrt(seeds) / t``)."""
    if "test_acc_sd" in stats:
        return _number(stats["test_acc_sd"])
    n = int(stats["seeds"])
    return _number(stats["test_acc_ci95"]) * math.sqrt(n) / t_quantile(n - 1)


def privacy_accuracy_figure(stats: Sequence[dict[str, Any]], *,
                            methods: Sequence[str] = _PRIVATE_GAUSSIAN,
                            deltas: Sequence[float] = ()):
    """The privacy-accuracy figure (a matplotlib Figure, or None when no
    line has two or more distinct noise levels) from group statistics: the
    dicts of :meth:`Group.stats`, or the objects ``cepam fl table --json``
    prints (``docs/experiments/sweep/table.json``).

    Without ``deltas``: eps is each group's ``epsilon``; with ``deltas``:
    eps from each group's ``epsilon_at_delta`` at each delta.  One line per
    (model, configuration but its sigma, scope), the configuration being
    every setting of the group's ``config`` (:meth:`FLConfig.group_settings`;
    summaries written without it: its method, ``label``), the scope the
    eps's level, relation and delta (``epsilon_level``, ``epsilon_relation``,
    ``epsilon_delta``, the delta replaced by each of ``deltas``): groups
    that differ in another setting (the clip, the sample rate...) are never
    joined, nor are points of different scopes.  What all lines share is
    stated in the x axis's label, what differs in each line's legend entry
    (the settings in which the configurations differ:
    :func:`cepam.fl.results.run_label`).  The eps axis is logarithmic
    when eps spans more than two decades; without any eps the x axis is
    sigma.

    Raises:
        InvalidArgumentError: ``deltas`` given but a group has no eps for one,
            or a group without its eps's scope (statistics written before
            eps was stated with it).
    """
    plt = _pyplot()
    chosen = [s for s in stats if s["method"] in methods]
    configs = [FLConfig.from_dict(s["config"]) if "config" in s else None for s in chosen]
    # A line's points differ in sigma; the scope names the relation and delta.
    varying = varying_settings(c for c in configs if c is not None) - {"sigma", "relation",
                                                                         "delta"}
    # (model, label, scope) -> [(eps, sigma, accuracy, sd)]
    lines: dict[tuple[str, str, EpsilonScope], list[tuple[float, float, float, float]]] = {}
    for s, config in zip(chosen, configs):
        label = s["label"] if config is None else run_label(config, varying)
        sd = _test_acc_sd(s)
        sd = 0.0 if math.isnan(sd) else sd
        for delta in deltas or [None]:
            if delta is None:
                eps = _number(s["epsilon"])
            else:
                at_delta = s.get("epsilon_at_delta") or {}
                if f"{delta:g}" not in at_delta:
                    raise InvalidArgumentError(f"no eps at delta = {delta:g} for {s['label']}")
                eps = _number(at_delta[f"{delta:g}"])
            scope = EpsilonScope.from_dict(s).at(delta)  # (pure DP stays pure)
            if scope.pure and delta not in (None, deltas[0]):
                continue  # pure DP: the same point at every delta
            lines.setdefault((s["model"], label, scope), []).append(
                (eps, float(s["sigma"]), _number(s["test_acc"]), sd))
    # A line needs two noise levels (not two points: a point per delta or
    # per setting of one sigma is no trade-off).
    lines = {k: v for k, v in lines.items() if len({p[1] for p in v}) >= 2}
    if not lines:
        return None
    eps_all = [p[0] for pts in lines.values() for p in pts]
    use_eps = all(math.isfinite(e) and e > 0 for e in eps_all)
    scopes = sorted({k[2] for k in lines},
                    key=lambda c: (LEVELS.index(c.level), c.relation, c.delta))
    # Each part of the scope (level, relation, delta, threat model) shared by
    # every line goes in the axis label; the others in the legend.
    shared = [len({c.parts()[i] for c in scopes}) == 1 for i in range(4)]
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(7.0, 5.4), layout="constrained")
        order = sorted(lines, key=lambda k: (k[0], k[1], scopes.index(k[2])))
        # One colour per (model, method), a line style per scope.
        colours: dict[tuple[str, str], str] = {}
        for key in order:
            colours.setdefault(key[:2], OKABE_ITO[(5, 6, 3, 1, 7, 2, 0)[len(colours) % 7]])
        for model, label, scope in order:
            pts = lines[(model, label, scope)]
            pts.sort(key=lambda p: p[0] if use_eps else -p[1])
            xs = [p[0] if use_eps else p[1] for p in pts]
            own = [part for part, common in zip(scope.parts(), shared) if part and not common]
            name = ", ".join([label, model.upper(), *own])
            marker = _MARKERS[list(colours).index((model, label)) % len(_MARKERS)]
            style = scopes.index(scope)
            acc = [100 * p[2] for p in pts]
            yerr = [[a - max(0.0, a - 100 * p[3]) for a, p in zip(acc, pts)],
                    [min(100.0, a + 100 * p[3]) - a for a, p in zip(acc, pts)]]
            ax.errorbar(xs, acc, yerr=yerr,
                        marker=marker, markersize=5, capsize=3, elinewidth=1.0,
                        color=colours[(model, label)], linestyle=("-", "--", ":", "-.")[style % 4],
                        label=name,
                        markerfacecolor="white" if style % 2 else colours[(model, label)])
        if use_eps:
            if max(eps_all) > 100 * min(eps_all):
                ax.set_xscale("log")
            common = ", ".join(part for part, same in zip(scopes[0].parts(), shared)
                               if part and same)
            # (the curious client's view is named only for the lines it is for:
            # a line of another threat model names its own)
            clients = [c.threat_model == CLIENT_THREAT_MODEL for c in scopes]
            accounting = (ACCOUNTING_VIEW if all(clients) else "tight bound" if not any(clients)
                          else f"{ACCOUNTING_VIEW} where a line names no threat model")
            view = f"{common}; {accounting}" if common else accounting
            ax.set_xlabel(f"privacy budget eps ({view})")
        else:
            ax.set_xscale("log")
            ax.invert_xaxis()
            ax.set_xlabel("noise sigma (no eps: accountant not available)")
        ax.set_ylabel("test accuracy (%, mean ± sd over seeds)")
        _clamp_percent(ax)
        ax.set_title("Privacy-accuracy trade-off on MNIST")
        ax.grid(True, alpha=0.3, linewidth=0.6)
        # Two columns of legend entries where they fit beside each other.
        wide = max(len(name) for name in ax.get_legend_handles_labels()[1]) > 45
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1 if wide else 2,
                  frameon=False)
    return fig


def plot_privacy_accuracy(groups: Sequence[Group], path: str | Path, *,
                          methods: Sequence[str] = _PRIVATE_GAUSSIAN,
                          at: str = "final", deltas: Sequence[float] = ()) -> Path | None:
    """Writes :func:`privacy_accuracy_figure` for ``groups`` (test accuracy
    at ``at``; with ``deltas``, eps recomputed at each delta by
    :meth:`Group.epsilon_at`, after the rounds run) to ``path`` (PNG, PDF or
    SVG by its suffix).  Returns the path, or None when no line (model,
    configuration but its sigma, and eps level, relation and delta) has two
    or more noise levels.

    Raises:
        InvalidArgumentError: a delta not in (0, 1), or ``deltas`` with
            non-IID runs.
    """
    stats = [g.stats(at, deltas=deltas) for g in groups if g.config.method in methods]
    fig = privacy_accuracy_figure(stats, methods=methods, deltas=deltas)
    if fig is None:
        return None
    plt = _pyplot()
    path = Path(path)
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path
