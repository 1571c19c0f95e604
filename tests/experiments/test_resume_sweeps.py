"""Resumable rate checks: convergence, generalization, heads and quasi-convexity
keep each finished unit (per H or per n); an interrupted run resumes and equals an
uninterrupted one number for number; another config on the same --out is refused."""
import json

import pytest

from mhajax.experiments.configs import make
from mhajax.experiments.convergence import ConvergenceConfig, run as run_convergence
from mhajax.experiments.configs import DataConfig
from mhajax.experiments.generalization import GeneralizationConfig, run as run_generalization
from mhajax.experiments.heads import HeadsConfig, run as run_heads
from mhajax.runtime.io import to_jsonable
from mhajax.experiments.quasi_convexity import QuasiConvexityConfig, run as run_quasi
from mhajax.runtime.resume import ProgressStore
from mhajax.cli.verify import main

pytestmark = pytest.mark.slow   # whole runs of a check: the slow tier

TINY = DataConfig(n=8, tokens=4, dim=6, num_clusters=2)
CASES = {
    "convergence": (run_convergence, make(ConvergenceConfig, heads=(1, 2), seeds=2, steps=16, fit_points=5,
                                                       resamples=200, n_test=32, data=TINY),
                    ["heads=1", "heads=2"], "resumed_heads", 1),
    "generalization": (run_generalization, make(GeneralizationConfig, ns=(8, 12, 16), heads=1, seeds=2,
                                                                n_test=32, resamples=200, data=TINY),
                       ["n=8", "n=12", "n=16"], "resumed_ns", 8),
    "heads": (run_heads, make(HeadsConfig, ns=(8, 16), heads=(1, 2), seeds=2, n_test=32, data=TINY),
              ["n=8", "n=16"], "resumed_ns", 8),
    "quasi-convexity": (run_quasi, make(QuasiConvexityConfig, heads=(1, 2), seeds=1, steps=6, every=3, grid=4,
                                                        references=("final", "witness"), data=TINY),
                        ["heads=1", "heads=2"], "resumed_heads", 1),
}
VOLATILE = ("wall_time_s", "timings_s", "resumed_heads", "resumed_ns")


def _numbers(summary):
    return {k: v for k, v in to_jsonable(summary).items() if k not in VOLATILE}


@pytest.mark.parametrize("name", list(CASES))
def test_interrupted_run_resumes_number_for_number(name, tmp_path):
    """Run with a store, drop every unit after the first (as a kill after the first unit
    would leave it), rerun: the first unit is loaded, the rest recomputed, and the summary
    equals both the stored run's and a run without any store."""
    run, cfg, units, key, first = CASES[name]
    conf = dict(command=name, **cfg.to_dict())
    full = run(cfg, store=ProgressStore(tmp_path, conf))
    store = ProgressStore(tmp_path, conf)
    assert store.units() == sorted(units)
    for u in units[1:]:
        (store.root / f"{u}.json").unlink()
    again = run(cfg, store=ProgressStore(tmp_path, conf))
    assert to_jsonable(again)[key] == [first]
    plain = run(cfg)
    assert to_jsonable(plain)[key] == []
    assert _numbers(again) == _numbers(full) == _numbers(plain)


def test_resumed_unit_is_loaded_not_recomputed(tmp_path):
    """A marker planted in the saved first unit shows up in the resumed summary."""
    run, cfg, units, key, first = CASES["convergence"]
    conf = dict(command="convergence", **cfg.to_dict())
    run(cfg, store=ProgressStore(tmp_path, conf))
    path = ProgressStore(tmp_path, conf).root / "heads=1.json"
    saved = json.loads(path.read_text())
    saved["entry"]["final_loss"] = [123.0, 456.0]
    path.write_text(json.dumps(saved))
    s = run(cfg, store=ProgressStore(tmp_path, conf))
    assert s["by_heads"][1]["final_loss"] == [123.0, 456.0] and s[key] == [1, 2]


CLI = {
    "convergence": ["--heads", "1,2", "--seeds", "2", "--steps", "16", "--fit-points", "5",
                    "--resamples", "200", "--n", "8", "--n-test", "32"],
    "generalization": ["--ns", "8,12,16", "--heads", "1", "--seeds", "2", "--n-test", "32",
                       "--resamples", "200"],
}
DATA = ["--tokens", "4", "--dim", "6", "--clusters", "2", "--quiet"]


@pytest.mark.parametrize("name", list(CLI))
def test_cli_resume_refuse_and_fresh(name, tmp_path, capsys):
    out = tmp_path / "o"
    argv = [name, *CLI[name], *DATA, "--out", str(out)]
    assert main(argv) in (0, 1)
    ref = json.loads((out / "summary.json").read_text())
    first = "heads=1.json" if name == "convergence" else "n=8.json"
    saved = sorted(p.name for p in (out / ".progress").glob("*.json"))
    assert first in saved and len(saved) >= 3  # manifest + every unit
    # as a kill after the first unit leaves it: no summary, only the first unit saved
    (out / "summary.json").unlink()
    for p in saved:
        if p not in ("manifest.json", first):
            (out / ".progress" / p).unlink()
    capsys.readouterr()
    assert main(argv) in (0, 1)
    again = json.loads((out / "summary.json").read_text())
    key = "resumed_heads" if name == "convergence" else "resumed_ns"
    assert again[key] == [1 if name == "convergence" else 8]
    assert _numbers({k: v for k, v in again.items() if k != "meta"}) == \
        _numbers({k: v for k, v in ref.items() if k != "meta"})
    # another config on the same --out: the saved progress is not reused; one line says so
    code = main(argv[:-2] + ["--lr", "0.5", "--out", str(out)])
    err = capsys.readouterr().err
    assert code in (0, 1, 3) and "Traceback" not in err
    said = [line for line in err.splitlines() if "starting afresh" in line]
    assert len(said) == 1 and "gd.lr" in said[0], err
    s = json.loads((out / "summary.json").read_text())
    assert s["meta"]["config"]["gd"]["lr"] == 0.5 and s[key] == []
