"""The CUDA path: the module cepam._cuda, CUDA inputs and outputs.

Tests marked ``cuda`` need a CUDA device (and torch with CUDA) and skip
cleanly without one; ``python bench/gpu_check.py`` runs them with the
throughput table on a GPU machine.  Most of them run on the host too
(their "host" variant), against the same kernels built for the host
(cepam._cuda_on_host, where cepam was built with CEPAM_CUDA_ON_HOST).  The
others run everywhere: the module must import and report "no device" on
machines without a driver, and the API must say clearly what it cannot do.
"""

import dataclasses
import warnings
from typing import Any

import numpy as np
import pytest

import cepam
import cepam.decoding
import cepam.encoding
from cepam import _core, cuda, cuda_device, cuda_stage
from cepam._core import testing as hooks
from cepam.errors import DeviceError, InvalidArgumentError

from helpers import cuda_devices
from test_subvector import CONFIGS, KEY, _input

try:
    from cepam import _cuda
except ImportError:  # built without a CUDA compiler
    _cuda = None


def _torch_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


HAS_GPU = cuda.is_available() and _torch_cuda()
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA device, cepam._cuda and torch "
                               "with CUDA (" + (cuda.status()[1] or "torch has no CUDA") + ")")
ON_HOST = cuda_devices.on_host()

# The whole-body ANS coder's tests (CMakeLists.txt's CEPAM_CUDA_EXPERIMENTAL):
# they skip unless the module of their device was built with it
# (tests/conftest.py).  The whole-body Golomb coder is in every build.
experimental = pytest.mark.cuda_experimental

# Where the device tests run: a GPU, or the host (cepam._cuda_on_host).
WHERE = [pytest.param("gpu", marks=[needs_gpu, pytest.mark.cuda]),
         pytest.param("host", marks=cuda_devices.needs_on_host)]


@pytest.fixture(params=WHERE)
def device(request) -> cuda_devices.Device:
    """Where a device test runs: a GPU, or the host running the same kernels
    (cepam._cuda_on_host, tests/helpers/cuda_devices.py)."""
    return cuda_devices.on_gpu() if request.param == "gpu" else ON_HOST


SECRET = bytes(range(32))


def test_status_never_raises_and_explains():
    ok, why = cuda.status()
    assert isinstance(ok, bool)
    assert ok == (why == "")
    assert cuda.is_available() == ok


@pytest.mark.skipif(_cuda is None, reason="cepam was built without its CUDA module")
def test_module_imports_and_counts_devices_without_crashing():
    count, why = _cuda.device_count()
    assert count >= 0
    if count == 0:
        assert why  # a reason, e.g. no driver
        assert not cuda.is_available()


@pytest.mark.parametrize("device,index", [(None, None), ("cpu", None), ("cuda", 0), ("cuda:3", 3)])
def test_parse_device(device, index):
    assert cuda.parse_device(device) == index


def test_parse_device_reads_a_torch_device():
    torch = pytest.importorskip("torch")
    assert cuda.parse_device(torch.device("cpu")) is None
    assert cuda.parse_device(torch.device("cuda", 2)) == 2


@pytest.mark.parametrize("device", ["gpu", "cuda:", "cuda:x", 0, "mps"])
def test_parse_device_refuses_others(device):
    with pytest.raises(InvalidArgumentError):
        cuda.parse_device(device)


@pytest.mark.skipif(HAS_GPU, reason="checks the behaviour without a CUDA device")
def test_decode_to_cuda_without_a_device_is_a_clear_error():
    pytest.importorskip("torch")
    payload = cepam.encode(np.ones(10, np.float32), cepam.Gaussian(sigma=0.1), secret=SECRET,
                           round=0, client=0)
    with pytest.raises(DeviceError, match="CUDA"):
        cepam.decode(payload, secret=SECRET, device="cuda")
    with pytest.raises(InvalidArgumentError, match="torch tensors"):
        cepam.decode(payload, secret=SECRET, device="cuda", output="numpy")


class _DLPackOnly:
    """An array that offers nothing but the DLPack protocol (as CuPy or JAX do)."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_dlpack_host_arrays_are_encoded_like_numpy():
    x = np.random.default_rng(3).normal(size=1000).astype(np.float32)
    kw = dict(secret=SECRET, round=1, client=2, clip=5.0, lattice="Z", nonce=bytes(16))
    expected = cepam.encode(x, cepam.Gaussian(sigma=0.1), **kw)
    assert cepam.encode(_DLPackOnly(x), cepam.Gaussian(sigma=0.1), **kw) == expected


def _cuda_path(monkeypatch, available: bool) -> None:
    """Pretends the CUDA path is (not) available, whatever this machine has,
    with the once-flag reset (other tests of the worker may have set it)."""
    why = "" if available else "no usable CUDA device: pretended by the test"
    monkeypatch.setattr(cuda_device, "status", lambda: (available, why))
    monkeypatch.setattr(cuda_device, "_warned_host_copy", False)


def test_host_copy_warning_is_shown_once(monkeypatch):
    # The warning is about the fallback: on a GPU machine the CUDA path is
    # available and note_host_copy() rightly says nothing, so the test
    # pretends it is not (it used to rely on the machine having no GPU).
    _cuda_path(monkeypatch, available=False)
    with pytest.warns(cuda.HostCopyWarning, match="pretended by the test"):
        cuda.note_host_copy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # whatever the registry and filters hold
        cuda.note_host_copy()
    assert caught == []


def test_no_host_copy_warning_when_the_cuda_path_runs(monkeypatch):
    _cuda_path(monkeypatch, available=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cuda.note_host_copy()
    assert caught == []


# --- the host's spot-check of a GPU (runs everywhere) ---------------------------

def _kw(mech, lattice, n):
    return dict(key=KEY, params=_core.Params(mechanism=mech, scale=0.5, lattice=lattice, n=n))



def test_spot_indices_take_the_first_the_last_and_some_drawn_from_the_key():
    a = cuda.spot_indices(bytes(32), 10**6)
    b = cuda.spot_indices(bytes(range(32)), 10**6)
    assert a.dtype == np.uint64 and a[0] == 0 and a[-1] == 10**6 - 1
    assert 2 < len(a) <= cuda.SPOT_CHECKS and np.all(np.diff(a.astype(np.int64)) > 0)
    assert not np.array_equal(a, b)  # each context checks other sub-vectors
    np.testing.assert_array_equal(cuda.spot_indices(bytes(32), 5), np.arange(5))
    with pytest.raises(InvalidArgumentError):
        cuda.spot_indices(bytes(32), 100, count=1)


def _host_stage(m, n, lattice, dtype=np.float32):
    x = _input(m, dtype, seed=m)
    kw = _kw(1, lattice, n)
    stage = [a.copy() for a in hooks.encode_subvectors(x, factor=0.75, **kw)]
    indices = cuda.spot_indices(kw["key"], len(stage[0]))
    padded = np.zeros(len(stage[0]) * n, x.dtype)
    padded[:m] = x
    pieces = padded.reshape(-1, n)[indices.astype(np.intp)].reshape(-1)
    return stage, pieces, indices, dict(m=m, factor=0.75, **kw)


@pytest.mark.parametrize("lattice,n", [(1, 1), (1, 3), (3, 4), (4, 8)])
def test_the_spot_check_accepts_the_host_stage(lattice, n):
    stage, pieces, indices, kw = _host_stage(10_001, n, lattice)
    cuda.check_stage(tuple(stage), pieces, indices, **kw)


@pytest.mark.parametrize("part", ["H", "M", "beta", "V", "V-sign"])
@pytest.mark.parametrize("where", ["first", "last", "drawn"])
def test_the_spot_check_raises_device_error_on_a_wrong_value(part, where):
    n = 4
    stage, pieces, indices, kw = _host_stage(10_001, n, 3)
    H, M, beta, V = stage
    j = int({"first": indices[0], "last": indices[-1], "drawn": indices[len(indices) // 2]}[where])
    if part == "H":
        H[j] += 1
    elif part == "M":
        M[j * n + 2] -= 1
    elif part == "beta":
        beta[j] = np.nextafter(beta[j], np.inf)  # one ulp
    elif part == "V":
        V[j * n + 1] = np.nextafter(V[j * n + 1], np.inf)
    else:  # a zero's sign: equal as numbers, other bits
        V[j * n] = -V[j * n] if V[j * n] != 0 else -0.0 if not np.signbit(V[j * n]) else 0.0
    with pytest.raises(DeviceError, match=f"sub-vector {j} of"):
        cuda.check_stage((H, M, beta, V), pieces, indices, **kw)


def test_the_spot_check_raises_device_error_where_the_host_refuses():
    """A value the host cannot encode (here: an infinite coordinate given as
    the sub-vector's) where the device claims a result."""
    stage, pieces, indices, kw = _host_stage(1000, 1, 1)
    pieces = pieces.copy()
    pieces[0] = np.inf
    with pytest.raises(DeviceError, match="refuses"):
        cuda.check_stage(tuple(stage), pieces, indices, **kw)


@pytest.mark.parametrize("m,n", [(10_001, 4), (10_000, 8), (7, 3)])
def test_the_spot_checked_pieces_are_the_sub_vectors_coordinates(m, n):
    """LatticeStage's gather of the checked sub-vectors (torch indexing, run
    here on a host tensor), zeros past the update's end."""
    torch = pytest.importorskip("torch")
    x = _input(m, np.float64, seed=1)
    indices = cuda.spot_indices(KEY, -(-m // n))
    pieces = cuda.LatticeStage(torch.from_numpy(x))._pieces(indices, n)
    padded = np.zeros(-(-m // n) * n)
    padded[:m] = x
    assert pieces.dtype == np.float64
    np.testing.assert_array_equal(pieces, padded.reshape(-1, n)[indices.astype(np.intp)].ravel())


@pytest.mark.parametrize("values,dtype", [
    (np.array([1.0, -2.0, 3.0], np.float32), "float32"),
    (np.array([1e5, 2.0], np.float32), "bfloat16"),        # rounding beyond the noise
    (np.array([1e6, -7e5], np.float64), "float16"),        # beyond float16's range
    (np.array([1e200, 1.0], np.float64), "float32"),       # squares beyond float64
    (np.array([1e200, -3e199], np.float64), "float64"),    # the same, rescaled
    (np.array([np.inf, 1.0], np.float32), "float32"),      # not finite
    (np.zeros(4, np.float32), "float16"),
])
def test_the_device_output_check_gives_the_host_verdicts(values, dtype):
    """check_device_output (torch statistics; here on a host tensor) raises
    and warns as check_output does."""
    torch = pytest.importorskip("torch")
    from cepam.precision import check_output

    def verdict(check, v):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                check(v, dtype, noise_std=1e-3, where="the update")
            except cepam.errors.DecodingError as e:
                return "raises", str(e)
        return "passes", [str(w.message) for w in caught]

    assert verdict(cuda.check_device_output, torch.from_numpy(values)) == \
        verdict(check_output, values)


# --- on a GPU, or on the host running its kernels (cepam._cuda_on_host) ------

@pytest.mark.parametrize("mech,lattice,n", CONFIGS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_lattice_stage_is_bit_identical(mech, lattice, n, dtype, device):
    x = _input(4099, dtype, seed=lattice * 10 + n)
    H, M, beta, V, timing = device.module.encode_lattice(device.put(x), factor=0.75,
                                                         **_kw(mech, lattice, n))
    H2, M2, beta2, V2 = hooks.encode_subvectors(x, factor=0.75, **_kw(mech, lattice, n))
    np.testing.assert_array_equal(H, H2)
    np.testing.assert_array_equal(M, M2)
    assert beta.tobytes() == beta2.tobytes() and V.tobytes() == V2.tobytes()
    for out in ("float32", "float64"):
        capsule, _ = device.module.decode_lattice(H, M, m=x.size, dtype=out,
                                                  **_kw(mech, lattice, n))
        y = device.get(capsule)
        y2 = hooks.decode_lattice(H, M, m=x.size, dtype=out, **_kw(mech, lattice, n))
        assert y.tobytes() == y2.tobytes()


@dataclasses.dataclass(frozen=True)
class _Path:
    """Where cepam.encode's device path runs: ``put`` gives a host torch
    tensor as the update the path takes, ``module`` runs its kernels."""
    put: Any
    module: Any


@pytest.fixture(params=WHERE)
def path(request, monkeypatch) -> _Path:
    """cepam.encode's device path on a GPU (CUDA tensors), or on the host:
    LatticeStage of a host tensor handed to cepam._cuda_on_host as CUDA
    memory, everything else (its checks, the payload) as on a GPU."""
    torch = pytest.importorskip("torch")
    if request.param == "gpu":
        return _Path(put=lambda t: t.cuda(), module=_cuda)

    class StageOnHost(cuda.LatticeStage):
        @staticmethod
        def _takes(leaves):
            return all(isinstance(t, torch.Tensor) for t in leaves)

        def _capsule(self):
            return cuda_devices.as_cuda(self._flat.numpy()), 0

    monkeypatch.setattr(cuda_device, "status", lambda: (True, ""))
    monkeypatch.setattr(cuda_stage, "cuda_module", lambda: ON_HOST.module)
    monkeypatch.setattr(cepam.encoding, "LatticeStage", StageOnHost)
    return _Path(put=lambda t: t, module=ON_HOST.module)


@pytest.mark.parametrize("lattice", ["Z", "E8", "auto"])
@pytest.mark.parametrize("coder,body_on_device", [
    ("ans", False), pytest.param("ans", True, marks=experimental), ("golomb", False),
    ("golomb", True)])
@pytest.mark.parametrize("clip", [None, 10.0])
def test_encode_takes_the_device_path_to_the_cpu_bytes(lattice, body_on_device, coder, clip,
                                                       path, monkeypatch):
    """cepam.encode through LatticeStage, its checks and every kernel of the
    path: the CPU's payload, the path taken (body_on_device: bodies coded on
    the device, by default Golomb bodies of 10^6 coordinates or more only:
    LatticeStage.codes_body_on_device); on a
    GPU, decode(device="cuda") too."""
    import torch

    update = {"w": torch.randn(300, 7, generator=torch.Generator().manual_seed(0)),
              "b": torch.randn(13, generator=torch.Generator().manual_seed(1))}
    kw = dict(secret=SECRET, round=4, client=1, clip=clip, lattice=lattice, coder=coder,
              nonce=bytes(16))
    expected = cepam.encode(update, cepam.Gaussian(sigma=0.05), **kw)
    monkeypatch.setattr(cuda.LatticeStage, "codes_body_on_device",
                        lambda self, **_: body_on_device)
    calls = _spy(monkeypatch)
    on_device = {k: path.put(v) for k, v in update.items()}
    assert cepam.encode(on_device, cepam.Gaussian(sigma=0.05), **kw) == expected
    assert calls["stage"] + calls["body"] >= 1
    assert calls["check"] == calls["stage"] + calls["body"] and calls["segment"] == calls["body"]
    if lattice != "auto":
        assert calls["body"] == (1 if body_on_device else 0)
    assert calls["squares"] == 1 and calls["model"] == 1  # the norm and the model's statistics
    assert calls["host"] == 0 and calls["flatten"] == 0  # the update never read on the host
    if path.module is not _cuda:
        return  # (torch holds decode's output: a GPU)
    monkeypatch.setattr(cuda, "DEVICE_DECODE_MIN_COORDINATES", 0)  # (the GPU's path at any size)
    out = cepam.decode(expected, secret=SECRET, device="cuda")
    assert calls["decode"] == 1  # the GPU kernel decoded
    ref = cepam.decode(expected, secret=SECRET)
    for k in update:
        assert out[k].is_cuda
        assert torch.equal(out[k].cpu(), ref[k])


def _spy(monkeypatch) -> dict[str, int]:
    """Counts the GPU path's calls: the LRSUQ stage of an encode (or the
    body coded on the GPU and its segment check), its
    spot-check, the device decode, the norm's first pass and the source
    model's statistics on the GPU, and the update's copies to the host
    (LatticeStage.host, or flattening on the host)."""
    import cepam.decoding
    import cepam.encoding

    calls = {"stage": 0, "check": 0, "decode": 0, "squares": 0, "model": 0, "host": 0,
             "flatten": 0, "body": 0, "segment": 0}

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(cuda.LatticeStage, "__call__", counted("stage", cuda.LatticeStage.__call__))
    monkeypatch.setattr(cuda.LatticeStage, "_first_pass",
                        counted("squares", cuda.LatticeStage._first_pass))
    monkeypatch.setattr(cuda.LatticeStage, "model_statistics",
                        counted("model", cuda.LatticeStage.model_statistics))
    monkeypatch.setattr(cuda.LatticeStage, "host", counted("host", cuda.LatticeStage.host))
    monkeypatch.setattr(cepam.encoding, "flatten", counted("flatten", cepam.encoding.flatten))
    monkeypatch.setattr(cuda_stage, "check_stage", counted("check", cuda.check_stage))
    monkeypatch.setattr(cuda.LatticeStage, "device_body",
                        counted("body", cuda.LatticeStage.device_body))
    monkeypatch.setattr(cuda_stage, "check_segment", counted("segment", cuda.check_segment))
    monkeypatch.setattr(cepam.decoding, "decode_on_device", counted("decode", cuda.decode_on_device))
    return calls


@needs_gpu
@pytest.mark.cuda
def test_dlpack_cuda_arrays_reach_the_gpu_stage(monkeypatch):
    """A CUDA array that offers only DLPack (as CuPy and JAX arrays do) runs
    the GPU's LRSUQ stage too, to the CPU's bytes."""
    import torch

    x = torch.randn(5000, generator=torch.Generator().manual_seed(3))
    kw = dict(secret=SECRET, round=2, client=3, clip=10.0, lattice="D4", nonce=bytes(16))
    expected = cepam.encode(x, cepam.Gaussian(sigma=0.05), **kw)
    calls = _spy(monkeypatch)
    assert cepam.encode(_DLPackOnly(x.cuda()), cepam.Gaussian(sigma=0.05), **kw) == expected
    assert calls["stage"] == 1 and calls["check"] == 1


@needs_gpu
@pytest.mark.cuda
@pytest.mark.parametrize("coder", ["ans", "golomb"])
@pytest.mark.parametrize("gpu_path", [True, False])
def test_decode_on_the_gpu_writes_into_a_tensor_the_caller_keeps(coder, gpu_path, monkeypatch):
    """decode(device="cuda", out=) on a GPU, by the GPU's path and by the
    host's (a copy: below cepam.cuda.DEVICE_DECODE_MIN_COORDINATES): the
    caller's CUDA tensor gets the CPU decode's values and is returned,
    round after round; a state_dict's entries are views of a 1-D out."""
    import torch

    if gpu_path:
        monkeypatch.setattr(cuda, "DEVICE_DECODE_MIN_COORDINATES", 0)
    assert cuda.decodes_on_device(m=5000) == gpu_path

    x = torch.randn(5000, generator=torch.Generator().manual_seed(4))
    out = torch.full((5000,), float("nan"), device="cuda")
    for round_ in (0, 1):
        payload = cepam.encode(x, cepam.Gaussian(sigma=0.05), secret=SECRET, round=round_,
                               client=1, clip=10.0, coder=coder)
        assert cepam.decode(payload, secret=SECRET, device="cuda", out=out) is out
        assert torch.equal(out.cpu(), cepam.decode(payload, secret=SECRET))
    update = {"w": x.reshape(50, 100), "b": x[:7].clone()}
    payload = cepam.encode(update, cepam.Gaussian(sigma=0.05), secret=SECRET, round=2, client=1,
                           clip=10.0, coder=coder)
    flat = torch.full((5007,), float("nan"), device="cuda")
    got, want = (cepam.decode(payload, secret=SECRET, device="cuda", out=flat),
                 cepam.decode(payload, secret=SECRET))
    for name in want:
        assert torch.equal(got[name].cpu(), want[name])
        assert got[name].untyped_storage().data_ptr() == flat.untyped_storage().data_ptr()


def test_a_wrong_gpu_result_raises_device_error(path, monkeypatch):
    """The spot-check after every GPU encode: a lattice point the GPU got
    wrong at a checked sub-vector (the first is always checked) is loud."""
    import torch

    real = path.module.encode_lattice

    def wrong(*args, **kwargs):
        H, M, beta, V, timing = real(*args, **kwargs)
        M[0] += 1
        return H, M, beta, V, timing

    monkeypatch.setattr(path.module, "encode_lattice", wrong)
    x = path.put(torch.randn(5000))
    with pytest.raises(DeviceError, match="sub-vector 0 of"):
        cepam.encode(x, cepam.Gaussian(sigma=0.05), secret=SECRET, round=0, client=0,
                     lattice="D4")


@experimental
@pytest.mark.parametrize("what", ["stage", "stream"])
@pytest.mark.parametrize("lattice", ["Z", "E8"])
def test_a_wrong_body_from_the_gpu_raises_device_error(what, lattice, path, monkeypatch):
    """With the ANS coder's body coded on the GPU: a wrong spot-checked
    sub-vector, or a wrong byte in the one segment the host codes again, is
    loud."""
    import torch

    real = path.module.encode_ans_body_resident

    def wrong(*args, **kwargs):
        body, (H, M, beta, V), timing = real(*args, **kwargs)
        if what == "stage":
            M[0] += 1
        else:
            body = body[:-3] + bytes([body[-3] ^ 0x10]) + body[-2:]
        return body, (H, M, beta, V), timing

    monkeypatch.setattr(path.module, "encode_ans_body_resident", wrong)
    monkeypatch.setattr(cuda.LatticeStage, "codes_body_on_device", lambda self, **_: True)
    x = path.put(torch.randn(5000))  # (rms/sigma = 20: the box model on E8)
    with pytest.raises(DeviceError, match="sub-vector 0 of" if what == "stage" else "segment 0"):
        cepam.encode(x, cepam.Gaussian(sigma=0.05), secret=SECRET, round=0, client=0,
                     clip=1e4, lattice=lattice)


@experimental
@pytest.mark.parametrize("mech,lattice,n,m,spread", [
    *[(mech, 1, n, m, spread) for mech, n in [(1, 1), (2, 1), (1, 2), (2, 3), (1, 8), (3, 1)]
      for m, spread in [(4_099, 3.0), (3 * (1 << 17) + 5, 0.2), (8_193, 0.0)]],
    *[(1, lattice, n, m, spread) for lattice, n in [(2, 2), (3, 4), (4, 8)]
      for m, spread in [(4_099, 5.0), (3 * (1 << 17) + 5, 5.0), (8_193, 0.0),
                        (3 * (1 << 17) + 5, 0.3)]]])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ans_bodies_coded_on_the_gpu_are_the_cpu_bodies(mech, lattice, n, dtype, m, spread, device):
    """The stage, the segments' symbols and their streams on the GPU
    (_cuda.encode_ans_body_resident): the CPU's body, and the spot-checked
    sub-vectors' stage, bit for bit; on A2, D4 and E8 the box model's
    (spread 5) and the point model's streams (spread 0 and 0.3: each
    sub-vector's candidates enumerated by a GPU thread)."""
    x = np.random.default_rng(m + n).normal(scale=spread, size=m).astype(dtype)
    kw = dict(_kw(mech, lattice, n), factor=0.75)
    spot = cuda.spot_indices(KEY, -(-m // n))
    body, stage, timing = device.module.encode_ans_body_resident(
        device.put(x), statistics=hooks.model_statistics(x, factor=0.75), spot=spot, **kw)
    assert body == _core.encode(x, coder=2, **kw)
    _assert_spot_stage(stage, x, kw, spot, n)


def _assert_spot_stage(stage, x, kw, spot, n):
    """The spot-checked sub-vectors' stage a GPU gave is the host's, bit for bit."""
    H, M, beta, V = hooks.encode_subvectors(x, **kw)
    at = spot.astype(np.int64)
    assert stage[0].tobytes() == H[at].tobytes() and stage[2].tobytes() == beta[at].tobytes()
    assert stage[1].tobytes() == M.reshape(-1, n)[at].tobytes()
    assert stage[3].tobytes() == V.reshape(-1, n)[at].tobytes()


@pytest.mark.parametrize("mech,lattice,n,m,spread", [
    (1, 1, 1, 4_099, 5.0), (1, 1, 2, 3 * (1 << 17) + 5, 5.0), (2, 1, 2, 8_193, 0.0),
    (3, 1, 1, 4_099, 50.0), (1, 1, 8, 2 * (1 << 17) + 3, 1e4), (1, 4, 8, 3 * (1 << 17) + 5, 5.0),
    (1, 1, 1, 3 * (1 << 17), (0.01, 1e3, 30.0))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_golomb_bodies_coded_on_the_gpu_are_the_cpu_bodies(mech, lattice, n, dtype, m, spread,
                                                           device):
    """The stage and every segment's codes on the GPU
    (_cuda.encode_golomb_body_resident: the units' codes counted, then
    written at their bit offsets with atomic ORs): the CPU's body, and the
    spot-checked sub-vectors' stage, bit for bit; one and several
    segments, long codes (spread 1e4), constant updates (spread 0), and
    segments of their own orders (a spread a segment)."""
    rng = np.random.default_rng(m + n)
    scales = np.repeat(spread, -(-m // len(spread)))[:m] if isinstance(spread, tuple) else spread
    x = rng.normal(scale=scales, size=m).astype(dtype)
    kw = dict(_kw(mech, lattice, n), factor=0.75)
    spot = cuda.spot_indices(KEY, -(-m // n))
    body, stage, _ = device.module.encode_golomb_body_resident(device.put(x), spot=spot, **kw)
    assert body == _core.encode(x, coder=1, **kw)
    _assert_spot_stage(stage, x, kw, spot, n)


@experimental
@pytest.mark.parametrize("mech,lattice,n,m,spread", [
    (1, 1, 1, 4_099, 5.0), (1, 1, 2, 4_099, 5.0), (2, 1, 1, 3 * (1 << 17) + 5, 5.0),
    (1, 1, 8, 8_193, 5.0), (1, 3, 4, 4_099, 5.0), (1, 4, 8, 2 * (1 << 17) + 3, 5.0),
    (1, 2, 2, 3 * (1 << 17) + 5, 0.3), (1, 4, 8, 3 * (1 << 17) + 5, 0.3)])
def test_the_symbol_kernel_gives_the_host_twins_symbols(mech, lattice, n, m, spread, device):
    """The symbol kernel (_cuda.body_symbols) against its host twin
    (hooks.body_symbols), symbol by symbol, and the segments with a point
    table (spread 0.3).  On its first GPU run (H100, nvcc 13.0) the kernel's
    counts were right but its symbols never reached the output, while it
    stored through a pointer to either a local array or the output;
    whole-body tests saw only a wrong stream."""
    x = np.random.default_rng(m + n).normal(scale=spread, size=m).astype(np.float32)
    kw = dict(_kw(mech, lattice, n), factor=0.75)
    on_device = device.module.body_symbols(
        device.put(x), statistics=hooks.model_statistics(x, factor=0.75), **kw)
    host = hooks.body_symbols(x, **kw)
    assert host[3].any() == (spread < 1)  # (the point model's streams, where it has tables)
    for a, b in zip(on_device, host):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("chunk,threads", [(1, 1), (1000, 3), (4096, 1), (1 << 20, 1),
                                           (1 << 20, 7)])
def test_gpu_results_do_not_depend_on_the_launch_chunk(chunk, threads, device):
    """...nor on the host threads that receive (encode) and pack (decode)
    each chunk."""
    kw = _kw(1, 4, 8)  # Gaussian, E8
    # (a chunk a coordinate: a launch a coordinate, so fewer of them)
    x = _input(100_003 if chunk > 1 else 4_099, np.float32, seed=5)
    H, M, beta, V, _ = device.module.encode_lattice(device.put(x), factor=0.75, chunk=chunk,
                                                    threads=threads, **kw)
    H2, M2, beta2, V2 = hooks.encode_subvectors(x, factor=0.75, **kw)
    assert (H.tobytes(), M.tobytes(), beta.tobytes(), V.tobytes()) == \
        (H2.tobytes(), M2.tobytes(), beta2.tobytes(), V2.tobytes())
    capsule, _ = device.module.decode_lattice(H, M, m=x.size, dtype="float32", chunk=chunk,
                                              threads=threads, **kw)
    y = device.get(capsule)
    assert y.tobytes() == hooks.decode_lattice(H, M, m=x.size, dtype="float32", **kw).tobytes()


@experimental
def test_gpu_rans_streams_are_the_cpu_streams(device):
    rng = np.random.default_rng(2)
    counts = [0, 1, 3, 4, 5, 4099, 1 << 17, 77]
    first = np.concatenate([[0], np.cumsum(counts)]).astype(np.uint64)
    freq = rng.integers(1, 1 << 12, int(first[-1])).astype(np.uint32)
    start = (rng.random(freq.size) * ((1 << 24) - freq)).astype(np.uint32)
    streams, timing = device.module.rans_encode_segments(start, freq, first)
    assert streams == hooks.rans_encode_segments(start, freq, first)


@experimental
@pytest.mark.parametrize("mech,lattice,n", [(1, 1, 1), (2, 1, 1), (1, 2, 2), (1, 3, 4),
                                            (1, 4, 8)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ans_bodies_with_gpu_coded_streams_are_the_cpu_bodies(mech, lattice, n, dtype, device):
    x = np.random.default_rng(lattice).normal(scale=0.2, size=300_001).astype(dtype)
    kw = dict(_kw(mech, lattice, n), factor=0.75)
    assert device.module.encode_ans_body(x, **kw) == _core.encode(x, coder=2, **kw)


def test_golden_vectors_encode_to_the_same_bytes_from_the_gpu(path):
    import importlib.util
    import torch

    from helpers.paths import GOLDEN

    spec = importlib.util.spec_from_file_location(
        "golden_generate", GOLDEN / "generate.py")
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    for name, case in generate.CASES.items():
        update = generate.update_for(name)
        leaves = update if isinstance(update, dict) else {"x": update}
        cpu = {k: torch.from_numpy(np.array(v)) for k, v in leaves.items()}
        gpu = {k: path.put(v) for k, v in cpu.items()}
        kw = dict(secret=generate.SECRET, round=3, client=5, message=1, dim=case["dim"],
                  clip=case["clip"], coder=case["coder"], nonce=generate.nonce_of(name))
        assert cepam.encode(gpu, case["mechanism"], **kw) == cepam.encode(cpu, case["mechanism"], **kw), name


def test_ci_built_the_cuda_module():
    """CI installs nvcc and sets CEPAM_REQUIRE_CUDA_MODULE, so the kernels
    can never rot uncompiled (.ci/run)."""
    import os

    if not os.environ.get("CEPAM_REQUIRE_CUDA_MODULE"):
        pytest.skip("CEPAM_REQUIRE_CUDA_MODULE is not set (only CI requires the module)")
    assert _cuda is not None, "cepam._cuda was not built although CI installed nvcc"


def test_ci_built_the_kernels_for_the_host():
    """CI builds cepam._cuda_on_host (CEPAM_REQUIRE_CUDA_ON_HOST, .ci/run), so
    the device tests above run on every CI machine, GPU or not."""
    import os

    if not os.environ.get("CEPAM_REQUIRE_CUDA_ON_HOST"):
        pytest.skip("CEPAM_REQUIRE_CUDA_ON_HOST is not set (only CI requires the module)")
    assert ON_HOST is not None, "cepam._cuda_on_host was not built (SKBUILD_CMAKE_DEFINE?)"


@pytest.mark.parametrize("m", [1, 4099, (1 << 16) + 1, 5 * (1 << 16) + 7])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_sum_of_squares_is_the_host_blocks(m, dtype, device):
    x = _input(m, dtype, seed=m)
    total, maxabs, _ = device.module.sum_of_squares(device.put(x))
    assert (total, maxabs) == hooks.sum_of_squares_blocks(x)


@pytest.mark.parametrize("m", [1, 4099, (1 << 16) + 3, 3 * (1 << 20) + 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("factor", [1.0, 0.3])
def test_gpu_model_statistics_are_the_host_twins(m, dtype, factor, device):
    """The source model's statistics kernels (cuda/model_gpu.cu) against
    their host twin; the model fitted from them is then the CPU's
    (tests/core/test_model_stats.py)."""
    x = _input(m, dtype, seed=m)
    x[m // 2] *= 1e3  # an outlier: the range
    rng, counts, _ = device.module.model_statistics(device.put(x), factor=factor)
    twin_rng, twin_counts = hooks.model_statistics(x, factor=factor)
    assert rng == twin_rng
    np.testing.assert_array_equal(counts, twin_counts)


# --- bodies decoded whole on the GPU (not decode's default yet) ---------------

@experimental
@pytest.mark.parametrize("lattice,n,m,dtype,scale", [
    (1, 1, 5, "float32", 0.01), (1, 1, 2 * (1 << 17) + 77, "float32", 0.01),
    (1, 2, 300_001, "float64", 0.01), (1, 3, 9_001, "float32", 0.01),
    (1, 8, 70_000, "float64", 0.01), (2, 2, 70_001, "float32", 0.01),
    (3, 4, 2 * (1 << 17) + 3, "float64", 0.01), (4, 8, 300_001, "float32", 0.01),
    (2, 2, 70_001, "float64", 1e-4), (3, 4, 9_001, "float32", 1e-4),
    (4, 8, 2 * (1 << 17) + 3, "float32", 3e-4)])
def test_the_gpu_decodes_bodies_to_the_cpu_values(lattice, n, m, dtype, scale, device):
    """Bodies of the box model (scale 0.01: rms/sigma = 10) and of the point
    model (below the noise: each table built by the reading thread)."""
    from test_segment_decode import KEY as ZKEY, _params, _update

    params = _params(n, lattice=lattice)
    body = _core.encode(_update(m, np.dtype(dtype), scale=scale, seed=n), key=ZKEY,
                        params=params, factor=1.0, coder=2, threads=2)
    capsule, _ = device.module.decode_ans_body_resident(body, m=m, key=ZKEY, params=params,
                                                        dtype=dtype)
    y = device.get(capsule)
    ref = _core.decode(body, m=m, key=ZKEY, params=params, coder=2, dtype=dtype, threads=2)
    assert y.tobytes() == ref.tobytes()


@experimental
@pytest.mark.parametrize("lattice,n,scale", [(1, 2, 0.01), (4, 8, 0.01), (4, 8, 3e-4)])
def test_the_gpu_refuses_corrupted_bodies_as_the_cpu_does(lattice, n, scale, device):
    from test_segment_decode import KEY as ZKEY, _corruptions, _outcome, _params, _update

    m, params = 2 * (1 << 17) + 5, _params(n, lattice=lattice)
    body = _core.encode(_update(m, scale=scale, seed=2), key=ZKEY, params=params, factor=1.0,
                        coder=2, threads=1)

    def on_gpu(bad):
        capsule, _ = device.module.decode_ans_body_resident(bad, m=m, key=ZKEY, params=params,
                                                            dtype="float32")
        return device.get(capsule)

    for bad in _corruptions(body, np.random.default_rng(2), 40):
        cpu = _outcome(lambda: _core.decode(bad, m=m, key=ZKEY, params=params, coder=2,
                                            dtype="float32", threads=1))
        assert _outcome(lambda: on_gpu(bad)) == cpu


@pytest.mark.parametrize("lattice,n,mechanism,m,dtype", [
    (1, 1, 1, 5, "float32"), (1, 1, 1, 2 * (1 << 17) + 77, "float32"),
    (1, 2, 1, 300_001, "float64"), (1, 3, 1, 9_001, "float32"), (1, 1, 2, 70_000, "float64"),
    (1, 8, 1, 70_000, "float32"), (2, 2, 1, 70_001, "float32"),
    (3, 4, 1, 2 * (1 << 17) + 3, "float64"), (4, 8, 1, 300_001, "float32")])
def test_the_gpu_decodes_golomb_bodies_to_the_cpu_values(lattice, n, mechanism, m, dtype, device):
    """_cuda.decode_golomb_body_resident: a block a segment, a piece's
    sections read by one thread, its values by all."""
    from test_golomb_segment import KEY as GKEY, _params as _gparams, _update as _gupdate

    params = _gparams(n, mechanism, lattice=lattice)
    body = _core.encode(_gupdate(m, np.dtype(dtype), seed=n), key=GKEY, params=params,
                        factor=1.0, coder=1, threads=2)
    capsule, _ = device.module.decode_golomb_body_resident(body, m=m, key=GKEY, params=params,
                                                           dtype=dtype)
    y = device.get(capsule)
    ref = _core.decode(body, m=m, key=GKEY, params=params, coder=1, dtype=dtype, threads=2)
    assert y.tobytes() == ref.tobytes()


@pytest.mark.parametrize("lattice,n,mechanism", [(1, 2, 1), (1, 1, 2), (4, 8, 1)])
def test_the_gpu_refuses_corrupted_golomb_bodies_as_the_cpu_does(lattice, n, mechanism, device):
    from test_golomb_segment import (
        KEY as GKEY, _forged_trials, _params as _gparams, _update as _gupdate,
    )
    from test_segment_decode import _corruptions, _outcome

    m, params = 2 * (1 << 17) + 5, _gparams(n, mechanism, lattice=lattice)
    body = _core.encode(_gupdate(m, seed=2), key=GKEY, params=params, factor=1.0, coder=1,
                        threads=1)

    def on_gpu(bad, m=m, params=params):
        capsule, _ = device.module.decode_golomb_body_resident(bad, m=m, key=GKEY,
                                                               params=params, dtype="float32")
        return device.get(capsule)

    def on_cpu(bad, m=m, params=params):
        return _core.decode(bad, m=m, key=GKEY, params=params, coder=1, dtype="float32",
                            threads=1)

    for bad in _corruptions(body, np.random.default_rng(2), 40):
        assert _outcome(lambda: on_gpu(bad)) == _outcome(lambda: on_cpu(bad))
    # A bad trial index and an overflow in one chunk of 256 sub-vectors (the
    # trial index first) and in two (test_golomb_segment.py).
    x = _gupdate(4_000, seed=9)
    for bad_at, scale in ((300, 1.15e37), (255, 1.15e37), (300, 1e-3)):
        z1 = _core.Params(mechanism=1, scale=scale, lattice=1, n=1)
        forged = _forged_trials(x, bad_at)
        assert _outcome(lambda: on_gpu(forged, 4_000, z1)) == \
            _outcome(lambda: on_cpu(forged, 4_000, z1))


@needs_gpu
@pytest.mark.cuda
@pytest.mark.parametrize("lattice,clip,coder", [
    pytest.param("Z", 1e4, "ans", marks=experimental),
    pytest.param("E8", 1e4, "ans", marks=experimental),
    pytest.param("E8", 0.5, "ans", marks=experimental), ("Z", 1e4, "golomb"),
    ("E8", 1e4, "golomb")])
def test_decode_takes_the_gpu_body_decoder_when_asked(lattice, clip, coder, monkeypatch):
    """The ANS box model's body (rms/sigma = 20) and point model's (clipped
    to rms/sigma = 0.2), and Golomb bodies, each by its coder's decoder."""
    update = {"w": np.random.default_rng(0).normal(size=(300, 7)).astype(np.float32)}
    payload = cepam.encode(update, cepam.Gaussian(sigma=0.05), secret=SECRET, round=1, client=1,
                           clip=clip, lattice=lattice, coder=coder)
    monkeypatch.setattr(cuda, "decodes_body_on_device", lambda **_: True)
    calls = []
    name = f"decode_{coder}_body_resident"
    original = getattr(_cuda, name)
    monkeypatch.setattr(_cuda, name, lambda *a, **k: calls.append(1) or original(*a, **k))
    out = cepam.decode(payload, secret=SECRET, device="cuda")
    assert calls and out["w"].is_cuda
    assert np.array_equal(out["w"].cpu().numpy(), cepam.decode(payload, secret=SECRET)["w"])
