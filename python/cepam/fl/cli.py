"""``cepam fl``: run the paper's MNIST experiments, tabulate and plot them.

* ``cepam fl run --model cnn --method cepam-gaussian --dim 2 --rounds 80
  --seeds 10 --out DIR --data-dir ...`` runs every combination of the given
  models, methods, dimensions (CEPAM methods only) and noise levels, for
  seeds ``seed .. seed + seeds - 1``, each into
  ``DIR/<run name>/seed<k>/`` (config.json, rounds.csv, rounds.json,
  state.pt).  A run interrupted and started again with the same command
  continues after its last completed round; finished runs are skipped.
  After each private run it prints (stderr) its client-level eps (one
  client's whole data; valid for any training loop) and its record-level
  eps (one training example; for the paper's loop only, which this one
  is), with a warning when either exceeds 10.  ``--json`` prints one object per run whose
  accuracies are fractions in [0, 1], as in the runs' files, and which
  names what each eps is for (``epsilon_level``, ``epsilon_relation``,
  ``epsilon_delta``; ``client_epsilon_...`` likewise).  ``--seeds`` takes
  1 to :data:`MAX_SEEDS`, ``--seed`` 0 to 2^63 - 1 (the last seed too).
  Each option reaches the runs it applies to (``--clip-all`` fl and fl-sdq,
  ``--sdq-step`` the SDQ methods, ``--laplace-b`` the Laplace methods);
  one that no run uses (``--laplace-b`` with Gaussian methods only,
  ``--clip-learning-rate`` without ``--clip-quantile``, ``--clip`` with
  fl alone and no ``--clip-all``) and settings that
  contradict each other (``--samples-per-client`` beyond the training
  set, or with ``--alpha``) are refused before any data is read
  (:func:`.config.grid_configs`, :class:`.config.FLConfig`).
* ``cepam fl table DIR`` prints the paper-style table, a row per
  configuration (runs that differ in any setting but the seed are rows of
  their own, named by the settings in which the rows differ; accuracy: mean
  and standard deviation over distinct seeds, the newest run of a seed used;
  ``--json`` also has the 95% CI and each group's settings, ``config``).
  eps has a column per level (record or client), relation and delta, named
  in its header, so that no column mixes them (``--json``:
  ``epsilon_level``, ``epsilon_relation``, ``epsilon_delta``).
  ``--delta D [D ...]`` adds a sigma column and eps
  columns per delta: eps recomputed by the accountant (tight bound,
  curious-client view) for each setting after the rounds run, in place of
  the runs' own eps column (computed at their ``--delta``).  Text tables
  show accuracy in percent; ``--json`` gives fractions in [0, 1].
* ``cepam fl plot DIR`` writes the convergence and privacy-accuracy figures
  (``--format png pdf svg``), a series per configuration as ``fl table``
  has a row per configuration (its seeds averaged, named as the table names
  the row); the privacy-accuracy figure has one line per configuration but
  its sigma, model and eps level, relation and delta, each with two or more
  noise levels (none: no figure, a note on stderr), and names them on its
  axis or legend;
  with ``--delta D [D ...]`` one line per delta too
  (eps on a log axis where it spans more than two decades).

The paper's grid and privacy-accuracy sweep (section VI-C: accuracy
depends on sigma only, so one sweep serves both of its deltas), for example::

    cepam fl run --model mlp cnn --method all --rounds 80 --seeds 10 \
        --out results/grid --data-dir ../shared/data/mnist --threads 1
    cepam fl run --model mlp cnn --method cepam-gaussian --dim 2 3 --rounds 80 \
        --seeds 10 --out results/grid --data-dir ../shared/data/mnist --threads 1
    cepam fl table results/grid && cepam fl plot results/grid
    cepam fl run --model cnn --method cepam-gaussian fl-gaussian-sdq --delta 0.01 \
        --sigma 0.1375 0.0864 0.0602 0.0431 0.0307 0.0231 0.0141 0.0083 0.00364 0.000159 \
        --rounds 80 --seeds 3 --out results/sweep --data-dir ../shared/data/mnist
    cepam fl table results/sweep --delta 0.01 0.015 --markdown
    cepam fl plot results/sweep --delta 0.01 0.015 --out figures

``fl table`` and ``fl plot`` exit 1 when the directory holds no run.
torch is imported by ``fl run`` only; ``fl table`` needs neither torch nor
matplotlib.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from .config import RELATIONS, SAMPLINGS, json_value
from .engines import ENGINES, engine
from .._argtypes import checked, nonnegative_int, open_unit_interval, positive_float, positive_int
from ..cli import requires
from .privacy import ACCOUNTING_VIEW
from .seeds import MAX_SEED

if TYPE_CHECKING:
    from .config import FLConfig

__all__ = ["register"]

_METHODS = (
    "fl", "fl-sdq", "fl-gaussian", "fl-gaussian-sdq", "fl-laplace", "fl-laplace-sdq",
    "cepam-gaussian", "cepam-laplace",
)


def _add_deltas(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--delta", nargs="+", type=open_unit_interval, default=[], metavar="D",
                   help=f"deltas in (0, 1): {what}, eps recomputed by the accountant "
                        f"({ACCOUNTING_VIEW}) for each setting after the rounds run "
                        "(default: the runs' own eps column, at their delta)")


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run", help="run federated-learning experiments on MNIST",
        description="Runs every combination of --model, --method, --dim (CEPAM methods) and "
                    "--sigma / --laplace-b for --seeds seeds. Defaults are the paper's setup. "
                    "Each option reaches the methods it applies to (--clip-all: fl and fl-sdq; "
                    "--sdq-step: the SDQ methods); an option that no run uses, or settings "
                    "that contradict each other, are an error before any data is read.")
    p.add_argument("--model", nargs="+", default=["cnn"], choices=("mlp", "cnn"),
                   metavar="MODEL", help="mlp and/or cnn (default cnn)")
    p.add_argument("--method", nargs="+", default=["cepam-gaussian"], choices=_METHODS + ("all",),
                   metavar="METHOD",
                   help=f"one or more of {', '.join(_METHODS)}, or all (default cepam-gaussian)")
    p.add_argument("--dim", nargs="+", type=positive_int, default=[1],
                   help="LRSUQ sub-vector dimensions n, for each CEPAM method given "
                        "(cepam-laplace included; default 1)")
    p.add_argument("--lattice", default="Z", help="lattice of the CEPAM methods (default Z)")
    p.add_argument("--sigma", nargs="+", type=positive_float, default=[1e-3],
                   help="Gaussian noise std per coordinate; several values for a sweep")
    p.add_argument("--laplace-b", nargs="+", type=positive_float, default=[1e-3],
                   help="Laplace scale per coordinate")
    p.add_argument("--sdq-step", type=positive_float, default=None,
                   help="SDQ step Delta (default sqrt(12) x the noise std)")
    p.add_argument("--clip", type=positive_float, default=1.0,
                   help="whole-update l2 clip gamma of the private methods (default 1)")
    p.add_argument("--clip-all", action="store_true", help="clip fl and fl-sdq too")
    p.add_argument("--rounds", type=nonnegative_int, default=80,
                   help="communication rounds (default 80)")
    p.add_argument("--seeds", type=_seed_count, default=1,
                   help=f"number of seeds, 1 to {MAX_SEEDS}: runs seed, seed + 1, ..., "
                        "seed + seeds - 1")
    p.add_argument("--seed", type=_seed, default=0,
                   help="first seed, 0 to 2^63 - 1 (so is the last, seed + seeds - 1)")
    p.add_argument("--clients", type=positive_int, default=30,
                   help="K, the clients that train and send an update every round")
    p.add_argument("--sgd-steps", type=positive_int, default=15,
                   help="local momentum-SGD steps per client and round (the paper's tau, 15); "
                        "each draws --batch-size samples with replacement")
    # The old name, which cepam privacy used for samples per round: refused
    # with an explanation (_configs), not offered.
    p.add_argument("--local-steps", dest="renamed_local_steps", default=None,
                   help=argparse.SUPPRESS)
    p.add_argument("--batch-size", type=positive_int, default=1,
                   help="samples per local SGD step, 1 in the paper")
    p.add_argument("--samples-per-client", type=positive_int, default=None,
                   help="IID share per client (default train-size // clients)")
    p.add_argument("--alpha", type=positive_float, default=None,
                   help="non-IID split: Dirichlet concentration (default: IID)")
    p.add_argument("--lr", type=positive_float, default=0.01, help="initial SGD learning rate")
    p.add_argument("--momentum", type=float, default=0.9, help="SGD momentum (default 0.9)")
    p.add_argument("--lr-patience", type=positive_int, default=10,
                   help="rounds without a validation gain before the LR is cut (default 10)")
    p.add_argument("--lr-factor", type=positive_float, default=0.5,
                   help="LR multiplier at a plateau (default 0.5)")
    p.add_argument("--train-size", type=positive_int, default=50000,
                   help="training samples from the official 60,000 (default 50000)")
    p.add_argument("--val-size", type=nonnegative_int, default=10000,
                   help="validation samples from the official 60,000 (default 10000)")
    p.add_argument("--test-size", type=nonnegative_int, default=None,
                   help="official test images used (default all 10000)")
    p.add_argument("--delta", type=open_unit_interval, default=1e-5,
                   help="delta of the eps column and of the eps printed after each run "
                        "(default 1e-5)")
    p.add_argument("--population", type=positive_int, default=None,
                   help="N, the clients the training data is split over (default --clients: "
                        "every client in every round)")
    p.add_argument("--sample-rate", type=_unit_rate, default=1.0,
                   help="q, each client's chance to take part in a round (Poisson sampling "
                        "by the server's seeded Generator); --clients must be q x N "
                        "(default 1: no sampling)")
    p.add_argument("--sampling", choices=SAMPLINGS, default="poisson",
                   help="poisson (default) or fixed: a uniform cohort of --clients out of "
                        "--population (rate clients / N; replace-one only)")
    p.add_argument("--relation", choices=RELATIONS, default="replace-one",
                   help="neighbouring relation of the client-level eps and the aggregation: "
                        "replace-one (mean of the k updates; default) or add-remove (top-up "
                        "noise to T clients' worth, fixed denominator; Gaussian methods)")
    p.add_argument("--clip-quantile", type=_open_rate, default=None,
                   help="adaptive clipping (Andrew et al. 2021): target quantile gamma of the "
                        "update norms (default: off, a fixed --clip); the noise follows the "
                        "clip, sigma_t = (sigma / clip) C_t")
    p.add_argument("--clip-learning-rate", type=positive_float, default=0.2,
                   help="eta of the adaptive clip's geometric update (default 0.2)")
    p.add_argument("--clip-count-sigma", type=positive_float, default=None,
                   help="per-client noise std on the clipped-or-not bit (default: "
                        "(n / 20) / sqrt(T), Andrew et al.'s n / 20 on the sum)")
    p.add_argument("--clipped-fraction", action="store_true",
                   help="with a fixed clip, publish (and account) the per-round noised clipped "
                        "fraction too (adaptive clipping always does)")
    p.add_argument("--server-lr", type=positive_float, default=1.0,
                   help="server learning rate on the released update (default 1)")
    p.add_argument("--out", required=True, help="results directory")
    p.add_argument("--data-dir", default=None,
                   help="folder with the MNIST .gz files (default $CEPAM_DATA)")
    p.add_argument("--download", action="store_true",
                   help="download missing MNIST files (checksums verified)")
    p.add_argument("--engine", choices=tuple(ENGINES), default="builtin",
                   help="; ".join(f"{e.name}: {e.summary}" for e in ENGINES.values()))
    p.add_argument("--threads", type=positive_int, default=None,
                   help="torch threads (default torch's; 1 is fastest on a shared machine)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object per run (final round) to stdout, with the "
                        "level, relation and delta of each eps (epsilon_level, ...)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar: one line per run on stdout instead")
    p.set_defaults(func=_run, on_interrupt="; run the same command again to resume")
    requires(p, "torch", "scipy", extra="fl")


def _unit_rate(text: str) -> float:
    """A rate in (0, 1]."""
    value = float(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


def _open_rate(text: str) -> float:
    """A quantile in (0, 1)."""
    value = float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {text}")
    return value


#: The most seeds one ``fl run`` takes (``--seeds``): runs are made one after
#: another, each taking seconds to hours.
MAX_SEEDS = 10_000
_seed = checked(int, lambda v: 0 <= v <= MAX_SEED, "a non-negative integer below 2^63")
_seed_count = checked(int, lambda v: 1 <= v <= MAX_SEEDS,
                      f"a positive integer up to {MAX_SEEDS}")


def _settings(args: argparse.Namespace) -> list["FLConfig"]:
    """One FLConfig for each combination of the options (model, method,
    dim, sigma, b), at the first seed; each shared option given to the runs
    that use it (:func:`.config.grid_configs`: ``--clip-all`` to fl and
    fl-sdq, ``--sdq-step`` to the SDQ methods, ...).

    Raises:
        InvalidTypeError: the renamed --local-steps.
        InvalidArgumentError: the last seed, seed + seeds - 1, above 2^63 - 1,
            an option that no run uses (``--laplace-b`` without a Laplace
            method, ``--clip-learning-rate`` without ``--clip-quantile``),
            or a bad combination of settings (FLConfig's checks).
    """
    from ..accounting.setting import LOCAL_STEPS_RENAMED
    from ..errors import InvalidArgumentError, InvalidTypeError
    from .config import grid_configs, uses

    if args.renamed_local_steps is not None:
        raise InvalidTypeError(LOCAL_STEPS_RENAMED)
    if args.seed + args.seeds - 1 > MAX_SEED:
        raise InvalidArgumentError(
            f"--seed {args.seed} --seeds {args.seeds} would run seeds up to "
            f"{args.seed + args.seeds - 1}; seeds run from 0 to 2^63 - 1 = {MAX_SEED}")
    shared = dict(
        lattice=args.lattice, sdq_step=args.sdq_step, clip=args.clip, clip_all=args.clip_all,
        clients=args.clients, samples_per_client=args.samples_per_client, alpha=args.alpha,
        sgd_steps=args.sgd_steps, batch_size=args.batch_size, lr=args.lr,
        momentum=args.momentum, lr_patience=args.lr_patience, lr_factor=args.lr_factor,
        rounds=args.rounds, train_size=args.train_size, val_size=args.val_size,
        test_size=args.test_size, delta=args.delta, seed=args.seed, engine=args.engine,
        population=args.population, sample_rate=args.sample_rate, sampling=args.sampling,
        relation=args.relation, clip_quantile=args.clip_quantile,
        clip_learning_rate=args.clip_learning_rate, clip_count_sigma=args.clip_count_sigma,
        clipped_fraction_release=args.clipped_fraction, server_lr=args.server_lr)
    runs = []
    methods = list(_METHODS) if "all" in args.method else list(dict.fromkeys(args.method))
    for model, method in itertools.product(args.model, methods):
        # A swept option runs each of its values for the methods it names, its
        # first value for the others (which grid_configs drops where unused).
        dims = sorted(set(args.dim)) if method.startswith("cepam") else [args.dim[0]]
        sigmas = args.sigma if uses("sigma", method=method, sdq_step=args.sdq_step) \
            else [args.sigma[0]]
        bs = args.laplace_b if uses("b", method=method) else [args.laplace_b[0]]
        for dim, sigma, b in itertools.product(dims, sigmas, bs):
            runs.append(dict(model=model, method=method, dim=dim, sigma=sigma, b=b, **shared))
    return grid_configs(runs)


def _configs(settings: list["FLConfig"], seeds: int) -> Iterator["FLConfig"]:
    """The runs of ``settings`` (:func:`_settings`), each for ``seeds``
    seeds from its own on, made one at a time (``--seeds`` runs are never
    all held at once)."""
    for setting in settings:
        for seed in range(setting.seed, setting.seed + seeds):
            yield setting.replace(seed=seed)


def _summary(result) -> dict[str, Any]:
    """``fl run --json``'s object for a run: its final row, with what each eps
    column is for (``epsilon_level``, ``epsilon_relation``,
    ``epsilon_delta``; ``client_epsilon_level`` ...:
    :func:`.privacy.epsilon_scope`)."""
    from .privacy import epsilon_scope

    final = result.final
    scopes = {}
    for column in ("epsilon", "client_epsilon"):
        if column in final:
            scopes.update(epsilon_scope(result.config, column=column).as_dict(column))
    return {"run": result.config.run_name(), "label": result.config.label,
            "seed": result.config.seed, "directory": str(result.directory),
            "rounds": final["round"], "complete": result.complete,
            **{k: json_value(v) for k, v in final.items() if k != "round"}, **scopes}


#: eps above which ``fl run`` warns that a run gives no meaningful privacy.
EPS_WARNING = 10.0


def privacy_report(config, final: dict[str, Any]) -> list[str]:
    """What ``fl run`` prints about a private run's privacy after it ends.

    First the client-level eps (:func:`.privacy.client_level_epsilon`: one
    client's whole data replaced; valid for any local training loop), then
    the record-level eps (the ``epsilon`` column at the last round: one
    training example replaced) with the loop it holds for, each naming its
    relation, level and threat model; then a warning when an eps exceeds
    :data:`EPS_WARNING`.  Empty for the methods that add no noise (``fl``,
    ``fl-sdq``).

    Outside the paper's setting (client sampling, add-remove, adaptive
    clipping, central DP: :attr:`FLConfig.paper_setting`) the record-level
    analysis does not apply: the client-level eps only (the ``epsilon``
    column, :func:`.privacy.client_epsilon_function`), naming its relation,
    threat model and sampling."""
    from ..accounting.setting import RECORD_LEVEL_LOOP
    from .privacy import GAUSSIAN_METHODS, client_level_epsilon

    if not config.paper_setting:
        return _client_level_report(config, final)
    record = float(final["epsilon"])
    if math.isinf(record) and config.method not in GAUSSIAN_METHODS \
            and "laplace" not in config.method:
        return []
    name = f"{config.run_name()} seed {config.seed}"
    rounds = int(final["round"])
    client = client_level_epsilon(config, rounds=rounds)
    if math.isnan(record) or math.isnan(client):
        return [f"{name}: eps not available (cepam.accounting could not compute it)"]
    gaussian = config.method in GAUSSIAN_METHODS
    noise = f"sigma = {config.sigma:g}" if gaussian else f"b = {config.b:g}"

    def dp(eps: float) -> str:
        return f"({eps:.4g}, {config.delta:g})-DP" if gaussian else f"{eps:.4g}-DP (pure)"

    lines = [
        f"{name}: client level: {dp(client)} after {rounds} rounds (replace-one client: one "
        f"client's whole data replaced; threat model: an honest-but-curious client; any local "
        f"training loop; {noise})",
        f"{name}: record level: {dp(record)} after {rounds} rounds (replace-one record: one "
        f"training example of one client replaced; threat model: an honest-but-curious client; "
        f"tight bound); {RECORD_LEVEL_LOOP} (this run's loop: "
        f"{config.sgd_steps} steps x batch {config.batch_size} = {config.samples_per_round} "
        "samples a round)",
    ]
    hint = ("raise --sigma; `cepam privacy --target-eps` finds one" if gaussian
            else "raise --laplace-b")
    if not record <= EPS_WARNING:
        lines.append(f"warning: eps = {record:.4g} > {EPS_WARNING:g} at record level (and "
                     f"{client:.4g} at client level): this run is not meaningfully private "
                     f"({hint})")
    elif not client <= EPS_WARNING:
        lines.append(f"warning: client-level eps = {client:.4g} > {EPS_WARNING:g}: a client's "
                     f"whole data is not meaningfully protected, only its single records "
                     f"(record-level eps {record:.4g}, for the paper's loop only) ({hint})")
    return lines


def _client_level_report(config, final: dict[str, Any]) -> list[str]:
    """:func:`privacy_report` outside the paper's setting."""
    from .privacy import GAUSSIAN_METHODS, client_privacy_statement

    eps = float(final["epsilon"])
    if math.isinf(eps) and config.central_dp is None and config.method not in GAUSSIAN_METHODS \
            and "laplace" not in config.method:
        return []
    name = f"{config.run_name()} seed {config.seed}"
    if math.isnan(eps):
        return [f"{name}: client-level eps not available for this setting "
                f"({client_privacy_statement(config)})"]
    lines = [f"{name}: client level: ({eps:.4g}, {config.delta:g})-DP after {final['round']} "
             f"rounds ({client_privacy_statement(config)}; any local training loop)"]
    if not eps <= EPS_WARNING:
        lines.append(f"warning: client-level eps = {eps:.4g} > {EPS_WARNING:g}: this run is not "
                     "meaningfully private (raise --sigma; `cepam privacy --target-eps "
                     "--sample-rate` finds one)")
    return lines


def _run(args: argparse.Namespace) -> int:
    import torch

    from .data import load_mnist
    from .experiment import TensorMNIST, run_experiment
    from .methods import make_method

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    settings = _settings(args)
    for c in settings:  # refuse bad settings before any run starts (the seed changes none)
        make_method(c.method, sigma=c.sigma, b=c.b, dim=c.dim, lattice=c.lattice, clip=c.clip,
                    clip_all=c.clip_all, sdq_step=c.sdq_step)
        engine(c.engine).check(c)
    data = TensorMNIST(load_mnist(args.data_dir, download=args.download))
    out = Path(args.out)
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is in the fl extra
        tqdm = None
    total = len(settings) * args.seeds
    for i, config in enumerate(_configs(settings, args.seeds)):
        directory = out / config.run_name() / f"seed{config.seed}"
        desc = f"[{i + 1}/{total}] {config.run_name()} seed {config.seed}"
        bar = None
        if tqdm is not None and not args.no_progress:
            bar = tqdm(total=config.rounds, desc=desc, unit="round", file=sys.stderr,
                       leave=True, dynamic_ncols=True)

        def progress(row: dict[str, Any], bar=bar) -> None:
            if bar is not None:
                bar.set_postfix(val=f"{100 * row['val_acc']:.2f}%",
                                test=f"{100 * row['test_acc']:.2f}%",
                                bits=f"{row['bits_per_client']:.0f}", refresh=False)
                bar.update(row["round"] - bar.n)  # a resumed run starts further on

        try:
            result = run_experiment(config, data, directory, progress=progress,
                                    data_dir=args.data_dir)
            if bar is not None:
                bar.update(max(0, result.final["round"] - bar.n))  # an already finished run
        finally:
            if bar is not None:
                bar.close()
        if args.json:
            print(json.dumps(_summary(result)), flush=True)
        elif args.no_progress or bar is None:
            f = result.final
            print(f"{desc}: round {f['round']}, val {100 * f['val_acc']:.2f}%, "
                  f"test {100 * f['test_acc']:.2f}%, {f['bits_per_client']:.0f} bits/client",
                  flush=True)
        for line in privacy_report(config, result.final):
            print(line, file=sys.stderr, flush=True)
    return 0


def _groups(args: argparse.Namespace) -> list | None:
    """The run groups under ``args.directory``; None (with a message on
    stderr) when there is none."""
    from .results import load_runs, summarize

    groups = summarize(load_runs(args.directory, include_incomplete=args.include_incomplete))
    if not groups:
        what = "runs" if args.include_incomplete else "complete runs"
        print(f"cepam fl {args.fl_command}: error: no {what} under {args.directory}",
              file=sys.stderr)
        return None
    for g in groups:
        for old in g.dropped:
            kept = next(r for r in g.runs if r.config.seed == old.config.seed)
            print(f"cepam fl {args.fl_command}: note: {old.path} and {kept.path} are runs of "
                  f"{g.config.run_name()} seed {old.config.seed}: the newer, {kept.path}, is "
                  "used", file=sys.stderr)
    return groups


def _table(args: argparse.Namespace) -> int:
    from .results import format_table

    groups = _groups(args)
    if groups is None:
        return 1
    if args.json:
        stats = [g.stats(args.at, deltas=args.delta) for g in groups]
        print(json.dumps([{k: json_value(v) for k, v in s.items()} for s in stats], indent=1))
    else:
        print(format_table(groups, at=args.at, markdown=args.markdown, deltas=args.delta),
              end="")
    return 0


def _plot(args: argparse.Namespace) -> int:
    from .plots import plot_convergence, plot_privacy_accuracy

    groups = _groups(args)
    if groups is None:
        return 1
    out = Path(args.out or args.directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in dict.fromkeys(args.format):
        written.append(plot_convergence(groups, out / f"convergence.{fmt}"))
        pa = plot_privacy_accuracy(groups, out / f"privacy_accuracy.{fmt}", deltas=args.delta)
        if pa is not None:
            written.append(pa)
        elif fmt == args.format[0]:
            print(f"cepam fl plot: note: no privacy_accuracy.{fmt}: no Gaussian method was run "
                  "at two or more noise levels with eps of one level, relation and delta",
                  file=sys.stderr)
    for path in written:
        print(path)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Adds the ``fl`` command group to the ``cepam`` command line."""
    fl = sub.add_parser("fl", help="federated-learning experiments on MNIST",
                        description="Federated-learning experiments of the CEPAM paper on MNIST. "
                                    "fl run needs torch (pip install torch==2.13.0) and the fl "
                                    'extra (pip install "cepam[fl]"); fl plot needs matplotlib; '
                                    "fl table needs neither.")
    fl_sub = fl.add_subparsers(dest="fl_command", metavar="COMMAND")
    fl_sub.required = True
    _add_run(fl_sub)

    t = fl_sub.add_parser(
        "table", help="paper-style table: mean and standard deviation over seeds",
        description="Tabulates the runs under DIRECTORY: test accuracy (mean and sample "
                    "standard deviation over distinct seeds, the newest run of a seed used; "
                    "--json also gives the 95% CI of the mean), bits per coordinate and eps "
                    "for each configuration (a row per configuration, seeds aside, named by "
                    "the settings in which the rows differ) and model. eps has one column "
                    "per level (record: one training example; client: one client's whole "
                    "data), neighbouring "
                    "relation and delta, named in its header (--json: epsilon_level, "
                    "epsilon_relation, epsilon_delta). Accuracy "
                    "is in percent in the text and Markdown tables and a fraction in [0, 1] "
                    "in --json, as in the runs' files. Exits 1 when there is no run.")
    t.add_argument("directory", help="folder of results from cepam fl run, searched recursively "
                                     "(per-round CSV files named <run>-seed<k>.csv too)")
    t.add_argument("--at", choices=("final", "best-val"), default="final",
                   help="test accuracy at the last round or at the best validation round")
    t.add_argument("--markdown", action="store_true", help="a Markdown table")
    t.add_argument("--json", action="store_true",
                   help="the statistics of each group as JSON (accuracies as fractions)")
    t.add_argument("--include-incomplete", action="store_true",
                   help="also use runs that have not reached their last round")
    _add_deltas(t, "a sigma column and one eps column per delta (--json: epsilon_at_delta)")
    t.set_defaults(func=_table)
    requires(t, extra="fl")  # nothing to import up front; --delta needs scipy (the accountant)

    p = fl_sub.add_parser("plot", help="convergence and privacy-accuracy figures",
                          description="Writes convergence.FORMAT and, where a Gaussian method "
                                      "was run at two or more noise levels with eps of one "
                                      "level, relation and delta, privacy_accuracy.FORMAT; "
                                      "prints the paths written. A curve or line is one "
                                      "configuration, its seeds averaged, as fl table's "
                                      "rows: runs that differ in any other setting (clip, "
                                      "lattice, sample rate...) are lines of their own, "
                                      "named by the settings in which the lines differ "
                                      "(privacy_accuracy: a line per configuration but its "
                                      "sigma, model and eps level, relation and delta, "
                                      "named on the axis or in the legend). Exits 1 when "
                                      "there is no run.")
    p.add_argument("directory", help="folder of results from cepam fl run, searched recursively "
                                     "(per-round CSV files named <run>-seed<k>.csv too)")
    p.add_argument("--out", default=None, help="folder for the figures (default DIRECTORY)")
    p.add_argument("--format", nargs="+", choices=("png", "pdf", "svg"), default=["png"],
                   metavar="FORMAT", help="one or more of png, pdf, svg")
    p.add_argument("--include-incomplete", action="store_true",
                   help="also use runs that have not reached their last round")
    _add_deltas(p, "the privacy-accuracy figure has one line per configuration and delta")
    p.set_defaults(func=_plot)
    requires(p, "matplotlib", extra="fl")
