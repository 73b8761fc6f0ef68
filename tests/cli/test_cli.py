"""The command line."""

import json
import math
import os

import numpy as np
import pytest

import cepam
from cepam.cli import main


@pytest.mark.usefixtures("counted_secrets", "counted_nonces")  # one noise: its KS p > 1e-6
def test_demo_json(capsys):
    assert main(["demo", "--json", "--dim", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["coordinates"] > 10**6
    assert 0.98 < out["noise_std_over_sigma"] < 1.02
    assert out["ks_p_value"] > 1e-6
    assert out["compression_vs_float32"] == 32.0 / out["bits_per_coordinate"]
    # Throughput is reported, not asserted on (a timing; speed lives in bench/).
    assert all(isinstance(out[k], float) for k in ("encode_coords_per_s", "decode_coords_per_s"))


def test_demo_text(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "bits per coordinate" in out and "KS test" in out
    # The default sigma shows the codec; the demo says loudly that it is not private.
    pytest.importorskip("scipy")
    assert "NO meaningful privacy" in out


def test_demo_reports_a_meaningful_guarantee_when_there_is_one(capsys):
    pytest.importorskip("scipy")
    assert main(["demo", "--sigma", "5", "--clip", "1", "--json"]) == 0
    privacy = json.loads(capsys.readouterr().out)["privacy"]
    assert privacy["level"] == "client" and 0 < privacy["epsilon"] < 2


def test_inspect_command(tmp_path, capsys):
    payload = cepam.encode(np.zeros(10), cepam.Gaussian(sigma=1.0), secret=bytes(32), round=1,
                           client=2)
    path = tmp_path / "p.bin"
    path.write_bytes(payload)
    assert main(["inspect", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["client"] == 2 and info["bits"]["total"] == 8 * len(payload)


def test_inspect_command_reports_bad_payloads(tmp_path, capsys):
    path = tmp_path / "bad.bin"
    path.write_bytes(b"not a payload at all, not at all, not at all, no" * 3)
    assert main(["inspect", str(path)]) == 1  # an error, not a usage error
    err = capsys.readouterr().err
    assert err.startswith("cepam inspect: error: ") and "bad magic" in err


def test_info_prints_the_simd_level(capsys):
    assert main(["info"]) == 0
    text = capsys.readouterr().out
    assert f"simd: {cepam.simd_level()}\n" in text
    assert f"version: {cepam.__version__}\n" in text
    assert main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["simd"] == cepam.simd_level() and info["version"] == cepam.__version__
    assert isinstance(info["cuda"], bool) and info["cuda"] == (info["cuda_status"] == "")


def test_a_negative_seed_is_a_usage_error(capsys):
    """It was numpy's ValueError, exit 1, for demo and bench bitrate."""
    for argv in (["demo", "--seed", "-1"], ["bench", "bitrate", "--seed", "-1"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
        assert "--seed: must be a non-negative integer" in capsys.readouterr().err


def test_demo_with_a_noise_far_below_the_update_warns_nothing_before_its_error(capsys):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow warnings came first
        assert main(["demo", "--sigma", "1e-300"]) == 1
    assert "too large relative to the noise" in capsys.readouterr().err


def test_inspect_reads_a_bounded_amount(tmp_path, monkeypatch, capsys):
    """A file above the bound is refused from its size, a stream (here
    /dev/zero, which read() would take until memory ran out) after the
    bound; both as errors (exit 1)."""
    import cepam.cli as cli

    monkeypatch.setattr(cli, "_INSPECT_MAX_BYTES", 1000)
    monkeypatch.setattr(cli, "_INSPECT_MAX_STREAM_BYTES", 100)
    big = tmp_path / "big.bin"
    big.write_bytes(b"\0" * 1001)
    assert main(["inspect", str(big)]) == 1
    assert "more than 1000 bytes" in capsys.readouterr().err
    if os.path.exists("/dev/zero"):  # (not on Windows, where the wheels' tests run too)
        assert main(["inspect", "/dev/zero"]) == 1
        assert "more than 100 bytes" in capsys.readouterr().err


def test_inspect_json_of_a_payload_of_no_coordinates_is_strict_json(tmp_path, capsys):
    """Its bits per coordinate are infinite: ``null`` in the JSON (json.dumps
    wrote ``Infinity``, which no strict JSON reader takes), ``inf`` in the
    text."""
    payload = cepam.encode(np.zeros(0, np.float32), cepam.Gaussian(sigma=1e-3),
                           secret=bytes(32), round=0, client=0, clip=1.0)
    path = tmp_path / "zero.bin"
    path.write_bytes(payload)
    assert main(["inspect", str(path), "--json"]) == 0
    text = capsys.readouterr().out
    assert "Infinity" not in text and "NaN" not in text
    info = json.loads(text, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))
    assert info["coordinates"] == 0 and info["bits_per_coordinate"] is None
    assert main(["inspect", str(path)]) == 0
    assert "bits_per_coordinate: inf" in capsys.readouterr().out


def test_json_text_writes_every_non_finite_float_as_null():
    from cepam.cli import json_text

    value = {"a": math.inf, "b": [1.5, -math.inf, {"c": math.nan}], "d": (math.nan, 2)}
    assert json.loads(json_text(value)) == {"a": None, "b": [1.5, None, {"c": None}],
                                           "d": [None, 2]}


HOSTILE_NAME = "a\nclip: 999\n\x1b[31mRED\x1b[0m"


def test_inspect_escapes_hostile_entry_names(tmp_path, capsys):
    """A payload is anyone's: an entry name with a newline forged a
    ``clip: 999`` line, one with ESC sent a terminal sequence, a bidi
    override reordered the line.  Each is shown escaped; ordinary names
    (dots, underscores, letters of any script) as they are."""
    update = {HOSTILE_NAME: np.zeros(3, np.float32), "\u202eevil": np.zeros(1, np.float32),
              "conv1.weight_ä": np.zeros(2, np.float32), "back\\nslash": np.zeros(1, np.float32)}
    path = tmp_path / "hostile.bin"
    path.write_bytes(cepam.encode(update, cepam.Gaussian(sigma=1e-3), secret=bytes(32), round=0,
                                  client=0, clip=1.0))
    assert main(["inspect", str(path)]) == 0
    text = capsys.readouterr().out
    assert "\x1b" not in text and "\u202e" not in text
    assert [line for line in text.splitlines() if line.startswith("clip:")] == ["clip: 1"]
    assert "  a\\nclip: 999\\n\\x1b[31mRED\\x1b[0m  numpy float32 3\n" in text
    assert "  \\u202eevil  numpy float32 1\n" in text
    assert "  conv1.weight_ä  numpy float32 2\n" in text
    assert "  back\\\\nslash  numpy float32 1\n" in text  # not the escape of a newline
    assert main(["inspect", str(path), "--json"]) == 0
    names = [e["name"] for e in json.loads(capsys.readouterr().out)["entries"]]
    assert HOSTILE_NAME in names  # JSON escapes by itself: the name as it is


def _demo(*argv: str, capsys) -> dict:
    assert main(["demo", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_demo_gives_the_same_output_for_the_same_seed(capsys):
    """Its secret was cepam.new_secret(), a new one at every run, so the
    payload, its size and the noise figures changed from run to run; now
    the secret and nonces derive from the seed (the timings alone vary)."""
    timings = ("encode_coords_per_s", "decode_coords_per_s")
    first, second = (_demo("--seed", "5", capsys=capsys) for _ in range(2))
    for out in (first, second):
        for key in timings:
            del out[key]
    assert first == second
    other = _demo("--seed", "6", capsys=capsys)
    assert other["noise_std"] != first["noise_std"]


def test_demo_secret_derives_from_the_seed_and_says_so(capsys):
    from cepam.demo import demo_nonce, demo_secret

    assert demo_secret(0) == demo_secret(0) != demo_secret(1)
    assert len(demo_secret(2**70)) == 32 and len(demo_nonce(2**70, 2)) == 16
    assert demo_nonce(0, 0) != demo_nonce(0, 1)
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    assert "not a secret" in capsys.readouterr().out.replace("\n", " ")


def test_demo_says_within_the_clip_when_nothing_was_clipped(capsys):
    assert main(["demo", "--clip", "100"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "l2 norm" in ln)
    assert line.endswith("within the clip 100") and "clipped" not in line
    assert main(["demo", "--clip", "1"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "l2 norm" in ln)
    assert line.endswith("clipped to 1")


def test_demo_states_the_neighbouring_relation_of_its_eps(capsys):
    """The eps is client_epsilon's for replace-one neighbours against the
    server threat model (one decoded update seen without its secret)."""
    pytest.importorskip("scipy")
    from cepam.accounting import client_epsilon

    privacy = _demo("--sigma", "5", capsys=capsys)["privacy"]
    assert {k: privacy[k] for k in ("level", "relation", "threat_model", "delta")} == \
        {"level": "client", "relation": "replace-one", "threat_model": "server", "delta": 1e-5}
    assert privacy["epsilon"] == client_epsilon(sigma=5, clip=1, rounds=1, clients=1, delta=1e-5,
                                                threat_model="server", relation="replace-one")
    assert main(["demo", "--sigma", "5"]) == 0
    text = capsys.readouterr().out
    assert "(client level, replace-one neighbours, server threat model" in text
