"""The strategy's privacy accounting (a mixin of
:class:`.strategy.CepamStrategy`): the run's budget (record-level
:class:`.budget.Budget` or client-level :class:`.budget.ClientBudget`, with
its ledger), the check before a round's train messages leave, and the
release of a round before its result is used."""

from __future__ import annotations

import logging
import secrets as _secrets
from typing import Any

from flwr.serverapp import Grid

from cepam.accounting import Ledger
from cepam.accounting.setting import THREAT_MODELS
from cepam.errors import PrivacyBudgetError

from .budget import Budget, ClientBudget
from .cohort import Plan

__all__ = ["Accounting"]

log = logging.getLogger("flwr.cepam")


class Accounting:
    """The privacy budget of the run (see the module)."""

    def _threat_label(self, threat_model: str) -> str:
        """``threat_model``, the run's, as its eps is stated against it: with
        a ledger that holds rounds against a weaker view, that view (the eps
        counts everything the ledger holds and holds against it only)."""
        weakest = None if self.ledger is None else self.ledger.weakest_threat_model()
        if weakest is None or THREAT_MODELS.index(weakest) >= THREAT_MODELS.index(threat_model):
            return threat_model
        return f"{weakest} (the weakest the ledger holds: the eps holds against it only)"

    def _begin_budget(self, grid: Grid) -> None:
        """Opens the ledger (once) and starts the run's budget."""
        if self._ledger_source is not None and self.ledger is None:
            self.ledger = (self._ledger_source if isinstance(self._ledger_source, Ledger) else
                           Ledger(self._ledger_source, name=self._ledger_name, delta=self.delta))
        run_id = f"flower-run-{getattr(getattr(grid, 'run', None), 'run_id', 0)}-" \
                 f"{_secrets.token_hex(8)}"
        if self._client_level:
            self.budget = ClientBudget(
                sigma=self.mechanism.sigma, clip=self.clip, delta=self.delta,
                threat_model=self.threat_model, relation=self.relation, sampling=self.sampling,
                count_sigma=self.clip_count_sigma, cohort_tail=self.cohort_tail,
                ledger=self.ledger, run_id=run_id)
        else:
            self.budget = None if self.setting is None else Budget(
                self.mechanism, self.setting, delta=self.delta, bound=self.bound,
                ledger=self.ledger, run_id=run_id)
        if self.ledger is not None and self.budget is not None:
            # Before any message leaves: a run whose rounds the ledger cannot
            # hold (another relation or level) fails here, not at its first
            # round's release, after the clients trained.
            try:
                probe = (self.budget.event(clients=2, sample_rate=1.0) if self._client_level
                         else self.budget.event(max(self.budget.minimum_clients(),
                                                    self.setting.clients)))
            except ImportError:  # (the accounting needs scipy: said at the first round)
                return
            self.ledger.check(probe)

    def _check_budget(self, server_round: int, k: int) -> bool:
        """Does a round of k updates (the nodes sampled, at most the last
        round's K) fit max_epsilon, against everything the ledger holds?"""
        if self.budget is None or self.max_epsilon is None or k == 0:
            return True
        if self.budget.rounds:
            k = min(k, self.budget.rounds[-1])
        k = max(k, self.budget.minimum_clients())
        eps = self.budget.epsilon(self.budget.rounds + [k])
        if eps > self.max_epsilon:
            log.warning("cepam: round %d: a round of %d updates would bring eps (%s) to %.4g > "
                        "max_epsilon %.4g (%s): no train message is sent, and the run's "
                        "remaining rounds are empty", server_round, k,
                        self.budget.analysis.describe(), eps, self.max_epsilon,
                        "everything the ledger holds" if self.ledger is not None else
                        f"{len(self.budget.rounds)} rounds so far")
            return False
        return True

    def _plan_fits(self, server_round: int, plan: Plan) -> bool:
        """Does the round fit max_epsilon, against everything the ledger holds?"""
        if self.max_epsilon is None:
            return True
        assert isinstance(self.budget, ClientBudget)
        eps = self.budget.epsilon([plan.event])
        if eps > self.max_epsilon:
            log.warning("cepam: round %d: the round would bring the client-level eps to %.4g "
                        "> max_epsilon %.4g (%s): no train message is sent, and the run's "
                        "remaining rounds are empty", server_round, eps, self.max_epsilon,
                        self.budget.label())
            return False
        return True

    def _release(self, round_: Any, server_round: int) -> float | None:
        """Records the round in the budget (and its ledger, if any) before its
        result is used; eps so far, or None when another server spent the
        budget meanwhile (the run's remaining rounds are then empty)."""
        assert self.budget is not None
        try:
            return self.budget.release(round_, round=server_round, max_epsilon=self.max_epsilon)
        except PrivacyBudgetError as exc:
            log.warning("cepam: round %d: not released: %s; the run's remaining rounds are "
                        "empty", server_round, exc)
            self.stopped_by_budget = True
            return None
