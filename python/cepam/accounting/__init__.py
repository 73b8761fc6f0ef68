"""Privacy accounting for CEPAM (the paper's Section V; docs/design.md, section 8).

Per round:

* :mod:`.paper` -- the paper's Theorem for CEPAM-Gaussian (sampling with
  replacement over ``tau`` local steps, ``K`` clients, clip ``gamma``, noise
  ``sigma``) and its CEPAM-Laplace condition.
* :mod:`.tight` -- a tighter valid bound from whole-update clipping and
  amplification by the chance ``p`` that a sample is drawn at all.
* :mod:`.analytic_gaussian` -- Balle and Wang's exact Gaussian profile.

Over rounds: :mod:`.pld` and :mod:`.accountant` (privacy loss distributions),
:mod:`.calibration` (sigma for a target, eps for a sigma); :mod:`.client_level`
(client-level DP, the guarantee for any training loop, and its calibration,
under replace-one or add/remove, with client sampling: :mod:`.cohort`,
:mod:`.subsampled_gaussian`); :mod:`.analyses` (one interface to them all:
``create_analysis("tight" | "paper" | "client", ...)``);
:mod:`.ledger` (a durable
record of the privacy spent, across runs and restarts). Threat models and
units: :mod:`.setting`. The argument and the numbers: ``docs/privacy.md``.

>>> from cepam.accounting import FLSetting, PLDAccountant, CepamGaussianRound
>>> s = FLSetting(clip=1, clients=30, samples_per_round=15, dataset_size=1666)
>>> acct = PLDAccountant().compose(CepamGaussianRound(sigma=0.5, setting=s), count=80)
>>> round(acct.get_epsilon(1e-5), 2)
0.31
"""

from __future__ import annotations

from .._lazy import lazy_exports


# Public name -> submodule. Submodules (and scipy) load on first use, so that
# ``cepam --help`` (which imports ``cepam.accounting.cli``) needs only numpy.
_EXPORTS = {
    "FLSetting": "setting",
    "sampling_probability": "setting",
    "RoundGuarantee": "guarantee",
    "gaussian_delta": "analytic_gaussian",
    "gaussian_epsilon": "analytic_gaussian",
    "gaussian_mu": "analytic_gaussian",
    "gaussian_noise_multiplier": "analytic_gaussian",
    "paper_gaussian_delta": "paper",
    "paper_gaussian_epsilon": "paper",
    "paper_gaussian_round": "paper",
    "paper_laplace_round": "paper",
    "tight_gaussian_delta": "tight",
    "tight_gaussian_epsilon": "tight",
    "tight_gaussian_round": "tight",
    "tight_laplace_round": "tight",
    "epsilon_for_delta": "profile",
    "PrivacyLossDistribution": "pld",
    "PrivacyEvent": "events",
    "CepamGaussianRound": "events",
    "CepamLaplaceRound": "events",
    "GaussianEvent": "events",
    "ProfileEvent": "events",
    "PLDAccountant": "accountant",
    "DEFAULT_DISCRETIZATION": "accountant",
    "epsilon_after_rounds": "calibration",
    "delta_after_rounds": "calibration",
    "calibrate_sigma": "calibration",
    "ClientLevelRound": "client_level",
    "client_noise_multiplier": "client_level",
    "client_epsilon": "client_level",
    "calibrate_client_sigma": "client_level",
    "average_noise": "client_level",
    "noise_drowns_update": "client_level",
    "RELATIONS": "cohort",
    "SAMPLINGS": "cohort",
    "population": "cohort",
    "cohort_cap": "cohort",
    "cohort_tail": "cohort",
    "topup_noise_std": "cohort",
    "subsampled_gaussian_delta": "subsampled_gaussian",
    "Analysis": "analyses",
    "RecordLevel": "analyses",
    "PaperBound": "analyses",
    "TightBound": "analyses",
    "ClientLevel": "analyses",
    "ANALYSES": "analyses",
    "create_analysis": "analyses",
    "Ledger": "ledger",
    "LedgerEntry": "ledger",
}

__all__ = list(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
