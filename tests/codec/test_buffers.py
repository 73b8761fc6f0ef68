"""Float buffers (BatchNorm's running statistics) in a state_dict update:
``buffers="separate"`` (the default), ``"joint"`` and ``"local"``."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

import cepam
from cepam.statistics_clip import WEIGHT_FLOOR
from cepam.structure import is_buffer

from conftest import SECRET_A

from helpers.paths import ROOT

TINY = cepam.Gaussian(sigma=1e-7)  # decoded values within about 1e-6 of the clipped input


def _update(weight_norm: float, buffer_norm: float) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    w = rng.normal(size=300).astype(np.float32)
    m, v = rng.normal(size=16).astype(np.float32), rng.normal(size=16).astype(np.float32)
    w *= weight_norm / np.linalg.norm(w)
    scale = buffer_norm / np.sqrt(np.sum(m.astype(np.float64) ** 2 + v.astype(np.float64) ** 2))
    return {"conv.weight": w.reshape(30, 10), "bn.running_mean": m * scale,
            "bn.running_var": v * scale, "bn.num_batches_tracked": np.array(7),
            "fc.bias": np.zeros(4, np.float32)}


def _norms(decoded: dict) -> tuple[float, float]:
    w = sum(float(np.sum(np.asarray(v, np.float64) ** 2)) for k, v in decoded.items()
            if not is_buffer(k))
    b = sum(float(np.sum(np.asarray(v, np.float64) ** 2)) for k, v in decoded.items()
            if is_buffer(k))
    return np.sqrt(w), np.sqrt(b)


def _roundtrip(update, **kwargs):
    codec = cepam.Codec(TINY, secret=SECRET_A, client=1, clip=1.0, **kwargs)
    return codec.decode(codec.encode(update, round=0), round=0)


def test_running_statistics_are_recognised_by_name():
    assert is_buffer("layer1.0.bn1.running_var") and is_buffer("running_mean")
    assert not is_buffer("bn.weight") and not is_buffer("running_var_of_mine.weight")
    assert not is_buffer("bn.num_batches_tracked")


def test_large_statistics_no_longer_crowd_the_weights_out():
    """Statistics 100 times the weights: one joint clip leaves the weights 1 %
    of their update; "separate" keeps 0.95 of the clip for them and gives the
    statistics the rest, the whole update still within the clip."""
    assert WEIGHT_FLOOR == 0.95
    update = _update(weight_norm=2.0, buffer_norm=200.0)
    w, b = _norms(_roundtrip(update, buffers="joint"))
    assert w == pytest.approx(2.0 / np.hypot(2.0, 200.0), rel=1e-3) and w < 0.011
    w, b = _norms(_roundtrip(update))
    assert w == pytest.approx(0.95, rel=1e-4)
    assert b == pytest.approx(np.sqrt(1 - 0.95 ** 2), rel=1e-4)
    assert np.hypot(w, b) <= 1.0 + 1e-5


def test_small_statistics_are_clipped_jointly_as_before():
    """Where the joint clip leaves the weights at least WEIGHT_FLOOR of the
    clip, "separate" is the one clip, to the byte."""
    for update in (_update(2.0, 0.6), _update(0.3, 0.2), _update(5.0, 0.0)):
        a = cepam.encode(update, TINY, secret=SECRET_A, round=0, client=1, clip=1.0,
                         nonce=bytes(16))
        b = cepam.encode(update, TINY, secret=SECRET_A, round=0, client=1, clip=1.0,
                         buffers="joint", nonce=bytes(16))
        assert a == b


@pytest.mark.parametrize("weights", [0.2, 0.5])
def test_small_weights_keep_their_size_and_the_statistics_take_the_rest(weights):
    """Weights below the floor keep their norm; the statistics take what the
    clip leaves, sqrt(1 - |w|^2) of it (0.87 for weights at half the clip,
    as encode's docstring says)."""
    update = _update(weight_norm=weights, buffer_norm=50.0)
    w, b = _norms(_roundtrip(update))
    assert w == pytest.approx(weights, rel=1e-4)
    assert b == pytest.approx(np.sqrt(1 - weights ** 2), rel=1e-4)


@pytest.mark.parametrize("buffer_norm", [1e6, 1e20, 1e160])
def test_statistics_that_dwarf_the_weights_still_leave_them_the_floor(buffer_norm):
    """Statistics 10^6 to 10^160 times the weights (float64, the last beyond
    float64's squares): the weights' share is no longer the whole's sum of
    squares less the statistics' (all rounding there), and they keep 0.95 of
    the clip as at 100 times."""
    update = {k: v.astype(np.float64) for k, v in _update(2.0, 1.0).items()}
    for name in ("bn.running_mean", "bn.running_var"):
        update[name] = update[name] * buffer_norm
    w, b = _norms(_roundtrip(update))
    assert w == pytest.approx(0.95, rel=1e-4)
    assert b == pytest.approx(np.sqrt(1 - 0.95 ** 2), rel=1e-4)


def test_the_input_is_not_modified():
    update = _update(weight_norm=2.0, buffer_norm=200.0)
    before = {k: v.copy() for k, v in update.items()}
    _roundtrip(update)
    assert all(np.array_equal(before[k], update[k]) for k in update)


def test_local_statistics_are_not_sent():
    update = _update(weight_norm=2.0, buffer_norm=200.0)
    out = _roundtrip(update, buffers="local")
    assert sorted(out) == ["conv.weight", "fc.bias"]
    assert _norms(out)[0] == pytest.approx(1.0, rel=1e-4)
    # A bare payload decodes with the full state dict as template, under the same choice.
    codec = cepam.Codec(TINY, secret=SECRET_A, client=1, clip=1.0, buffers="local",
                        structure=False)
    out = codec.decode(codec.encode(update, round=1), like=update)
    assert sorted(out) == ["conv.weight", "fc.bias"]
    with pytest.raises(cepam.FormatError, match="buffers="):
        cepam.decode(codec.encode(update, round=2), secret=SECRET_A, like=update)
    assert sorted(cepam.decode(codec.encode(update, round=3), secret=SECRET_A, like=update,
                               buffers="local")) == ["conv.weight", "fc.bias"]
    # A payload with its structure names the first entry that differs, and the choice too.
    named = cepam.encode(update, TINY, secret=SECRET_A, round=4, client=1, clip=1.0,
                         buffers="local")
    with pytest.raises(cepam.FormatError, match=r"at entry 1: .*pass the encoder's buffers="):
        cepam.decode(named, secret=SECRET_A, like=update)


def test_only_statistics_with_local_is_refused():
    with pytest.raises(cepam.InvalidArgumentError, match="buffers='local'"):
        cepam.encode({"bn.running_var": np.ones(3, np.float32)}, TINY, secret=SECRET_A,
                     round=0, client=1, clip=1.0, buffers="local")


@pytest.mark.parametrize("bad", ["Local", "params"])
def test_bad_buffers_choice_is_refused(bad):
    with pytest.raises(cepam.InvalidArgumentError, match="buffers must be one of"):
        cepam.encode(_update(1.0, 1.0), TINY, secret=SECRET_A, round=0, client=1, buffers=bad)
    with pytest.raises(cepam.InvalidArgumentError, match="buffers must be one of"):
        cepam.Codec(TINY, secret=SECRET_A, buffers=bad)


@pytest.mark.parametrize("bad", [None, 1, np.array(["local", "joint"])])
def test_buffers_that_are_not_a_str_are_a_type_error(bad):
    """An array raised numpy's "truth value of an array is ambiguous"
    ValueError (``buffers in BUFFER_CHOICES``); None and 1 were
    InvalidArgumentError."""
    payload = cepam.encode(_update(1.0, 1.0), TINY, secret=SECRET_A, round=0, client=1)
    for call in (lambda: cepam.encode(_update(1.0, 1.0), TINY, secret=SECRET_A, round=0,
                                      client=1, buffers=bad),
                 lambda: cepam.Codec(TINY, secret=SECRET_A, buffers=bad),
                 lambda: cepam.decode(payload, secret=SECRET_A, buffers=bad)):
        with pytest.raises(cepam.InvalidTypeError, match="buffers must be a str, one of"):
            call()


# ------------------------------------------------ a BatchNorm CNN trained as README shows


def _mnist_dir() -> str | None:
    for candidate in (ROOT.parent / "shared" / "data" / "mnist", os.environ.get("CEPAM_DATA")):
        if candidate and (Path(candidate) / "train-images-idx3-ubyte.gz").exists():
            return str(candidate)
    return None


@pytest.mark.skipif(_mnist_dir() is None, reason="MNIST not found in ../shared/data/mnist "
                    "beside the repository nor in $CEPAM_DATA")
def test_a_batchnorm_cnn_learns_with_the_readme_pattern():
    """The whole state_dict difference, one clip (the default buffers) trains
    a BatchNorm CNN at least as well as sending the parameters alone (within
    3 points), on real MNIST with fixed seeds."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the accuracies are those of one thread
    try:
        _train_and_compare()
    finally:
        torch.set_num_threads(threads)


def _train_and_compare():
    spec = importlib.util.spec_from_file_location("pytorch_batchnorm",
                                                  ROOT / "examples" / "pytorch_batchnorm.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    default = example.run("separate", seed=0, rounds=10, data_dir=_mnist_dir())
    params = example.run("params", seed=0, rounds=10, data_dir=_mnist_dir())
    assert default["accuracy"][-1] >= params["accuracy"][-1] - 0.03
    assert default["accuracy"][-1] > 0.8  # it learns (10 classes: chance is 0.1)


def test_the_experiments_table_is_what_the_shipped_runs_give():
    """docs/EXPERIMENTS.md's BatchNorm table is examples/pytorch_batchnorm.py's
    table of the shipped results (docs/experiments/batchnorm.json)."""
    import json
    import re

    pytest.importorskip("scipy")
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("pytorch_batchnorm",
                                                  ROOT / "examples" / "pytorch_batchnorm.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    path = ROOT / "docs" / "experiments" / "batchnorm.json"
    if not path.exists():
        pytest.skip("docs/experiments/ is not in the sdist")
    shipped = json.loads(path.read_text())
    text = (ROOT / "docs" / "EXPERIMENTS.md").read_text()
    table = re.search(r"<!-- batchnorm-table:start -->\n(.*?)\n<!-- batchnorm-table:end -->",
                      text, re.S).group(1)
    assert table == example.table(shipped["results"])
    assert shipped["sigma"] == example.SIGMA and shipped["clip"] == example.CLIP


# ------------------------------------ the default's first rounds (bench/batchnorm_rounds.py)


def _bench_rounds():
    spec = importlib.util.spec_from_file_location("batchnorm_rounds",
                                                  ROOT / "bench" / "batchnorm_rounds.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(_mnist_dir() is None, reason="MNIST not found in ../shared/data/mnist "
                    "beside the repository nor in $CEPAM_DATA")
@pytest.mark.usefixtures("one_torch_thread", "counted_nonces")
def test_the_default_keeps_pace_with_parameters_only_from_round_3():
    """Issue 38: a BatchNorm CNN (inputs in [0, 1], SGD with momentum, 3
    clients, sigma 1e-3, clip 1), the server's model evaluated in eval mode:
    the default (statistics clipped apart, the weights keeping 0.95 of the
    clip) within 3 points of sending the parameters alone at every round from
    round 3 on (with the weights' floor at 0.5 it was 7 to 22 points behind
    in rounds 3 to 6).  bench/batchnorm_rounds.py's setting and seed 0: the
    first 6 rounds of docs/EXPERIMENTS.md's table.  The payload nonces are
    counted (the bench script encodes without nonce=): over fresh nonces the
    default's lead in round 3 is 1.2 points with a spread of 1.2 (12 runs),
    so the 3-point margin would be lost about once in a few thousand runs."""
    pytest.importorskip("torch")
    bench = _bench_rounds()
    settings = dict(bench.SETTINGS, rounds=6)  # the first 6 rounds of the table
    data = bench.mnist_tensors(_mnist_dir(), clients=settings["clients"],
                               samples=settings["samples"], test_size=settings["test_size"])
    default = bench.run("default", data, sigma=1e-3, seed=0, **settings)["accuracy"]
    params = bench.run("parameters only", data, sigma=1e-3, seed=0, **settings)["accuracy"]
    assert all(d >= p - 0.03 for d, p in zip(default[2:], params[2:])), (default, params)
    assert default[-1] > 0.8
