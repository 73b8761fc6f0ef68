"""The sdist holds what the build and the tests need and nothing generated;
the licence file matches the metadata.

Builds the sdist from the source tree (no isolation: scikit-build-core from
the environment); skips against an installed wheel, where there is no tree.
"""

import subprocess
import sys
import tarfile

import pytest

from helpers.paths import ROOT


@pytest.fixture(scope="module")
def sdist_members(tmp_path_factory):
    if not (ROOT / "pyproject.toml").exists() or not (ROOT / "csrc").is_dir():
        pytest.skip("needs the source tree")
    if getattr(pytest.importorskip("build"), "__file__", None) is None:
        # A build/ folder in the working directory imports as a namespace package.
        pytest.skip("the build package (python -m build) is not installed")
    pytest.importorskip("scikit_build_core")
    out = tmp_path_factory.mktemp("sdist")
    subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation",
                    "--skip-dependency-check", "--outdir",
                    str(out), str(ROOT)], check=True, capture_output=True)
    (archive,) = out.glob("cepam-*.tar.gz")
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    top = names[0].split("/")[0]
    return {n[len(top) + 1:] for n in names if n != top}


def test_sdist_holds_the_build_and_the_tests(sdist_members):
    tracked = subprocess.run(["git", "ls-files", "csrc", "python", "tests"], cwd=ROOT,
                             capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    for path in tracked.stdout.split():
        assert path in sdist_members, path
    for path in ("pyproject.toml", "CMakeLists.txt", "README.md", "LICENSE", "CHANGELOG.md",
                 "tests/golden/generate.py", "tests/native/golden_digest.cpp",
                 "tools/cross_check.sh", "tools/check_wheel.sh", "docs/format.md", ".ci/run"):
        assert path in sdist_members, path


def test_sdist_leaves_out_generated_files(sdist_members):
    for name in sdist_members:
        assert not name.startswith(("docs/experiments/", "docs/bitrate/", "build/",
                                    ".github/", ".venv/")), name
        assert "__pycache__" not in name and not name.endswith((".so", ".pyd", ".o")), name


def test_license_file_is_the_apache_2_text():
    license_file = ROOT / "LICENSE"
    if not license_file.exists():
        pytest.skip("needs the source tree")
    text = license_file.read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert 'license = "Apache-2.0"' in (ROOT / "pyproject.toml").read_text()
