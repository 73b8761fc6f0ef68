"""The two networks of the paper's MNIST experiments (docs/design.md, section 9).

* :class:`MLP` -- 784-32-16-10 with ReLU: 25,818 parameters.
* :class:`CNN` -- conv(1->6, 5x5) - maxpool 2 - conv(6->6, 5x5) - maxpool 2 -
  fc(96->50) - fc(50->10), ReLU after each hidden layer: 6,422 parameters.

Both output logits (the paper's "softmax output layer" is folded into the
cross-entropy loss).  The CNN max-pools before the ReLU and pools with two
``torch.maximum`` calls on strided views: the same numbers as
``relu -> max_pool2d(2)`` (both maps are monotone), several times faster on
CPU.

Each model also has :meth:`forward_stacked`, the forward pass of K models at
once: parameters stacked along a leading client axis, one batch of inputs per
client.  It is plain batched tensor algebra (grouped convolutions, batched
matrix products) so that autograd gives every client's gradient in one
backward pass; :mod:`.training` uses it, and the tests check it against
:meth:`forward` model by model.  Weights are initialised with PyTorch's default
initialisation from a generator seeded by the caller, so a model depends on
its seed only.
"""

from __future__ import annotations

import torch
from torch import nn

from .._checks import check_choice, check_int

__all__ = ["MLP", "CNN", "MODELS", "build_model", "parameter_count"]


def _maxpool2(x: torch.Tensor) -> torch.Tensor:
    """2x2 max-pooling with stride 2 over the last two (even) dimensions."""
    x = torch.maximum(x[..., ::2, :], x[..., 1::2, :])
    return torch.maximum(x[..., ::2], x[..., 1::2])


def _linear_stacked(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """x (K, B, in), weight (K, out, in), bias (K, out) -> (K, B, out)."""
    return torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))


class MLP(nn.Module):
    """784-32-16-10 multi-layer perceptron with ReLU (25,818 parameters)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(784, 32)
        self.fc2 = nn.Linear(32, 16)
        self.fc3 = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.flatten(x, start_dim=-3)  # (..., 1, 28, 28) -> (..., 784)
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)

    @staticmethod
    def forward_stacked(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """K models at once: params with a leading K axis, x (K, B, 1, 28, 28) -> (K, B, 10)."""
        h = x.reshape(x.shape[0], x.shape[1], 784)
        h = torch.relu(_linear_stacked(h, params["fc1.weight"], params["fc1.bias"]))
        h = torch.relu(_linear_stacked(h, params["fc2.weight"], params["fc2.bias"]))
        return _linear_stacked(h, params["fc3.weight"], params["fc3.bias"])


class CNN(nn.Module):
    """Two 5x5 convolutions with max-pooling, then two linear layers (6,422 parameters)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, kernel_size=5)   # 28 -> 24, pool -> 12
        self.conv2 = nn.Conv2d(6, 6, kernel_size=5)   # 12 -> 8, pool -> 4
        self.fc1 = nn.Linear(96, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(_maxpool2(self.conv1(x)))
        x = torch.relu(_maxpool2(self.conv2(x)))
        x = torch.flatten(x, start_dim=-3)
        x = torch.relu(self.fc1(x))
        return self.fc2(x)

    @staticmethod
    def forward_stacked(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """K models at once: params with a leading K axis, x (K, B, 1, 28, 28) -> (K, B, 10).

        Client k's images become channel k of a batch of B, and each
        convolution is one grouped convolution with K groups.
        """
        k, b = x.shape[0], x.shape[1]
        h = x.transpose(0, 1).reshape(b, k, 28, 28)
        h = torch.conv2d(h, params["conv1.weight"].reshape(k * 6, 1, 5, 5),
                         params["conv1.bias"].reshape(k * 6), groups=k)
        h = torch.relu(_maxpool2(h))
        h = torch.conv2d(h, params["conv2.weight"].reshape(k * 6, 6, 5, 5),
                         params["conv2.bias"].reshape(k * 6), groups=k)
        h = torch.relu(_maxpool2(h))                       # (B, K * 6, 4, 4)
        h = h.reshape(b, k, 96).transpose(0, 1)            # (K, B, 96)
        h = torch.relu(_linear_stacked(h, params["fc1.weight"], params["fc1.bias"]))
        return _linear_stacked(h, params["fc2.weight"], params["fc2.bias"])


MODELS = {"mlp": MLP, "cnn": CNN}
#: The largest seed :func:`build_model` takes (torch's seeds are 64-bit).
MAX_MODEL_SEED = 2**64 - 1


def build_model(name: str, seed: int) -> nn.Module:
    """A freshly initialised model; the same (name, seed) gives the same weights.

    Args:
        name: "mlp" or "cnn".
        seed: torch's seed, 0 to 2^64 - 1 (:data:`MAX_MODEL_SEED`).

    Raises:
        InvalidTypeError: a ``name`` that is not a str, or a ``seed`` that
            is not an int.
        InvalidArgumentError: unknown model name, or a seed out of range.
    """
    name = check_choice("model", name, tuple(MODELS))
    seed = check_int("seed", seed, minimum=0, maximum=MAX_MODEL_SEED)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return MODELS[name]()


def parameter_count(model: nn.Module) -> int:
    """Number of learnable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
