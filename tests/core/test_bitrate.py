"""Bitrate benchmark (cepam.bitrate) and the noisy-SDQ baselines (cepam.baselines)."""

import argparse
import math

import numpy as np
import pytest

import cepam
from cepam import baselines, bitrate
from cepam.errors import InvalidArgumentError, InvalidTypeError

scipy_stats = pytest.importorskip("scipy.stats")

SECRET = bytes(range(32))
OTHER_SECRET = bytes(range(100, 132))
# The payload nonce of the SDQ error-law tests: with a fresh one per payload
# (the dither drawn anew) their checks would fail about once in 70,000 runs
# (mostly the Laplace variance, 4.2 standard deviations from its bound).
NONCE = bytes(range(16))


# ---------------------------------------------------------------------------
# Mutual information


@pytest.mark.parametrize("ratio", [0.01, 1.0, 10.0, 100.0, 1000.0])
def test_mutual_information_gaussian_closed_form(ratio):
    assert bitrate.mutual_information("gaussian", ratio) == pytest.approx(
        0.5 * math.log2(1.0 + ratio * ratio), rel=1e-12)


def test_mutual_information_gaussian_spec_values():
    for ratio, value in ((1.0, 0.500), (10.0, 3.329), (100.0, 6.644)):
        assert abs(bitrate.mutual_information("gaussian", ratio) - value) < 1e-3


@pytest.mark.parametrize("ratio", sorted(bitrate.DESIGN_MUTUAL_INFORMATION_UNIFORM))
def test_mutual_information_uniform_matches_spec(ratio):
    spec = bitrate.DESIGN_MUTUAL_INFORMATION_UNIFORM[ratio]
    assert abs(bitrate.mutual_information("uniform", ratio) - spec) < 1e-3


@pytest.mark.parametrize("ratio", [0.3, 1.0, 3.0])
def test_mutual_information_uniform_against_brute_force_integral(ratio):
    from scipy.special import ndtr

    y = np.linspace(-ratio - 14.0, ratio + 14.0, 400_001)
    f = (ndtr(y + ratio) - ndtr(y - ratio)) / (2.0 * ratio)
    integrand = np.where(f > 0, -f * np.log2(np.where(f > 0, f, 1.0)), 0.0)
    h_y = float(np.sum((integrand[1:] + integrand[:-1]) * 0.5 * np.diff(y)))
    expected = h_y - 0.5 * math.log2(2.0 * math.pi * math.e)
    assert bitrate.mutual_information("uniform", ratio) == pytest.approx(expected, abs=1e-6)


def test_mutual_information_uniform_limits():
    # Low SNR: I ~ Var(X) / (2 ln 2) = A^2 / (6 ln 2).
    for ratio in (1e-4, 0.01):
        assert bitrate.mutual_information("uniform", ratio) == pytest.approx(
            ratio * ratio / (6.0 * math.log(2.0)), rel=1e-3)
    # High SNR: I -> log2(2A) - h(Z).
    high = bitrate.mutual_information("uniform", 1e4)
    assert high == pytest.approx(math.log2(2e4) - 0.5 * math.log2(2 * math.pi * math.e), abs=1e-3)
    # Monotone in A, and below the Gaussian source of the same variance.
    values = [bitrate.mutual_information("uniform", a) for a in (0.1, 1.0, 10.0, 100.0)]
    assert values == sorted(values)
    for a in (0.1, 1.0, 10.0):
        assert bitrate.mutual_information("uniform", a) < bitrate.mutual_information(
            "gaussian", a / math.sqrt(3.0))


# ---------------------------------------------------------------------------
# Ideal rates


@pytest.mark.parametrize("source,ratio", [
    ("gaussian", 1.0), ("gaussian", 10.0), ("gaussian", 100.0),
    ("uniform", 0.1), ("uniform", 1.0), ("uniform", 10.0), ("uniform", 100.0),
])
def test_ideal_rate_z1_reproduces_spec(source, ratio):
    spec = bitrate.spec_ideal_rate(source, ratio)
    rate, err = bitrate.ideal_rate(source, ratio, draws=20000, seed=0, return_error=True)
    assert abs(rate - spec) < 0.03
    assert err < 0.01


def test_ideal_rate_z1_high_resolution_limit_and_determinism():
    mi = bitrate.mutual_information("gaussian", 1000.0)
    rate = bitrate.ideal_rate("gaussian", 1000.0, draws=5000)
    assert rate == pytest.approx(mi + bitrate.high_resolution_gap("Z", 1), abs=2e-3)
    assert bitrate.ideal_rate("uniform", 1.0, draws=3000, seed=4) == \
        bitrate.ideal_rate("uniform", 1.0, draws=3000, seed=4)


def test_ideal_sdq_rate_matches_spec():
    for ratio, spec in bitrate.DESIGN_SCALAR_SDQ_UNIFORM.items():
        assert abs(bitrate.ideal_sdq_rate("uniform", ratio) - spec) < 3e-3


def test_high_resolution_gaps_match_spec():
    for (lattice, dim), gap in bitrate.DESIGN_HIGH_RESOLUTION_GAP.items():
        assert bitrate.high_resolution_gap(lattice, dim) == pytest.approx(gap, abs=1e-3)
    assert bitrate.packing_density("E8") == pytest.approx(math.pi ** 4 / 384)
    assert bitrate.packing_density("Z", 2) == pytest.approx(math.pi / 4)
    assert bitrate.geometric_entropy(1.0) == 0.0
    assert bitrate.geometric_entropy(0.5) == pytest.approx(2.0)


def test_ideal_rate_sampled_agrees_with_exact_n1():
    from cepam.bitrate.ideal import _ideal_rate_sampled
    from cepam.bitrate.theory import _geometry

    exact = bitrate.ideal_rate("gaussian", 1.0, draws=20000)
    sampled, err = _ideal_rate_sampled(_geometry("Z", 1), 1.0, 8000, 1)
    assert abs(sampled - exact) < max(0.02, 4 * err)


@pytest.mark.parametrize("lattice,dim", [("Z", 2), ("A2", 2)])
def test_ideal_rate_higher_dimension_limits(lattice, dim):
    p = bitrate.packing_density(lattice, dim)
    # s -> 0: M is fixed by the dither, only H costs: H(Geometric(p)) / n.
    low = bitrate.ideal_rate("gaussian", 0.01, lattice=lattice, dim=dim, draws=3000)
    assert low == pytest.approx(bitrate.geometric_entropy(p) / dim, abs=0.015)
    # s >> sigma: I + the high-resolution gap.
    high = bitrate.ideal_rate("gaussian", 10.0, lattice=lattice, dim=dim, draws=3000)
    expected = bitrate.mutual_information("gaussian", 10.0) + \
        bitrate.high_resolution_gap(lattice, dim)
    assert high == pytest.approx(expected, abs=0.01)


def test_ideal_rate_not_computed_cases():
    with pytest.raises(InvalidArgumentError):
        bitrate.ideal_rate("uniform", 1.0, lattice="Z", dim=2)
    with pytest.raises(InvalidArgumentError):
        bitrate.ideal_rate("gaussian", 0.1, lattice="E8", draws=200)
    assert bitrate.spec_ideal_rate("uniform", 10.0, "E8") == 2.76
    assert bitrate.spec_ideal_rate("gaussian", 10.0, "E8") is None


# ---------------------------------------------------------------------------
# Payloads against the ideal rate


@pytest.mark.parametrize("lattice,dim", [("A2", 2), ("D4", 4)])
@pytest.mark.parametrize("ratio", [0.01, 0.1, 1.0])
def test_lattice_ans_payload_within_002_of_ideal_rate_at_low_snr(lattice, dim, ratio):
    """The point model (issue 3): within 0.02 bits per coordinate of the
    ideal rate, up to the Monte Carlo error of the ideal."""
    m = 200_000
    x = bitrate.sample_source("gaussian", ratio, m, seed=11)
    payload = cepam.encode(x, cepam.Gaussian(sigma=1.0), secret=SECRET, round=0, client=0,
                           lattice=lattice, coder="ans")
    measured = 8 * len(payload) / m
    ideal, err = bitrate.ideal_rate("gaussian", ratio, lattice=lattice, dim=dim, draws=3000,
                                    seed=0, return_error=True)
    assert ideal - 0.005 - 3 * err < measured < ideal + 0.02 + 3 * err


@pytest.mark.parametrize("kind", ["gaussian", "uniform"])
@pytest.mark.parametrize("ratio", [0.01, 0.1])
def test_e8_ans_payload_near_the_trial_index_entropy_at_low_snr(kind, ratio):
    """E8 at low SNR: M is nearly determined by the side information, so the
    payload costs about H(H) / 8 (the ideal rate's limit), not the 1.0 to
    1.5 bits per coordinate of the box model."""
    m = 200_000
    x = bitrate.sample_source(kind, ratio, m, seed=12)
    payload = cepam.encode(x, cepam.Gaussian(sigma=1.0), secret=SECRET, round=0, client=0,
                           lattice="E8", coder="ans")
    p = bitrate.packing_density("E8")
    h_trials = -(p * math.log2(p) + (1 - p) * math.log2(1 - p)) / p
    assert h_trials / 8 < 8 * len(payload) / m < h_trials / 8 + 0.02


@pytest.mark.parametrize("ratio", [10.0, 100.0])
def test_ans_payload_within_002_of_ideal_rate(ratio):
    m = 200_000
    x = bitrate.sample_source("gaussian", ratio, m, seed=11)
    payload = cepam.encode(x, cepam.Gaussian(sigma=1.0), secret=SECRET, round=0, client=0,
                           lattice="Z", dim=1, coder="ans")
    measured = cepam.inspect(payload).bits_per_coordinate
    assert measured == 8 * len(payload) / m
    ideal = bitrate.ideal_rate("gaussian", ratio, draws=20000)
    assert ideal - 0.005 < measured < ideal + 0.02


def _ideal_rate_student_t3(ratio: float, draws: int, seed: int) -> float:
    """Ideal LRSUQ Z (n=1) rate, Gaussian sigma = 1, for x = ratio * T (T Student-t, 3
    degrees of freedom): H(M | U, V) by Monte Carlo over (U, V), exact sums over M
    (cells out to 400 ratio, beyond which T has mass ~1e-7)."""
    rng = np.random.default_rng(seed)
    beta = 2.0 * np.sqrt(rng.chisquare(3, draws))  # sigma sqrt(U) / rho
    dither = rng.random(draws) - 0.5
    total = 0.0
    for b, v in zip(beta, dither):
        jmax = int(400 * ratio / b) + 2
        edges = b * (np.arange(-jmax, jmax + 2) - 0.5 + v) / ratio
        p = np.diff(scipy_stats.t.cdf(edges, 3))
        p = p[p > 0]
        total -= float(np.sum(p * np.log2(p)))
    return total / draws


@pytest.mark.parametrize("ratio", [10.0, 100.0])
def test_ans_payload_of_a_heavy_tailed_source_within_005_of_ideal_rate(ratio):
    """Student-t with 3 degrees of freedom (a few huge coordinates, most near zero, like
    real model updates): the source model's widening bins keep the payload within 0.05
    bits per coordinate of the ideal rate (about +0.025 here; 64 equal bins on [-A, A]
    cost +0.15)."""
    m = 100_000
    x = ratio * np.random.default_rng(3).standard_t(3, m)
    payload = cepam.encode(x, cepam.Gaussian(sigma=1.0), secret=SECRET, round=0, client=0,
                           lattice="Z", dim=1, coder="ans")
    measured = 8 * len(payload) / m
    ideal = _ideal_rate_student_t3(ratio, draws=2000, seed=0)
    assert ideal < measured < ideal + 0.05, (measured, ideal)


# ---------------------------------------------------------------------------
# Noisy SDQ


def _decoded_error(payload, x):
    return np.asarray(cepam.decode(payload, secret=SECRET), dtype=np.float64) - x


@pytest.mark.parametrize("noise", [cepam.Gaussian(sigma=0.7), cepam.Laplace(b=0.5)])
def test_noisy_sdq_error_law(noise):
    step = math.sqrt(12.0) * noise.std
    x = np.random.default_rng(3).uniform(-5.0, 5.0, 100_000)
    payload = baselines.encode_noisy_sdq(x, noise, step=step, rng=np.random.default_rng(8),
                                         secret=SECRET, round=0, client=1, nonce=NONCE)
    err = _decoded_error(payload, x)
    expected_std = baselines.noisy_sdq_error_std(noise, step)
    assert expected_std == pytest.approx(math.sqrt(noise.std ** 2 + step ** 2 / 12.0))
    assert abs(err.mean()) < 4 * expected_std / math.sqrt(err.size)
    assert err.var() == pytest.approx(expected_std ** 2, rel=0.02)
    p = scipy_stats.kstest(err, lambda z: baselines.noisy_sdq_error_cdf(z, noise, step)).pvalue
    assert p > 1e-6
    # ... and not the law without the SDQ part.
    wrong = scipy_stats.kstest(err / expected_std * noise.std,
                               lambda z: baselines.noisy_sdq_error_cdf(z, noise, step)).pvalue
    assert wrong < 1e-6


def test_plain_sdq_error_is_uniform():
    step = 0.3
    x = np.random.default_rng(5).normal(0.0, 2.0, 50_000)
    err = _decoded_error(baselines.encode_sdq(x, step=step, secret=SECRET, round=0, client=2,
                                              nonce=NONCE), x)
    assert np.all(np.abs(err) <= step / 2 + 1e-12)
    assert scipy_stats.kstest(err, lambda z: baselines.noisy_sdq_error_cdf(z, None, step)
                              ).pvalue > 1e-6


def test_noisy_sdq_noise_comes_from_the_private_generator():
    x = np.linspace(-1.0, 1.0, 5000)
    noise, step = cepam.Gaussian(sigma=0.2), 0.2 * math.sqrt(12.0)

    def enc(seed, secret=SECRET):
        return baselines.encode_noisy_sdq(x, noise, step=step, rng=np.random.default_rng(seed),
                                          secret=secret, round=4, client=9, nonce=bytes(16))

    assert enc(1) == enc(1)
    assert enc(1) != enc(2)
    # Same generator, different secrets: the same noisy update, so the two decodes
    # differ only by their SDQ errors (at most one step).
    y1 = cepam.decode(enc(1), secret=SECRET)
    y2 = cepam.decode(enc(1, OTHER_SECRET), secret=OTHER_SECRET)
    assert np.max(np.abs(y1 - y2)) <= step
    assert not np.array_equal(y1, y2)
    # Different generators under one secret: independent noises.
    y3 = cepam.decode(enc(2), secret=SECRET)
    assert abs(np.corrcoef(y1 - x, y3 - x)[0, 1]) < 0.1


def test_noisy_sdq_clip_applies_before_the_noise():
    x = np.full(1000, 1.0)  # norm sqrt(1000)
    noisy = baselines.add_private_noise(x, cepam.Gaussian(sigma=1e-9),
                                        rng=np.random.default_rng(0), clip=1.0)
    assert np.linalg.norm(noisy) == pytest.approx(1.0, rel=1e-6)


def test_noisy_sdq_torch_and_structures():
    torch = pytest.importorskip("torch")
    update = {"w": torch.zeros(3, 400), "b": torch.zeros(400, dtype=torch.float64)}
    step = 0.5
    gen = torch.Generator().manual_seed(0)
    payload = baselines.encode_laplace_sdq(update, 0.25, step=step, rng=gen, secret=SECRET,
                                           round=0, client=0, nonce=bytes(16))
    out = cepam.decode(payload, secret=SECRET)
    assert set(out) == {"w", "b"} and out["w"].shape == (3, 400)
    assert out["b"].dtype == torch.float64
    err = torch.cat([out["w"].reshape(-1).double(), out["b"]]).numpy()
    assert scipy_stats.kstest(err, lambda z: baselines.noisy_sdq_error_cdf(
        z, cepam.Laplace(b=0.25), step)).pvalue > 1e-6
    again = baselines.encode_laplace_sdq(update, 0.25, step=step,
                                         rng=torch.Generator().manual_seed(0), secret=SECRET,
                                         round=0, client=0, nonce=bytes(16))
    assert again == payload
    gauss = baselines.encode_gaussian_sdq(torch.zeros(1000), 0.1, step=step,
                                          rng=torch.Generator().manual_seed(1), secret=SECRET,
                                          round=0, client=0)
    assert isinstance(cepam.decode(gauss, secret=SECRET), torch.Tensor)


def test_noisy_sdq_argument_errors():
    x = np.zeros(10)
    good = dict(step=1.0, rng=np.random.default_rng(0), secret=SECRET, round=0, client=0)
    g = cepam.Gaussian(sigma=1.0)
    with pytest.raises(InvalidTypeError):
        baselines.encode_noisy_sdq(x, cepam.SDQ(step=1.0), **good)
    with pytest.raises(InvalidTypeError):
        baselines.encode_noisy_sdq(x, "gaussian", **good)
    for step in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(InvalidArgumentError):
            baselines.encode_noisy_sdq(x, g, **{**good, "step": step})
    for step in (True, "1", None):
        with pytest.raises(InvalidTypeError):
            baselines.encode_noisy_sdq(x, g, **{**good, "step": step})
    for rng in (SECRET, 0, None, np.random.RandomState(0)):
        with pytest.raises(InvalidTypeError):
            baselines.encode_noisy_sdq(x, g, **{**good, "rng": rng})
    with pytest.raises(InvalidArgumentError):
        baselines.encode_noisy_sdq(x, g, **good, clip=-1.0)
    with pytest.raises(InvalidTypeError):
        baselines.encode_noisy_sdq(x, g, **good, clip="1")
    with pytest.raises(InvalidArgumentError):
        baselines.encode_noisy_sdq(np.array([0.0, np.nan]), g, **good, clip=1.0)
    with pytest.raises(InvalidArgumentError):
        baselines.encode_noisy_sdq(x, g, **{**good, "secret": bytes(3)})
    with pytest.raises(InvalidArgumentError):
        baselines.encode_noisy_sdq(x, g, **good, coder="huffman")
    with pytest.raises(InvalidArgumentError):
        baselines.encode_sdq(x, step=0.0, secret=SECRET, round=0, client=0)


def test_bitrate_argument_errors():
    with pytest.raises(InvalidArgumentError):
        bitrate.mutual_information("laplace", 1.0)
    with pytest.raises(InvalidTypeError):
        bitrate.mutual_information(1, 1.0)
    for bad in (0.0, -1.0, math.nan):
        with pytest.raises(InvalidArgumentError):
            bitrate.mutual_information("gaussian", bad)
    with pytest.raises(InvalidTypeError):
        bitrate.ideal_rate("gaussian", "1")
    with pytest.raises(InvalidArgumentError):
        bitrate.ideal_rate("gaussian", 1.0, draws=1)
    with pytest.raises(InvalidArgumentError):
        bitrate.ideal_rate("gaussian", 1.0, lattice="A2", dim=3)
    with pytest.raises(InvalidArgumentError):
        bitrate.run_benchmark(m=0)


def test_sample_source_checks_its_arguments():
    """A negative s raised numpy's ValueError, a NaN one gave NaN draws, a
    str one float()'s ValueError; m and seed numpy's errors."""
    for s in (-1.0, 0.0, math.nan, math.inf, 2**1100):
        with pytest.raises(InvalidArgumentError, match="s must be"):
            bitrate.sample_source("gaussian", s, 10, 0)
    for s in ("x", None, np.array([1.0, 2.0]), True):
        with pytest.raises(InvalidTypeError, match="s must be"):
            bitrate.sample_source("uniform", s, 10, 0)
    with pytest.raises(InvalidArgumentError, match="m must be"):
        bitrate.sample_source("gaussian", 1.0, -1, 0)
    with pytest.raises(InvalidTypeError, match="m must be"):
        bitrate.sample_source("gaussian", 1.0, 1.5, 0)
    with pytest.raises(InvalidArgumentError, match="seed must be"):
        bitrate.sample_source("gaussian", 1.0, 10, -1)
    with pytest.raises(InvalidTypeError, match="seed must be"):
        bitrate.sample_source("gaussian", 1.0, 10, np.array([1, 2]))
    assert bitrate.sample_source("gaussian", 2, np.int64(3), np.uint8(1)).shape == (3,)


@pytest.mark.parametrize("lattice", [[], {}, np.array([1.0, 2.0]), None, 1])
def test_a_lattice_that_is_not_a_str_is_a_type_error(lattice):
    """A list, dict or array raised TypeError: unhashable type (the lattice
    table's lookup), None and 1 an "unknown lattice" InvalidArgumentError."""
    for call in (lambda: bitrate.packing_density(lattice),
                 lambda: bitrate.high_resolution_gap(lattice),
                 lambda: bitrate.spec_ideal_rate("uniform", 1.0, lattice),
                 lambda: bitrate.ideal_rate("gaussian", 1.0, lattice=lattice)):
        with pytest.raises(InvalidTypeError, match="lattice must be a str"):
            call()


def test_spec_ideal_rate_checks_its_arguments():
    with pytest.raises(InvalidTypeError, match="s_over_sigma"):
        bitrate.spec_ideal_rate("gaussian", "x")
    with pytest.raises(InvalidArgumentError, match="s_over_sigma"):
        bitrate.spec_ideal_rate("gaussian", -1.0)
    with pytest.raises(InvalidTypeError, match="dim"):
        bitrate.spec_ideal_rate("uniform", 1.0, "Z", "2")
    assert bitrate.spec_ideal_rate("uniform", 1, "Z", np.int64(2)) == 0.83


@pytest.mark.parametrize("rows", [None, 0, 1.0, [1], [None], "abc", {"source": "gaussian"}])
def test_reports_refuse_what_is_not_rows(rows, tmp_path):
    """None or 0 raised a bare TypeError (not iterable), a list of non-dicts
    an AttributeError; write_results wrote nothing then."""
    for call in (bitrate.rows_to_csv, bitrate.rows_to_markdown):
        with pytest.raises(InvalidTypeError, match=r"rows(\[0\])? must be"):
            call(rows)
    with pytest.raises(InvalidTypeError):
        bitrate.write_results(rows, str(tmp_path / "out"), plot=False)
    assert not (tmp_path / "out").exists()


def test_markdown_report_names_a_missing_key():
    with pytest.raises(InvalidArgumentError, match=r"rows\[0\] lacks 'source'"):
        bitrate.rows_to_markdown([{"s_over_sigma": 1.0}])
    assert bitrate.rows_to_csv(iter([])) == bitrate.rows_to_csv([])


def test_run_benchmark_checks_draws_and_seed_before_it_runs():
    """One draw made every ideal rate's InvalidArgumentError, which
    run_benchmark took for "not computed" (or the tabulated value); a seed
    near 2^63 overflowed the nonce's 64-bit field (struct.error) mid-run."""
    from cepam.bitrate.benchmark import MAX_SEED, MIN_DRAWS

    def fail(*args, **kwargs):
        raise AssertionError("the run started")

    schemes = [s for s in bitrate.default_schemes() if s.key in ("ideal-Z1", "cepam-Z1-ans")]
    for kwargs, message in (({"draws": MIN_DRAWS - 1}, "draws must be at least 2"),
                            ({"seed": MAX_SEED + 1}, "seed must be at most"),
                            ({"seed": 2**63}, "seed must be at most"),
                            ({"seed": -1}, "seed must be at least 0")):
        with pytest.raises(InvalidArgumentError, match=message):
            bitrate.run_benchmark(m=10, grid=(1.0,), schemes=schemes, log=fail, **kwargs)
    rows = bitrate.run_benchmark(m=10, grid=(1.0,), sources=("gaussian",), draws=MIN_DRAWS,
                                 seed=MAX_SEED, schemes=schemes)
    assert [r["status"] for r in rows] == ["ok", "ok"]


def test_write_results_refuses_to_overwrite_when_told(tmp_path):
    rows = bitrate.run_benchmark(m=10, grid=(1.0,), sources=("gaussian",), draws=10,
                                 schemes=[s for s in bitrate.default_schemes() if s.key == "mi"])
    bitrate.write_results(rows, str(tmp_path), plot=False, overwrite=False)
    (tmp_path / "bitrate.md").write_text("kept")
    with pytest.raises(FileExistsError):
        bitrate.write_results(rows, str(tmp_path), plot=False, overwrite=False)
    assert (tmp_path / "bitrate.md").read_text() == "kept"
    bitrate.write_results(rows, str(tmp_path), plot=False)  # the default replaces
    assert (tmp_path / "bitrate.md").read_text() != "kept"


# ---------------------------------------------------------------------------
# Benchmark plumbing


def test_run_benchmark_and_outputs(tmp_path):
    schemes = [s for s in bitrate.default_schemes()
               if s.key in ("mi", "ideal-Z1", "ideal-Z2", "ideal-sdq", "sdq", "gaussian+sdq",
                            "cepam-Z1-ans", "cepam-Z1-golomb", "cepam-E8-ans")]
    rows = bitrate.run_benchmark(m=4000, grid=(1.0,), draws=1000, schemes=schemes)
    assert len(rows) == 2 * len(schemes)
    by = {(r["source"], r["scheme"]): r for r in rows}
    for source in bitrate.SOURCES:
        assert by[(source, "cepam-Z1-ans")]["status"] == "ok"
        assert 0.9 < by[(source, "cepam-Z1-ans")]["error_std_over_expected"] < 1.1
        assert 0.9 < by[(source, "gaussian+sdq")]["error_std_over_expected"] < 1.1
        assert by[(source, "cepam-Z1-ans")]["bits_per_coordinate"] < \
            by[(source, "cepam-Z1-golomb")]["bits_per_coordinate"]
    assert by[("uniform", "ideal-Z2")]["status"] == "spec"
    assert by[("uniform", "ideal-Z2")]["bits_per_coordinate"] == 0.83
    assert by[("gaussian", "ideal-Z2")]["status"] == "ok"
    e8 = by[("gaussian", "cepam-E8-ans")]["status"]
    assert e8 in ("ok", "not available")
    paths = bitrate.write_results(rows, str(tmp_path), m=4000, seconds=1.0, draws=1000,
                                  plot=False)
    text = (tmp_path / "bitrate.md").read_text()
    assert "| CEPAM Z (n=1), ans |" in text and "0.830*" in text
    csv_text = (tmp_path / "bitrate.csv").read_text().splitlines()
    assert csv_text[0].startswith("source,s_over_sigma,scheme")
    assert len(csv_text) == 1 + len(rows)
    assert set(paths) == {"csv", "md"}


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    rows = bitrate.run_benchmark(m=2000, grid=(0.1, 10.0), sources=("gaussian",), draws=500,
                                 schemes=[s for s in bitrate.default_schemes()
                                          if s.key in ("mi", "cepam-Z1-ans")])
    path = tmp_path / "b.png"
    bitrate.plot_rows(rows, str(path))
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_cli_registers_bench_bitrate(tmp_path, capsys):
    from cepam.bitrate import cli as bitrate_cli

    parser = argparse.ArgumentParser(prog="cepam")
    sub = parser.add_subparsers(dest="command")
    bitrate_cli.register(sub)
    # A second benchmark can join the same group.
    bitrate_cli.bench_subparsers(sub).add_parser("other")
    args = parser.parse_args(["bench", "bitrate", "--out", str(tmp_path), "--m", "2000",
                              "--draws", "300", "--quick", "--no-plot"])
    assert args.func is bitrate_cli.handler and args.m == 2000
    assert parser.parse_args(["bench", "other"]).benchmark == "other"
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "bitrate", "--m", "0"])
