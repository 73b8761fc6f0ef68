import numpy as np
import pytest

import cepam

# Fixed secrets: every statistical test is deterministic.
SECRET_A = bytes(range(32))
SECRET_B = bytes(range(100, 132))


@pytest.fixture
def secret() -> bytes:
    return SECRET_A


def roundtrip_error(x, mechanism, *, secret=SECRET_A, dim=1, round=0, client=0, message=0,
                    clip=None):
    """decode(encode(x)) - x in float64, for a 1-D float64 numpy input."""
    payload = cepam.encode(x, mechanism, secret=secret, round=round, client=client,
                           message=message, dim=dim, clip=clip)
    y = cepam.decode(payload, secret=secret)
    return y.astype(np.float64) - x, payload


@pytest.fixture
def one_torch_thread():
    """torch on one thread for the test (the FL tests' results are per thread count)."""
    torch = pytest.importorskip("torch")  # the FL tests only; torch is an extra

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
