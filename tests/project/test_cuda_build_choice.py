"""When CMake builds the CUDA module cepam._cuda (CMakeLists.txt, option
CEPAM_CUDA): by default only where a GPU is present, for its architecture;
with nvcc but no GPU nothing of CUDA is compiled (issue 39, item 7).

Each case configures the project (no build) with a stand-in nvidia-smi
first on PATH: one that fails as on a machine without a driver, or one that
reports compute capabilities.  Skips without cmake or pybind11's CMake
files (the build requirements, present where cepam was built without build
isolation)."""

import os
import shutil
import subprocess
import sys

import pytest

from helpers.paths import ROOT

CMAKE = shutil.which("cmake")
try:
    import pybind11
except ImportError:  # pragma: no cover - depends on the environment
    pybind11 = None

pytestmark = pytest.mark.skipif(CMAKE is None or pybind11 is None,
                                reason="needs cmake and pybind11 (the build requirements)")


def _nvcc():
    """A CUDA compiler: CUDACXX, nvcc on PATH or pip's nvidia-cuda-nvcc; or None."""
    found = os.environ.get("CUDACXX") or shutil.which("nvcc")
    if found:
        return found
    try:
        import nvidia
    except ImportError:
        return None
    for base in nvidia.__path__:
        for sub in ("cu13", "cuda_nvcc"):
            path = os.path.join(base, sub, "bin", "nvcc")
            if os.access(path, os.X_OK):
                return path
    return None


def _configure(tmp_path, *, smi, cudacxx, define=()):
    """Configures into tmp_path/build with a stand-in nvidia-smi (a shell
    body) on PATH; returns (exit status, CMake's output)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\n{smi}\n")
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("CUDACXX", "CUDAARCHS")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["CUDACXX"] = cudacxx
    cmd = [CMAKE, "-S", str(ROOT), "-B", str(tmp_path / "build"),
           f"-DPython_EXECUTABLE={sys.executable}", f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
           *(f"-D{d}" for d in define)]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True)
    return run.returncode, run.stdout + run.stderr


NO_GPU = "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'" \
         "; exit 9"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a shell-script nvidia-smi")
def test_nvcc_without_a_gpu_compiles_no_cuda(tmp_path):
    status, out = _configure(tmp_path, smi=NO_GPU, cudacxx=_nvcc() or "/nonexistent/nvcc")
    assert status == 0, out
    assert "cepam: no GPU found" in out
    assert "CUDA compiler" not in out  # not even CMake's compiler check runs
    assert not (tmp_path / "build" / "CMakeFiles" / "cepam_cuda.dir").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a shell-script nvidia-smi")
def test_a_gpu_without_a_compiler_is_said(tmp_path):
    status, out = _configure(tmp_path, smi="echo 8.6", cudacxx="/nonexistent/nvcc")
    assert status == 0, out
    assert "a GPU is present (sm_86) but no CUDA compiler was found" in out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a shell-script nvidia-smi")
def test_on_without_a_compiler_fails(tmp_path):
    status, out = _configure(tmp_path, smi=NO_GPU, cudacxx="/nonexistent/nvcc",
                             define=["CEPAM_CUDA=ON"])
    assert status != 0 and "CEPAM_CUDA=ON but no CUDA compiler was found" in out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a shell-script nvidia-smi")
def test_an_unknown_choice_fails(tmp_path):
    status, out = _configure(tmp_path, smi=NO_GPU, cudacxx="/nonexistent/nvcc",
                             define=["CEPAM_CUDA=YES"])
    assert status != 0 and "CEPAM_CUDA must be AUTO, ON or OFF, not 'YES'" in out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a shell-script nvidia-smi")
@pytest.mark.skipif(_nvcc() is None, reason="needs a CUDA compiler (pip install nvidia-cuda-nvcc)")
@pytest.mark.parametrize("smi, define, architectures", [
    ("printf '8.6\\n9.0\\n8.6\\n'", [], "86;90"),       # the GPUs present, once each
    (NO_GPU, ["CEPAM_CUDA=ON"], "75;80;86;89;90"),     # asked: every architecture (CI)
    ("echo 9.0", ["CMAKE_CUDA_ARCHITECTURES=80"], "80"),  # the user's list first
], ids=["gpus present", "asked", "user's list"])
def test_the_architectures_built(tmp_path, smi, define, architectures):
    status, out = _configure(tmp_path, smi=smi, cudacxx=_nvcc(), define=define)
    assert status == 0, out
    assert f"architectures {architectures})" in out, out
