"""Simulated Flower runs in tests: a Grid that shows a test every exchange,
and run_simulation with the settings these 2-core machines need."""

from __future__ import annotations

import logging
from typing import Any, Callable


class ObservedGrid:
    """The run's Grid; ``observe(messages, replies)`` sees every
    ``send_and_receive`` (both as lists), before the strategy does."""

    def __init__(self, grid: Any, observe: Callable[[list, list], None]) -> None:
        self._grid, self._observe = grid, observe

    def __getattr__(self, name: str) -> Any:
        return getattr(self._grid, name)

    def send_and_receive(self, messages, *, timeout=None):
        messages = list(messages)
        replies = list(self._grid.send_and_receive(messages, timeout=timeout))
        self._observe(messages, replies)
        return replies


def simulate(server: Any, client: Any, nodes: int) -> None:
    """``flwr.simulation.run_simulation`` on Ray, one CPU a node and two in
    all, quiet."""
    from flwr.simulation import run_simulation

    run_simulation(server_app=server, client_app=client, num_supernodes=nodes,
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                   "init_args": {"num_cpus": 2, "logging_level": logging.ERROR,
                                                 "log_to_driver": False}})
