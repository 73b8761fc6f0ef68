"""cepam: private, compressed federated-learning updates (LRSUQ / CEPAM)."""

from .errors import (
    AuthenticationError,
    CepamError,
    ContextReuseError,
    EncodingError,
    FormatError,
    InvalidArgumentError,
    InvalidTypeError,
)

__version__ = "0.1.0"
