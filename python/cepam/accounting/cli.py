"""``cepam privacy``: per-round and total (eps, delta) of CEPAM-Gaussian.

Two levels (``--level``):

* ``client`` (the default without ``--samples-per-round``/``--dataset-size``):
  client-level DP, which holds for any local training loop once each
  client's whole update is clipped (:mod:`cepam.accounting.client_level`);
* ``record``: the record-level bound for the paper's loop (local steps on
  samples drawn with replacement); its report also gives the client-level eps.
  ``--samples-per-round`` is the samples each client draws with replacement
  in a round (optimizer steps times the batch size), not its optimizer
  steps: the old ``--local-steps`` is refused, as it meant either.

Examples::

    cepam privacy --target-eps 8 --delta 1e-5 --clip 1 --clients 10 --rounds 20

    cepam privacy --sigma 0.5 --clip 1 --clients 30 --samples-per-round 15 \\
        --dataset-size 1666 --rounds 80 --delta 1e-5 --bound tight --json
    cepam privacy --target-eps 1 --clip 1 --clients 30 --samples-per-round 15 \\
        --dataset-size 1666 --rounds 80 --delta 1e-5

The JSON holds the inputs, the method (per-round bound, threat model,
composition), sigma (given or calibrated), the per-round eps at ``--delta``
(and the paper-style pair at ``--eps-tilde`` if given) and the total
``(eps, delta)`` after ``--rounds`` rounds. An eps that is not finite (no
finite eps certified at that delta) is written as ``null`` with a note.
scipy is imported only when the command runs.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from typing import Any

from ..cli import requires
from ..errors import InvalidArgumentError, InvalidTypeError, NoiseWarning

__all__ = ["register", "handler", "build_report"]

_HELP = "per-round and total (eps, delta) of CEPAM-Gaussian; or sigma for a target eps"


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``privacy`` sub-command to ``subparsers`` (argparse)."""
    p = subparsers.add_parser("privacy", help=_HELP, description=_HELP + ".",
                              epilog="cepam privacy ledger PATH [--json]: print a privacy "
                                     "ledger (cepam.accounting.Ledger)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--sigma", type=float,
                      help="per-coordinate noise std of each client's decoded update")
    what.add_argument("--target-eps", type=float,
                      help="solve for the smallest sigma giving this total eps")
    p.add_argument("--clip", type=float, required=True, help="l2 clip gamma of the whole update")
    p.add_argument("--clients", type=_clients, required=True,
                   help="clients K averaged per round; with --sample-rate below 1, the "
                        "expected cohort q N (the population is clients / sample-rate)")
    p.add_argument("--sample-rate", type=float, default=1.0,
                   help="client level: the chance q a client is in a round (Poisson sampling; "
                        "default 1: every client every round)")
    p.add_argument("--relation", choices=("replace-one", "add-remove"), default="replace-one",
                   help="client level: neighbouring federations differ by one client's data "
                        "replaced (default) or one client added or removed (DP-FedAvg's "
                        "convention; the server tops the noise up, docs/privacy.md section 12)")
    p.add_argument("--coordinates", type=int, default=None,
                   help="client level: the model's size; a note says when the noise on the "
                        "released average exceeds clip / sqrt(coordinates) per coordinate "
                        "(without it: when it exceeds the clip)")
    p.add_argument("--sampling", choices=("poisson", "fixed"), default="poisson",
                   help="client level: Poisson cohorts (default) or a fixed cohort of "
                        "--clients drawn uniformly (replace-one only)")
    p.add_argument("--samples-per-round", type=int, default=None,
                   help="record level: samples tau each client draws with replacement per "
                        "round, i.e. optimizer steps x batch size (the paper's loop: "
                        "single-sample steps); not the number of optimizer steps")
    # The old name, which meant either samples or optimizer steps: refused with
    # an explanation (build_report), not offered.
    p.add_argument("--local-steps", dest="renamed_local_steps", default=None,
                   help=argparse.SUPPRESS)
    p.add_argument("--dataset-size", type=int, default=None,
                   help="record level: samples |D| per client")
    p.add_argument("--level", choices=("client", "record"), default=None,
                   help="client: one client's whole data, any training loop (default without "
                        "--samples-per-round/--dataset-size); record: one training example, the "
                        "paper's loop (default with them)")
    p.add_argument("--rounds", type=int, default=1, help="rounds R (default 1)")
    p.add_argument("--delta", type=float, required=True, help="target delta (total and per round)")
    p.add_argument("--bound", choices=("tight", "paper"), default=None,
                   help="record level: per-round bound, tight (default) or the paper's "
                        "Theorem")
    p.add_argument("--threat-model", choices=("client", "aggregate", "server"), default="client",
                   help="adversary: an honest-but-curious client that knows its own noise "
                        "(default), a third party seeing only the average (the paper's "
                        "formula), or an untrusted server seeing one client's update")
    p.add_argument("--eps-tilde", type=float, default=None,
                   help="record level: also report the paper-style per-round (eps, delta) "
                        "at this eps_t")
    p.add_argument("--discretization", type=float, default=None,
                   help="record level: PLD grid step in nats, honoured exactly (refused if "
                        "too fine for sigma); default: chosen automatically")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=handler)
    requires(p, "scipy", extra="privacy")
    # The nested command (cepam.cli dispatches it before this parser) in the
    # usage line, under the parser's own.
    from . import ledger_cli

    nested = ledger_cli.build_parser().format_usage().removeprefix("usage: ").strip()
    p.usage = p.format_usage().removeprefix("usage: ").rstrip() + "\n       " + nested
    return p


def _clients(text: str) -> int | float:
    """--clients: a count, or (with sampling) an expected cohort."""
    value = float(text)
    return int(value) if value.is_integer() else value


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


def build_report(args: argparse.Namespace) -> dict[str, Any]:
    """The report dict that :func:`handler` prints (JSON-safe: inf -> None).

    Raises:
        CepamError: invalid arguments or an unreachable target.
    """
    from ..mechanisms import Gaussian
    from .accountant import DEFAULT_DISCRETIZATION, PLDAccountant
    from .analyses import _record_analysis
    from .calibration import calibrate_sigma
    from .client_level import client_epsilon
    from .setting import LOCAL_STEPS_RENAMED, FLSetting
    from . import _validation as _v

    if getattr(args, "renamed_local_steps", None) is not None:
        raise InvalidTypeError(LOCAL_STEPS_RENAMED)
    level = args.level or ("client" if args.samples_per_round is None
                           and args.dataset_size is None else "record")
    if level == "client":
        given = [name for name, value in (("--bound", args.bound), ("--eps-tilde", args.eps_tilde),
                                          ("--discretization", args.discretization))
                 if value is not None]
        if given:
            raise InvalidArgumentError(
                f"{', '.join(given)}: record-level option(s) (--level record, with "
                "--samples-per-round and --dataset-size); the client level's eps is exact "
                "or composed on its own grid")
        return _client_report(args)
    if (args.sample_rate != 1.0 or args.relation != "replace-one" or args.sampling != "poisson"
            or args.coordinates is not None):
        raise InvalidArgumentError("--sample-rate, --relation, --sampling and --coordinates are "
                                   "client-level options (--level client); the record-level "
                                   "bound is for the paper's loop, every client every round")
    args.bound = args.bound or "tight"
    if args.samples_per_round is None or args.dataset_size is None:
        raise InvalidArgumentError("--level record needs --samples-per-round and --dataset-size "
                                   "(the paper's loop); without them use --level client")
    setting = FLSetting(clip=args.clip, clients=args.clients,
                        samples_per_round=args.samples_per_round,
                        dataset_size=args.dataset_size, threat_model=args.threat_model)
    analysis = _record_analysis(args.bound, setting)
    rounds = _v.integer("rounds", args.rounds)
    delta = _v.probability_open("delta", args.delta)
    notes: list[str] = []
    disc = args.discretization
    coarsen = disc is None  # a step the user gives is honoured (or refused), never coarsened
    if args.target_eps is not None:
        target = _v.positive("target_eps", args.target_eps)
        sigma = calibrate_sigma(target_epsilon=target, target_delta=delta, rounds=rounds,
                                setting=setting, bound=args.bound, discretization=disc)
        if disc is None:  # as calibrate_sigma does, so the report matches the target
            disc = min(DEFAULT_DISCRETIZATION, target / 100.0)
    else:
        sigma = _v.positive("sigma", args.sigma)
    acct = PLDAccountant(discretization=disc, coarsen=coarsen)
    acct.compose(analysis.round_event(Gaussian(sigma=sigma), clients=setting.clients), rounds)
    total_eps = acct.get_epsilon(delta)
    round_eps = analysis.gaussian_epsilon(delta, sigma=sigma)
    p = setting.sampling_probability
    if not math.isfinite(total_eps):
        used = -math.expm1(rounds * math.log1p(-p)) if p < 1 else 1.0
        inf_mass = float(acct.privacy_loss_distribution().infinity_mass)
        notes.append(
            f"no finite total eps is certified at delta={delta:g}: the {args.bound} bound "
            f"leaves mass {inf_mass:.4g} on unbounded privacy loss (the noise is too small to "
            f"matter; the chance that a given sample is used at all in {rounds} round(s) is "
            f"{used:.4g})")
    report: dict[str, Any] = {
        "inputs": {
            "sigma": args.sigma, "target_eps": args.target_eps, "clip": setting.clip,
            "clients": setting.clients, "samples_per_round": setting.samples_per_round,
            "dataset_size": setting.dataset_size, "rounds": rounds, "delta": delta,
            "bound": args.bound, "threat_model": setting.threat_model,
            "eps_tilde": args.eps_tilde, "level": "record", "relation": "replace-one",
        },
        "method": {
            "level": "record",
            "relation": "replace one training example of one client (the paper's loop)",
            "per_round_bound": args.bound,
            "per_round_description": analysis.summary,
            "threat_model": setting.threat_model,
            "composition": "pld",
            "composition_description": (
                "privacy loss distribution of the per-round privacy profile, symmetrised for "
                "the replace-one relation, pessimistic connect-the-dots, FFT self-composition"),
            "discretization": acct.discretization(),
            "backend": acct.backend,
        },
        "sampling_probability": p,
        "noise_multiplier": setting.noise_multiplier(sigma),
        "sigma": sigma,
        "calibrated": args.target_eps is not None,
        "per_round": {"epsilon": _num(round_eps), "delta": delta},
        "total": {"epsilon": _num(total_eps), "delta": delta, "rounds": rounds},
        "client_level": {"epsilon": client_epsilon(
            sigma=sigma, clip=setting.clip, rounds=rounds, clients=setting.clients, delta=delta,
            threat_model=setting.threat_model), "delta": delta, "rounds": rounds,
            "level": "client", "relation": "replace-one", "threat_model": setting.threat_model},
        "notes": notes,
    }
    if args.eps_tilde is not None:
        g = analysis.gaussian_round(args.eps_tilde, sigma=sigma)
        report["per_round_at_eps_tilde"] = {"eps_tilde": g.eps_tilde, "epsilon": g.epsilon,
                                            "delta": g.delta}
    return report


def _client_report(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`build_report` for ``--level client``."""
    from ..mechanisms import Gaussian
    from . import _validation as _v
    from .accountant import PLDAccountant
    from .analyses import create_analysis
    from .analytic_gaussian import gaussian_epsilon
    from .client_level import calibrate_client_sigma, client_epsilon, noise_drowns_update

    rounds = _v.integer("rounds", args.rounds)
    delta = _v.probability_open("delta", args.delta)
    options = dict(clip=args.clip, threat_model=args.threat_model,
                   sample_rate=args.sample_rate, relation=args.relation, sampling=args.sampling)
    sampling = dict(clients=args.clients, **options)
    if args.target_eps is not None:
        with warnings.catch_warnings():  # said in the report's notes instead
            warnings.simplefilter("ignore", NoiseWarning)
            sigma = calibrate_client_sigma(target_epsilon=args.target_eps, target_delta=delta,
                                           rounds=rounds, **sampling)
    else:
        sigma = _v.positive("sigma", args.sigma)
    event = create_analysis("client", **options).round_event(Gaussian(sigma=sigma),
                                                             clients=args.clients)
    total = client_epsilon(sigma=sigma, rounds=rounds, delta=delta, **sampling)
    drowns = noise_drowns_update(sigma=sigma, clip=args.clip, clients=args.clients,
                                 coordinates=args.coordinates, sample_rate=args.sample_rate,
                                 relation=args.relation)
    per_round = (gaussian_epsilon(delta, mu=event.mu) if event.is_gaussian else
                 PLDAccountant().compose(event).get_epsilon(delta))
    add_remove = args.relation == "add-remove"
    if add_remove:
        relation = ("add or remove one client (the server tops the noise on the sum up to "
                    f"T = {event.cap} clients' worth and divides by the fixed {args.clients})")
        round_text = ("Gaussian mechanism, noise multiplier z = sigma sqrt(T - c) / clip, "
                      "c = 1 against a curious client, 0 for the aggregate")
    else:
        relation = "replace one client's whole data (any local training loop)"
        round_text = ("Gaussian mechanism, noise multiplier z = sigma sqrt(m) / (2 clip), m "
                      "clients' noise unknown to the adversary")
    if event.sample_rate < 1:
        round_text += (f"; the client in the round with probability {event.sample_rate:g} "
                       f"({args.sampling} sampling from {round(args.clients / event.sample_rate)}"
                       " clients)")
    return {
        "inputs": {"sigma": args.sigma, "target_eps": args.target_eps, "clip": args.clip,
                   "clients": args.clients, "rounds": rounds, "delta": delta,
                   "level": "client", "threat_model": args.threat_model,
                   "sample_rate": event.sample_rate, "relation": args.relation,
                   "sampling": args.sampling},
        "method": {
            "level": "client",
            "relation": relation,
            "per_round_description": round_text,
            "threat_model": args.threat_model,
            "composition": ("exact (Gaussian DP: mu = sqrt(R) / z; Balle-Wang analytic eps)"
                            if event.is_gaussian else
                            "privacy loss distributions (pessimistic, each direction apart "
                            "under add/remove)"),
        },
        "noise_multiplier": event.noise_multiplier,
        "cohort_cap": event.cap,
        "sigma": sigma,
        "calibrated": args.target_eps is not None,
        "per_round": {"epsilon": _num(per_round), "delta": delta},
        "total": {"epsilon": _num(total), "delta": delta, "rounds": rounds},
        "notes": ([] if math.isfinite(total) else [_no_finite_eps(event, delta, rounds)]) + (
            [] if drowns is None else [drowns]),
    }


def _no_finite_eps(event: Any, delta: float, rounds: int) -> str:
    """The client level's note where no finite total eps is certified."""
    why = ("under add/remove, part of delta is the chance that a round's cohort exceeds the "
           f"cap T = {event.cap}, which the noise cannot cover"
           if event.relation == "add-remove" else
           "the noise is too small for this delta")
    return (f"no finite total eps is certified at delta={delta:g} after {rounds} round(s): "
            f"{why}; a larger sigma or delta gives one")


def handler(args: argparse.Namespace) -> int:
    """Run ``cepam privacy``; print the report; return the exit code (0)."""
    report = build_report(args)
    if args.json:
        json.dump(report, sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
        return 0

    def fmt(x: float | None) -> str:
        return "inf" if x is None else f"{x:.6g}"

    inp = report["inputs"]
    out = sys.stdout
    calibrated = " (calibrated)" if report["calibrated"] else ""
    if inp.get("level") == "client":
        cohort = "" if inp["sample_rate"] >= 1 else (
            f"   expected cohort: {inp['clients']:g} of "
            f"{round(inp['clients'] / inp['sample_rate'])} clients")
        out.write(f"level: client (one client's whole data, any training loop)   relation: "
                  f"{inp['relation']}   threat model: {inp['threat_model']}   sample rate: "
                  f"{inp['sample_rate']:g}{cohort}\n")
        out.write(f"sigma = {report['sigma']:.6g}{calibrated}"
                  f"   noise multiplier z = {report['noise_multiplier']:.6g}\n")
    else:
        out.write(f"level: record (one training example, the paper's loop)   relation: "
                  f"{inp['relation']}   bound: {inp['bound']}   threat model: "
                  f"{inp['threat_model']}   "
                  f"composition: PLD (h={report['method']['discretization']:.3g})\n")
        out.write(f"sigma = {report['sigma']:.6g}{calibrated}"
                  f"   p = {report['sampling_probability']:.6g}"
                  f"   noise multiplier z = {report['noise_multiplier']:.6g}\n")
    if "per_round_at_eps_tilde" in report:
        r = report["per_round_at_eps_tilde"]
        out.write(f"per round at eps_t={r['eps_tilde']:g}: eps = {r['epsilon']:.6g}, "
                  f"delta = {r['delta']:.6g}\n")
    out.write(f"per round: eps = {fmt(report['per_round']['epsilon'])} at delta = "
              f"{inp['delta']:g}\n")
    out.write(f"after {inp['rounds']} rounds: eps = {fmt(report['total']['epsilon'])} at delta = "
              f"{inp['delta']:g}\n")
    if "client_level" in report:
        out.write(f"client level (any training loop; relation replace-one, threat model "
                  f"{inp['threat_model']}): eps = "
                  f"{fmt(report['client_level']['epsilon'])} at delta = {inp['delta']:g}\n")
    for n in report["notes"]:
        out.write(f"note: {n}\n")
    return 0
