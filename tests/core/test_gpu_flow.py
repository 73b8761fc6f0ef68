"""The GPU encode's Python logic (cepam.encoding with cepam.cuda.LatticeStage),
run on the CPU with the kernels' host twins in their place: the norm's
first pass (``_core.testing.sum_of_squares_blocks``, the code the GPU's
sum-of-squares kernel runs) and the LRSUQ stage
(``_core.testing.encode_subvectors``, the kernel's per-sub-vector code).
The payload bytes and errors must be the CPU codec's, whatever path the
norm takes (first pass, rescaled second pass, non-finite values) and
whatever the clip does to the update.  decode(device="cuda") is checked
with the twins and, where cepam was built with them, with the GPU's
decoders run on the host (cepam._cuda_on_host); tests/core/test_cuda.py
runs the encode's path on them.
"""

import numpy as np
import pytest

import cepam
import cepam.decoding
import cepam.encoding
from cepam import _core, cuda
from cepam._core import testing as hooks
from cepam.errors import InvalidArgumentError

from helpers import cuda_devices

torch = pytest.importorskip("torch")

SECRET = bytes(range(32))
ON_HOST = cuda_devices.on_host()


class _TwinStage(cuda.LatticeStage):
    """cuda.LatticeStage of CPU torch tensors, its kernels replaced by their
    host twins; counts the calls, so that a test knows the GPU path ran and
    whether the update was copied to the host."""

    calls: dict[str, int] = {}
    threads: list[int] = []  # each stage call's host threads

    @staticmethod
    def usable():
        return True

    @staticmethod
    def _takes(leaves):
        # torch tensors, as the real stage takes CUDA tensors only
        return all(isinstance(t, torch.Tensor) for t in leaves)

    def host(self):
        type(self).calls["host"] += 1
        return super().host()

    def _first_pass(self):
        type(self).calls["squares"] += 1
        return hooks.sum_of_squares_blocks(self._flat.numpy())

    def model_statistics(self, *, factor):
        type(self).calls["model"] += 1
        return hooks.model_statistics(self._flat.numpy(), factor=factor)

    def _lattice(self, params, *, key, factor, threads):
        type(self).calls["stage"] += 1
        type(self).threads.append(threads)
        return hooks.encode_subvectors(self._flat.numpy(), key=key, params=params, factor=factor)

    def _device_body(self, row, params, *, key, factor, statistics, spot):
        """The body by the host twin of the kernels that the coder's row
        names (the symbol and rANS kernels' twin, the model fitted from x:
        the statistics' model, test_model_stats.py; the Golomb kernels'
        twin), and the spot-checked sub-vectors' stage."""
        type(self).calls["body"] += 1
        x = self._flat.numpy()
        twin = {"encode_ans_body_resident": self._ans_twin,
                "encode_golomb_body_resident": self._golomb_twin}[row["device_encode"]]
        H, M, beta, V = hooks.encode_subvectors(x, key=key, params=params, factor=factor)
        return twin(x, H, M, params, key=key, factor=factor), _spot_stage(H, M, beta, V, params,
                                                                         spot)

    @staticmethod
    def _ans_twin(x, H, M, params, *, key, factor):
        return hooks.ans_body_by_streams(x, key=key, params=params, factor=factor,
                                         shared_symbols=True)

    @staticmethod
    def _golomb_twin(x, H, M, params, *, key, factor):
        golomb = hooks.golomb_parameter(_core.acceptance_probability(params))
        return hooks.golomb_body_by_units(H, M, golomb=golomb, n=int(params.n))


def _spot_stage(H, M, beta, V, params, spot):
    """(H, M, beta, V) of the sub-vectors spot."""
    n, at = int(params.n), np.asarray(spot, np.int64)
    return H[at], M.reshape(-1, n)[at].reshape(-1), beta[at], V.reshape(-1, n)[at].reshape(-1)


def _twin(monkeypatch):
    """From now on, cepam.encode of CPU torch tensors takes the GPU path,
    with host twins; the counts of the twins' calls."""
    _TwinStage.calls = {"squares": 0, "stage": 0, "model": 0, "host": 0, "body": 0}
    _TwinStage.threads = []
    monkeypatch.setattr(cepam.encoding, "LatticeStage", _TwinStage)
    return _TwinStage.calls


def _encode(update, **kw):
    kw = dict(secret=SECRET, round=3, client=1, nonce=bytes(16)) | kw  # comparable bytes
    return cepam.encode(update, cepam.Gaussian(sigma=kw.pop("sigma", 0.05)), **kw)


def _normal(m, dtype, scale=1.0, seed=0):
    return torch.from_numpy((np.random.default_rng(seed).normal(size=m) * scale).astype(dtype))


# name: (the update, encode's arguments, whether the update must come to
# the host: only for the norm's second pass and for clipping apart).
CASES = {
    "float32, clipped": (lambda: _normal(200_003, np.float32), dict(clip=10.0), False),
    "float64, within the clip": (lambda: _normal(70_001, np.float64, 1e-3), dict(clip=10.0),
                                 False),
    "no clip, E8": (lambda: _normal(4_099, np.float32), dict(lattice="E8"), False),
    "golomb": (lambda: _normal(10_000, np.float32), dict(clip=10.0, coder="golomb"), False),
    # rms / sigma = 1, in the band where "auto" tries Z and E8: on a sample
    # (from the GPU) for a large update, whole for a small one.
    "auto, sampled": (lambda: _normal(300_000, np.float32, 0.05), dict(clip=1e4, lattice="auto"),
                      False),
    "auto, both coded": (lambda: _normal(50_000, np.float32, 0.05),
                         dict(clip=1e4, lattice="auto"), False),
    "auto, high ratio": (lambda: _normal(300_000, np.float32, 0.5),
                         dict(clip=1e4, lattice="auto"), False),
    # Squares that overflow float64 (the rescaled second pass, on the host).
    "overflow": (lambda: _normal(1_000, np.float64, 1e200), dict(clip=1.0), True),
    # Squares at and below 2^-900 (the second pass too).
    "underflow": (lambda: _normal(5_000, np.float64, 2.0 ** -460), dict(clip=1.0, sigma=1e-3),
                  True),
    "zeros": (lambda: torch.zeros(3_000, dtype=torch.float32), dict(clip=1.0), True),
    "one coordinate": (lambda: _normal(1, np.float32), dict(clip=0.5), False),
    "a state_dict": (lambda: {"w": _normal(5_000, np.float32, seed=1),
                              "b": _normal(7, np.float32, seed=2)}, dict(clip=3.0), False),
    "mixed dtypes": (lambda: {"w": _normal(5_000, np.float32, seed=1),
                              "h": _normal(99, np.float32, seed=5).half(),
                              "d": _normal(30, np.float64, seed=6)}, dict(clip=3.0), False),
    # buffers="separate": the host clips weights and running statistics
    # apart, and the stage must code those values, not the input's.
    "running statistics clipped apart": (
        lambda: {"conv.weight": _normal(4_000, np.float32, 0.1, seed=3),
                 "bn.running_var": _normal(64, np.float32, 1e3, seed=4)}, dict(clip=5.0), True),
    "running statistics within the clip": (
        lambda: {"conv.weight": _normal(4_000, np.float32, 0.01, seed=3),
                 "bn.running_var": _normal(64, np.float32, 0.1, seed=4)}, dict(clip=5.0), False),
}


# (The sample's indices are a cached read-only array: handed to torch as
# they are, torch would warn that it cannot protect them.)
@pytest.mark.filterwarnings("error:The given NumPy array is not writable")
@pytest.mark.parametrize("case", CASES)
def test_the_gpu_flow_gives_the_cpu_payload(case, monkeypatch):
    make, kw, host_copy = CASES[case]
    update = make()
    expected = _encode(update, **kw)  # the CPU path
    twin = _twin(monkeypatch)
    monkeypatch.setattr(cepam.encoding, "flatten", None)  # the GPU path never flattens on the host
    assert _encode(update, **kw) == expected
    assert twin["squares"] == 1 and twin["stage"] + twin["body"] >= 1  # the GPU path ran
    assert twin["model"] == 1  # the model's statistics from the "GPU"
    assert (twin["host"] > 0) == host_copy


# --- the ANS coder: the body coded on the GPU --------------------------------


def _body_on_gpu(monkeypatch):
    """Encode codes bodies of either coder on the GPU from now on, at any
    size (by default Golomb bodies from 10^6 coordinates, ANS bodies never:
    LatticeStage.codes_body_on_device)."""
    monkeypatch.setattr(_TwinStage, "codes_body_on_device", lambda self, **_: True)


def _ans(*values):
    """A parameter set of the ANS coder's whole-body path (experimental:
    tests/conftest.py skips it unless cepam was built with it)."""
    return pytest.param(*values, marks=pytest.mark.cuda_experimental)


@pytest.mark.parametrize("lattice", ["Z", "E8"])
def test_bodies_are_coded_on_the_host_from_the_gpus_stage_by_default(lattice, monkeypatch):
    """...and the host's side of the stage's transfer runs on the call's
    threads (the same bytes)."""
    update = _normal(300_001, np.float32)
    expected = _encode(update, clip=10.0, lattice=lattice)
    twin = _twin(monkeypatch)
    assert _encode(update, clip=10.0, lattice=lattice, threads=3) == expected
    assert twin["stage"] == 1 and twin["body"] == 0 and twin["host"] == 0
    assert _TwinStage.threads == [3]


@pytest.mark.parametrize("coder", ["golomb", "ans"])
def test_golomb_bodies_are_coded_on_the_gpu_from_their_threshold(coder, monkeypatch):
    """By default a Golomb body is coded whole on the GPU from
    cuda.DEVICE_BODY_MIN_COORDINATES["golomb"]["encode"] coordinates (10^6; lowered
    here), on the host from the GPU's stage below; an ANS body on the host
    at every size.  The CPU's bytes either way."""
    assert cuda.DEVICE_BODY_MIN_COORDINATES["golomb"]["encode"] == 1_000_000
    monkeypatch.setitem(cuda.DEVICE_BODY_MIN_COORDINATES["golomb"], "encode", 5_000)
    for m, on_device in ((4_999, False), (5_000, coder == "golomb")):
        update = _normal(m, np.float32, seed=m)
        expected = _encode(update, clip=10.0, coder=coder)
        twin = _twin(monkeypatch)
        assert _encode(update, clip=10.0, coder=coder) == expected
        assert (twin["body"], twin["stage"]) == ((1, 0) if on_device else (0, 1))
        assert twin["host"] == 0


@pytest.mark.cuda_experimental
@pytest.mark.parametrize("lattice,dim,m,dtype,sigma", [
    ("Z", 1, 4_099, np.float32, 0.05), ("Z", 2, 3 * (1 << 17) + 5, np.float64, 0.05),
    ("Z", 3, 300_001, np.float32, 1e-6), ("Z", 8, 200_003, np.float64, 0.05),
    ("Z", 1, 20_000, np.float32, 1e3), ("A2", None, 70_001, np.float32, 0.1),
    ("D4", None, 2 * (1 << 17) + 3, np.float64, 0.1), ("E8", None, 300_001, np.float32, 0.1)])
def test_ans_bodies_coded_on_the_gpu_give_the_cpu_payload(lattice, dim, m, dtype, sigma,
                                                          monkeypatch):
    """One and several segments, coarse tables (sigma 1e-6), padded bodies
    (sigma 1e3), and A2, D4 and E8 at rms/sigma = 10 (the box model): the
    body by the symbol kernel's twin, only its streams and the
    spot-checked sub-vectors "back from the GPU"."""
    update = _normal(m, dtype)
    clip = 10.0 if lattice == "Z" else 1e4  # (A2, D4, E8: unclipped, rms/sigma = 10)
    kw = dict(clip=clip, lattice=lattice, sigma=sigma) | ({"dim": dim} if dim else {})
    expected = _encode(update, **kw)
    twin = _twin(monkeypatch)
    _body_on_gpu(monkeypatch)
    assert _encode(update, **kw) == expected
    assert twin["body"] == 1 and twin["stage"] == 0 and twin["host"] == 0


@pytest.mark.cuda_experimental
@pytest.mark.parametrize("lattice", ["A2", "D4", "E8"])
def test_point_tables_are_coded_on_the_gpu_too(lattice, monkeypatch):
    """An update far below the noise (rms/sigma = 0.01): sub-vectors have
    point tables, and the body's point streams are coded by the symbol
    kernel's twin too: the CPU's payload, nothing coded on the host."""
    update = _normal(20_000, np.float32, 1e-3)
    kw = dict(clip=10.0, lattice=lattice, sigma=0.1)
    expected = _encode(update, **kw)
    twin = _twin(monkeypatch)
    _body_on_gpu(monkeypatch)
    assert _encode(update, **kw) == expected
    assert twin["body"] == 1 and twin["stage"] == 0 and twin["host"] == 0


@pytest.mark.parametrize("lattice,dim,m,dtype,sigma", [
    ("Z", 1, 4_099, np.float32, 0.05), ("Z", 2, 3 * (1 << 17) + 5, np.float64, 0.05),
    ("Z", 3, 300_001, np.float32, 1e-6), ("Z", 8, 200_003, np.float64, 0.05),
    ("E8", None, 300_001, np.float32, 0.1)])
def test_golomb_bodies_coded_on_the_gpu_give_the_cpu_payload(lattice, dim, m, dtype, sigma,
                                                             monkeypatch):
    """One and several segments, long codes (sigma 1e-6), and E8: the body by
    the Golomb kernels' twin, only the body and the spot-checked sub-vectors
    "back from the GPU"."""
    update = _normal(m, dtype)
    kw = dict(clip=10.0, lattice=lattice, sigma=sigma, coder="golomb") | (
        {"dim": dim} if dim else {})
    expected = _encode(update, **kw)
    twin = _twin(monkeypatch)
    _body_on_gpu(monkeypatch)
    assert _encode(update, **kw) == expected
    assert twin["body"] == 1 and twin["stage"] == 0 and twin["host"] == 0


def _corrupt(monkeypatch, what):
    """The twin's body (of either coder) or its spot-checked stage with one
    value wrong."""
    real = _TwinStage._device_body

    def wrong(self, row, params, **kw):
        body, (H, M, beta, V) = real(self, row, params, **kw)
        if what == "stream":
            body = body[:-3] + bytes([body[-3] ^ 0x10]) + body[-2:]
        elif what == "M":
            M = M.copy()
            M[-1] += 1
        else:  # beta
            beta = np.nextafter(beta, np.inf)
        return body, (H, M, beta, V)

    monkeypatch.setattr(_TwinStage, "_device_body", wrong)


@pytest.mark.parametrize("what", ["stream", "M", "beta"])
@pytest.mark.parametrize("lattice", ["Z", "E8"])
def test_a_wrong_golomb_body_or_stage_from_the_gpu_raises(what, lattice, monkeypatch):
    """As below, for a Golomb body: a bit of the last code flipped."""
    update = _normal(5_000, np.float32)
    _twin(monkeypatch)
    _body_on_gpu(monkeypatch)
    _corrupt(monkeypatch, what)
    with pytest.raises(cepam.errors.DeviceError, match="stage differs" if what != "stream"
                       else "segment 0"):
        _encode(update, clip=1e4, lattice=lattice, coder="golomb")


@pytest.mark.cuda_experimental
@pytest.mark.parametrize("what", ["stream", "M", "beta"])
@pytest.mark.parametrize("lattice", ["Z", "E8"])
def test_a_wrong_body_or_stage_from_the_gpu_raises(what, lattice, monkeypatch):
    """The host's checks: the spot-checked sub-vectors' stage, and the one
    segment it codes again (here the only one: the last bytes of its
    stream changed)."""
    update = _normal(5_000, np.float32)
    _twin(monkeypatch)
    _body_on_gpu(monkeypatch)
    _corrupt(monkeypatch, what)
    with pytest.raises(cepam.errors.DeviceError, match="stage differs" if what != "stream"
                       else "segment 0"):
        _encode(update, clip=1e4, lattice=lattice)  # (rms/sigma = 20: the box model)


def test_the_checked_segment_is_drawn_from_the_key():
    m, n = 10 * (1 << 17), 1
    drawn = {cuda.segment_to_check(bytes([k]) * 32, m=m, n=n) for k in range(40)}
    assert len(drawn) > 5 and drawn <= set(range(10))
    assert cuda.segment_to_check(bytes(32), m=1000, n=2) == 0
    assert cuda.segment_coordinates(9, m=m - 3, n=n) == (9 << 17, m - 3)
    assert cuda.segment_coordinates(1, m=500_000, n=3) == (3 * 43_690, 6 * 43_690)


@pytest.mark.parametrize("m", [1, 4, 65_536, 65_537, 200_003])
@pytest.mark.parametrize("scale", [1.0, 1e-3, 1e160, 2.0 ** -455, 2.0 ** -450, 0.0])
def test_the_stage_norm_is_the_cpu_norm(m, scale):
    x = (np.random.default_rng(m).standard_cauchy(size=m) * scale)
    stage = _TwinStage(torch.from_numpy(x))
    _TwinStage.calls = {"squares": 0, "stage": 0, "model": 0, "host": 0, "body": 0}
    for threads in (1, 3):
        assert stage.sum_of_squares(threads=threads) == _core.sum_of_squares(x, threads=threads)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("index", [0, 70_000, 99_999])
def test_a_non_finite_value_is_named_as_on_the_cpu(bad, index, monkeypatch):
    x = _normal(100_000, np.float32)
    x[index] = bad
    with pytest.raises(InvalidArgumentError) as cpu:
        _encode({"w": x}, clip=1.0)
    twin = _twin(monkeypatch)
    with pytest.raises(InvalidArgumentError) as gpu:
        _encode({"w": x}, clip=1.0)
    assert str(gpu.value) == str(cpu.value) and f"({index},)" in str(gpu.value)
    assert twin["squares"] == 1


def test_the_core_reads_no_update_given_the_stage_and_the_statistics():
    x = _normal(10_000, np.float32).numpy()
    params = _core.Params(mechanism=1, scale=0.05, lattice=1, n=1)
    kw = dict(key=bytes(32), params=params, factor=0.5, coder=2)
    stage = hooks.encode_subvectors(x, key=bytes(32), params=params, factor=0.5)
    expected = _core.encode(x, **kw)
    statistics = hooks.model_statistics(x, factor=0.5)
    assert _core.encode(np.empty(0, np.float32), lattice_stage=stage, model_statistics=statistics,
                        m=x.size, **kw) == expected
    with pytest.raises(InvalidArgumentError, match="m must be"):
        _core.encode(np.empty(0, np.float32), lattice_stage=stage, m=x.size, **kw)
    with pytest.raises(InvalidArgumentError, match="m must be"):
        _core.encode(x, m=x.size + 1, **kw)
    with pytest.raises(InvalidArgumentError, match="model_statistics"):
        _core.encode(np.empty(0, np.float32), lattice_stage=stage, model_statistics=(1.0,),
                     m=x.size, **kw)


# --- decode(device="cuda"): which decoder the codec asks for -------------------


class _TwinCuda:
    """cepam._cuda's two decoders, by their host twins (the whole-body
    decoder's, and the decode kernel's code), noting which ran; with out
    (the capsule of the caller's tensor), the values go there."""

    def __init__(self):
        self.calls = []

    @staticmethod
    def _give(y, out):
        if out is None:
            return torch.from_numpy(y).__dlpack__(), {}
        torch.from_dlpack(out).copy_(torch.from_numpy(y))
        return None, {}

    def decode_ans_body_resident(self, body, *, m, key, params, dtype, device, stream, out=None):
        self.calls.append("body")
        y = hooks.decode_by_segments(body, m=m, key=key, params=params, dtype=dtype, coder=2)
        return self._give(y, out)

    def decode_golomb_body_resident(self, body, *, m, key, params, dtype, device, stream,
                                    out=None):
        self.calls.append("golomb body")
        y = hooks.decode_by_segments(body, m=m, key=key, params=params, dtype=dtype, coder=1)
        return self._give(y, out)

    def decode_lattice(self, H, M, *, m, key, params, dtype, device, stream, threads, out=None):
        self.calls.append("lattice")
        y = hooks.decode_lattice(H, M, m=m, key=key, params=params, dtype=dtype)
        return self._give(y, out)


class _OnHostCuda(_TwinCuda):
    """cepam._cuda's two decoders as cepam._cuda_on_host runs them (the
    GPU's kernels on the host), their output relabelled as host memory for
    torch, noting which ran."""

    def __init__(self):
        super().__init__()
        self._module = ON_HOST.module

    def _run(self, name, note, *args, out=None, **kwargs):
        if not hasattr(self._module, name):  # (the ANS decoder: CEPAM_CUDA_EXPERIMENTAL)
            pytest.skip(f"cepam._cuda_on_host was built without {name}")
        self.calls.append(note)
        into = None if out is None else cuda_devices.labelled_cuda(out)
        capsule, timing = getattr(self._module, name)(*args, out=into, **kwargs)
        return (None if capsule is None else cuda_devices.as_host(capsule)), timing

    def decode_ans_body_resident(self, body, **kw):
        return self._run("decode_ans_body_resident", "body", body, **kw)

    def decode_golomb_body_resident(self, body, **kw):
        return self._run("decode_golomb_body_resident", "golomb body", body, **kw)

    def decode_lattice(self, H, M, **kw):
        return self._run("decode_lattice", "lattice", H, M, **kw)


# The decoders a test hands to decode(device="cuda"): the host twins, and
# the GPU's kernels run on the host (where cepam was built with them; the
# whole-body ANS decoder only with CEPAM_CUDA_EXPERIMENTAL, else the test
# skips).
DECODERS = [pytest.param(_TwinCuda, id="twin"),
            pytest.param(_OnHostCuda, id="kernels", marks=cuda_devices.needs_on_host)]


@pytest.mark.parametrize("decoders", DECODERS)
@pytest.mark.parametrize("lattice,coder,scale,calls", [
    _ans("Z", "ans", 1.0, ["body"]), ("Z", "golomb", 1.0, ["golomb body"]),
    ("E8", "golomb", 1.0, ["golomb body"]), _ans("E8", "ans", 1.0, ["body"]),
    _ans("D4", "ans", 1.0, ["body"]), _ans("A2", "ans", 1.0, ["body"]),
    _ans("E8", "ans", 1e-4, ["body"])])
def test_decode_on_the_gpu_takes_the_whole_body_decoder_when_asked(lattice, coder, scale, calls,
                                                                   decoders, monkeypatch):
    """With cepam.cuda.decodes_body_on_device, decode(device="cuda") hands
    every ANS body to the GPU's whole-body decoder of ANS bodies (the point
    model's segments too: an update far below the noise), a Golomb body to
    the one of Golomb bodies; the CPU's values either way."""
    update = _normal(5_000, np.float32, scale)
    payload = _encode(update, clip=1e3, lattice=lattice, coder=coder)
    fake = decoders()
    monkeypatch.setattr(cepam.decoding, "decodes_on_device", lambda **_: True)
    monkeypatch.setattr(cuda, "decodes_body_on_device", lambda **_: True)
    monkeypatch.setattr(cuda, "cuda_module", lambda: fake)
    monkeypatch.setattr(torch.cuda, "current_stream",
                        lambda index: type("Stream", (), {"cuda_stream": 0}))
    out = cepam.decode(payload, secret=SECRET, device="cuda")
    assert fake.calls == calls
    assert torch.equal(out, cepam.decode(payload, secret=SECRET))


@pytest.mark.parametrize("decoders", DECODERS)
@pytest.mark.parametrize("coder", ["ans", "golomb"])
def test_decode_on_the_gpu_takes_the_whole_golomb_decoder_from_its_threshold(coder, decoders,
                                                                             monkeypatch):
    """decode(device="cuda") reads an ANS body on the host and runs the
    decode kernel at every size (on an H200 the whole-body ANS decoder was
    slower), a Golomb body too below
    cuda.DEVICE_BODY_MIN_COORDINATES["golomb"]["decode"] (2^24; lowered
    here) and decodes it whole on the GPU from there: the CPU's values."""
    assert cuda.DEVICE_BODY_MIN_COORDINATES == {
        "golomb": {"encode": 1_000_000, "decode": 1 << 24}}
    monkeypatch.setitem(cuda.DEVICE_BODY_MIN_COORDINATES["golomb"], "decode", 5_000)
    fake = decoders()
    monkeypatch.setattr(cepam.decoding, "decodes_on_device", lambda **_: True)
    monkeypatch.setattr(cuda, "cuda_module", lambda: fake)
    monkeypatch.setattr(torch.cuda, "current_stream",
                        lambda index: type("Stream", (), {"cuda_stream": 0}))
    whole = ["golomb body"] if coder == "golomb" else ["lattice"]
    for m, calls in ((4_999, ["lattice"]), (5_000, whole)):
        payload = _encode(_normal(m, np.float32, 1.0), clip=1e3, lattice="Z", coder=coder)
        code = 1 if coder == "golomb" else 2
        assert cuda.decodes_body_on_device(coder=code, m=m) == (calls != ["lattice"])
        fake.calls.clear()
        out = cepam.decode(payload, secret=SECRET, device="cuda")
        assert fake.calls == calls
        assert torch.equal(out, cepam.decode(payload, secret=SECRET))


# --- decode(device="cuda", out=): into the caller's GPU tensor ----------------


def _gpu_path(monkeypatch, fake, *, whole_body=False):
    """decode(device="cuda") on the decoders `fake`, its torch tensors on the
    host standing in for cuda:0 tensors."""
    monkeypatch.setattr(cepam.decoding, "decodes_on_device", lambda **_: True)
    monkeypatch.setattr(cuda, "decodes_body_on_device", lambda **_: whole_body)
    monkeypatch.setattr(cuda, "cuda_module", lambda: fake)
    monkeypatch.setattr(torch.cuda, "current_stream",
                        lambda index: type("Stream", (), {"cuda_stream": 0}))
    monkeypatch.setattr(cepam.decoding, "cuda_index_of",
                        lambda t: 0 if isinstance(t, torch.Tensor) else None)


@pytest.mark.parametrize("decoders", DECODERS)
@pytest.mark.parametrize("coder", ["ans", "golomb"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_decode_on_the_gpu_writes_into_out(coder, dtype, decoders, monkeypatch):
    """With out= (a tensor on the device), the GPU's decoder writes the
    values into it, and it is what decode returns: the CPU's values, again
    and again into the same tensor."""
    fake = decoders()
    _gpu_path(monkeypatch, fake)
    out = torch.full((5_000,), float("nan"), dtype=torch.from_numpy(np.zeros(1, dtype)).dtype)
    for seed in (0, 1):
        payload = _encode(_normal(5_000, dtype, 1.0, seed=seed), clip=1e3, coder=coder)
        got = cepam.decode(payload, secret=SECRET, device="cuda", out=out)
        assert got is out
        assert torch.equal(out, cepam.decode(payload, secret=SECRET))
    assert fake.calls == ["lattice", "lattice"]


@pytest.mark.parametrize("decoders", DECODERS)
@pytest.mark.parametrize("coder,calls", [_ans("ans", ["body"]), ("golomb", ["golomb body"])])
def test_the_whole_body_decoders_write_into_out(coder, calls, decoders, monkeypatch):
    """The whole-body decoders take out= too."""
    fake = decoders()
    _gpu_path(monkeypatch, fake, whole_body=True)
    payload = _encode(_normal(5_000, np.float32), clip=1e3, lattice="D4", coder=coder)
    out = torch.full((5_000,), float("nan"))
    assert cepam.decode(payload, secret=SECRET, device="cuda", out=out) is out
    assert fake.calls == calls
    assert torch.equal(out, cepam.decode(payload, secret=SECRET))


@pytest.mark.parametrize("decoders", DECODERS)
def test_a_structure_decoded_on_the_gpu_is_views_of_out(decoders, monkeypatch):
    """For a state_dict, out= is 1-D, all the payload's coordinates, and the
    result's entries are views of it."""
    _gpu_path(monkeypatch, decoders())
    update = {"w": _normal(4_000, np.float32, seed=1).reshape(40, 100),
              "b": _normal(7, np.float32, seed=2)}
    payload = _encode(update, clip=3.0)
    out = torch.full((4_007,), float("nan"))
    got = cepam.decode(payload, secret=SECRET, device="cuda", out=out)
    want = cepam.decode(payload, secret=SECRET)
    for name in want:
        assert torch.equal(got[name], want[name])
        assert got[name].untyped_storage().data_ptr() == out.untyped_storage().data_ptr()
    assert torch.equal(out, torch.cat([want["w"].reshape(-1), want["b"]]))


def test_out_is_copied_into_where_the_gpu_does_not_decode(monkeypatch):
    """device= with out= where decode has no CUDA path: decoded on the host,
    then copied into out."""
    _gpu_path(monkeypatch, _TwinCuda())
    monkeypatch.setattr(cepam.decoding, "decodes_on_device", lambda **_: False)
    payload = _encode(_normal(3_000, np.float32), clip=1e3)
    out = torch.full((3_000,), float("nan"))
    assert cepam.decode(payload, secret=SECRET, device="cuda", out=out) is out
    assert torch.equal(out, cepam.decode(payload, secret=SECRET))


def test_small_updates_are_decoded_on_the_host_for_the_gpu(monkeypatch):
    """Below cepam.cuda.DEVICE_DECODE_MIN_COORDINATES, decode(device="cuda")
    decodes on the host and copies the values into out= (faster on an
    H200 at 10^6 and 10^7 coordinates); from there on, the GPU's path; a
    body decoded whole on the GPU goes there at any size."""
    whole_body = cuda.decodes_body_on_device
    fake = _TwinCuda()
    _gpu_path(monkeypatch, fake)
    monkeypatch.setattr(cepam.decoding, "decodes_on_device", cuda.decodes_on_device)
    monkeypatch.setattr(cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    payload = _encode(_normal(3_000, np.float32), clip=1e3)
    want = cepam.decode(payload, secret=SECRET)
    for threshold, calls in ((3_001, []), (3_000, ["lattice"])):
        monkeypatch.setattr(cuda, "DEVICE_DECODE_MIN_COORDINATES", threshold)
        fake.calls.clear()
        out = torch.full((3_000,), float("nan"))
        assert cepam.decode(payload, secret=SECRET, device="cuda", out=out) is out
        assert fake.calls == calls
        assert torch.equal(out, want)
    monkeypatch.setattr(cuda, "DEVICE_DECODE_MIN_COORDINATES", 3_001)
    assert cuda.decodes_on_device() and not cuda.decodes_on_device(m=3_000)
    monkeypatch.setattr(cuda, "decodes_body_on_device", whole_body)  # (the real rule again)
    monkeypatch.setitem(cuda.DEVICE_BODY_MIN_COORDINATES["golomb"], "decode", 3_000)
    assert cuda.decodes_on_device(m=3_000, coder=1) and not cuda.decodes_on_device(m=3_000,
                                                                                    coder=2)
    assert not cuda.decodes_on_device(m=2_999, coder=1)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert not cuda.decodes_on_device() and not cuda.decodes_on_device(m=1 << 30)
    assert not cuda.decodes_on_device(m=3_000, coder=1)
    for bad, error in ((-1, InvalidArgumentError), (1.5, cepam.errors.InvalidTypeError)):
        with pytest.raises(error):
            cuda.decodes_on_device(m=bad)
        with pytest.raises(error):
            cuda.decodes_body_on_device(coder=1, m=bad)
    for bad, error in ((3, InvalidArgumentError), (0, InvalidArgumentError),
                       ("golomb", cepam.errors.InvalidTypeError)):
        with pytest.raises(error, match="coder"):
            cuda.decodes_on_device(m=10, coder=bad)
        with pytest.raises(error, match="coder"):
            cuda.decodes_body_on_device(coder=bad, m=10)


def test_out_must_be_a_tensor_on_the_decoding_gpu(monkeypatch):
    """device= takes an out= on that GPU only: a numpy array, a host tensor
    or one on another GPU is refused before anything is decoded."""
    fake = _TwinCuda()
    _gpu_path(monkeypatch, fake)
    payload = _encode(_normal(3_000, np.float32), clip=1e3)
    with pytest.raises(InvalidArgumentError, match="torch tensor on cuda:0.*numpy array"):
        cepam.decode(payload, secret=SECRET, device="cuda", out=np.zeros(3_000, np.float32))
    with pytest.raises(InvalidArgumentError, match="tensor on cuda:1, as device= says"):
        cepam.decode(payload, secret=SECRET, device="cuda:1", out=torch.zeros(3_000))
    monkeypatch.setattr(cepam.decoding, "cuda_index_of", lambda t: None)  # a host tensor
    with pytest.raises(InvalidArgumentError, match="tensor on cuda:0, as device= says, got one "
                                                   "on cpu"):
        cepam.decode(payload, secret=SECRET, device="cuda", out=torch.zeros(3_000))
    monkeypatch.setattr(cepam.decoding, "cuda_index_of", lambda t: 0)
    with pytest.raises(InvalidArgumentError, match="out has dtype float64"):
        cepam.decode(payload, secret=SECRET, device="cuda",
                     out=torch.zeros(3_000, dtype=torch.float64))
    assert fake.calls == []


@cuda_devices.needs_on_host
def test_the_gpu_decoder_checks_out_before_writing():
    """cepam._cuda's decode_lattice takes out= only on its device, of its
    dtype and of m values; anything else is refused with nothing written."""
    x = _normal(2_000, np.float32).numpy()
    kw = dict(key=bytes(range(32)), params=_core.Params(mechanism=1, scale=0.5, lattice=1, n=1))
    H, M, _, _ = hooks.encode_subvectors(x, factor=1.0, **kw)
    kw |= dict(m=x.size, dtype="float32")
    good = np.full(x.size, np.nan, np.float32)  # (as_cuda's capsule holds good itself)
    capsule, _ = ON_HOST.module.decode_lattice(H, M, **kw, out=cuda_devices.as_cuda(good))
    assert capsule is None
    assert good.tobytes() == hooks.decode_lattice(H, M, **kw).tobytes()
    bad = {"float64": (np.full(x.size, np.nan), "float32", None),
           "short": (np.full(x.size - 1, np.nan, np.float32), "m = 2000", None),
           "host memory": (np.full(x.size, np.nan, np.float32), "device memory", None),
           "another device": (np.full(x.size, np.nan, np.float32), "CUDA device 1", 1)}
    for name, (array, message, device) in bad.items():
        into = array.__dlpack__() if name == "host memory" else cuda_devices.as_cuda(array)
        with pytest.raises(InvalidArgumentError, match=message):
            ON_HOST.module.decode_lattice(H, M, **kw, device=device or 0, out=into)
        assert np.isnan(array).all(), name
