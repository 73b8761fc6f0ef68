"""The two figures of the paper's experiments, drawn from finished runs (PNG).

* :func:`plot_convergence` -- validation accuracy over the rounds, mean over
  seeds with a 95% confidence band, one line per method, one panel per model
  (the paper's Figures for CEPAM-Gaussian and CEPAM-Laplace).
* :func:`plot_privacy_accuracy` -- final test accuracy against the privacy
  budget eps (from the runs' eps column) for the Gaussian methods run at
  several noise levels (the paper's Section VI-C: CEPAM-Gaussian against
  Gaussian+SDQ; FL+Gaussian too where it was run).  Where the runs have no eps (no accountant installed) the
  x axis is the noise sigma instead.

matplotlib is imported inside the functions, with the Agg backend.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

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
                          at: str = "final") -> Path | None:
    """Test accuracy against eps (or sigma) for ``methods``; one line per
    (model, method, dim).  Returns None when fewer than two noise levels were run."""
    plt = _pyplot()
    lines: dict[tuple, list[tuple[float, float, float, float]]] = {}
    use_eps = True
    chosen = [g for g in groups if g.config.method in methods]
    for g in chosen:
        eps = g.stats(at)["epsilon"]
        if not (math.isfinite(eps) and eps > 0):
            use_eps = False
    for g in chosen:
        s = g.stats(at)
        key = (g.config.model, g.config.label)
        ci = 0.0 if math.isnan(s["test_acc_ci95"]) else s["test_acc_ci95"]
        lines.setdefault(key, []).append((s["epsilon"], g.config.sigma, s["test_acc"], ci))
    lines = {k: v for k, v in lines.items() if len(v) >= 2}
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for (model, label), pts in sorted(lines.items()):
        pts.sort(key=lambda p: p[0] if use_eps else -p[1])
        xs = [p[0] if use_eps else p[1] for p in pts]
        ax.errorbar(xs, [p[2] for p in pts], yerr=[p[3] for p in pts], marker="o", capsize=3,
                    label=f"{label}, {model.upper()}")
    if use_eps:
        ax.set_xlabel(f"privacy budget eps (delta = {chosen[0].config.delta:g})")
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
