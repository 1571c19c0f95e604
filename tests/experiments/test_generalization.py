"""The generalization check's rules: the control-variate gap per n, the
per-n reasons for an unresolved gap, the GD step-size premise, the paper preset."""
import json

import numpy as np
import pytest

from mhajax.analysis.gap import control_variate_gap
from mhajax.analysis.step_premise import gd_step_premise
from mhajax.cli.verify import main
from mhajax.errors import InputError
from mhajax.experiments.base import batched_data, batched_init
from mhajax.experiments.configs import DataConfig, make, updated
from mhajax.experiments.generalization import PAPER, GeneralizationConfig, gap_estimates, run
from mhajax.experiments.registry import get_check

TINY = DataConfig(n=8, tokens=4, dim=6, num_clusters=2)


def test_gap_estimates_cv_and_plain():
    rng = np.random.default_rng(0)
    S, m = 5, 3
    gap = rng.normal(1e-3, 1e-4, (S, m))
    cross = [rng.normal(0, 1e-4, (S, S)) for _ in range(m)]
    est = gap_estimates(gap, cross, np.full((S, m), 1e-5))
    assert est.method == "control variate"
    for j in range(m):
        r = control_variate_gap(gap[:, j], cross[j])
        assert est.mean[j] == r["mean"] and est.se[j] == r["se"]
        assert est.per_seed[:, j].tolist() == r["per_seed"]
    assert est.resolved.tolist() == (est.mean > 2 * est.se).tolist()
    assert est.se_test == pytest.approx(np.full(m, np.sqrt(S) * 1e-5 / S), rel=1e-14, abs=0)
    plain = gap_estimates(gap[:2], None, np.zeros((2, m)))     # two seeds: no control variate
    assert plain.method == "plain" and plain.loo is None
    assert plain.se == pytest.approx(gap[:2].std(axis=0, ddof=1) / np.sqrt(2), rel=1e-14, abs=0)


def test_unresolved_points_say_why():
    """A gap of mean 0 at one n: unresolved, with its upper bound and the seeds needed."""
    rng = np.random.default_rng(3)
    S = 6
    gap = np.stack([rng.normal(1e-2, 1e-4, S), rng.normal(0.0, 1e-3, S)], axis=1)
    cross = [np.zeros((S, S)), np.zeros((S, S))]
    est = gap_estimates(gap, cross, np.zeros((S, 2)))
    assert est.resolved.tolist() == [True, False]
    assert est.seeds_needed[0] is None and (est.seeds_needed[1] is None or est.seeds_needed[1] > S)


@pytest.mark.slow
def test_tiny_run_records_cv_premise_and_unresolved():
    cfg = make(GeneralizationConfig, ns=(8, 16, 32), heads=1, seeds=3, n_test=64, resamples=200, data=TINY)
    s = run(cfg)
    ge = s.gap_estimate
    assert ge.method == "control variate" and len(ge.mean) == 3
    # the CV estimate is the mean of its seed-wise values, and the fitted band is over them
    assert np.allclose(np.mean(ge.per_seed, axis=0), ge.mean, rtol=1e-12)
    assert np.allclose(s.bands["gap_cv"].mean, ge.mean, rtol=1e-12)
    res = [m is not None and m > 2 * e for m, e in zip(ge.mean, ge.se)]
    assert s.resolved == res
    assert [u.n for u in s.unresolved] == [n for n, r in zip(s.ns, res) if not r]
    for u in s.unresolved:
        assert u.upper == pytest.approx(u.gap + 2 * u.se, rel=1e-12, abs=0)
    seeds = s.seeds
    for n in (8, 16, 32):
        X, y = batched_data(TINY, seeds, n=n)
        ref = gd_step_premise(1.0, batched_init(TINY, seeds, 1), X, y)
        assert s.premise[n].lambda_max_upper == pytest.approx(ref.lambda_max_upper, rel=1e-12, abs=0)


def test_paper_preset():
    assert get_check("generalization").presets["paper"] is PAPER
    cfg = updated(GeneralizationConfig(), PAPER).validate()
    assert len(cfg.ns) >= 6 and max(cfg.ns) >= 4096 and cfg.seeds >= 3    # ≥ 3: the control variate
    assert GeneralizationConfig().validate().ns == (32, 64, 128, 256, 512)   # quick defaults untouched


@pytest.mark.parametrize("ns", ["8,16", "64"])
def test_grid_too_small_for_a_slope_is_bad_input(ns, tmp_path, capsys):
    with pytest.raises(InputError, match="--ns"):
        make(GeneralizationConfig, ns=tuple(int(x) for x in ns.split(",")), data=TINY).validate()
    out = tmp_path / "never"
    assert main(["generalization", "--ns", ns, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--ns" in err and repr(ns) in err
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("seeds", [2, 3])
def test_loaded_summary_equals_the_returned_one(seeds, tmp_path):
    """CHECKS["generalization"].load of the summary.json a run writes is the typed summary run
    returned (plain gap with 2 seeds: no gap_cv band; control variate with 3), and renders the same."""
    from mhajax.cli.common import run_and_save
    from mhajax.experiments.registry import CHECKS
    entry = CHECKS["generalization"]
    cfg = make(GeneralizationConfig, ns=(8, 16, 32), heads=1, seeds=seeds, n_test=64, resamples=100, data=TINY)
    s, path = run_and_save(run, cfg, tmp_path)
    data = json.loads(path.read_text())
    assert ("gap_cv" in data["bands"]) is (seeds >= 3)
    loaded = entry.load(data)
    assert loaded == s and all(type(n) is int for n in loaded.premise)
    assert entry.report(loaded) == entry.report(s) and entry.section(loaded) == entry.section(s)
    assert entry.headline(loaded) == entry.headline(s)
