"""cepam.fl: models, stacked local training, and the transports."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import cepam  # noqa: E402
from cepam.fl.methods import METHODS, clip_update, make_method, method_label  # noqa: E402
from cepam.fl.models import CNN, MLP, build_model, parameter_count  # noqa: E402
from cepam.fl.seeds import client_secret, torch_generator  # noqa: E402
from cepam.fl.training import ClientData, LocalTrainer, evaluate  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_parameter_counts_match_the_paper():
    assert parameter_count(MLP()) == 25818
    assert parameter_count(CNN()) == 6422
    shapes = {n: tuple(p.shape) for n, p in CNN().named_parameters()}
    assert shapes == {"conv1.weight": (6, 1, 5, 5), "conv1.bias": (6,),
                      "conv2.weight": (6, 6, 5, 5), "conv2.bias": (6,),
                      "fc1.weight": (50, 96), "fc1.bias": (50,),
                      "fc2.weight": (10, 50), "fc2.bias": (10,)}
    shapes = {n: tuple(p.shape) for n, p in MLP().named_parameters()}
    assert shapes["fc1.weight"] == (32, 784) and shapes["fc2.weight"] == (16, 32)
    assert shapes["fc3.weight"] == (10, 16)


def test_build_model_depends_on_the_seed_only():
    a, b, c = build_model("cnn", 3), build_model("cnn", 3), build_model("cnn", 4)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.conv1.weight, c.conv1.weight)
    with pytest.raises(cepam.InvalidArgumentError):
        build_model("resnet", 0)


def test_build_model_checks_its_arguments():
    """A str or NaN seed raised int()'s ValueError, an infinite one
    OverflowError, one above 2^64 - 1 torch's ValueError; a list or an
    array as the name TypeError: unhashable type."""
    for seed in ("x", math.nan, math.inf, 1.5, None, np.array([1, 2])):
        with pytest.raises(cepam.InvalidTypeError, match="seed must be an integer"):
            build_model("cnn", seed)
    for seed in (-1, 2**64):
        with pytest.raises(cepam.InvalidArgumentError, match="seed must be"):
            build_model("cnn", seed)
    for name in ([], np.array(["cnn"]), None):
        with pytest.raises(cepam.InvalidTypeError, match="model must be a str"):
            build_model(name, 0)
    a, b = build_model("mlp", np.uint64(2**63)), build_model("mlp", 2**63)
    assert torch.equal(a.fc1.weight, b.fc1.weight)
    build_model("mlp", 2**64 - 1)


def test_cnn_equals_the_textbook_layers():
    m = build_model("cnn", 0)
    x = torch.randn(7, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    F = torch.nn.functional
    h = F.max_pool2d(F.relu(m.conv1(x)), 2)
    h = F.max_pool2d(F.relu(m.conv2(h)), 2)
    ref = m.fc2(F.relu(m.fc1(h.flatten(1))))
    assert torch.equal(m(x), ref)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_forward_stacked_equals_forward(name):
    k, b = 4, 3
    models = [build_model(name, s) for s in range(k)]
    params = {n: torch.stack([dict(m.named_parameters())[n].detach() for m in models])
              for n, _ in models[0].named_parameters()}
    x = torch.randn(k, b, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    out = type(models[0]).forward_stacked(params, x)
    for i, m in enumerate(models):
        torch.testing.assert_close(out[i], m(x[i]), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_local_training_equals_torch_sgd_client_by_client(name):
    """The stacked trainer, the vmap trainer and torch.optim.SGD on one
    module per client give the same local weights."""
    k, steps, b, lr = 3, 4, 2, 0.05
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(k, steps, b, 1, 28, 28, generator=gen)
    y = torch.randint(0, 10, (k, steps, b), generator=gen)
    model = build_model(name, 5)
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    stacked, losses = LocalTrainer(model, momentum=0.9).train(start, x, y, lr)
    vmapped, losses_v = LocalTrainer(model, momentum=0.9, stacked=False).train(start, x, y, lr)
    for i in range(k):
        ref = build_model(name, 5)
        opt = torch.optim.SGD(ref.parameters(), lr=lr, momentum=0.9)
        total = 0.0
        for t in range(steps):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(ref(x[i, t]), y[i, t])
            loss.backward()
            opt.step()
            total += float(loss.detach())
        for n, p in ref.named_parameters():
            torch.testing.assert_close(stacked[n][i], p.detach(), rtol=1e-4, atol=1e-6)
            torch.testing.assert_close(vmapped[n][i], p.detach(), rtol=1e-4, atol=1e-6)
        assert losses[i].item() == pytest.approx(total / steps, rel=1e-5)
        assert losses_v[i].item() == pytest.approx(total / steps, rel=1e-5)
    assert all(torch.equal(start[n], p) for n, p in model.named_parameters())


def test_client_sampling_is_per_client_and_seeded():
    rng = np.random.default_rng(0)
    parts = [np.sort(rng.choice(1000, 50, replace=False)) for _ in range(5)]
    a = ClientData(parts[:3]).sample(seed=7, round=2, steps=15, batch=2)
    b = ClientData(parts).sample(seed=7, round=2, steps=15, batch=2)
    assert a.shape == (3, 15, 2)
    assert torch.equal(a, b[:3])  # independent of how many clients are batched
    for k in range(3):
        assert set(a[k].flatten().tolist()) <= set(parts[k].tolist())
    assert not torch.equal(a, ClientData(parts[:3]).sample(seed=7, round=3, steps=15, batch=2))


def test_evaluate_counts_correct_predictions():
    model = build_model("mlp", 0)
    params = {n: p.detach() for n, p in model.named_parameters()}
    x = torch.randn(50, 1, 28, 28, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        pred = model(x).argmax(1)
    y = pred.clone()
    y[:10] = (y[:10] + 1) % 10
    loss, acc = evaluate(model, params, x, y, batch_size=16)
    assert acc == pytest.approx(0.8) and loss > 0


# -------------------------------------------------------------------------- transports


def _update(scale=0.01, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {n: scale * torch.randn(p.shape, generator=g) for n, p in CNN().named_parameters()}


def _send_receive(method, update, round=1, client=0, seed=0):
    secret = client_secret(seed, client)
    noise = torch_generator(seed, "noise", round, client)
    msg = method.send(update, round=round, client=client, secret=secret, noise=noise)
    return msg, method.receive(msg, client=client, secret=secret)


def _flat(d):
    return torch.cat([v.flatten().double() for v in d.values()])


def test_method_names_and_labels():
    assert len(METHODS) == 8
    assert method_label("cepam-gaussian", 2) == "CEPAM-Gaussian (n=2)"
    assert method_label("fl-gaussian-sdq") == "FL+Gaussian+SDQ"
    from cepam.fl.cli import _METHODS

    assert tuple(_METHODS) == METHODS
    with pytest.raises(cepam.InvalidArgumentError):
        make_method("fl-gauss")
    with pytest.raises(cepam.InvalidArgumentError):
        make_method("fl", dim=2)


@pytest.mark.parametrize("kwargs, error, message", [
    # clip: float()'s TypeError for a str, OverflowError beyond float64
    (dict(clip="x"), cepam.InvalidTypeError, r"^clip must be a number or None"),
    (dict(clip=2**1100), cepam.InvalidArgumentError, r"^clip must be a finite number"),
    (dict(clip=np.array([1.0, 2.0])), cepam.InvalidTypeError, r"^clip must be a number"),
    (dict(clip=math.nan), cepam.InvalidArgumentError, r"^clip must be a positive finite"),
    # arrays where a flag or a name is expected: numpy's ambiguous truth value
    (dict(clip_all=np.array([1.0, 2.0])), cepam.InvalidTypeError, r"^clip_all must be True"),
    (dict(lattice=np.array([1.0, 2.0])), cepam.InvalidTypeError, r"^lattice must be a str"),
    (dict(dim=np.array([1.0, 2.0])), cepam.InvalidTypeError, r"^dim must be an integer"),
    (dict(sigma="x"), cepam.InvalidTypeError, r"^sigma must be a real number"),
    (dict(b=2**1100), cepam.InvalidArgumentError, r"^b must be a finite number"),
    (dict(sdq_step="0.1"), cepam.InvalidTypeError, r"^sdq_step must be a real number"),
])
def test_make_method_checks_its_arguments(kwargs, error, message):
    for method in ("cepam-gaussian", "fl", "fl-sdq"):
        with pytest.raises(error, match=message):
            make_method(method, **kwargs)


def test_make_method_refuses_a_method_that_is_not_a_str():
    with pytest.raises(cepam.InvalidTypeError, match="method must be a str"):
        make_method(np.array(["fl", "fl-sdq"]))
    with pytest.raises(cepam.InvalidArgumentError, match="sdq_step must be a positive"):
        make_method("fl-sdq", sigma=1e308)  # the default step, sqrt(12) sigma, is infinite


def test_fl_is_lossless_and_charged_32_bits():
    u = _update()
    msg, out = _send_receive(make_method("fl"), u)
    assert msg.payload is None and not msg.measured and msg.bits == 32 * 6422
    assert all(torch.equal(out[n], u[n]) for n in u)


def test_clip_update_is_one_norm_over_the_whole_update():
    u = _update(scale=1.0)
    c = clip_update(u, 2.0)
    assert _flat(c).norm().item() == pytest.approx(2.0, rel=1e-6)
    ratio = [(c[n] / u[n]).flatten()[0].item() for n in u]
    assert max(ratio) == pytest.approx(min(ratio), rel=1e-5)  # one factor for all tensors
    assert clip_update(u, 1e9) is u


def test_fl_gaussian_adds_private_gaussian_noise_after_clipping():
    u = _update(scale=1.0)  # norm ~80: clipped to 1
    method = make_method("fl-gaussian", sigma=0.01, clip=1.0)
    msg, out = _send_receive(method, u)
    err = _flat(out) - _flat(clip_update(u, 1.0))
    assert err.std().item() == pytest.approx(0.01, rel=0.05)
    assert abs(err.mean().item()) < 1e-3 and msg.bits == 32 * 6422
    _, again = _send_receive(method, u)  # same (seed, round, client): same noise
    assert torch.equal(_flat(again), _flat(out))
    _, other = _send_receive(method, u, round=2)
    assert not torch.equal(_flat(other), _flat(out))


def test_fl_laplace_noise_has_the_laplace_scale():
    u = _update()
    _, out = _send_receive(make_method("fl-laplace", b=0.01), u)
    err = _flat(out) - _flat(u)
    assert err.abs().mean().item() == pytest.approx(0.01, rel=0.05)  # E|Z| = b
    assert err.std().item() == pytest.approx(0.01 * math.sqrt(2), rel=0.05)


@pytest.mark.parametrize("method,dim", [("cepam-gaussian", 1), ("cepam-gaussian", 2),
                                        ("cepam-gaussian", 3), ("cepam-laplace", 1)])
def test_cepam_sends_real_payloads(method, dim):
    u = _update(scale=1.0)
    m = make_method(method, sigma=0.01, b=0.01, dim=dim, clip=1.0)
    msg, out = _send_receive(m, u, round=4, client=2)
    assert isinstance(msg.payload, bytes) and msg.measured
    assert msg.bits == 8 * len(msg.payload)
    info = cepam.inspect(msg.payload, secret=client_secret(0, 2))
    assert (info.round, info.client, info.message, info.dim) == (4, 2, 0, dim)
    assert info.clip == 1.0 and info.total_bits == msg.bits
    err = _flat(out) - _flat(clip_update(u, 1.0))
    std = 0.01 if method == "cepam-gaussian" else 0.01 * math.sqrt(2)
    assert err.std().item() == pytest.approx(std, rel=0.06)
    assert set(out) == set(u) and all(out[n].shape == u[n].shape for n in u)


def test_cepam_with_lattice_auto_lets_the_codec_choose_for_every_update():
    # The probe's choice (on a zero update) used to be passed on as dim with
    # lattice "auto", which the codec refuses: `cepam fl run --lattice auto`
    # crashed in round 1.
    m = make_method("cepam-gaussian", sigma=0.01, lattice="auto", clip=1.0)
    assert m.dim is None and m.describe()["lattice"] == "auto"
    u = _update(scale=1.0)
    msg, out = _send_receive(m, u, round=4, client=2)
    info = cepam.inspect(msg.payload, secret=client_secret(0, 2))
    assert info.round == 4 and info.clip == 1.0 and info.total_bits == msg.bits
    err = _flat(out) - _flat(clip_update(u, 1.0))
    assert err.std().item() == pytest.approx(0.01, rel=0.06)
    with pytest.raises(cepam.InvalidArgumentError, match="auto"):
        make_method("cepam-gaussian", lattice="auto", dim=2)


def test_cepam_rejects_settings_the_codec_refuses():
    with pytest.raises(cepam.InvalidArgumentError):
        make_method("cepam-laplace", dim=5)
    with pytest.raises(cepam.InvalidArgumentError):
        make_method("cepam-gaussian", lattice="no-such-lattice")


@pytest.mark.parametrize("method", ["fl-sdq", "fl-gaussian-sdq", "fl-laplace-sdq"])
def test_sdq_methods(method):
    u = _update(scale=0.01)
    sigma = b = 0.002
    m = make_method(method, sigma=sigma, b=b, clip=1.0)
    step = math.sqrt(12) * (math.sqrt(2) * b if method == "fl-laplace-sdq" else sigma)
    assert m.step == pytest.approx(step)
    msg, out = _send_receive(m, u)
    assert msg.measured and msg.bits == 8 * len(msg.payload)
    err = _flat(out) - _flat(u)
    noise_var = {"fl-sdq": 0.0, "fl-gaussian-sdq": sigma ** 2,
                 "fl-laplace-sdq": 2 * b ** 2}[method]
    assert err.var().item() == pytest.approx(noise_var + step ** 2 / 12, rel=0.08)
    m2 = make_method(method, sigma=sigma, b=b, sdq_step=0.5 * step)
    assert m2.step == pytest.approx(0.5 * step)


# ----------------------------------------------------------------------- eps column


def test_epsilon_column_plumbing(monkeypatch):
    import sys
    import types

    from cepam.fl import privacy

    args = dict(sigma=0.5, b=0.5, delta=1e-5, clip=1.0, clients=30, samples_per_round=15,
                dataset_size=1666, coordinates=100)
    assert privacy.epsilon_function(method="fl", **args)(3) == math.inf

    calls = []

    class FLSetting:
        def __init__(self, **kw):
            self.kw = kw

    def epsilon_after_rounds(*, sigma, delta, rounds, setting):
        calls.append((sigma, delta, rounds, setting.kw))
        return 0.1 * rounds

    def tight_laplace_round(*, scale, setting, dimension):
        return types.SimpleNamespace(epsilon=scale * dimension)

    fake = types.ModuleType("cepam.accounting")
    fake.FLSetting, fake.epsilon_after_rounds = FLSetting, epsilon_after_rounds
    fake.tight_laplace_round = tight_laplace_round
    monkeypatch.setitem(sys.modules, "cepam.accounting", fake)
    monkeypatch.setattr(privacy, "_CACHE", {})
    eps = privacy.epsilon_function(method="cepam-gaussian", **args)
    assert eps(0) == 0.0 and eps(4) == pytest.approx(0.4) and eps(4) == pytest.approx(0.4)
    assert calls == [(0.5, 1e-5, 4, dict(clip=1.0, clients=30, samples_per_round=15,
                                         dataset_size=1666))]  # computed once
    assert privacy.epsilon_function(method="fl-laplace", **args)(3) == pytest.approx(150.0)

    monkeypatch.setitem(sys.modules, "cepam.accounting", None)  # not installed
    assert math.isnan(privacy.epsilon_function(method="fl-gaussian", **args)(2))


def test_epsilon_column_from_the_real_accountant():
    acc = pytest.importorskip("cepam.accounting")
    from cepam.fl import privacy

    args = dict(sigma=2.0, b=50.0, delta=1e-5, clip=1.0, clients=30, samples_per_round=15,
                dataset_size=1666, coordinates=6422)
    eps = privacy.epsilon_function(method="fl-gaussian-sdq", **args)
    e1, e2 = eps(1), eps(2)
    assert 0 < e1 < e2 < math.inf
    setting = acc.FLSetting(clip=1.0, clients=30, samples_per_round=15, dataset_size=1666)
    assert e2 == acc.epsilon_after_rounds(sigma=2.0, delta=1e-5, rounds=2, setting=setting)
    lap = privacy.epsilon_function(method="cepam-laplace", **args)
    one = acc.tight_laplace_round(scale=50.0, setting=setting, dimension=6422).epsilon
    assert lap(3) == pytest.approx(3 * one) and lap(3) > 0
