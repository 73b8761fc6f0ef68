"""cepam.apply_update: a decoded update added into a model in place, a tied
tensor once, running variances clamped; and what users wrote by hand before
it, which these tests show going wrong."""

from __future__ import annotations

import numpy as np
import pytest

import cepam
from cepam.update import RUNNING_VAR_FLOOR

torch = pytest.importorskip("torch")

SECRET = bytes(range(32))


class TiedLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(20, 4)
        self.norm = torch.nn.BatchNorm1d(4)
        self.decoder = torch.nn.Linear(4, 20, bias=False)
        self.decoder.weight = self.embedding.weight


def _bn_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 256), torch.nn.BatchNorm1d(256),
                               torch.nn.ReLU(), torch.nn.Linear(256, 3))


def _noisy_round(model, sigma, clients=10):
    """Each client's decoded update after a step of local training, at noise scale sigma."""
    updates = []
    for c in range(clients):
        local = _bn_model()
        local.load_state_dict(model.state_dict())
        before = {k: v.clone() for k, v in local.state_dict().items()}
        opt = torch.optim.Adam(local.parameters(), lr=1e-2)
        x = torch.rand(32, 8, generator=torch.Generator().manual_seed(c))  # inputs in [0, 1]
        opt.zero_grad()
        local(x).square().mean().backward()
        opt.step()
        delta = {k: v - before[k] for k, v in local.state_dict().items()}
        codec = cepam.Codec(cepam.Gaussian(sigma=sigma), secret=SECRET, client=c, clip=1.0)
        payload = codec.encode(delta, round=0, nonce=bytes(16))  # (fixed: the same noise)
        updates.append(codec.decode(payload, round=0))
    return updates


def test_a_privacy_level_sigma_keeps_batchnorm_finite():
    # sigma 1.79: README's sigma for 10 clients, 20 rounds, eps 8.  Added by
    # hand, the mean update leaves running variances negative and the model
    # evaluates to NaN; apply_update clamps them.
    model = _bn_model()
    updates = _noisy_round(model, 1.79)
    mean = {k: sum(u[k] for u in updates) / len(updates) for k in updates[0]}
    by_hand = _bn_model()
    state = {k: v.clone() for k, v in by_hand.state_dict().items()}
    for k, v in mean.items():
        state[k] += v
    by_hand.load_state_dict(state)
    x = torch.rand(16, 8, generator=torch.Generator().manual_seed(99))
    assert (by_hand[1].running_var < 0).any()
    assert torch.isnan(by_hand.eval()(x)).any()

    counter = model[1].num_batches_tracked.clone()
    cepam.apply_update(model, mean)
    var = model[1].running_var
    assert (var >= RUNNING_VAR_FLOOR).all()
    unclamped = state["1.running_var"] >= RUNNING_VAR_FLOOR
    assert torch.equal(var[unclamped], state["1.running_var"][unclamped])
    assert torch.equal(model[0].weight, state["0.weight"])
    assert torch.equal(model[1].num_batches_tracked, counter)  # not in the update
    assert torch.isfinite(model.eval()(x)).all()


def test_the_floor_can_be_turned_off_or_moved():
    update = {"1.running_var": torch.full((256,), -2.0)}
    model = _bn_model()  # (running variances of 1)
    cepam.apply_update(model, update, running_var_floor=None)
    assert torch.equal(model[1].running_var, torch.full((256,), -1.0))
    model = _bn_model()
    cepam.apply_update(model, update, running_var_floor=0.5)
    assert torch.equal(model[1].running_var, torch.full((256,), 0.5))


def test_a_small_variance_the_model_has_is_kept():
    """A BatchNorm on inputs of scale 1e-3 has running variances near 1e-6,
    below the floor: a zero update leaves them, and one that would lower
    them keeps them where they were (the floor set them to 1e-3 before,
    and the model's output moved)."""
    model = _bn_model()
    with torch.no_grad():
        model[1].running_var.fill_(1e-6)
    cepam.apply_update(model, {"1.running_var": torch.zeros(256)})
    assert torch.equal(model[1].running_var, torch.full((256,), 1e-6))
    cepam.apply_update(model, {"1.running_var": torch.full((256,), -1.0)})
    assert torch.equal(model[1].running_var, torch.full((256,), 1e-6))
    cepam.apply_update(model, {"1.running_var": torch.full((256,), 0.5)})
    assert torch.allclose(model[1].running_var, torch.full((256,), 0.5 + 1e-6))


def test_a_refused_update_writes_nothing():
    """Every new value is computed before any is written: an entry that
    cannot be added (a big-endian array into a float16 tensor that
    overflows, a scale that overflows) refuses the whole update."""
    target = {"a": torch.zeros(3), "b": torch.full((2,), 60000.0, dtype=torch.float16)}
    update = {"a": np.ones(3, ">f4"), "b": np.full(2, 60000.0, np.float32)}
    with pytest.raises(cepam.InvalidArgumentError, match="overflows"):
        cepam.apply_update(target, update)
    assert torch.equal(target["a"], torch.zeros(3))
    with pytest.raises(cepam.InvalidArgumentError, match="overflows"):
        cepam.apply_update(target, {"a": np.ones(3)}, scale=1e300)
    assert torch.equal(target["a"], torch.zeros(3))
    cepam.apply_update(target, {"a": np.ones(3, ">f4")[::-1]})  # (strides, byte order)
    assert torch.equal(target["a"], torch.ones(3))
    bf16 = {"w": np.zeros(2, np.float32)}
    cepam.apply_update(bf16, {"w": torch.full((2,), 0.5, dtype=torch.bfloat16)})
    assert np.array_equal(bf16["w"], np.full(2, 0.5, np.float32))


def _tied_payload(model):
    delta = {k: torch.full_like(v, 1e-2) if v.is_floating_point() else v
             for k, v in model.state_dict().items()}
    return cepam.encode(delta, cepam.Gaussian(sigma=1e-3), secret=SECRET, round=0, client=1,
                        clip=10.0, ties=model)


def test_a_tie_named_once_by_the_update_moves_once():
    model = TiedLM()
    noisy = cepam.decode(_tied_payload(model), secret=SECRET)  # no like=: one name
    assert "decoder.weight" not in noisy
    before = model.embedding.weight.detach().clone()
    # By hand (clone, add, load): the stale clone of decoder.weight, loaded
    # after embedding.weight, writes the old matrix back.
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for k, v in noisy.items():
        state[k] += v
    model.load_state_dict(state)
    assert torch.equal(model.embedding.weight, before)

    cepam.apply_update(model, noisy)
    assert torch.equal(model.embedding.weight, before + noisy["embedding.weight"])
    assert model.decoder.weight is model.embedding.weight


def test_a_tie_named_twice_by_the_update_moves_once():
    model = TiedLM()
    noisy = cepam.decode(_tied_payload(model), secret=SECRET, like=model)
    assert noisy["decoder.weight"] is noisy["embedding.weight"]
    before = model.embedding.weight.detach().clone()
    cepam.apply_update(model, noisy)
    assert torch.equal(model.embedding.weight, before + noisy["embedding.weight"])
    # A mean of such updates holds two equal tensors: still once.
    mean = {k: v / 2 for k, v in noisy.items()}
    cepam.apply_update(model, mean, scale=2.0)
    assert torch.allclose(model.embedding.weight, before + 2 * noisy["embedding.weight"])


def test_two_values_for_one_tied_tensor_are_refused_before_anything_changes():
    model = TiedLM()
    snapshot = {k: v.clone() for k, v in model.state_dict().items()}
    update = {"norm.weight": torch.ones(4), "embedding.weight": torch.ones(20, 4),
              "decoder.weight": torch.zeros(20, 4)}
    with pytest.raises(cepam.InvalidArgumentError, match="one tied tensor"):
        cepam.apply_update(model, update)
    for k, v in model.state_dict().items():
        assert torch.equal(v, snapshot[k]), k


@pytest.mark.parametrize("make", [
    lambda b: {"flat": b, "square": b.view(2, 2)},  # two shapes of one buffer
    lambda b: {"head": b[:3], "tail": b[1:]},  # overlapping slices
    lambda b: {"all": b, "t": b.view(2, 2).t()},  # a transposed view
    lambda b: {"torch": b, "numpy": b.numpy().reshape(2, 2)},  # torch and numpy, one memory
    lambda b: {"a": b.numpy(), "r": b.numpy()[::-1]},  # a reversed numpy view
])
def test_entries_that_share_memory_in_different_shapes_are_refused(make):
    """Two names over overlapping bytes that are not one tied tensor: an
    update would add into the shared bytes twice (it did). Refused, before
    anything is written."""
    buffer = torch.zeros(4)
    target = make(buffer)
    update = {name: np.ones(np.shape(value), np.float32) for name, value in target.items()}
    with pytest.raises(cepam.InvalidArgumentError, match="share memory as views of different "
                                                         "shapes"):
        cepam.apply_update(target, update)
    assert torch.equal(buffer, torch.zeros(4))
    name = next(iter(target))  # one of them alone is an update, added once
    cepam.apply_update(target, {name: update[name]})
    assert np.array_equal(np.asarray(target[name]), update[name])
    assert float(buffer.sum()) == update[name].size


def test_disjoint_views_of_one_buffer_each_move_once():
    """A flat buffer cut into parameters (as flat-parameter wrappers do)."""
    flat = torch.zeros(10)
    target = {"w": flat[:6].view(2, 3), "b": flat[6:]}
    cepam.apply_update(target, {"w": torch.ones(2, 3), "b": torch.full((4,), 2.0)})
    assert torch.equal(flat, torch.tensor([1.0] * 6 + [2.0] * 4))


def test_interleaved_views_share_no_byte_and_each_move_once():
    """Their spans overlap, their bytes do not (torch and numpy)."""
    flat = torch.zeros(8)
    cepam.apply_update({"even": flat[0::2], "odd": flat[1::2]},
                       {"even": torch.ones(4), "odd": torch.full((4,), 2.0)})
    assert torch.equal(flat, torch.tensor([1.0, 2.0] * 4))
    arr = np.zeros((4, 2))
    cepam.apply_update({"left": arr[:, 0], "right": arr[:, 1]},
                       {"left": np.ones(4), "right": np.full(4, 3.0)})
    assert np.array_equal(arr, np.tile([1.0, 3.0], (4, 1)))


def test_numpy_and_mixed_entries_keep_the_target_dtype():
    state = {"w": np.zeros(3, np.float16), "b.running_var": np.ones(2, np.float64),
             "t": torch.zeros(2, dtype=torch.bfloat16)}
    update = {"w": np.full(3, 1e-3, np.float32), "b.running_var": torch.full((2,), -2.0),
              "t": np.full(2, 0.25, np.float32)}
    cepam.apply_update(state, update, scale=2.0)
    assert state["w"].dtype == np.float16
    assert np.array_equal(state["w"], np.full(3, np.float16(2e-3)))
    assert np.array_equal(state["b.running_var"], np.full(2, RUNNING_VAR_FLOOR))
    assert state["t"].dtype == torch.bfloat16 and torch.equal(state["t"], torch.full((2,), 0.5,
                                                                      dtype=torch.bfloat16))


@pytest.mark.parametrize("target, update, kwargs, error, match", [
    (3, {}, {}, cepam.InvalidTypeError, "torch.nn.Module or a mapping"),
    ("model", [1], {}, cepam.InvalidTypeError, "update must be a mapping"),
    ("model", {"nope": torch.ones(1)}, {}, cepam.InvalidArgumentError, "not an entry"),
    ("model", {1: torch.ones(1)}, {}, cepam.InvalidTypeError, "keys must be str"),
    ("model", {"0.weight": [1.0]}, {}, cepam.InvalidTypeError, "tensor or an array"),
    ("model", {"1.num_batches_tracked": torch.ones(())}, {}, cepam.InvalidArgumentError,
     "only float entries"),
    ("model", {"0.weight": torch.ones(3)}, {}, cepam.InvalidArgumentError, "shape"),
    ("model", {"0.bias": torch.full((256,), float("nan"))}, {}, cepam.InvalidArgumentError,
     "NaN or Inf"),
    ("model", {}, {"scale": float("inf")}, cepam.InvalidArgumentError, "finite"),
    ("model", {}, {"scale": True}, cepam.InvalidTypeError, "real number"),
    ("model", {}, {"running_var_floor": -1.0}, cepam.InvalidArgumentError, ">= 0"),
    ("model", {}, {"running_var_floor": "1"}, cepam.InvalidTypeError, "real number"),
    ({"w": np.zeros(2, np.float32)}, {"w": np.zeros(2, np.complex64)}, {},
     cepam.InvalidArgumentError, "only float entries"),
])
def test_bad_arguments_are_refused(target, update, kwargs, error, match):
    target = _bn_model() if target == "model" else target
    with pytest.raises(error, match=match):
        cepam.apply_update(target, update, **kwargs)


@pytest.mark.parametrize("prefix, on", [("module.", "update"), ("_orig_mod.", "target")])
def test_names_under_a_wrapper_s_prefix_are_named_as_such(prefix, on):
    """DataParallel's 'module.' on the update's names, or torch.compile's
    '_orig_mod.' on the target's: apply_update and a decode against the
    template say so, not that the names are unknown or that running
    statistics differ."""
    model = _bn_model()
    plain = {k: torch.zeros_like(v) for k, v in model.state_dict().items()
             if v.dtype.is_floating_point}
    update = {prefix + k: v for k, v in plain.items()} if on == "update" else plain
    target = model if on == "update" else {prefix + k: v for k, v in
                                           model.state_dict().items()}
    with pytest.raises(cepam.InvalidArgumentError, match=f"differ by the prefix '{prefix}'"):
        cepam.apply_update(target, update)
    secret = cepam.new_secret()
    payload = cepam.encode(update, cepam.Gaussian(sigma=1e-3), secret=secret, round=0,
                           client=1, clip=1.0)
    with pytest.raises(cepam.FormatError, match=f"differ by the prefix '{prefix}'") as err:
        cepam.decode(payload, secret=secret, like=target)
    assert "running statistics" not in str(err.value)


@pytest.mark.parametrize("make, error, match", [
    (lambda: {"w": torch.empty(2, device="meta")}, cepam.InvalidTypeError, "device 'meta'"),
    (lambda: torch.nn.LazyLinear(2).state_dict(), cepam.InvalidArgumentError, "lazy"),
])
def test_a_target_without_values_is_refused(make, error, match):
    target = make()
    name = next(iter(target))
    with pytest.raises(error, match=match):
        cepam.apply_update(target, {name: torch.zeros(2)})


def test_an_inference_tensor_is_refused():
    with torch.inference_mode():
        w = torch.zeros(2)
    with pytest.raises(cepam.InvalidArgumentError, match="inference tensor"):
        cepam.apply_update({"w": w}, {"w": torch.ones(2)})


def test_a_read_only_array_is_refused():
    w = np.zeros(2, np.float32)
    w.flags.writeable = False
    with pytest.raises(cepam.InvalidArgumentError, match="read-only"):
        cepam.apply_update({"w": w}, {"w": np.ones(2, np.float32)})
