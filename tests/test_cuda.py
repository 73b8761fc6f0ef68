"""The CUDA path: the module cepam._cuda, CUDA inputs and outputs.

Tests marked ``cuda`` need a CUDA device (and torch with CUDA) and skip
cleanly without one; ``python bench/gpu_check.py`` runs them with the
throughput table on a GPU machine.  The others run everywhere: the module
must import and report "no device" on machines without a driver, and the
API must say clearly what it cannot do.
"""

import warnings

import numpy as np
import pytest

import cepam
from cepam import cuda
from cepam._core import testing as hooks
from cepam.errors import DeviceError, InvalidArgumentError

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
    kw = dict(secret=SECRET, round=1, client=2, clip=5.0, lattice="Z")
    expected = cepam.encode(x, cepam.Gaussian(sigma=0.1), **kw)
    assert cepam.encode(_DLPackOnly(x), cepam.Gaussian(sigma=0.1), **kw) == expected


def _cuda_path(monkeypatch, available: bool) -> None:
    """Pretends the CUDA path is (not) available, whatever this machine has,
    with the once-flag reset (other tests of the worker may have set it)."""
    why = "" if available else "no usable CUDA device: pretended by the test"
    monkeypatch.setattr(cuda, "status", lambda: (available, why))
    monkeypatch.setattr(cuda, "_warned_host_copy", False)


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


# --- on a GPU ------------------------------------------------------------------

def _kw(mech, lattice, n):
    return dict(key=KEY, mechanism=mech, scale=0.5, lattice=lattice, n=n)


@needs_gpu
@pytest.mark.cuda
@pytest.mark.parametrize("mech,lattice,n", CONFIGS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_lattice_stage_is_bit_identical(mech, lattice, n, dtype):
    import torch

    x = _input(4099, dtype, seed=lattice * 10 + n)
    xd = torch.from_numpy(x).cuda()
    H, M, beta, V, timing = _cuda.encode_lattice(xd.__dlpack__(stream=1), factor=0.75,
                                                 **_kw(mech, lattice, n))
    H2, M2, beta2, V2 = hooks.encode_subvectors(x, factor=0.75, **_kw(mech, lattice, n))
    np.testing.assert_array_equal(H, H2)
    np.testing.assert_array_equal(M, M2)
    assert beta.tobytes() == beta2.tobytes() and V.tobytes() == V2.tobytes()
    assert timing["kernel_ms"] >= 0.0
    for out in ("float32", "float64"):
        capsule, _ = _cuda.decode_lattice(H, M, m=x.size, dtype=out, **_kw(mech, lattice, n))
        y = torch.from_dlpack(capsule).cpu().numpy()
        y2 = hooks.decode_lattice(H, M, m=x.size, dtype=out, **_kw(mech, lattice, n))
        assert y.tobytes() == y2.tobytes()


@needs_gpu
@pytest.mark.cuda
@pytest.mark.parametrize("lattice", ["Z", "E8", "auto"])
def test_cuda_tensors_encode_to_the_cpu_bytes_and_decode_on_the_gpu(lattice):
    import torch

    update = {"w": torch.randn(300, 7, generator=torch.Generator().manual_seed(0)),
              "b": torch.randn(13, generator=torch.Generator().manual_seed(1))}
    kw = dict(secret=SECRET, round=4, client=1, clip=10.0, lattice=lattice)
    expected = cepam.encode(update, cepam.Gaussian(sigma=0.05), **kw)
    on_gpu = {k: v.cuda() for k, v in update.items()}
    assert cepam.encode(on_gpu, cepam.Gaussian(sigma=0.05), **kw) == expected
    out = cepam.decode(expected, secret=SECRET, device="cuda")
    ref = cepam.decode(expected, secret=SECRET)
    for k in update:
        assert out[k].is_cuda
        assert torch.equal(out[k].cpu(), ref[k])


@needs_gpu
@pytest.mark.cuda
def test_golden_vectors_encode_to_the_same_bytes_from_the_gpu():
    import importlib.util
    from pathlib import Path

    import torch

    spec = importlib.util.spec_from_file_location(
        "golden_generate", Path(__file__).parent / "golden" / "generate.py")
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    for name, case in generate.CASES.items():
        update = generate.update_for(name)
        leaves = update if isinstance(update, dict) else {"x": update}
        cpu = {k: torch.from_numpy(np.array(v)) for k, v in leaves.items()}
        gpu = {k: v.cuda() for k, v in cpu.items()}
        kw = dict(secret=generate.SECRET, round=3, client=5, message=1, dim=case["dim"],
                  clip=case["clip"], coder=case["coder"])
        assert cepam.encode(gpu, case["mechanism"], **kw) == cepam.encode(cpu, case["mechanism"], **kw), name


def test_ci_built_the_cuda_module():
    """CI installs nvcc and sets CEPAM_REQUIRE_CUDA_MODULE, so the kernels
    can never rot uncompiled (.ci/run)."""
    import os

    if not os.environ.get("CEPAM_REQUIRE_CUDA_MODULE"):
        pytest.skip("CEPAM_REQUIRE_CUDA_MODULE is not set (only CI requires the module)")
    assert _cuda is not None, "cepam._cuda was not built although CI installed nvcc"
