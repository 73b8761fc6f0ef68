"""A Flower Grid that shows a test every exchange of a simulated run."""

from __future__ import annotations

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
