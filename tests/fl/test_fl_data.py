"""cepam.fl: the MNIST loader (checksums, missing files, downloads) and the splits."""

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import cepam
from cepam.fl import data as fldata
from cepam.fl.split import dirichlet_split, iid_split, split_clients, train_validation_split

from helpers.paths import ROOT as REPO


def mnist_dir() -> Path | None:
    """The shared MNIST copy beside the repository, or $CEPAM_DATA."""
    for candidate in (REPO.parent / "shared" / "data" / "mnist", os.environ.get("CEPAM_DATA")):
        if candidate and all((Path(candidate) / f).is_file() for f in fldata.FILES.values()):
            return Path(candidate)
    return None


needs_mnist = pytest.mark.skipif(
    mnist_dir() is None,
    reason="MNIST not found in ../shared/data/mnist beside the repository nor in $CEPAM_DATA",
)


@pytest.fixture
def mnist_copy(tmp_path):
    """A writable copy of the four MNIST files."""
    src = mnist_dir()
    if src is None:
        pytest.skip("MNIST not found in ../shared/data/mnist nor in $CEPAM_DATA")
    dst = tmp_path / "mnist"
    dst.mkdir()
    for name in fldata.FILES.values():
        shutil.copyfile(src / name, dst / name)
    return dst


@needs_mnist
def test_loads_the_shared_copy():
    m = fldata.load_mnist(mnist_dir())
    assert m.train_images.shape == (60000, 28, 28) and m.train_images.dtype == np.uint8
    assert m.test_images.shape == (10000, 28, 28)
    # Label counts and pixel statistics from shared/data/mnist/README.md.
    assert np.bincount(m.train_labels).tolist() == [5923, 6742, 5958, 6131, 5842, 5421, 5918,
                                                    6265, 5851, 5949]
    assert np.bincount(m.test_labels).sum() == 10000
    x = m.train_images.astype(np.float64) / 255.0
    assert abs(x.mean() - 0.1307) < 1e-4 and abs(x.std() - 0.3081) < 1e-4


@needs_mnist
def test_environment_variable_is_the_fallback(monkeypatch):
    monkeypatch.setenv("CEPAM_DATA", str(mnist_dir()))
    assert fldata.load_mnist().directory == mnist_dir()


def test_no_directory_at_all(monkeypatch):
    monkeypatch.delenv("CEPAM_DATA", raising=False)
    with pytest.raises(fldata.DatasetError, match="CEPAM_DATA"):
        fldata.load_mnist()


def test_both_training_image_checksums_are_accepted(tmp_path, monkeypatch):
    name = "train-images-idx3-ubyte.gz"
    sums = fldata.MD5SUMS[name]
    assert "f68b3c2dcbeaaa9fbdd348bbdeb94873" in sums  # official
    assert "1d473e58ef44e25f798984071547abb4" in sums  # shared copy
    # verify_file accepts a file whose MD5 is either sum and refuses a third:
    # files of other content stand in for the two (their sums in the table).
    files = []
    for i, content in enumerate([b"official stand-in", b"shared stand-in", b"other"]):
        (tmp_path / str(i)).mkdir()
        files.append(tmp_path / str(i) / name)
        files[-1].write_bytes(content)
    stand_ins = {fldata._md5(files[0]), fldata._md5(files[1])}
    monkeypatch.setitem(fldata.MD5SUMS, name, frozenset(stand_ins))
    fldata.verify_file(files[0])
    fldata.verify_file(files[1])
    with pytest.raises(fldata.DatasetError, match="checksum mismatch"):
        fldata.verify_file(files[2])


@needs_mnist
def test_the_shared_training_images_pass_the_check():
    fldata.verify_file(mnist_dir() / "train-images-idx3-ubyte.gz")


def test_dataset_error_is_a_cepam_error_and_a_value_error():
    assert issubclass(fldata.DatasetError, cepam.CepamError)
    assert issubclass(fldata.DatasetError, ValueError)


def test_missing_file_is_named_with_the_directory(mnist_copy):
    (mnist_copy / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(fldata.DatasetError) as e:
        fldata.load_mnist(mnist_copy)
    assert "t10k-labels-idx1-ubyte.gz" in str(e.value)
    assert str(mnist_copy.resolve()) in str(e.value)


def test_checksum_mismatch(mnist_copy):
    path = mnist_copy / "train-labels-idx1-ubyte.gz"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(fldata.DatasetError, match="checksum mismatch.*train-labels"):
        fldata.load_mnist(mnist_copy)


def test_corrupt_file_without_verification_is_still_refused(mnist_copy):
    path = mnist_copy / "t10k-labels-idx1-ubyte.gz"
    path.write_bytes(b"not gzip at all")
    with pytest.raises(fldata.DatasetError, match="t10k-labels"):
        fldata.load_mnist(mnist_copy, verify=False)


def test_failed_download_names_the_missing_file(tmp_path):
    # A closed port on this machine: the download fails at once, offline or not.
    empty = tmp_path / "empty"
    with pytest.raises(fldata.DatasetError) as e:
        fldata.load_mnist(empty, download=True, mirrors=("http://127.0.0.1:9/",), timeout=2)
    message = str(e.value)
    assert "train-images-idx3-ubyte.gz" in message and str(empty) in message
    assert "127.0.0.1:9" in message
    assert not any(p.name.endswith(".gz") for p in empty.iterdir())  # nothing half-written


def test_download_verifies_checksums(tmp_path, mnist_copy):
    # A "mirror" on disk serving a wrong file under the right name.
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "train-images-idx3-ubyte.gz").write_bytes(b"wrong")
    target = tmp_path / "target"
    with pytest.raises(fldata.DatasetError, match="checksum mismatch"):
        fldata.load_mnist(target, download=True, mirrors=(mirror.as_uri() + "/",))
    assert not (target / "train-images-idx3-ubyte.gz").exists()
    # A good mirror: every file is fetched and verified.
    fldata.load_mnist(target, download=True, mirrors=(mnist_copy.as_uri() + "/",))
    assert all((target / f).is_file() for f in fldata.FILES.values())


# ----------------------------------------------------------------------------- splits


def test_train_validation_split_is_disjoint_and_seeded():
    a, b = train_validation_split(60000, 50000, 10000, np.random.default_rng(1))
    assert len(a) == 50000 and len(b) == 10000 and not set(a) & set(b)
    a2, _ = train_validation_split(60000, 50000, 10000, np.random.default_rng(1))
    assert np.array_equal(a, a2)


def test_iid_split_has_the_papers_sizes():
    parts = iid_split(50000, 30, np.random.default_rng(0))
    assert [len(p) for p in parts] == [1666] * 30
    assert len(np.unique(np.concatenate(parts))) == 30 * 1666


def test_iid_split_too_small():
    with pytest.raises(cepam.InvalidArgumentError):
        iid_split(10, 3, np.random.default_rng(0), per_client=4)


def test_dirichlet_split_is_a_partition_and_heterogeneous():
    labels = np.random.default_rng(0).integers(0, 10, 5000)
    parts = dirichlet_split(labels, 10, 0.1, np.random.default_rng(1))
    allidx = np.concatenate(parts)
    assert len(allidx) == 5000 and len(np.unique(allidx)) == 5000
    assert min(len(p) for p in parts) >= 10
    # Small alpha: most clients are dominated by few classes.
    top = [np.bincount(labels[p], minlength=10).max() / len(p) for p in parts]
    assert np.median(top) > 0.4
    iid = split_clients(labels, 10, np.random.default_rng(1))
    assert np.median([np.bincount(labels[p], minlength=10).max() / len(p) for p in iid]) < 0.2


def test_dirichlet_bad_alpha():
    with pytest.raises(cepam.InvalidArgumentError):
        dirichlet_split(np.zeros(100, dtype=int), 2, 0.0, np.random.default_rng(0))
