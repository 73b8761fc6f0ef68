"""cepam: private, compressed federated-learning updates.

One randomized vector quantizer (LRSUQ) compresses a model update and makes
its error exactly Gaussian or Laplace noise, independent of the update:

>>> import numpy as np, cepam
>>> secret = cepam.new_secret()
>>> x = np.linspace(-0.01, 0.01, 1000, dtype=np.float32)
>>> payload = cepam.encode(x, cepam.Gaussian(sigma=1e-3), secret=secret, round=0, client=3)
>>> y = cepam.decode(payload, secret=secret)
>>> y.shape, y.dtype
((1000,), dtype('float32'))
>>> bool(abs(float(np.std(y - x)) - 1e-3) < 1e-4)
True
"""

from .baselines import encode_gaussian_sdq, encode_laplace_sdq, encode_noisy_sdq, encode_sdq
from .codec import Codec, PayloadInfo, decode, encode, inspect, update_norm
from .errors import (
    AuthenticationError,
    CepamError,
    ContextReuseError,
    DecodingError,
    DeviceError,
    EncodingError,
    FileSafetyWarning,
    PrivacyBudgetError,
    FormatError,
    InvalidArgumentError,
    InvalidTypeError,
    PrecisionWarning,
    NoiseWarning,
    PrivacyWarning,
    RateWarning,
    UnexpectedPayloadError,
)
from .guard import ContextGuard
from .keys import Context, new_secret
from .mechanisms import SDQ, Gaussian, Laplace
from .runtime import simd_level
from .ties import find_ties
from .update import apply_update
from ._version import package_version

#: The installed version of cepam (a PEP 440 string, e.g. ``"0.1.0"``).
__version__ = package_version()

__all__ = [
    "encode",
    "decode",
    "inspect",
    "update_norm",
    "find_ties",
    "apply_update",
    "simd_level",
    "Codec",
    "ContextGuard",
    "PayloadInfo",
    "encode_sdq",
    "encode_noisy_sdq",
    "encode_gaussian_sdq",
    "encode_laplace_sdq",
    "Gaussian",
    "Laplace",
    "SDQ",
    "Context",
    "new_secret",
    "CepamError",
    "InvalidArgumentError",
    "InvalidTypeError",
    "FormatError",
    "AuthenticationError",
    "ContextReuseError",
    "EncodingError",
    "DecodingError",
    "DeviceError",
    "UnexpectedPayloadError",
    "PrecisionWarning",
    "NoiseWarning",
    "PrivacyWarning",
    "FileSafetyWarning",
    "RateWarning",
    "PrivacyBudgetError",
    "__version__",
]
