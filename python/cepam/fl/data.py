"""MNIST from its four IDX gzip files, with checksum verification.

:func:`load_mnist` reads ``train-images-idx3-ubyte.gz``,
``train-labels-idx1-ubyte.gz``, ``t10k-images-idx3-ubyte.gz`` and
``t10k-labels-idx1-ubyte.gz`` from a directory: the ``data_dir`` argument, or
else the ``CEPAM_DATA`` environment variable.  Each file's MD5 must be one of
the sums in :data:`MD5SUMS` (the official ones; for the training images also
the sum of the copy in the project's ``shared/data/mnist``, which holds the
same 60,000 images in a different order within each digit class).

With ``download=True`` a missing file is fetched from the mirrors in
:data:`MIRRORS` and verified before it is moved into place; where the network
does not allow it, the error names the missing file, the directory searched
and the addresses tried.  Nothing is downloaded unless asked for.

Every failure raises :class:`DatasetError` (a :class:`cepam.CepamError` and a
:class:`ValueError`).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import struct
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import InvalidArgumentError

__all__ = [
    "DatasetError",
    "MNIST",
    "FILES",
    "MD5SUMS",
    "MIRRORS",
    "ENV_VAR",
    "MEAN",
    "STD",
    "resolve_data_dir",
    "verify_file",
    "load_mnist",
]

ENV_VAR = "CEPAM_DATA"

FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}

# Accepted MD5 sums per file.  The training images have two: the official
# file, and the project's shared copy (same images and labels, a different
# order within each class; see shared/data/mnist/README.md).
MD5SUMS: dict[str, frozenset[str]] = {
    "train-images-idx3-ubyte.gz": frozenset({
        "f68b3c2dcbeaaa9fbdd348bbdeb94873",  # official
        "1d473e58ef44e25f798984071547abb4",  # shared/data/mnist copy
    }),
    "train-labels-idx1-ubyte.gz": frozenset({"d53e105ee54ea40749a09fcbcd1e9432"}),
    "t10k-images-idx3-ubyte.gz": frozenset({"9fb629c4189551a2d022fa330f9573f3"}),
    "t10k-labels-idx1-ubyte.gz": frozenset({"ec29112dd5afa0611ce80d1b7f02629c"}),
}

MIRRORS: tuple[str, ...] = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
)

# Pixel statistics of the training images (of x / 255).
MEAN, STD = 0.1307, 0.3081

_SHAPES = {"train": 60000, "test": 10000}


class DatasetError(InvalidArgumentError):
    """A data set is missing, corrupt or cannot be downloaded."""


@dataclass(frozen=True)
class MNIST:
    """The raw MNIST arrays: images uint8 (N, 28, 28), labels int64 (N,)."""

    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray
    directory: Path


def resolve_data_dir(data_dir: str | os.PathLike[str] | None) -> Path:
    """The directory to read: ``data_dir``, else ``$CEPAM_DATA``.

    Raises:
        DatasetError: neither is given.
    """
    if data_dir is None or str(data_dir) == "":
        env = os.environ.get(ENV_VAR, "")
        if not env:
            raise DatasetError(
                f"no MNIST directory given: pass a data directory (--data-dir) or set "
                f"{ENV_VAR} to a folder holding {', '.join(FILES.values())}"
            )
        data_dir = env
    return Path(data_dir).expanduser()


def _md5(path: Path) -> str:
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify_file(path: str | os.PathLike[str]) -> None:
    """Checks one file's MD5 against the accepted sums for its name.

    Raises:
        DatasetError: unknown file name or checksum mismatch.
    """
    path = Path(path)
    accepted = MD5SUMS.get(path.name)
    if accepted is None:
        raise DatasetError(f"{path.name} is not an MNIST file this loader knows")
    digest = _md5(path)
    if digest not in accepted:
        raise DatasetError(
            f"checksum mismatch for {path}: md5 {digest}, expected one of "
            f"{', '.join(sorted(accepted))}; the file is corrupt or not the MNIST file "
            f"(delete it and copy or download it again)"
        )


def _download(name: str, directory: Path, mirrors: Sequence[str], timeout: float) -> None:
    """Fetches ``name`` into ``directory`` from the first mirror that works,
    verifying the checksum before the file is moved into place."""
    errors = []
    directory.mkdir(parents=True, exist_ok=True)
    for base in mirrors:
        url = base + name
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=directory)
        try:
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as r:
                while block := r.read(1 << 20):
                    out.write(block)
            tmp_path = Path(tmp)
            digest = _md5(tmp_path)
            if digest not in MD5SUMS[name]:
                errors.append(f"{url}: checksum mismatch (md5 {digest})")
                continue
            os.replace(tmp, directory / name)
            return
        except (urllib.error.URLError, OSError, ValueError) as exc:
            errors.append(f"{url}: {exc}")
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    raise DatasetError(
        f"MNIST file {name} is missing from {directory} and could not be downloaded "
        f"({'; '.join(errors) or 'no mirrors given'}); copy it there, or point "
        f"--data-dir / {ENV_VAR} at a folder that holds it"
    )


def _read_idx(path: Path, kind: str, count: int) -> np.ndarray:
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as exc:
        raise DatasetError(f"cannot read {path}: {exc}") from None
    if kind == "images":
        if len(raw) < 16:
            raise DatasetError(f"{path}: truncated IDX header")
        magic, n, rows, cols = struct.unpack(">IIII", raw[:16])
        if magic != 0x803 or n != count or rows != 28 or cols != 28:
            raise DatasetError(f"{path}: not an MNIST image file (header {magic:#x} {n} {rows} {cols})")
        data = np.frombuffer(raw, dtype=np.uint8, offset=16)
        if data.size != n * rows * cols:
            raise DatasetError(f"{path}: expected {n * rows * cols} pixels, found {data.size}")
        return data.reshape(n, rows, cols)
    if len(raw) < 8:
        raise DatasetError(f"{path}: truncated IDX header")
    magic, n = struct.unpack(">II", raw[:8])
    if magic != 0x801 or n != count:
        raise DatasetError(f"{path}: not an MNIST label file (header {magic:#x} {n})")
    labels = np.frombuffer(raw, dtype=np.uint8, offset=8)
    if labels.size != n or labels.max(initial=0) > 9:
        raise DatasetError(f"{path}: expected {n} labels in 0..9")
    return labels.astype(np.int64)


def load_mnist(
    data_dir: str | os.PathLike[str] | None = None,
    *,
    download: bool = False,
    verify: bool = True,
    mirrors: Sequence[str] = MIRRORS,
    timeout: float = 30.0,
) -> MNIST:
    """Loads MNIST from ``data_dir`` (or ``$CEPAM_DATA``).

    Args:
        data_dir: folder with the four ``.gz`` IDX files; ``None`` reads
            ``$CEPAM_DATA``.
        download: fetch missing files from ``mirrors`` (checksums verified).
        verify: check each file's MD5 (on by default).
        mirrors: base URLs to download from, tried in order.
        timeout: seconds per network operation.

    Returns:
        :class:`MNIST` with 60,000 training and 10,000 test images and labels.

    Raises:
        DatasetError: no directory, a missing file (naming it and the
            directory), a checksum mismatch, a malformed file, or a failed
            download.
    """
    directory = resolve_data_dir(data_dir)
    paths = {}
    for key, name in FILES.items():
        path = directory / name
        if not path.is_file():
            if not download:
                raise DatasetError(
                    f"MNIST file {name} not found in {directory.resolve()} (searched "
                    f"{path.resolve()}); copy the four MNIST .gz files there, point "
                    f"--data-dir / {ENV_VAR} at a folder that holds them, or download "
                    f"them with --download where the network allows"
                )
            _download(name, directory, mirrors, timeout)
        if verify:
            verify_file(path)
        paths[key] = path
    return MNIST(
        train_images=_read_idx(paths["train_images"], "images", _SHAPES["train"]),
        train_labels=_read_idx(paths["train_labels"], "labels", _SHAPES["train"]),
        test_images=_read_idx(paths["test_images"], "images", _SHAPES["test"]),
        test_labels=_read_idx(paths["test_labels"], "labels", _SHAPES["test"]),
        directory=directory,
    )


def normalize(images: np.ndarray):
    """uint8 images (N, 28, 28) -> float32 torch tensor (N, 1, 28, 28), standardised."""
    import torch

    x = np.asarray(images, dtype=np.float32) / np.float32(255.0)
    x = (x - np.float32(MEAN)) / np.float32(STD)
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).unsqueeze(1)
