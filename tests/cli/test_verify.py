"""mhajax.cli.verify: the dispatch of ``python -m verify`` and the exit codes of ``verify all``.

``verify all`` exits 0 when every claim it could judge held (NOT REACHED and INFORMATIONAL
checks do not count), else with the worst verdict that counts; 2 when a check refused its
input, 1 when a check ended without a verdict (e.g. interrupted); ``--strict`` counts every
verdict other than PASSED. The registry is
replaced by fake checks (in-process, no JAX work), whose outcome the test chooses; exit
codes are literals (docs/architecture.md), never the library's constants.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from mhajax.__main__ import main as mhajax_main
from mhajax.cli.verify import main
from mhajax.errors import InputError
from mhajax.experiments.base import verdict_fields
from mhajax.experiments.configs import Config, option
from mhajax.experiments.registry import Check
from mhajax.verdict import Verdict


@dataclass(frozen=True)
class FakeConfig(Config):
    seeds: int = option(1, "seeds")

    def validate(self):
        return self

    def to_dict(self):
        return dict(seeds=self.seeds)


@dataclass(frozen=True)
class RefusingConfig(FakeConfig):
    def validate(self):
        raise InputError("--seeds: refused by the fake check")


def _fake(name, outcome, config=FakeConfig):
    def run(cfg, store=None, progress=None):
        if outcome == "interrupt":
            raise KeyboardInterrupt
        return dict(verdict_fields(outcome, "fake"), seeds=[0], wall_time_s=0.0)

    return Check(name, config, run, lambda s: "", lambda s: name, lambda s: "", "a claim")


@pytest.fixture
def registry(monkeypatch):
    def install(**checks):
        monkeypatch.setattr("mhajax.experiments.registry.CHECKS", checks)
        monkeypatch.setattr("mhajax.cli.verify.CHECKS", checks)
    return install


def _summary(out):
    return json.loads((out / "summary.json").read_text())


@pytest.mark.slow
def test_all_exits_2_when_a_check_refused_its_input(registry, tmp_path, capsys):
    registry(good=_fake("good", Verdict.PASSED), bad=_fake("bad", Verdict.PASSED, RefusingConfig))
    out = tmp_path / "all"
    assert main(["all", "--jobs", "1", "--out", str(out)]) == 2
    s = _summary(out)
    assert s["checks"]["bad"]["exit_code"] == 2 and s["checks"]["good"]["exit_code"] == 0
    assert s["passed"] is False and s["verdict"] == "passed"   # the judged checks passed
    assert "refused by the fake check" in capsys.readouterr().err
    assert not (out / "bad" / "summary.json").exists()


def test_all_bad_input_wins_over_a_failed_check(registry, tmp_path):
    registry(fail=_fake("fail", Verdict.FAILED), bad=_fake("bad", Verdict.PASSED, RefusingConfig))
    assert main(["all", "--jobs", "1", "--out", str(tmp_path / "o")]) == 2
    assert _summary(tmp_path / "o")["verdict"] == "failed"


def test_all_exits_1_when_a_check_ends_without_a_verdict(registry, tmp_path):
    registry(good=_fake("good", Verdict.PASSED), stop=_fake("stop", "interrupt"))
    assert main(["all", "--jobs", "1", "--out", str(tmp_path / "o")]) == 1
    s = _summary(tmp_path / "o")
    assert s["checks"]["stop"]["exit_code"] == 130 and s["passed"] is False


@pytest.mark.slow
@pytest.mark.parametrize("verdicts,code,strict_code", [
    ([Verdict.PASSED, Verdict.PASSED], 0, 0),
    ([Verdict.INFORMATIONAL, Verdict.PASSED], 0, 5),
    ([Verdict.NOT_REACHED, Verdict.PASSED], 0, 6),
    ([Verdict.NOT_REACHED, Verdict.INFORMATIONAL], 0, 6),
    ([Verdict.INCONCLUSIVE, Verdict.NOT_REACHED], 3, 3),
    ([Verdict.PREMISE_VIOLATED, Verdict.INCONCLUSIVE], 4, 4),
    ([Verdict.PASSED, Verdict.FAILED, Verdict.INFORMATIONAL], 1, 1),
])
def test_all_exits_0_unless_a_judged_claim_did_not_hold(registry, tmp_path, verdicts, code, strict_code, capsys):
    registry(**{f"c{i}": _fake(f"c{i}", v) for i, v in enumerate(verdicts)})
    assert main(["all", "--jobs", "1", "--out", str(tmp_path / "o")]) == code
    s = _summary(tmp_path / "o")
    assert s["exit_code"] == code and s["strict"] is False
    assert s["passed"] is all(v is Verdict.PASSED for v in verdicts)
    assert f"all: exit {code} " in capsys.readouterr().out
    assert main(["all", "--jobs", "1", "--out", str(tmp_path / "s"), "--strict"]) == strict_code
    assert _summary(tmp_path / "s")["exit_code"] == strict_code and _summary(tmp_path / "s")["strict"] is True


@pytest.mark.parametrize("argv,needle", [
    (["no-such-check"], "no-such-check"),
    (["all", "--only", "good,nope"], "nope"),
    (["all", "--preset", "huge"], "huge"),
    (["good", "--seeds", "x"], "--seeds"),
])
def test_unknown_checks_presets_and_flags_exit_2(registry, tmp_path, capsys, argv, needle):
    """A check that is not registered (what "not available" means since the registry replaced
    importing a module per command), an unknown --only entry or preset, a bad flag."""
    registry(good=_fake("good", Verdict.PASSED))
    capsys.readouterr()
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and needle in err and "\n" not in err
    assert not (tmp_path / "o" / "summary.json").exists()


def test_help_and_the_mhajax_command(registry, capsys):
    registry(good=_fake("good", Verdict.PASSED))
    assert main(["--help"]) == 0 and "good" in capsys.readouterr().out
    assert mhajax_main(["--help"]) == 0
    assert mhajax_main([]) == 2                        # no command: usage, bad input
    assert mhajax_main(["nope"]) == 2 and "nope" in capsys.readouterr().err
    assert mhajax_main(["verify", "no-such-check"]) == 2


# --- verify all: --fresh passes through, finished checks are kept ------------------------

def test_all_keeps_finished_checks_and_passes_fresh(tmp_path, monkeypatch, capsys):
    """``verify all`` runs each registered check once; a finished one (its summary.json
    unchanged) is kept, a changed one is rerun, and ``--fresh`` reaches every check."""
    calls = []

    def fake_run(cfg, store=None, progress=None):
        calls.append(store.has("marker"))     # progress kept from an earlier run of this check?
        store.save("marker", {})
        return dict(verdict_fields(Verdict.PASSED, "fake"), seeds=[0], wall_time_s=0.0)

    fake = Check("fake", FakeConfig, fake_run, lambda s: "", lambda s: "fake", lambda s: "", "a claim")
    monkeypatch.setattr("mhajax.experiments.registry.CHECKS", {"fake": fake})
    monkeypatch.setattr("mhajax.cli.verify.CHECKS", {"fake": fake})
    out = str(tmp_path / "all")
    assert main(["all", "--jobs", "1", "--out", out]) == 0 and calls == [False]
    assert main(["all", "--jobs", "1", "--out", out]) == 0 and calls == [False]  # kept, not rerun
    assert "kept" in capsys.readouterr().out
    summary = tmp_path / "all" / "fake" / "summary.json"
    summary.write_text(summary.read_text().replace('"fake"', '"edited"'))  # changed under us: rerun
    assert main(["all", "--jobs", "1", "--out", out]) == 0 and calls == [False, True]
    assert main(["all", "--jobs", "1", "--out", out, "--fresh"]) == 0 and calls == [False, True, False]
    s = json.loads((tmp_path / "all" / "summary.json").read_text())
    assert s["passed"] is True and s["verdict"] == "passed"


def test_all_runs_checks_in_processes_of_their_own_with_jobs(registry, tmp_path, monkeypatch, capsys):
    """``--jobs 2``: each check not kept goes to ``_run_as_process`` (a process of its own,
    replaced here by a fake that writes the check's summary as the process would); the table,
    the summary and the exit rule are those of the in-process path, in registry order."""
    import mhajax.cli.verify as V
    verdicts = {"a": Verdict.PASSED, "b": Verdict.NOT_REACHED, "c": Verdict.FAILED}
    registry(**{k: _fake(k, v) for k, v in verdicts.items()})
    ran = []

    def fake_process(nm, argv):
        ran.append((nm, argv))
        out = Path(argv[argv.index("--out") + 1])
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps({"verdict": verdicts[nm].value}))
        return verdicts[nm].exit_code, 0.5, f"{nm}: {verdicts[nm].label}"

    monkeypatch.setattr(V, "_run_as_process", fake_process)
    out = tmp_path / "o"
    assert main(["all", "--jobs", "2", "--out", str(out)]) == 1
    assert sorted(nm for nm, _ in ran) == ["a", "b", "c"]
    assert all("--quiet" in argv and argv[argv.index("--preset") + 1] == "quick" for _, argv in ran)
    s = _summary(out)
    assert list(s["checks"]) == ["a", "b", "c"] and s["exit_code"] == 1 and s["verdict"] == "failed"
    text = capsys.readouterr().out
    assert "a: PASSED" in text and "c: FAILED" in text and "(2 at a time)" in text
    # a second run keeps the finished checks and runs nothing
    ran.clear()
    assert main(["all", "--jobs", "2", "--out", str(out)]) == 1 and ran == []


def test_all_refuses_a_jobs_count_below_one(registry, tmp_path, capsys):
    registry(good=_fake("good", Verdict.PASSED))
    assert main(["all", "--jobs", "0", "--out", str(tmp_path / "o")]) == 2
    assert "--jobs" in capsys.readouterr().err and not (tmp_path / "o").exists()
