"""Who is in a round: client sampling, the cohort's law and the noise cap.

A federation of ``N`` clients; each round the server samples a *cohort*:

* ``"poisson"`` (the field's convention: DP-FedAvg, McMahan et al. 2018;
  TFF; Opacus): each client independently with probability ``q``, from the
  server's own randomness, so the cohort size is ``Binomial(N, q)``;
* ``"fixed"``: ``n`` clients drawn uniformly without replacement (``q = n /
  N``); only for the replace-one relation.

``clients`` is ``n``, the *expected* cohort (``q N``), so the population is
``N = round(n / q)``; ``q = 1`` is every client every round (the paper's
setting, and the default).

cepam's noise comes with each client: ``k`` sampled clients bring noise of
variance ``k sigma^2`` on the sum, so the noise level would tell the cohort's
size, and under add/remove whether one more client took part.  Under
add/remove the server therefore *tops up* the noise on the sum to a fixed
``T`` clients' worth (:func:`cohort_cap`, :func:`topup_noise_std`) and
divides by the fixed ``n`` (DP-FedAvg's fixed-denominator estimator): the
released sum then carries ``N(0, T sigma^2)`` whatever the cohort, exactly
the noise a central server would add, as long as ``k <= T`` (an empty
cohort releases the top-up noise alone).  The cap is the ``1 - 10^-12``
quantile of the cohort of ``N + 1`` clients; a larger cohort
(:func:`cohort_tail`) is paid for in delta (``docs/privacy.md``, "Client
sampling").

>>> cohort_cap(clients=100, sample_rate=0.1)
173
>>> cohort_cap(clients=10)          # everyone, every round: N + 1
11
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from .._checks import check_choice
from ..errors import InvalidArgumentError
from . import _validation as _v
from .setting import THREAT_MODELS, hidden_clients

__all__ = ["Relation", "RELATIONS", "MAX_POPULATION", "Sampling", "SAMPLINGS", "COHORT_TAIL",
           "COHORT_TAIL_RANGE", "check_cohort_tail",
           "population", "cohort_cap", "cohort_tail", "topup_noise_std", "hidden_cohort_law",
           "check_sampling"]

Relation = Literal["replace-one", "add-remove"]
#: The neighbouring relations between federations: one client's whole data
#: replaced by other data, or one client added or removed.
RELATIONS: tuple[str, ...] = ("replace-one", "add-remove")
#: The largest federation :func:`population` takes (clients / sample_rate).
MAX_POPULATION = 1e12
Sampling = Literal["poisson", "fixed"]
SAMPLINGS: tuple[str, ...] = ("poisson", "fixed")
#: The chance per round, at most, that a Poisson cohort exceeds the cap: the
#: default of ``cohort_tail=`` (:func:`cohort_cap`).  Each round pays it in
#: delta, times ``1 + e^eps``: at large eps, many rounds or a small delta a
#: smaller one is worth its larger cap (the noise on the released sum is the
#: same; each client's sigma is smaller by sqrt(T / T')).
COHORT_TAIL = 1e-12
#: The range of ``cohort_tail=``.
COHORT_TAIL_RANGE = (1e-300, 1e-6)


def check_cohort_tail(tail: object) -> float:
    """``tail`` (a cap's chance per round of a cohort above it) as a float in
    :data:`COHORT_TAIL_RANGE`.

    Raises:
        InvalidTypeError: not a real number.
        InvalidArgumentError: outside the range.
    """
    tail = _v.real("cohort_tail", tail)
    low, high = COHORT_TAIL_RANGE
    if not low <= tail <= high:
        raise InvalidArgumentError(f"cohort_tail must be in [{low:g}, {high:g}], got {tail!r}")
    return tail


def check_sampling(*, clients: object, sample_rate: object, relation: object,
                   sampling: object, threat_model: object) -> tuple[float, float]:
    """Validates a sampling setting; returns ``(clients, sample_rate)`` as floats.

    Raises:
        InvalidArgumentError: out of range, unknown names, a combination
            without a bound (add/remove with the ``"server"`` threat model or
            a fixed cohort), or a non-integral ``clients`` where it must count.
        InvalidTypeError: values of the wrong type.
    """
    q = _v.positive("sample_rate", sample_rate)
    if q > 1.0:
        raise InvalidArgumentError(f"sample_rate must be in (0, 1], got {q!r}")
    relation = check_choice("relation", relation, RELATIONS)
    sampling = check_choice("sampling", sampling, SAMPLINGS)
    threat_model = check_choice("threat_model", threat_model, THREAT_MODELS)
    if q == 1.0 or sampling == "fixed":
        n = float(_v.integer("clients", clients))
    else:
        n = _v.positive("clients", clients)
    if relation == "add-remove" and threat_model == "server":
        raise InvalidArgumentError(
            "relation='add-remove' has no bound against threat_model='server': whoever sees "
            "one client's decoded update sees that the client took part (its presence is "
            "the difference); use relation='replace-one' for that view")
    if relation == "add-remove" and sampling == "fixed":
        raise InvalidArgumentError(
            "sampling='fixed' is accounted under relation='replace-one' only (adding a client "
            "to a fixed-size cohort displaces another: a replacement)")
    population(clients=n, sample_rate=q)
    return n, q


def population(*, clients: float, sample_rate: float = 1.0) -> int:
    """``N = round(clients / sample_rate)``, the federation's size.

    Args:
        clients: the expected clients a round, ``n = q N`` (> 0).
        sample_rate: ``q`` in (0, 1], each client's chance of taking part in a round.

    Returns:
        ``N``, the number of clients in the federation (>= 1).

    Raises:
        InvalidArgumentError: N < 1 or above :data:`MAX_POPULATION`, or
            ``clients`` not within 1e-6 of ``q N`` (``clients`` is the
            expected cohort of a population of whole clients).
    """
    n = _v.positive("clients", clients)
    q = _v.positive("sample_rate", sample_rate)
    if not n / q <= MAX_POPULATION:
        raise InvalidArgumentError(
            f"clients / sample_rate = {n / q:g} clients: a population of at most "
            f"{MAX_POPULATION:g} is supported")
    size = round(n / q)
    if size < 1 or abs(size * q - n) > 1e-6 * max(n, 1.0):
        raise InvalidArgumentError(
            f"clients={n:g} at sample_rate={q:g} is not the expected cohort of a whole "
            f"population (clients / sample_rate = {n / q:g}); pass clients = sample_rate x "
            "population")
    return size


def cohort_cap(*, clients: float, sample_rate: float = 1.0,
               tail: float = COHORT_TAIL) -> int:
    """``T``: the clients' worth of noise the server tops the sum's noise up to
    under add/remove, the smallest ``T >= clients`` with ``P(Binomial(N + 1,
    q) > T) <= tail`` (``N + 1`` with ``q = 1``).

    Args:
        clients: expected clients a round (``n = q N``), > 0.
        sample_rate: ``q`` in (0, 1].
        tail: the chance per round allowed of a cohort above ``T``
            (:data:`COHORT_TAIL`; :func:`check_cohort_tail`).

    Returns:
        ``T`` (an integer >= ``clients``); ``N + 1`` when ``q = 1``.

    Raises:
        InvalidArgumentError, InvalidTypeError: as :func:`population` and
            :func:`check_cohort_tail`.
    """
    from scipy import stats

    size = population(clients=clients, sample_rate=sample_rate)
    tail = check_cohort_tail(tail)
    q = float(sample_rate)
    if q >= 1.0:
        return size + 1
    # The smallest cap with sf(cap) <= tail, by bisection on sf (scipy's
    # isf gives up below about 1e-17 and returns the whole population).
    low, high = -1, size + 1  # sf(low) > tail >= sf(high) = 0
    while high - low > 1:
        mid = (low + high) // 2
        if stats.binom.sf(mid, size + 1, q) > tail:
            low = mid
        else:
            high = mid
    return max(high, math.ceil(clients))


def cohort_tail(*, clients: float, sample_rate: float, cap: int) -> float:
    """``beta``: the chance, in the larger of two add/remove neighbours, that a
    round's cohort exceeds ``cap`` (its noise is then more than ``cap``
    clients' worth); see ``docs/privacy.md``.  An empty cohort costs nothing
    extra: the server then releases the top-up noise alone.

    Args:
        clients: expected clients a round (``n = q N``), > 0.
        sample_rate: ``q`` in (0, 1].
        cap: ``T`` >= 1, as :func:`cohort_cap` gives it.

    Returns:
        ``beta`` in [0, 1], a probability per round.

    Raises:
        InvalidArgumentError, InvalidTypeError: as :func:`population`, or cap < 1.
    """
    from scipy import stats

    size = population(clients=clients, sample_rate=sample_rate)
    cap = _v.integer("cap", cap)
    return min(1.0, float(stats.binom.sf(cap, size + 1, float(sample_rate))))


def topup_noise_std(*, sigma: float, cohort: int, cap: int) -> float:
    """Std of the noise the server adds to the sum of ``cohort`` decoded updates
    (per coordinate, in the update's units) so that it carries ``cap`` clients'
    worth: ``sigma sqrt(max(cap - cohort, 0))``.

    Args:
        sigma: per-coordinate noise std of each client's decoded update (> 0).
        cohort: the clients whose updates were decoded this round (>= 0).
        cap: ``T`` >= 1, the clients' worth the noise must carry (:func:`cohort_cap`).

    Returns:
        The std (>= 0; 0 when ``cohort >= cap``), in the update's units.

    Raises:
        InvalidArgumentError, InvalidTypeError: sigma <= 0, cohort < 0 or cap < 1.
    """
    sigma = _v.positive("sigma", sigma)
    cohort = _v.integer("cohort", cohort, minimum=0)
    cap = _v.integer("cap", cap)
    return sigma * math.sqrt(max(cap - cohort, 0))


def hidden_cohort_law(*, clients: float, sample_rate: float, sampling: str,
                      threat_model: str) -> tuple[np.ndarray, np.ndarray]:
    """Law of ``m``, the clients whose noise the adversary does not know in a
    round that includes the target client, under replace-one without top-up:
    ``(values, probabilities)``.

    The other sampled clients are ``j ~ Binomial(N - 1, q)`` (Poisson) or
    ``n - 1`` (fixed); ``m = j + 1`` (``"aggregate"``), ``max(j, 1)``
    (``"client"``: the curious client knows its own noise when it is in the
    cohort) or 1 (``"server"``).  With ``q = 1``, ``m`` is
    :func:`~.setting.hidden_clients`'s.  ``m`` is rounded down to the grid
    ``floor(1.005^k)`` (every integer up to about 200), masses below 1e-20
    and the far lower tail go to ``j = 0`` and the far upper tail to the
    largest ``j`` kept: fewer clients than the truth, the safe side.
    """
    from scipy import stats

    size = population(clients=clients, sample_rate=sample_rate)
    q = float(sample_rate)
    if q >= 1.0 or sampling == "fixed":
        k = round(clients)
        m = 1 if threat_model == "server" else hidden_clients(k, threat_model) if q >= 1.0 \
            else {"aggregate": k, "client": max(k - 1, 1)}[threat_model]
        return np.array([m]), np.array([1.0])
    if threat_model == "server":
        return np.array([1]), np.array([1.0])
    others = size - 1
    mean, sd = others * q, math.sqrt(others * q * (1 - q))
    lo = max(0, int(mean - 40 * sd - 1))
    hi = min(others, int(mean + 40 * sd + 1))
    j = np.concatenate(([0], np.arange(max(lo, 1), hi + 1)))
    p = stats.binom.pmf(j, others, q)
    p[-1] += stats.binom.sf(hi, others, q)  # more clients: less privacy loss, folded down
    keep = p > 1e-20
    keep[0] = True  # j = 0 (the fewest clients) takes every mass dropped
    j, p = j[keep], p[keep]
    p[0] += max(0.0, 1.0 - p.sum())
    m = j + 1 if threat_model == "aggregate" else np.maximum(j, 1)
    # m rounded down to the grid floor(1.005^k) (fewer clients: safe), so that
    # large cohorts mix a few dozen Gaussians rather than thousands; below
    # about 200 the grid holds every integer, and m stays as it is (the floor
    # of the grid point under m, as before, took every such m to m - 1)
    k = np.floor(np.log(m) / math.log(1.005))
    up, down = (np.floor(np.exp(e * math.log(1.005)) + 1e-9) for e in (k + 1, k))
    grid = np.where(up <= m, up, down)
    m, index = np.unique(np.maximum(grid.astype(np.int64), 1), return_inverse=True)
    return m, np.bincount(index, weights=p)
