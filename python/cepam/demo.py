"""``cepam demo``: the main job on a built-in synthetic model update.

Builds a realistic update (a dict of layers with per-layer scales and
heavy-tailed values, about the size of a small CNN), clips it to a whole-update
l2 norm, encodes it with CEPAM-Gaussian, decodes it, and reports the bitrate,
the compression ratio against float32, the measured noise against sigma (with
a Kolmogorov-Smirnov test) and the encode/decode throughput.  No data files,
numpy only.

Everything the demo draws comes from its seed: the update, and the secret
and payload nonces (:func:`demo_secret`, :func:`demo_nonce`), so the same
seed gives the same payload and figures at every run (the throughput
aside).  The demo's secret is therefore no secret: it shows the codec, and
a real client draws its secret with ``cepam.new_secret()``.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import time
from typing import Any

import numpy as np

from ._argtypes import nonnegative_int
from .cli import json_text

__all__ = ["synthetic_update", "demo_secret", "demo_nonce", "run_demo", "register"]

#: The neighbouring relation, level, threat model and delta of the eps the
#: demo reports (:func:`_privacy`).
_RELATION = "replace-one"
_THREAT_MODEL = "server"
_DELTA = 1e-5

# (name, shape) of a small convolutional network: about 1.2 million weights.
_LAYERS = (
    ("conv1.weight", (64, 3, 3, 3)), ("conv1.bias", (64,)),
    ("conv2.weight", (128, 64, 3, 3)), ("conv2.bias", (128,)),
    ("conv3.weight", (256, 128, 3, 3)), ("conv3.bias", (256,)),
    ("conv4.weight", (256, 256, 3, 3)), ("conv4.bias", (256,)),
    ("fc1.weight", (256, 1024)), ("fc1.bias", (256,)),
    ("fc2.weight", (10, 256)), ("fc2.bias", (10,)),
)


def synthetic_update(*, seed: int = 0, scale: float = 1.0) -> dict[str, np.ndarray]:
    """A float32 model-update dict shaped like a small CNN's state_dict difference.

    Each layer's values are Student-t (4 degrees of freedom: heavy tails, as
    SGD updates have) with a layer-specific scale, so that layers differ by
    about an order of magnitude.
    """
    rng = np.random.default_rng(seed)
    update = {}
    for name, shape in _LAYERS:
        layer_scale = scale * 1e-3 * math.exp(rng.normal(0.0, 1.0))
        update[name] = (layer_scale * rng.standard_t(4.0, size=shape)).astype(np.float32)
    return update


def _seed_bytes(seed: int) -> bytes:
    """``seed`` (a non-negative int of any size) as bytes, for hashing."""
    return seed.to_bytes(max(1, (seed.bit_length() + 7) // 8), "little")


def demo_secret(seed: int) -> bytes:
    """The demo's 32-byte secret for ``seed``: SHA-256 of a label and the
    seed, so the same seed gives the same payload.  Not a secret: anyone
    who knows the seed has it; for the demo only."""
    return hashlib.sha256(b"cepam.demo/secret\0" + _seed_bytes(seed)).digest()


def demo_nonce(seed: int, round_: int) -> bytes:
    """The demo's 16-byte payload nonce for ``seed`` and round ``round_``:
    the reproducible experiments' nonce (:func:`cepam.fl.seeds.payload_nonce`)
    under the demo's secret, client 0; one per payload."""
    from .fl.seeds import payload_nonce

    return payload_nonce(demo_secret(seed), round_, 0)


def run_demo(*, sigma: float = 1e-3, clip: float = 1.0, dim: int | None = None,
             lattice: str | None = None, seed: int = 0, repeats: int = 3) -> dict[str, Any]:
    """Encodes and decodes the synthetic update ``repeats`` times (rounds 0,
    1, ...); returns the measured figures (as :func:`_print_report` shows
    them; the privacy figure's terms under ``privacy``).

    The update, the secret and the nonces all derive from ``seed``
    (:func:`demo_secret`, :func:`demo_nonce`): the same arguments give the
    same figures, the throughput aside.

    Args:
        sigma: the Gaussian noise's standard deviation per coordinate (> 0).
        clip: the whole-update l2 clip (> 0).
        dim, lattice: as :func:`cepam.encode`.
        seed: seed of everything the demo draws (a non-negative integer).
        repeats: encodes and decodes timed (>= 1; the fastest is reported).

    Raises:
        InvalidArgumentError, InvalidTypeError: a bad argument (from
            :func:`cepam.encode`, or a seed or ``repeats`` out of range).
    """
    import cepam
    from ._checks import check_int
    from ._stats import kolmogorov_smirnov, normal_cdf
    from .threads import resolve_threads

    seed = check_int("seed", seed, minimum=0)
    repeats = check_int("repeats", repeats, minimum=1)
    update = synthetic_update(seed=seed)
    secret = demo_secret(seed)
    mech = cepam.Gaussian(sigma=sigma)
    m = sum(v.size for v in update.values())
    threads = resolve_threads(None)  # the default: CEPAM_THREADS, else every core

    enc_times, dec_times = [], []
    for r in range(repeats):
        t0 = time.perf_counter()
        payload = cepam.encode(update, mech, secret=secret, round=r, client=0, dim=dim,
                               lattice=lattice, clip=clip, threads=threads,
                               nonce=demo_nonce(seed, r))
        t1 = time.perf_counter()
        decoded = cepam.decode(payload, secret=secret, threads=threads)
        t2 = time.perf_counter()
        enc_times.append(t1 - t0)
        dec_times.append(t2 - t1)

    x = np.concatenate([v.astype(np.float64).ravel() for v in update.values()])
    y = np.concatenate([decoded[k].astype(np.float64).ravel() for k in update])
    norm = math.sqrt(float(np.dot(x, x)))
    factor = clip / norm if norm > clip else 1.0
    z = y - x * factor
    # float32 output rounds y by up to half an ulp of |y|: negligible against sigma
    # when sigma >> 2^-24 |y|, which the demo's defaults respect.
    sample = np.sort(np.random.default_rng(seed + 1).choice(z, size=min(200_000, m), replace=False))
    d, p_value = kolmogorov_smirnov(sample, normal_cdf(sample, sigma))
    info = cepam.inspect(payload, secret=secret)
    return {
        "coordinates": m,
        "layers": len(update),
        "sigma": sigma,
        "clip": clip,
        "lattice": info.lattice,
        "dim": info.dim,
        "update_norm_before_clip": norm,
        "payload_bytes": len(payload),
        "bits_per_coordinate": info.bits_per_coordinate,
        "compression_vs_float32": 32.0 / info.bits_per_coordinate,
        "noise_std": float(np.std(z)),
        "noise_std_over_sigma": float(np.std(z)) / sigma,
        "noise_mean": float(np.mean(z)),
        "ks_statistic": d,
        "ks_p_value": p_value,
        "encode_coords_per_s": m / min(enc_times),
        "decode_coords_per_s": m / min(dec_times),
        "threads": threads,
        "privacy": _privacy(sigma, clip),
    }


def _privacy(sigma: float, clip: float) -> dict[str, Any]:
    """What one release of this update guarantees: client level (one
    client's whole update), replace-one neighbours (its data replaced by
    any other: the clipped update moves by at most 2 clip), against the
    "server" threat model (one decoded update seen without its secret), at
    delta = 1e-5.  eps is None without scipy (``cepam[privacy]``)."""
    try:
        from .accounting import client_epsilon

        eps: float | None = client_epsilon(sigma=sigma, clip=clip, rounds=1, clients=1,
                                           delta=_DELTA, threat_model=_THREAT_MODEL,
                                           relation=_RELATION)
    except ImportError:
        eps = None
    return {"level": "client", "relation": _RELATION, "threat_model": _THREAT_MODEL,
            "rounds": 1, "delta": _DELTA, "epsilon": eps}


def _print_report(r: dict[str, Any]) -> None:
    print("cepam demo: CEPAM-Gaussian on a synthetic model update")
    norm, clip = r["update_norm_before_clip"], r["clip"]
    clipping = f"clipped to {clip:g}" if norm > clip else f"within the clip {clip:g}"
    print(f"  update             {r['coordinates']:,} coordinates in {r['layers']} tensors, "
          f"l2 norm {norm:.3g} {clipping}")
    lattice = f"Z^{r['dim']}" if r["lattice"] == "Z" else r["lattice"]
    print(f"  mechanism          Gaussian sigma = {r['sigma']:g}, lattice {lattice}")
    print(f"  payload            {r['payload_bytes']:,} bytes = "
          f"{r['bits_per_coordinate']:.3f} bits per coordinate")
    print(f"  compression        {r['compression_vs_float32']:.1f}x smaller than float32")
    print(f"  noise std          {r['noise_std']:.5g} = {r['noise_std_over_sigma']:.4f} sigma "
          f"(mean {r['noise_mean']:.2g})")
    print(f"  KS test vs N(0, sigma^2)   D = {r['ks_statistic']:.5f}, p = {r['ks_p_value']:.3f} "
          "(uniform on [0, 1] for exactly Gaussian noise)")
    print(f"  throughput         encode {r['encode_coords_per_s'] / 1e6:.1f} M coords/s, "
          f"decode {r['decode_coords_per_s'] / 1e6:.1f} M coords/s "
          f"({r['threads']} thread{'s' if r['threads'] > 1 else ''})")
    privacy = r["privacy"]
    eps = privacy["epsilon"]
    if eps is None:
        print("  privacy            eps not computed (pip install \"cepam[privacy]\")")
    else:
        verdict = ("NO meaningful privacy: this demo shows the codec; pick sigma for a "
                   "target with 'cepam privacy --target-eps'" if eps > 10 else "")
        print(f"  privacy            eps = {eps:.3g} at delta = {privacy['delta']:g} for this one "
              f"update (client level, {privacy['relation']} neighbours, "
              f"{privacy['threat_model']} threat model: the decoded update seen without its "
              f"secret){'; ' + verdict if verdict else ''}")


def _handler(args: argparse.Namespace) -> int:
    result = run_demo(sigma=args.sigma, clip=args.clip, dim=args.dim, lattice=args.lattice,
                      seed=args.seed)
    if args.json:
        print(json_text(result))
    else:
        _print_report(result)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="encode and decode a built-in synthetic model update",
                       description="Encodes a built-in synthetic model update (about 1.2 "
                                   "million float32 weights, clipped) with CEPAM-Gaussian, "
                                   "decodes it, and reports the bits per coordinate, the "
                                   "compression against float32, the measured noise against "
                                   "sigma (KS test) and the throughput. numpy only. "
                                   "Everything it draws derives from --seed: the update, "
                                   "and the secret and nonces, so the same seed gives the "
                                   "same output (timings aside) and the demo's secret is "
                                   "no secret.")
    p.add_argument("--sigma", type=float, default=1e-3, help="Gaussian noise std (default 1e-3)")
    p.add_argument("--clip", type=float, default=1.0, help="whole-update l2 clip (default 1)")
    p.add_argument("--lattice", default=None,
                   help="auto (default without --dim), Z (default with --dim), A2, D4 or E8")
    p.add_argument("--dim", type=int, default=None, help="sub-vector dimension n (Z^n)")
    p.add_argument("--seed", type=nonnegative_int, default=0,
                   help="seed of the synthetic update, the secret and the nonces (the "
                        "secret derives from it: not a secret; default 0)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(func=_handler)
