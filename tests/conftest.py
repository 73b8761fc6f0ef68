import hashlib
import itertools
import os
from pathlib import Path

import numpy as np
import pytest

import cepam

# Fixed secrets (and, where an assertion depends on the noise, a fixed nonce=
# or the counted_nonces fixture below): every statistical test is deterministic.
SECRET_A = bytes(range(32))
SECRET_B = bytes(range(100, 132))


@pytest.fixture
def secret() -> bytes:
    return SECRET_A


def roundtrip_error(x, mechanism, *, secret=SECRET_A, dim=1, round=0, client=0, message=0,
                    clip=None, nonce=bytes(16)):
    """decode(encode(x)) - x in float64, for a 1-D float64 numpy input (under a
    fixed payload nonce by default: the same noise at every run)."""
    payload = cepam.encode(x, mechanism, secret=secret, round=round, client=client,
                           message=message, dim=dim, clip=clip, nonce=nonce)
    y = cepam.decode(payload, secret=secret)
    return y.astype(np.float64) - x, payload


def _counted(label: bytes, size: int):
    """A function returning ``size`` bytes from sha256(label, counter): fixed
    values, a new one at each call."""
    counter = itertools.count()
    return lambda: hashlib.sha256(label + b"/%d" % next(counter)).digest()[:size]


@pytest.fixture
def counted_nonces(monkeypatch):
    """Payload nonces from a counter, not the operating system, for tests of
    code that encodes without ``nonce=`` (examples, bench scripts, the demo,
    docstrings) and asserts what its noise only makes likely: the noise, and
    so the result, is then the same at every run.  (It replaces the name
    cepam.encoding resolves ``nonce=None`` with; were that name gone, the
    test would error, not go back to fresh nonces.)"""
    import cepam.encoding

    monkeypatch.setattr(cepam.encoding, "new_nonce", _counted(b"cepam-tests/nonce", 16))


@pytest.fixture
def counted_secrets(monkeypatch):
    """``cepam.new_secret()`` from a counter, not the operating system (as
    counted_nonces, for code that draws its own secret)."""
    monkeypatch.setattr(cepam, "new_secret", _counted(b"cepam-tests/secret", 32))


@pytest.fixture
def one_torch_thread():
    """torch on one thread for the test (the FL tests' results are per thread count)."""
    torch = pytest.importorskip("torch")  # the FL tests only; torch is an extra

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def pytest_sessionstart(session: pytest.Session) -> None:
    """With CEPAM_CI_PYTEST_STARTED set (by .ci/run), touches that file: the
    README's test command has reached its tests, so pip has finished
    changing the venv and CI's other lanes may run tests in it."""
    started = os.environ.get("CEPAM_CI_PYTEST_STARTED")
    if started:
        Path(started).touch()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked cuda_experimental (the whole-body CUDA ANS coder) skip
    unless the module they run on was built with them: the one of their
    ``device`` or ``path`` parameter ("gpu" or "host"), else either."""
    if item.get_closest_marker("cuda_experimental") is None:
        return
    from helpers import cuda_devices

    params = getattr(item, "callspec", None)
    params = params.params if params is not None else {}
    where = params.get("device", params.get("path"))
    if not cuda_devices.experimental(where if where in ("gpu", "host") else None):
        pytest.skip("needs the whole-body CUDA ANS coder "
                    "(pip install -C cmake.define.CEPAM_CUDA_EXPERIMENTAL=ON .)")
