"""cepam.accounting.Ledger: a durable privacy ledger.

The SIGKILL test kills a writer process at random moments, many times, and
checks that every record the writer saw returned is there exactly once,
that a retried round is not counted twice, and that the ledger always
opens and answers.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

pytest.importorskip("scipy", reason="cepam.accounting needs scipy (cepam[privacy])")

import cepam
from cepam.accounting import (CepamGaussianRound, CepamLaplaceRound, FLSetting, GaussianEvent,
                              Ledger, PLDAccountant, ProfileEvent)
from cepam.cli import main

SETTING = FLSetting(clip=1, clients=30, samples_per_round=15, dataset_size=1666)
ROUND = CepamGaussianRound(sigma=0.5, setting=SETTING)


@pytest.fixture
def path(tmp_path):
    return tmp_path / "privacy.db"


def test_epsilon_is_the_accountant_s_over_every_record_and_survives_reopening(path):
    laplace = CepamLaplaceRound(scale=50.0, setting=SETTING, dimension=4)
    with Ledger(path, name="mnist", delta=1e-5) as ledger:
        for r in range(40):
            ledger.record(ROUND, run_id="run-1", round=r)
        ledger.record(laplace, run_id="run-1", round=40)
        first = ledger.epsilon()
    with Ledger(path, name="mnist") as ledger:  # a restart; then a second run
        assert ledger.epsilon() == first
        for r in range(40):
            ledger.record(ROUND, run_id="run-2", round=r)
        expected = PLDAccountant().compose(ROUND, 80).compose(laplace, 1).get_epsilon(1e-5)
        assert ledger.epsilon() == pytest.approx(expected, rel=1e-9)
        assert ledger.epsilon() > first
        assert ledger.runs() == ["run-1", "run-2"]
        assert len(ledger.events(run_id="run-2")) == 40
        assert ledger.epsilon(delta=1e-3) < ledger.epsilon()


def test_a_record_and_the_epsilon_parse_each_distinct_event_once(path, monkeypatch):
    # A long run's ledger: what a record, its budget check and epsilon cost
    # grows with the distinct events recorded, not with the rounds.
    from cepam.accounting import ledger as ledger_module
    laplace = CepamLaplaceRound(scale=50.0, setting=SETTING, dimension=4)
    with Ledger(path, name="long") as ledger:
        for r in range(300):
            ledger.record(ROUND if r % 3 else laplace, run_id="run", round=r)
        parsed = []
        real = ledger_module._event_from
        monkeypatch.setattr(ledger_module, "_event_from",
                            lambda d: parsed.append(d["event"]) or real(d))
        ledger.record(ROUND, run_id="run", round=300, max_epsilon=1e9)
        eps = ledger.epsilon()
        # each of the two events once for the record, once for epsilon (it
        # was once for each of the 300 records, twice over)
        assert sorted(parsed) == ["cepam_gaussian_round"] * 2 + ["cepam_laplace_round"] * 2
        expected = PLDAccountant().compose(ROUND, 201).compose(laplace, 100).get_epsilon(1e-5)
        assert eps == pytest.approx(expected, rel=1e-9)


def test_rounds_compose_as_separate_records(path):
    with Ledger(path) as ledger:
        ledger.record(ROUND, run_id="a", rounds=10)
        ledger.record(GaussianEvent(noise_multiplier=2.0), run_id="b")
        expected = (PLDAccountant().compose(ROUND, 10)
                    .compose(GaussianEvent(noise_multiplier=2.0)).get_epsilon(1e-5))
        assert ledger.epsilon() == pytest.approx(expected, rel=1e-9)


def test_a_retried_round_is_not_counted_twice(path):
    with Ledger(path) as ledger:
        first = ledger.record(ROUND, run_id="a", round=3)
        assert ledger.record(ROUND, run_id="a", round=3) == first
        assert len(ledger.events()) == 1
        with pytest.raises(cepam.InvalidArgumentError, match="already recorded"):
            ledger.record(CepamGaussianRound(sigma=0.7, setting=SETTING), run_id="a", round=3)
        assert ledger.record(ROUND, run_id="b", round=3) != first


def test_a_retried_round_less_record_is_not_counted_twice(path):
    with Ledger(path) as ledger:
        first = ledger.record(ROUND, run_id="a", rounds=10)
        assert ledger.record(ROUND, run_id="a", rounds=10) == first
        assert sum(e.rounds for e in ledger.events()) == 10
        with pytest.raises(cepam.InvalidArgumentError, match="round-less record"):
            ledger.record(ROUND, run_id="a", rounds=11)
        assert ledger.record(ROUND, run_id="a", round=0) != first


def test_empty_and_foreign_files_are_not_ledgers(tmp_path):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    for create in (False, True):
        with pytest.raises(cepam.FormatError, match="empty file"):
            Ledger(empty, create=create)
    assert empty.stat().st_size == 0  # left as it was
    (tmp_path / "notes.txt").write_text("privacy budget: plenty\n")
    with pytest.raises(cepam.FormatError):
        Ledger(tmp_path / "notes.txt", create=False)


def test_the_budget_is_checked_before_recording(path):
    with Ledger(path) as ledger:
        one = ledger.epsilon_with([ROUND])
        two = ledger.epsilon_with([(ROUND, 2)])
        assert 0 < one < two
        ledger.record(ROUND, run_id="a", round=0, max_epsilon=two)
        ledger.record(ROUND, run_id="a", round=1, max_epsilon=two)
        with pytest.raises(cepam.PrivacyBudgetError, match="max_epsilon"):
            ledger.record(ROUND, run_id="a", round=2, max_epsilon=two)
        assert len(ledger.events()) == 2
        assert ledger.epsilon() == pytest.approx(two, rel=1e-12)


def test_every_epsilon_a_ledger_prints_names_what_it_is_for(path, capsys):
    # the relation, the level and the threat model, in the budget error, the
    # report and the CLI's total; none for an empty ledger
    terms = "replace-one neighbours, sample level, client threat model"
    with Ledger(path, name="mnist") as ledger:
        assert ledger.report()["terms"] == ""
        ledger.record(ROUND, run_id="a", round=0)
        with pytest.raises(cepam.PrivacyBudgetError, match=f"\\({terms}\\)"):
            ledger.record(ROUND, run_id="a", round=1, max_epsilon=ledger.epsilon())
        assert ledger.report()["terms"] == terms
        ledger.record(GaussianEvent(noise_multiplier=2.0), run_id="b")
        mixed = ("replace-one neighbours, sample level and the caller's level, "
                 "client threat model")
        assert ledger.report()["terms"] == mixed
    assert main(["privacy", "ledger", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith(f"({mixed})")


def test_a_ledger_is_for_one_federation_and_one_delta(path):
    Ledger(path, name="mnist", delta=1e-6).close()
    with pytest.raises(cepam.InvalidArgumentError, match="accounts for 'mnist'"):
        Ledger(path, name="cifar")
    with pytest.raises(cepam.InvalidArgumentError, match="delta"):
        Ledger(path, delta=1e-5)
    with Ledger(path) as ledger:
        assert (ledger.name, ledger.delta) == ("mnist", 1e-6)


def test_a_ledger_is_for_one_level(path):
    """Sample-level (record) rounds and client-level rounds do not compose
    into either's eps; a bare GaussianEvent (the caller's level) goes with
    both."""
    from cepam.accounting import ClientLevelRound

    client_round = ClientLevelRound(sigma=0.5, clip=1.0, clients=30, sample_rate=0.5)
    with Ledger(path) as ledger:
        ledger.record(ROUND, run_id="record-level")
        ledger.record(GaussianEvent(3.0), run_id="caller")
        before = ledger.epsilon()
        with pytest.raises(cepam.InvalidArgumentError, match="one level"):
            ledger.record(client_round, run_id="client-level")
        with pytest.raises(cepam.InvalidArgumentError, match="one level"):
            ledger.epsilon_with([client_round])
        assert ledger.epsilon() == before and len(ledger.events()) == 2
        assert ledger.totals() == [(ROUND, 1), (GaussianEvent(3.0), 1)]


def test_a_ledger_of_several_threat_models_states_its_eps_against_the_weakest(path):
    """Rounds against the aggregate and against a curious client composed
    into one eps that was stated against both ("aggregate and client threat
    models"), yet held against the aggregate only (137.5 where 171.5 holds
    against the curious client, in a reviewer's run): the terms name the
    weakest view recorded.  Each round's bound holds against its own view
    and every weaker one, so the ledger still takes any mix."""
    from cepam.accounting import FLSetting

    def sample_round(threat_model):
        return CepamGaussianRound(sigma=0.3, setting=FLSetting(
            clip=1.0, clients=2, samples_per_round=15, dataset_size=1666,
            threat_model=threat_model))

    with Ledger(path) as ledger:
        ledger.record(sample_round("client"), run_id="a", rounds=80)
        ledger.record(GaussianEvent(3.0), run_id="caller")
        assert ledger.report()["terms"].endswith(", client threat model")
        ledger.record(sample_round("server"), run_id="b", rounds=10)
        assert ledger.report()["terms"].endswith(
            ", client threat model (the weakest of the client and server recorded: the eps "
            "holds against it only)")
        ledger.record(sample_round("aggregate"), run_id="c", rounds=80)
        assert "aggregate threat model (the weakest of the aggregate and client and server" \
            in ledger.report()["terms"]
        assert math.isfinite(ledger.epsilon())


def test_a_closed_or_damaged_ledger_and_odd_arguments_are_cepam_errors(path, tmp_path):
    """Each was a raw sqlite3, Overflow, Type, Attribute, Key or ValueError."""
    ledger = Ledger(path)
    ledger.record(ROUND, run_id="r", round=0)
    ledger.close()
    with pytest.raises(cepam.InvalidArgumentError, match="closed"):
        ledger.epsilon()
    with Ledger(path) as ledger:
        for kw in (dict(round=2**70), dict(round=5, rounds=2**70)):
            with pytest.raises(cepam.InvalidArgumentError, match="at most"):
                ledger.record(ROUND, run_id="r", **kw)
        with pytest.raises(cepam.InvalidTypeError, match="iterable"):
            ledger.epsilon_with(None)
        with pytest.raises(cepam.InvalidArgumentError, match="2 items"):
            ledger.epsilon_with([(ROUND, 1, 2)])
    with pytest.raises(cepam.InvalidTypeError, match="create"):
        Ledger(tmp_path / "new.db", create="no")
    damage = {"event-list": "UPDATE events SET event = '[1, 2]'",
              "event-null": "UPDATE events SET event = 'null'",
              "no-events": "DROP TABLE events",
              "delta-abc": "UPDATE meta SET value = 'abc' WHERE key = 'delta'",
              "no-name": "DELETE FROM meta WHERE key = 'name'"}
    for name, statement in damage.items():
        copy = tmp_path / f"{name}.db"
        with Ledger(copy) as ledger:
            ledger.record(ROUND, run_id="r", round=0)
        db = sqlite3.connect(copy)
        db.execute(statement)
        db.commit()
        db.close()
        with pytest.raises(cepam.FormatError):
            with Ledger(copy) as ledger:
                ledger.epsilon()


def test_bad_arguments_and_files_are_cepam_errors(path, tmp_path):
    with pytest.raises(cepam.InvalidArgumentError, match="no ledger"):
        Ledger(tmp_path / "missing.db", create=False)
    (tmp_path / "junk.db").write_bytes(b"not a database at all" * 100)
    with pytest.raises(cepam.FormatError):
        Ledger(tmp_path / "junk.db")
    other = sqlite3.connect(tmp_path / "other.db")
    other.execute("CREATE TABLE t (x)")
    other.close()
    with pytest.raises(cepam.FormatError, match="not a cepam ledger"):
        Ledger(tmp_path / "other.db")
    with Ledger(path) as ledger:
        with pytest.raises(cepam.InvalidTypeError):
            ledger.record(ProfileEvent(lambda e: e * 0), run_id="a")
        with pytest.raises(cepam.InvalidArgumentError):
            ledger.record(ROUND, run_id="")
        with pytest.raises(cepam.InvalidArgumentError):
            ledger.record(ROUND, run_id="a", rounds=0)
        with pytest.raises(cepam.InvalidArgumentError):
            ledger.epsilon(delta=2.0)
        assert ledger.epsilon() == 0.0
    with pytest.raises(cepam.InvalidArgumentError):
        Ledger(path, name="")


def test_run_ids_and_huge_rounds_are_cepam_errors(path):
    """A lone surrogate raised UnicodeEncodeError, an array run_id numpy's
    ambiguous truth value (on a ledger with records; [] on an empty one),
    2**1100 rounds OverflowError."""
    with Ledger(path) as ledger:
        with pytest.raises(cepam.InvalidTypeError, match="run_id"):
            ledger.events(run_id=np.array([1.0, 2.0]))
        with pytest.raises(cepam.InvalidArgumentError, match="encodable"):
            ledger.record(GaussianEvent(1.0), run_id="\ud800")
        with pytest.raises(cepam.InvalidTypeError, match="run_id"):
            ledger.record(GaussianEvent(1.0), run_id=7)
        ledger.record(GaussianEvent(1.0), run_id="a")
        with pytest.raises(cepam.InvalidTypeError, match="run_id"):
            ledger.events(run_id=np.array([1.0, 2.0]))
        with pytest.raises(cepam.InvalidArgumentError, match="float64"):
            ledger.epsilon_with([(GaussianEvent(1.0), 2**1100)])
        assert [e.run_id for e in ledger.events(run_id="a")] == ["a"]
        assert ledger.runs() == ["a"]


def test_cli_prints_the_table_and_json(path, capsys):
    with Ledger(path, name="mnist") as ledger:
        for r in range(3):
            ledger.record(ROUND, run_id="run-1", round=r)
        eps = ledger.epsilon()
    assert main(["privacy", "ledger", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["epsilon"] == pytest.approx(eps, rel=1e-12)
    assert report["name"] == "mnist" and report["rounds"] == 3 and report["delta"] == 1e-5
    assert [e["round"] for e in report["events"]] == [0, 1, 2]
    assert main(["privacy", "ledger", str(path)]) == 0
    table = capsys.readouterr().out
    assert "cepam_gaussian_round" in table and f"epsilon = {eps:.6g}" in table
    assert main(["privacy", "ledger", str(path) + ".missing"]) == 1  # a missing path: exit 1
    assert "no ledger" in capsys.readouterr().err


WRITER = """
    import sys
    import time
    from cepam.accounting import CepamGaussianRound, FLSetting, Ledger
    path, log, rounds, hold = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    with open(log) as f:
        done = [int(line) for line in f if line.strip()]
    setting = FLSetting(clip=1, clients=30, samples_per_round=15, dataset_size=1666)
    event = CepamGaussianRound(sigma=0.5, setting=setting)
    ledger = Ledger(path, name="kill-test")
    print("ready", flush=True)
    # Resume after the last round this writer knows it recorded: a round
    # recorded just before a kill, but not logged, is recorded again.
    for r in range((done[-1] + 1) if done else 0, rounds):
        if r >= hold:  # (not done yet when the test kills it, however fast it runs)
            signal.pause()
        time.sleep(0.005)  # a round's work: the kills land while rounds go on
        ledger.record(event, run_id="run", round=r)
        with open(log, "a") as f:
            f.write(f"{r}\\n")
            f.flush()
            os.fsync(f.fileno())
"""


@pytest.mark.slow  # (1,500 rounds, the writer process killed 15 times)
def test_sigkill_at_any_moment_loses_no_record_and_counts_none_twice(path, tmp_path):
    rounds, kills = 1500, 15
    log = tmp_path / "log"
    log.write_text("")
    script = "import os, signal\n" + textwrap.dedent(WRITER)
    rng = random.Random(14)
    killed = 0
    interrupted = 0  # kills that hit a writer between its first and last round
    before = 0
    while True:
        # A writer to be killed stops short of the end (the kill always finds
        # it running, past the rounds it was waited for): what the
        # assertions count does not depend on how fast the machine is.
        target = before + rng.randint(1, 40)
        hold = target + 40 if killed < kills else rounds
        child = subprocess.Popen([sys.executable, "-c", script, str(path), str(log), str(rounds),
                                  str(hold)], stdout=subprocess.PIPE, text=True)
        if killed < kills:
            if killed % 5 == 4:  # now and then while it starts (opening the ledger)
                time.sleep(rng.uniform(0.0, 0.5))
            else:  # else while it writes: once it has logged 1 to 40 more rounds, and a
                # moment of up to a round later (it goes on 40 rounds at most, then waits)
                assert child.stdout.readline() == "ready\n"
                while len(log.read_text().split()) < target and child.poll() is None:
                    time.sleep(0.001)
                time.sleep(rng.uniform(0.0, 0.01))
            if child.poll() is None:
                os.kill(child.pid, signal.SIGKILL)
                killed += 1
        child.communicate()
        # After every kill the ledger opens and holds every logged round once.
        logged = {int(x) for x in log.read_text().split()}
        with Ledger(path, name="kill-test") as ledger:
            recorded = [e.round for e in ledger.events(run_id="run")]
        assert len(recorded) == len(set(recorded))
        assert logged <= set(recorded)
        assert set(recorded) <= set(range(rounds))
        if child.returncode == 0:
            break
        interrupted += before < len(logged) < rounds
        before = len(logged)
    assert killed == kills
    assert interrupted >= kills // 2, interrupted
    with Ledger(path, name="kill-test") as ledger:
        assert sorted(e.round for e in ledger.events()) == list(range(rounds))
        expected = PLDAccountant().compose(ROUND, rounds).get_epsilon(1e-5)
        assert ledger.epsilon() == pytest.approx(expected, rel=1e-12)


def test_threads_share_one_ledger(path):
    import threading

    with Ledger(path) as ledger:
        def write(k):
            for r in range(20):
                ledger.record(ROUND, run_id=f"thread-{k}", round=r)
        threads = [threading.Thread(target=write, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(ledger.events()) == 80
        assert sorted(ledger.runs()) == [f"thread-{k}" for k in range(4)]


def test_a_ledger_written_before_the_local_steps_rename_reads_and_retries(path):
    # Ledgers written before FLSetting.local_steps became samples_per_round
    # store the old key in their events' descriptions.
    with Ledger(path, name="mnist") as ledger:
        first = ledger.record(ROUND, run_id="run-1", round=0)
        eps = ledger.epsilon()
    db = sqlite3.connect(path)
    text = db.execute("SELECT event FROM events").fetchone()[0]
    assert '"samples_per_round": 15' in text
    db.execute("UPDATE events SET event = ?", (text.replace("samples_per_round", "local_steps"),))
    db.commit()
    db.close()
    with Ledger(path, name="mnist") as ledger:
        assert ledger.events()[0].event == ROUND
        assert ledger.epsilon() == eps
        assert ledger.record(ROUND, run_id="run-1", round=0) == first  # a retry, not a clash
        with pytest.raises(cepam.InvalidArgumentError, match="another event"):
            ledger.record(CepamGaussianRound(sigma=0.6, setting=SETTING), run_id="run-1",
                          round=0)
        assert ledger.record(ROUND, run_id="run-1", round=1) != first
        assert ledger.epsilon() > eps
        assert "local_steps" not in json.dumps(ledger.report(delta=1e-5)["events"])


CONCURRENT_WRITER = """
    import os
    import sys
    from cepam.accounting import CepamGaussianRound, FLSetting, Ledger
    path, log, stop, writer = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    with open(log) as f:
        done = [int(line) for line in f if line.strip()]
    setting = FLSetting(clip=1, clients=30, samples_per_round=15, dataset_size=1666)
    event = CepamGaussianRound(sigma=0.5, setting=setting)
    r = (done[-1] + 1) if done else 0
    print("ready", flush=True)
    while not os.path.exists(stop):
        # Open, record a round or two, close: the kills land in every phase,
        # opening included, while three other writers do the same.
        with Ledger(path, name="kill-test") as ledger:
            for _ in range(1 + r % 2):
                ledger.record(event, run_id=writer, round=r)
                with open(log, "a") as f:
                    f.write(f"{r}\\n")
                    f.flush()
                    os.fsync(f.fileno())
                r += 1
"""


@pytest.mark.slow
def test_four_writers_and_forty_sigkills_never_fail_to_open(path, tmp_path):
    """A ledger that four processes open, write and close in turn, one of
    them SIGKILLed 40 times at random moments (opening, writing, closing),
    always opens: no writer ever exits with an error (a locked file is
    waited for), and every round a writer saw returned is there once."""
    Ledger(path, name="kill-test").close()
    script = textwrap.dedent(CONCURRENT_WRITER)
    stop = tmp_path / "stop"
    writers = [f"w{i}" for i in range(4)]
    logs = {w: tmp_path / f"{w}.log" for w in writers}
    for log in logs.values():
        log.write_text("")

    def start(writer):
        return subprocess.Popen([sys.executable, "-c", script, str(path), str(logs[writer]),
                                 str(stop), writer], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def failed(writer, child):
        return f"{writer} exited with {child.returncode}: {child.communicate()[1]}"

    rng = random.Random(40)
    children = {w: start(w) for w in writers}
    for _ in range(40):
        victim = rng.choice(writers)
        # Once it runs (past its imports), at a random moment of its loop.
        assert children[victim].stdout.readline() == "ready\n", failed(victim,
                                                                        children[victim])
        time.sleep(rng.uniform(0.0, 0.3))
        for w, child in children.items():  # none has stopped on its own
            assert child.poll() is None, failed(w, child)
        os.kill(children[victim].pid, signal.SIGKILL)
        children[victim].communicate()
        assert children[victim].returncode == -signal.SIGKILL
        children[victim] = start(victim)
        with Ledger(path, name="kill-test") as ledger:  # a fifth opener, after each kill
            assert ledger.name == "kill-test"
    for w, child in children.items():
        assert child.stdout.readline() == "ready\n", failed(w, child)
    stop.write_text("")
    for w, child in children.items():
        child.communicate(timeout=120)
        assert child.returncode == 0, failed(w, child)
    with Ledger(path, name="kill-test") as ledger:
        for w in writers:
            recorded = [e.round for e in ledger.events(run_id=w)]
            assert len(recorded) == len(set(recorded))
            assert {int(x) for x in logs[w].read_text().split()} <= set(recorded)
        assert len(ledger.events()) > 40


def test_cli_table_names_each_event_s_noise_parameter(path, capsys):
    """A GaussianEvent's noise multiplier was shown under ``sigma/scale``,
    as if it were a noise std; the ``noise`` column names each one."""
    laplace = CepamLaplaceRound(scale=50.0, setting=SETTING, dimension=4)
    with Ledger(path, name="mnist") as ledger:
        ledger.record(ROUND, run_id="a", round=0)
        ledger.record(GaussianEvent(noise_multiplier=0.01), run_id="b")
    with Ledger(path.with_name("laplace.db"), name="l") as ledger:
        ledger.record(laplace, run_id="c", round=0)
    assert main(["privacy", "ledger", str(path)]) == 0
    header, first, second = capsys.readouterr().out.splitlines()[1:4]
    assert "sigma/scale" not in header and " noise " in header
    assert " sigma=0.5 " in first and " z=0.01 " in second and "sigma=0.01" not in second
    assert main(["privacy", "ledger", str(path.with_name("laplace.db"))]) == 0
    assert " b=50 " in capsys.readouterr().out


def test_cli_table_escapes_names_from_the_ledger(path, capsys):
    with Ledger(path, name="mnist") as ledger:
        ledger.record(ROUND, run_id="run\n\x1b[31mforged", round=0)
    assert main(["privacy", "ledger", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "run\\n\\x1b[31mforged" in out


def test_an_empty_ledger_path_is_refused_not_taken_for_the_current_directory(tmp_path):
    with pytest.raises(cepam.errors.MissingPathError, match="no ledger at ''"):
        Ledger("", create=False)
    with pytest.raises(cepam.InvalidArgumentError, match="must not be empty"):
        Ledger("")
    with pytest.raises(cepam.errors.NotAFileError, match=f"ledger {str(tmp_path)!r} is not a "
                       "regular file"):
        Ledger(tmp_path, create=False)
