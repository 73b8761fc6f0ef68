"""What the inner strategy makes of the noisy models, and so what a round's
epsilon can claim.

cepam's accounting of a round (record-level and client-level alike) is that
of the *mean* of the ``K`` noisy models: the noise on the released model is
``sigma / sqrt(K)`` per coordinate.  FedAvg and the strategies that step from
that mean (FedAvgM's momentum, FedOpt's FedAdam, FedYogi and FedAdagrad:
post-processing of the mean) release exactly that, each noisy model with
weight 1 (:meth:`.aggregation.Aggregation._equal_weights`).

A strategy that does not average releases something else: Krum one client's
noisy model (its noise ``sigma``, not ``sigma / sqrt(K)``), FedMedian,
FedTrimmedAvg, MultiKrum and Bulyan medians or means of a few of them.  Each
is still a function of the individual noisy models alone, so it reveals no
more than all of them do: the round is accounted as one client's decoded
update (the threat model ``"server"``, ``m = 1``), a bound that holds
whatever the strategy does with them, and whose eps is larger.  Under
add/remove there is none (a client's own noisy model tells that it took
part), so such a strategy is refused there.  A strategy whose aggregate
reads what the clients report without noise (QFedAvg weighs each update by
its client's training loss) has no bound at all and is refused.

A strategy is known to average when its ``aggregate_train`` is that of one
of :data:`AVERAGING` (a subclass that keeps it, e.g. one with its own
``configure_train``, averages too); any other is taken as one that does not,
unless the server's operator declares it does (``CepamStrategy(averages=
True)``: an override that logs, then calls FedAvg's, say).
"""

from __future__ import annotations

from flwr.serverapp.strategy import (
    Bulyan, FedAdagrad, FedAdam, FedAvg, FedAvgM, FedMedian, FedProx, FedTrimmedAvg,
    FedXgbBagging, FedXgbCyclic, FedYogi, Krum, MultiKrum, QFedAvg, Strategy,
)

from cepam.errors import InvalidArgumentError

__all__ = ["AVERAGING", "NOT_AVERAGING", "UNNOISED_INPUTS", "NOT_CODED", "averages",
           "check_inner"]

#: Strategies whose aggregate is the mean of the noisy models (weights made
#: equal by cepam), or a server optimizer's step from it.
AVERAGING: tuple[type[Strategy], ...] = (FedAvg, FedAvgM, FedProx, FedAdam, FedYogi, FedAdagrad)
#: Strategies whose aggregate reads client-reported values that no noise
#: covers (QFedAvg: each update weighed by its client's training loss).
UNNOISED_INPUTS: tuple[type[Strategy], ...] = (QFedAvg,)
#: Flower's strategies known not to average (a declaration that one of them
#: averages is refused: it would report the eps of a mean for a median).
NOT_AVERAGING: tuple[type[Strategy], ...] = (FedMedian, FedTrimmedAvg, Krum, MultiKrum, Bulyan,
                                             *UNNOISED_INPUTS)
#: Flower's strategies whose model is no float arrays (XGBoost's trees travel
#: as serialised bytes), which cepam cannot code.
NOT_CODED: tuple[type[Strategy], ...] = (FedXgbBagging, FedXgbCyclic)


def averages(strategy: Strategy) -> bool:
    """Whether ``strategy``'s aggregate is the mean of the noisy models: its
    ``aggregate_train`` is that of one of :data:`AVERAGING`, as a method of
    its class (one set on the instance is not known to average)."""
    method = strategy.aggregate_train
    func = getattr(method, "__func__", None)
    if func is None or getattr(method, "__self__", None) is not strategy:
        return False
    return any(func is cls.aggregate_train for cls in AVERAGING)


def check_inner(strategy: Strategy, *, relation: str, declared: bool | None = None) -> bool:
    """Whether ``strategy`` averages: :func:`averages`, or what the server's
    operator ``declared`` (``CepamStrategy(averages=)``: True for a
    strategy of its own whose aggregate is the mean of the noisy models, or
    a server optimizer's step from it, e.g. FedAvg's ``aggregate_train``
    called from an override that logs); a strategy that does not average is
    accounted as one client's update, and refused where that has no bound.

    Raises:
        InvalidArgumentError: a strategy of :data:`NOT_CODED`, a strategy of
            :data:`UNNOISED_INPUTS` (its
            aggregate reads values no noise covers) unless declared to
            average, one that does not average under
            ``relation="add-remove"``, or a declaration that one of
            :data:`NOT_AVERAGING`, or a subclass of one, averages.
    """
    name = type(strategy).__name__
    if isinstance(strategy, NOT_CODED):
        raise InvalidArgumentError(
            f"{name} exchanges XGBoost models as serialised bytes, not float arrays: cepam "
            "codes (and noises) float arrays only, so it cannot carry them")
    if declared and isinstance(strategy, NOT_AVERAGING):  # (a subclass's override included)
        raise InvalidArgumentError(
            f"averages=True, but {name} is (or derives from) a Flower strategy that does not "
            "average the noisy models: its rounds would be reported with too small an eps")
    does = averages(strategy) if declared is None else declared
    if isinstance(strategy, UNNOISED_INPUTS) and not does:
        raise InvalidArgumentError(
            f"{name} weighs each update by a value its client reports without noise (its "
            "training loss): no privacy bound covers the model it releases; use FedAvg or "
            "another strategy of cepam.flower.inner.AVERAGING")
    if does:
        return True
    if relation == "add-remove":
        raise InvalidArgumentError(
            f"{name} is not known to average the noisy models (its aggregate may be any "
            "function of the individual ones): under relation 'add-remove' that has no "
            "bound, since a client's own noisy model tells that it took part; use relation "
            "'replace-one', an averaging strategy (cepam.flower.inner.AVERAGING), or, for a "
            "strategy of your own that averages them, CepamStrategy(averages=True)")
    return False
