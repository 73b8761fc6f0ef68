"""Local training of all clients of a round at once, and evaluation.

Every client starts the round from the global weights and runs ``tau``
steps of momentum SGD (PyTorch's rule: ``b <- mu b + g``, ``w <- w - lr b``,
no dampening, no weight decay), each on ``B`` samples (the paper: one)
drawn uniformly with replacement from its own data.

The K client models are trained together: their parameters are stacked
along a leading client axis and one forward/backward pass serves all of
them.  Models with a ``forward_stacked`` method (the paper's MLP and CNN)
use it with plain autograd; any other ``nn.Module`` (parameters only, no
buffers) goes through ``torch.func.vmap(grad(functional_call))``.  The two
paths compute the same numbers up to float rounding.

Momentum buffers start at zero every round (so the first step is a plain
SGD step).  Algorithm 1 of the paper has each client start every round from
the received global model and keep no other state, and its privacy analysis
(sampling with replacement of tau samples per round) assumes the round's
update depends on that round's samples only; a momentum buffer carried over
from earlier rounds would break both.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .seeds import torch_generator

__all__ = ["ClientData", "LocalTrainer", "evaluate"]


class ClientData:
    """The clients' sample indices, padded into one tensor for gathering.

    Args:
        indices: one index array per client, into the training tensors.
    """

    def __init__(self, indices: Sequence[np.ndarray]) -> None:
        self.sizes = [int(len(ix)) for ix in indices]
        if not self.sizes or min(self.sizes) < 1:
            raise ValueError("every client needs at least one sample")
        width = max(self.sizes)
        table = np.zeros((len(indices), width), dtype=np.int64)
        for k, ix in enumerate(indices):
            table[k, :len(ix)] = ix
        self.table = torch.from_numpy(table)

    @property
    def clients(self) -> int:
        return len(self.sizes)

    def sample(self, seed: int, round: int, steps: int, batch: int,
               cohort: Sequence[int] | None = None) -> torch.Tensor:
        """Indices (k, steps, batch) into the training set for the clients
        of ``cohort`` (default: all, in order): client c draws uniformly with
        replacement from its own samples with a generator seeded by
        (seed, round, c) only, whoever else is in the cohort."""
        members = range(self.clients) if cohort is None else [int(c) for c in cohort]
        pos = torch.empty((len(members), steps, batch), dtype=torch.int64)
        for i, k in enumerate(members):
            g = torch_generator(seed, "sample", round, k)
            pos[i] = torch.randint(0, self.sizes[k], (steps, batch), generator=g)
        table = self.table if cohort is None else self.table[torch.as_tensor(list(members),
                                                                            dtype=torch.int64)]
        return torch.gather(table, 1, pos.view(len(members), -1)).view_as(pos)


class LocalTrainer:
    """Runs the local SGD of K clients together.

    Args:
        model: the architecture (its own weights are not used).
        momentum: SGD momentum (the paper: 0.9).
        stacked: use ``model.forward_stacked`` (default: when it exists);
            False forces the generic ``vmap`` path.
    """

    def __init__(self, model: nn.Module, *, momentum: float = 0.9,
                 stacked: bool | None = None) -> None:
        self.model = model
        self.momentum = float(momentum)
        self.names = [n for n, _ in model.named_parameters()]
        if stacked is None:
            stacked = hasattr(model, "forward_stacked")
        self.stacked = bool(stacked)
        if not self.stacked:
            if any(True for _ in model.buffers()):
                raise ValueError("the vmap path supports models without buffers only")
            from torch.func import functional_call, grad_and_value, vmap

            def loss(params, x, y):
                return F.cross_entropy(functional_call(model, params, (x,)), y)

            self._grad_and_loss = vmap(grad_and_value(loss))

    def _gradients(self, params: dict[str, torch.Tensor], x: torch.Tensor,
                   y: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Per-client gradients (stacked) and per-client losses (K,)."""
        if self.stacked:
            k, b = y.shape
            logits = self.model.forward_stacked(params, x)
            losses = F.cross_entropy(logits.reshape(k * b, -1), y.reshape(-1),
                                     reduction="none").view(k, b).mean(1)
            grads = torch.autograd.grad(losses.sum(), [params[n] for n in self.names])
            return list(grads), losses.detach()
        grads, losses = self._grad_and_loss(params, x, y)
        return [grads[n] for n in self.names], losses.detach()

    def train(self, global_params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor,
              lr: float) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """Trains K clients from ``global_params``.

        Args:
            global_params: the global model's parameters (unstacked).
            x: inputs (K, steps, B, 1, 28, 28); y: labels (K, steps, B).
            lr: the learning rate of this round.

        Returns:
            The clients' final parameters (stacked, leading K axis) and each
            client's training loss averaged over its steps (K,).
        """
        k, steps = y.shape[0], y.shape[1]
        params = {n: global_params[n].detach().unsqueeze(0).repeat(k, *[1] * global_params[n].dim())
                  for n in self.names}
        if self.stacked:
            for p in params.values():
                p.requires_grad_(True)
        plist = [params[n] for n in self.names]
        bufs: list[torch.Tensor] | None = None
        loss_sum = torch.zeros(k)
        for t in range(steps):
            grads, losses = self._gradients(params, x[:, t], y[:, t])
            loss_sum += losses
            with torch.no_grad():
                if bufs is None:
                    bufs = [g.detach().clone() for g in grads]
                else:
                    torch._foreach_mul_(bufs, self.momentum)
                    torch._foreach_add_(bufs, [g.detach() for g in grads])
                torch._foreach_add_(plist, bufs, alpha=-lr)
        return {n: p.detach() for n, p in params.items()}, loss_sum / steps


@torch.inference_mode()
def evaluate(model: nn.Module, params: dict[str, torch.Tensor], x: torch.Tensor,
             y: torch.Tensor, *, batch_size: int = 500) -> tuple[float, float]:
    """Mean cross-entropy loss and accuracy of ``model`` with ``params`` on (x, y)."""
    from torch.func import functional_call

    if len(y) == 0:
        return float("nan"), float("nan")
    loss, correct = 0.0, 0
    for i in range(0, len(y), batch_size):
        logits = functional_call(model, params, (x[i:i + batch_size],))
        yb = y[i:i + batch_size]
        loss += float(F.cross_entropy(logits, yb, reduction="sum"))
        correct += int((logits.argmax(1) == yb).sum())
    return loss / len(y), correct / len(y)
