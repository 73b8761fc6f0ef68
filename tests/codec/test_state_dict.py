"""Real state_dict deltas: a ResNet-style model with BatchNorm, whose
``num_batches_tracked`` buffers are int64 counters, not model updates."""

import numpy as np
import pytest

import cepam

from conftest import SECRET_A

torch = pytest.importorskip("torch")
nn = torch.nn

SIGMA = 1e-3


class BasicBlock(nn.Module):
    """torchvision's ResNet BasicBlock: conv-BN-ReLU-conv-BN plus a projection."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                        nn.BatchNorm2d(cout))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.downsample(x))


def small_resnet() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         BasicBlock(8, 16, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(16, 10))


def local_training(model: nn.Module, steps: int = 3) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1)
    model.train()
    for _ in range(steps):
        x = torch.randn(8, 1, 12, 12, generator=gen)
        y = torch.randint(0, 10, (8,), generator=gen)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def delta_of_training():
    model = small_resnet()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    local_training(model)
    after = model.state_dict()
    return before, {k: after[k] - before[k] for k in after}


def test_batchnorm_delta_round_trips_without_the_counters():
    before, delta = delta_of_training()
    counters = [k for k, v in delta.items() if not v.dtype.is_floating_point]
    assert len(counters) == 4 and all(k.endswith("num_batches_tracked") for k in counters)
    assert all(int(delta[k]) == 3 for k in counters)

    client = cepam.Codec(cepam.Gaussian(sigma=SIGMA), secret=SECRET_A, client=3, clip=10.0)
    # A fixed nonce: the std check below is 4.5 standard errors wide (4,050
    # coordinates), so fresh noise would fail it about once in 150,000 runs.
    payload = client.encode(delta, round=0, nonce=bytes(16))
    server = cepam.Codec(cepam.Gaussian(sigma=SIGMA), secret=SECRET_A, client=3, clip=10.0)
    noisy = server.decode(payload)

    # the counters are left out (never noised): decode returns every float entry
    floats = [k for k in delta if k not in counters]
    assert list(noisy) == floats
    assert {e.name for e in cepam.inspect(payload).structure.entries} == set(floats)
    for k in floats:
        assert noisy[k].shape == delta[k].shape and noisy[k].dtype == delta[k].dtype
    # BatchNorm's running statistics are float buffers that depend on the data:
    # they are coded and noised like the parameters
    assert "1.running_mean" in noisy and "3.bn2.running_var" in noisy
    err = torch.cat([(noisy[k] - delta[k]).reshape(-1).double() for k in floats])
    assert err.numel() > 3000
    assert float(err.std()) == pytest.approx(SIGMA, rel=0.05)

    # the conventional server step: add the update to the global state, in place,
    # then load it strictly (the counters keep the server's values)
    global_model = small_resnet()
    state = global_model.state_dict()
    for k, v in noisy.items():
        state[k] += v
    global_model.load_state_dict(state, strict=True)
    for k in floats:
        assert torch.allclose(global_model.state_dict()[k], before[k] + noisy[k])
    for k in counters:
        assert int(global_model.state_dict()[k]) == 0


def test_non_float_error_refuses_the_counters():
    _, delta = delta_of_training()
    with pytest.raises(cepam.InvalidTypeError, match="num_batches_tracked.*int64.*non_float"):
        cepam.encode(delta, cepam.Gaussian(sigma=SIGMA), secret=SECRET_A, round=0, client=0,
                     non_float="error")
    codec = cepam.Codec(cepam.Gaussian(sigma=SIGMA), secret=SECRET_A, non_float="error")
    with pytest.raises(cepam.InvalidTypeError):
        codec.encode(delta, round=0)
    codec.encode({k: v for k, v in delta.items() if v.dtype.is_floating_point}, round=0)


def test_skipping_counters_does_not_change_the_payload():
    """Leaving integer entries out is the same as never having had them."""
    _, delta = delta_of_training()
    floats = {k: v for k, v in delta.items() if v.dtype.is_floating_point}
    kw = dict(secret=SECRET_A, round=5, client=1, clip=1.0, nonce=bytes(16))
    mech = cepam.Gaussian(sigma=SIGMA)
    assert cepam.encode(delta, mech, **kw) == cepam.encode(floats, mech, **kw)
    with_bools = {**floats, "mask": torch.ones(3, dtype=torch.bool),
                  "steps": np.arange(2, dtype=np.int32), "count": np.int64(7)}
    assert cepam.encode(with_bools, mech, **kw) == cepam.encode(floats, mech, **kw)


def test_local_noise_baseline_takes_the_same_delta():
    _, delta = delta_of_training()
    payload = cepam.encode_noisy_sdq(delta, cepam.Gaussian(sigma=SIGMA), step=SIGMA,
                                     rng=np.random.default_rng(0), secret=SECRET_A, round=0,
                                     client=0, clip=10.0)
    noisy = cepam.decode(payload, secret=SECRET_A)
    assert not any(k.endswith("num_batches_tracked") for k in noisy)
    assert len(noisy) == sum(v.dtype.is_floating_point for v in delta.values())
