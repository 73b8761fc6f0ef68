"""Splitting MNIST into training, validation and per-client data.

* :func:`train_validation_split` -- the paper's 50,000 / 10,000 split of the
  official training set (a seeded permutation; the test set is the official
  10,000 test images);
* :func:`iid_split` -- K clients with equal, disjoint, uniformly random
  shares (the paper: 30 clients of 1,666 samples; the 20 samples left over by
  50,000 / 30 are not used);
* :func:`dirichlet_split` -- the usual non-IID split: for every class, the
  class's samples are divided among the clients in proportions drawn from
  Dirichlet(alpha, ..., alpha).  Small alpha gives clients few classes each
  (heterogeneous data, the regime of the paper's convergence analysis);
  large alpha approaches the IID split;
* :func:`check_split` -- whether a split's sizes fit, before any data is
  read (:class:`~cepam.fl.config.FLConfig` checks its settings with it).

The split functions take a numpy ``Generator`` and return index arrays into the
array they were given, so a split depends only on the seed.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError

__all__ = ["train_validation_split", "iid_split", "dirichlet_split", "split_clients",
           "check_split", "MIN_CLIENT_SAMPLES"]

#: The fewest samples :func:`dirichlet_split` leaves a client (its default
#: ``min_size``).
MIN_CLIENT_SAMPLES = 10


def train_validation_split(n: int, n_train: int, n_validation: int,
                           rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint random index sets of sizes ``n_train`` and ``n_validation`` from ``range(n)``.

    Raises:
        InvalidArgumentError: the sizes do not fit in ``n``.
    """
    if n_train < 1 or n_validation < 0 or n_train + n_validation > n:
        raise InvalidArgumentError(
            f"cannot take {n_train} training and {n_validation} validation samples from {n}"
        )
    perm = rng.permutation(n)
    return np.sort(perm[:n_train]), np.sort(perm[n_train:n_train + n_validation])


def iid_split(n: int, clients: int, rng: np.random.Generator,
              per_client: int | None = None) -> list[np.ndarray]:
    """``clients`` disjoint uniformly random subsets of ``range(n)``, each of
    ``per_client`` samples (default ``n // clients``).

    Raises:
        InvalidArgumentError: too few samples.
    """
    _check_shares(n, clients, per_client)
    if per_client is None:
        per_client = n // clients
    perm = rng.permutation(n)
    return [np.sort(perm[k * per_client:(k + 1) * per_client]) for k in range(clients)]


def dirichlet_split(labels: np.ndarray, clients: int, alpha: float, rng: np.random.Generator,
                    *, min_size: int = MIN_CLIENT_SAMPLES,
                    max_tries: int = 100) -> list[np.ndarray]:
    """Non-IID split: each class is divided among the clients with
    Dirichlet(alpha) proportions; redrawn until every client has at least
    ``min_size`` samples.

    Raises:
        InvalidArgumentError: bad alpha, or no draw gave every client
            ``min_size`` samples in ``max_tries`` tries.
    """
    if not (alpha > 0 and np.isfinite(alpha)):
        raise InvalidArgumentError(f"alpha must be a positive finite number, got {alpha}")
    labels = np.asarray(labels)
    _check_shares(labels.size, clients, min_size, least=0)
    classes = np.unique(labels)
    for _ in range(max_tries):
        parts: list[list[np.ndarray]] = [[] for _ in range(clients)]
        for c in classes:
            idx = rng.permutation(np.flatnonzero(labels == c))
            props = rng.dirichlet(np.full(clients, float(alpha)))
            cuts = (np.cumsum(props)[:-1] * idx.size).astype(np.int64)
            for k, chunk in enumerate(np.split(idx, cuts)):
                parts[k].append(chunk)
        out = [np.sort(np.concatenate(p)) for p in parts]
        if min(p.size for p in out) >= min_size:
            return out
    raise InvalidArgumentError(
        f"Dirichlet(alpha={alpha}) split left a client with fewer than {min_size} samples "
        f"in {max_tries} draws; use a larger alpha or fewer clients"
    )


def split_clients(labels: np.ndarray, clients: int, rng: np.random.Generator, *,
                  alpha: float | None = None, per_client: int | None = None) -> list[np.ndarray]:
    """IID split when ``alpha`` is None, else the Dirichlet split.

    ``per_client`` (IID only) caps each client's share; the Dirichlet split
    uses all samples.

    Raises:
        InvalidArgumentError: the settings :func:`check_split` refuses, or a
            Dirichlet draw that left a client too few samples.
    """
    check_split(len(labels), clients, alpha=alpha, per_client=per_client)
    if alpha is None:
        return iid_split(len(labels), clients, rng, per_client)
    return dirichlet_split(labels, clients, alpha, rng)


def _check_shares(n: int, clients: int, share: int | None, *, least: int = 1) -> None:
    """Raises InvalidArgumentError unless ``clients`` (at least 1) shares of
    ``share`` samples (None: ``n // clients``), at least ``least``, fit in
    ``n`` samples."""
    if clients < 1:
        raise InvalidArgumentError(f"clients must be at least 1, got {clients}")
    if share is None:
        share = n // clients
    if share < least or share * clients > n:
        raise InvalidArgumentError(
            f"cannot give {clients} clients {share} samples each from {n} samples")


def check_split(n: int, clients: int, *, alpha: float | None = None,
                per_client: int | None = None) -> None:
    """Checks, before any data is read, that :func:`split_clients` can split
    ``n`` training samples over ``clients`` clients: IID (``alpha`` None),
    ``per_client`` samples each (default ``n // clients``, at least one),
    or Dirichlet (``alpha``), which takes all samples and leaves each client
    at least :data:`MIN_CLIENT_SAMPLES`, and no ``per_client``.

    Raises:
        InvalidArgumentError: the shares do not fit in ``n`` samples, or
            ``per_client`` given with ``alpha``.
    """
    if alpha is None:
        _check_shares(n, clients, per_client)
        return
    if per_client is not None:
        raise InvalidArgumentError(
            "samples_per_client applies to the IID split only: a non-IID (alpha) split gives "
            "each client its Dirichlet share of all training samples")
    _check_shares(n, clients, MIN_CLIENT_SAMPLES)
