"""The engines that run a federated-learning experiment, by name: one table.

:data:`ENGINES` maps each name to an :class:`Engine`: a one-line summary (for
``--help``), the module and function that run it and, where the engine runs
only some configurations, the function that checks one.  :mod:`.config`
reads the names (``FLConfig.engine``), :mod:`.cli` the choices and the help,
:func:`.experiment.run_experiment` the runner.  Adding an engine is one row
here and its module.

Runners are loaded by module name on first use, so reading the table needs
neither torch nor Flower, and :mod:`.config` (which every engine imports)
can read it without an import circle.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import InvalidArgumentError

__all__ = ["Engine", "ENGINES", "engine"]


@dataclass(frozen=True)
class Engine:
    """One engine: ``name`` (``FLConfig.engine``), ``summary`` (one line),
    ``module`` (a submodule of cepam.fl) holding the function ``runner`` and,
    if not None, the function ``checker`` that raises InvalidArgumentError for
    a configuration the engine cannot run."""

    name: str
    summary: str
    module: str
    runner: str
    checker: str | None = None

    def _load(self, attribute: str) -> Callable[..., Any]:
        return getattr(importlib.import_module(f".{self.module}", __package__), attribute)

    def run(self, config: Any, data: Any, directory: Any = None, **options: Any) -> Any:
        """Run ``config`` on this engine: the runner's
        ``(config, data, directory, *, progress, stop_after, eval_batch,
        data_dir)`` -> :class:`~.run.RunResult`.  Raises ImportError when the
        engine's extra is not installed."""
        return self._load(self.runner)(config, data, directory, **options)

    def check(self, config: Any) -> None:
        """Raise InvalidArgumentError if this engine cannot run ``config``."""
        if self.checker is not None:
            self._load(self.checker)(config)


ENGINES: dict[str, Engine] = {e.name: e for e in (
    Engine("builtin", "all clients in one process", "builtin_engine", "run_builtin_experiment"),
    Engine("flower", "Flower's simulation engine on Ray: cepam_mod and CepamStrategy; methods "
                     "fl, cepam-gaussian, cepam-laplace; needs cepam[flower]",
           "flower_engine", "run_flower_experiment", checker="check_flower_config"),
)}


def engine(name: str) -> Engine:
    """The engine called ``name``.

    Raises:
        InvalidArgumentError: no engine has that name.
    """
    if name not in ENGINES:
        raise InvalidArgumentError(f"engine must be one of {tuple(ENGINES)}, got {name!r}")
    return ENGINES[name]
