"""What a round sends (a mixin of :class:`.strategy.CepamStrategy`): the
inner strategy's train messages (those of the cohort, when the wrapper
samples), each with its own cepam configuration (:mod:`.protocol`: the
round's mechanism and clip, a fresh message number, the keys), or none when
the round does not fit the privacy budget; and Flower's "Sampled N nodes"
line held back until N, the nodes sent, is known."""

from __future__ import annotations

import logging
import secrets as _secrets

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, RecordDict
from flwr.serverapp import Grid

from cepam.errors import InvalidArgumentError

from .budget import Budget
from .protocol import (CONFIG_RECORD, FLOWER_CLIPPING_KEY, KEYS_AGREED, KEYS_PRESHARED,
                       RoundConfig, flower_clipping_text)
from .replies import Sent

__all__ = ["SAMPLED", "HeldLines", "TrainMessages"]

log = logging.getLogger("flwr.cepam")

SAMPLED = "configure_train: Sampled"  # the start of Flower's sampling log line


class HeldLines(logging.Filter):
    """While active, holds back the records of Flower's logger whose message
    starts with ``prefix``; :meth:`release` logs them (Flower's "Sampled N
    nodes" line with the number of nodes actually sent)."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix, self.held = prefix, []

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith(self.prefix):
            self.held.append(record)
            return False
        return True

    def __enter__(self) -> "HeldLines":
        logging.getLogger("flwr").addFilter(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("flwr").removeFilter(self)

    def release(self, sent: int) -> None:
        for record in self.held:
            if isinstance(record.args, tuple) and len(record.args) == 2:
                record.args = (sent, record.args[1])  # "Sampled %s nodes (out of %s)"
            logging.getLogger("flwr").handle(record)
        self.held = []


class TrainMessages:
    """The round's train messages (see the module)."""

    def _records_of(self, content: RecordDict, cache: dict[int, dict[str, np.ndarray]]
                    ) -> dict[str, dict[str, np.ndarray]]:
        records = {}
        for key, record in content.array_records.items():
            if id(record) not in cache:
                cache[id(record)] = {name: array.numpy() for name, array in record.items()}
            records[key] = cache[id(record)]
        return records

    def _configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                         grid: Grid) -> list[Message]:
        if not self._started:  # called outside start()
            self._begin_run(grid)
        self._round = int(server_round)
        self._arrays = arrays  # the round's model (an empty add/remove round adds noise to it)
        self._sent, self._plan = {}, None
        if self.stopped_by_budget:
            log.warning("cepam: round %d: the privacy budget is spent: no train message is "
                        "sent", server_round)
            return []
        messages = list(self.strategy.configure_train(server_round, arrays, config, grid))
        if self._lookup is None and messages:  # key agreement: the nodes' registered keys
            self._registered = self._registered_keys(grid)
        plan = None
        if self._client_level and messages:
            try:
                messages, plan = self._sample(server_round, messages, grid)
            except InvalidArgumentError as exc:  # (a round its accountant cannot bound)
                log.warning("cepam: round %d: %s: no train message is sent this round",
                            server_round, exc)
                return []
        clip, mechanism = self._round_settings()
        cache: dict[int, dict[str, np.ndarray]] = {}
        sent: dict[int, Sent] = {}
        for msg in messages:
            for record in msg.content.config_records.values():
                if FLOWER_CLIPPING_KEY in record:
                    raise InvalidArgumentError(flower_clipping_text("the inner strategy sends"))
            node = int(msg.metadata.dst_node_id)
            if node in sent:
                raise InvalidArgumentError(f"the inner strategy sent node {node} two train "
                                           "messages in one round")
            records = self._records_of(msg.content, cache)
            config_ = RoundConfig(
                mechanism=mechanism, clip=clip, lattice=self.lattice, dim=self.dim,
                coder=self.coder, round=self._round, message=_secrets.randbits(63),
                keys=KEYS_PRESHARED if self._lookup is not None else KEYS_AGREED,
                server_key=b"" if self._server_pair is None else self._server_pair.public,
                pad=self.pad, count_sigma=self.clip_count_sigma, buffers=self.buffers,
                prefer=self.prefer)
            sent[node] = Sent(config_, records)
            if sent[node].coordinates == 0:
                raise InvalidArgumentError("the model has no float arrays to train")
        if isinstance(self.budget, Budget) and sent:
            self.budget.coordinates = max(s.coordinates for s in sent.values())
        fits = self._plan_fits(server_round, plan) if plan is not None else \
            self._check_budget(server_round, len(messages))
        if not fits:  # before anything is sent
            self.stopped_by_budget = True
            return []
        for msg in messages:
            content = RecordDict(dict(msg.content.items()))  # its own, shallow
            content[CONFIG_RECORD] = ConfigRecord(sent[int(msg.metadata.dst_node_id)]
                                                  .config.to_record())
            msg.content = content  # the message itself: its metadata (ttl, ...) kept
        self._sent, self._plan = sent, plan
        self.last_cohort = sorted(sent)
        return messages
