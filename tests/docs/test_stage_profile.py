"""bench/stage_profile.py: the stages of docs/guide/performance.md's profile
are the script's table, and the native core's hot symbols (as `perf` names
them) fall into the stage the docs say."""

from __future__ import annotations


import pytest

from helpers.paths import ROOT, load_script


@pytest.fixture(scope="module")
def stage_profile():
    return load_script(ROOT / "bench" / "stage_profile.py")


@pytest.mark.parametrize("symbol, stage", [
    ("cepam::(anonymous namespace)::blocks16_avx512", "ChaCha keystream"),
    ("cepam::kernels::(anonymous namespace)::gaussian_radii_avx512", "latent radii"),
    ("cepam::kernels::avx512::maxwell_radii", "latent radii"),
    ("cepam::kernels::gaussian_pair_radii", "latent radii"),  # (format version 9)
    ("cepam::maxwell_radii_at(double, cepam::KeyStream const&, unsigned long, unsigned long, "
     "unsigned long*, double*)", "latent radii"),
    ("cepam::kernels::lanes::trials<cepam::kernels::avx512::Avx512Ops, E8>", "LRSUQ trials"),
    ("cepam::kernels::avx512::zn_trial", "LRSUQ trials"),
    ("cepam::kernels::(anonymous namespace)::reciprocals_avx512", "LRSUQ trials"),
    ("cepam::kernels::avx512::zn_dither", "dithers and reconstruction"),
    ("cepam::(anonymous namespace)::reconstruct_impl<float, cepam::BasicLatticeZn<1> >",
     "dithers and reconstruction"),
    ("cepam::(anonymous namespace)::count_cells<float>", "source model"),
    ("cepam::(anonymous namespace)::max_abs_avx512", "source model"),
    ("cepam::(anonymous namespace)::cells_avx512", "source model"),
    ("cepam::cell_kernels::avx512::encode_run(cepam::CellCoder const&)", "conditional coder"),
    ("unsigned long cepam::cell_lanes::encode_run<cepam::simd::Avx2Lanes>(cepam::CellCoder)",
     "conditional coder"),
    ("cepam::(anonymous namespace)::BoxGroups::operator()", "conditional coder"),
    ("cepam::AnsEncoder::finish_together", "rANS"),
    ("cepam::rans_kernels::avx512::encode_groups", "rANS"),
    ("cepam::(anonymous namespace)::append_rans_run", "rANS"),
    ("clear_page_erms", "kernel: fresh pages"),
    ("_PyEval_EvalFrameDefault", "other"),
])
def test_symbols_fall_into_their_stage(stage_profile, symbol, stage):
    assert stage_profile.stage_of(symbol).startswith(stage)


def test_the_published_profile_has_the_scripts_stages(stage_profile):
    text = (ROOT / "docs" / "guide" / "performance.md").read_text()
    header = "| stage | Z encode | Z decode | E8 encode | E8 decode |"
    lines = text.split(header, 1)[1].strip().splitlines()[1:]
    rows = lines[:next(i for i, line in enumerate(lines) if not line.startswith("|"))]
    assert [row.split("|")[1].strip() for row in rows] == \
        [stage for stage, _ in stage_profile.STAGES] + ["other"]
    for row in rows:
        shares = [float(c) for c in row.strip().strip("|").split("|")[1:]]
        assert all(0.0 <= share <= 100.0 for share in shares)
    assert sum(float(row.split("|")[2]) for row in rows) == pytest.approx(100.0, abs=1.0)
