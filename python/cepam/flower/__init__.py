"""cepam on Flower: a client mod and a server strategy wrapper.

Clients compress and privatise their updates with cepam before they leave
the node; the server authenticates, checks and decodes each payload, then
lets any Flower strategy (FedAvg and its family) aggregate the noisy models::

    from cepam.flower import cepam_mod, CepamStrategy

    app = ClientApp(mods=[cepam_mod])                       # client
    strategy = CepamStrategy(FedAvg(), mechanism=cepam.Gaussian(sigma=1e-3),
                             clip=1.0, setting=setting)     # server
    strategy.start(grid=grid, initial_arrays=arrays, num_rounds=20)

* :func:`cepam_mod` (:mod:`.mod`): encodes the train reply's update.
* :class:`CepamStrategy` (:mod:`.strategy`): per-node configuration, keys,
  decoding and the privacy budget, each concern in its module
  (:mod:`.settings`, :mod:`.configure`, :mod:`.node_keys`, :mod:`.replies`,
  :mod:`.aggregation`, :mod:`.cohort`, :mod:`.accountant`).
* :mod:`.keys`: pre-shared secrets and X25519 key agreement; :mod:`.identity`:
  the nodes' X25519 keys bound to their Flower authentication keys.
* :mod:`.protocol`: what travels between the two (configuration keys, the
  payload Array).
* :mod:`.budget`: the privacy spent per round.

Needs the ``flower`` extra (``pip install "cepam[flower]"``: flwr with its
simulation engine, and cryptography); ``import cepam`` does not import flwr.
"""

from __future__ import annotations

try:
    import flwr  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "cepam.flower needs Flower: pip install \"cepam[flower]\"") from exc

from .mod import cepam_mod
from .strategy import CepamStrategy

__all__ = ["cepam_mod", "CepamStrategy"]
