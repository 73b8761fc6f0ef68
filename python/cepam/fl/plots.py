"""The two figures of the paper's experiments, drawn from finished runs (PNG).

* :func:`plot_convergence` -- validation accuracy over the rounds, mean over
  seeds with a 95% confidence band, one line per method, one panel per model
  (the paper's Figures for CEPAM-Gaussian and CEPAM-Laplace).
* :func:`plot_privacy_accuracy` -- final test accuracy against the privacy
  budget eps (from the runs' eps column, or recomputed at each of several
  deltas) for the Gaussian methods run at several noise levels (the paper's
  Section VI-C: CEPAM-Gaussian against Gaussian+SDQ; FL+Gaussian too where
  it was run).  Where the runs have no eps (no accountant installed) the x
  axis is the noise sigma instead.

matplotlib is imported inside the functions, with the Agg backend.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

from .privacy import ACCOUNTING_VIEW
from .results import Group, mean_ci

__all__ = ["plot_convergence", "plot_privacy_accuracy"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _clamp_percent(ax) -> None:
    lo, hi = ax.get_ylim()
    ax.set_ylim(max(lo, 0.0), min(hi, 100.0))


def _label(group: Group, sigmas: set[float]) -> str:
    label = group.config.label
    if len(sigmas) > 1 and "gaussian" in group.config.method:
        label += f", sigma={group.config.sigma:g}"
    return label


def plot_convergence(groups: Sequence[Group], path: str | Path, *,
                     column: str = "val_acc") -> Path:
    """Accuracy (``column``, in %) over rounds, mean and 95% CI over seeds."""
    plt = _pyplot()
    models = [m for m in ("mlp", "cnn") if any(g.config.model == m for g in groups)]
    if not models:
        raise ValueError("no runs to plot")
    fig, axes = plt.subplots(1, len(models), figsize=(6.5 * len(models), 4.5), squeeze=False)
    sigmas = {g.config.sigma for g in groups}
    for ax, model in zip(axes[0], models):
        for g in (g for g in groups if g.config.model == model):
            n = min(len(r.rows) for r in g.runs)
            rounds, mean, lo, hi = [], [], [], []
            for i in range(n):
                m, ci = mean_ci([100.0 * float(r.rows[i][column]) for r in g.runs])
                ci = 0.0 if math.isnan(ci) else ci
                rounds.append(g.runs[0].rows[i]["round"])
                mean.append(m)
                lo.append(max(0.0, m - ci))
                hi.append(min(100.0, m + ci))
            (line,) = ax.plot(rounds, mean, label=f"{_label(g, sigmas)} ({len(g.runs)} seeds)")
            ax.fill_between(rounds, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
        ax.set_title(f"{model.upper()} on MNIST")
        ax.set_xlabel("communication round")
        ax.set_ylabel("validation accuracy (%)" if column == "val_acc" else f"{column} (%)")
        ax.grid(True, alpha=0.3)
        _clamp_percent(ax)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_privacy_accuracy(groups: Sequence[Group], path: str | Path, *,
                          methods: Sequence[str] = ("cepam-gaussian", "fl-gaussian-sdq", "fl-gaussian"),
                          at: str = "final", deltas: Sequence[float] = ()) -> Path | None:
    """Test accuracy against eps (or sigma) for ``methods``.

    Without ``deltas``: eps is the runs' own column (at their delta), one line
    per (model, method, dim).  With ``deltas``: eps recomputed at each delta
    (:meth:`Group.epsilon_at`, after the rounds run), one line per (model,
    method, dim, delta).  The eps axis is logarithmic when eps spans more than
    two decades.  Returns None when fewer than two noise levels were run.

    Raises:
        InvalidArgumentError: a delta not in (0, 1), or ``deltas`` with
            non-IID runs.
    """
    plt = _pyplot()
    chosen = [g for g in groups if g.config.method in methods]
    # (model, label, delta or None) -> [(eps, sigma, accuracy, ci)]
    lines: dict[tuple, list[tuple[float, float, float, float]]] = {}
    for g in chosen:
        s = g.stats(at)
        ci = 0.0 if math.isnan(s["test_acc_ci95"]) else s["test_acc_ci95"]
        for delta in deltas or [None]:
            eps = s["epsilon"] if delta is None else g.epsilon_at(delta)
            lines.setdefault((g.config.model, g.config.label, delta), []).append(
                (eps, g.config.sigma, s["test_acc"], ci))
    lines = {k: v for k, v in lines.items() if len(v) >= 2}
    if not lines:
        return None
    eps_all = [p[0] for pts in lines.values() for p in pts]
    use_eps = all(math.isfinite(e) and e > 0 for e in eps_all)
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    order = sorted(lines, key=lambda k: (k[0], k[1], k[2] or 0.0))
    colours: dict[tuple[str, str], str] = {}  # one colour per (model, method), a style per delta
    for key in order:
        colours.setdefault(key[:2], f"C{len(colours)}")
    styles = {d: ("-", "--", ":", "-.")[i % 4] for i, d in enumerate(deltas or [None])}
    for model, label, delta in order:
        pts = lines[(model, label, delta)]
        pts.sort(key=lambda p: p[0] if use_eps else -p[1])
        xs = [p[0] if use_eps else p[1] for p in pts]
        name = f"{label}, {model.upper()}" + ("" if delta is None else f", delta = {delta:g}")
        ax.errorbar(xs, [p[2] for p in pts], yerr=[p[3] for p in pts], marker="o", capsize=3,
                    color=colours[(model, label)], linestyle=styles[delta], label=name)
    if use_eps:
        if max(eps_all) > 100 * min(eps_all):
            ax.set_xscale("log")
        at_delta = "" if deltas else f", delta = {chosen[0].config.delta:g}"
        ax.set_xlabel(f"privacy budget eps ({ACCOUNTING_VIEW}{at_delta})")
    else:
        ax.set_xscale("log")
        ax.invert_xaxis()
        ax.set_xlabel("noise sigma (no eps: accountant not available)")
    ax.set_ylabel("test accuracy (%)")
    _clamp_percent(ax)
    ax.set_title("Privacy-accuracy trade-off on MNIST")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
