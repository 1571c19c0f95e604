"""verify census: the summary's counts against dense eigvalsh, and bad
input (edges empty, not finite, not increasing) refused with one line, nothing written."""
import json
from typing import get_type_hints

import jax
import numpy as np
import pytest

from mhajax.cli.common import run_and_save
from mhajax.cli.verify import main
from mhajax.curvature.operators import assemble_hessian
from mhajax.errors import InputError
from mhajax.experiments.base import batched_data, batched_init
from mhajax.experiments.census import (CensusConfig, Diverged, Histogram, Kept, NoSlope, NoSlq, Point, Summary, Unit,
                                       WidthStep, headline, parse_edges, report, run, section)
from mhajax.experiments.configs import make
from mhajax.experiments.registry import CHECKS
from mhajax.linalg import eigvalsh
from mhajax.runtime.records import roundtrip
from mhajax.train import train

SMALL = dict(n=8, tokens=3, dim=4, num_clusters=2, steps=4, every=2, seeds=1, probes=2, lanczos=8,
             resamples=100)


@pytest.mark.slow
def test_summary_counts_equal_dense_eigvalsh():
    cfg = make(CensusConfig, heads=(1, 2), **SMALL).validate()
    s = run(cfg)
    X, y = batched_data(cfg.data, [0])
    checked = 0
    for H in (1, 2):
        th0 = batched_init(cfg.data, [0], H)
        traj = train(th0, X, y, cfg.gd.lr, steps=cfg.gd.steps, every=cfg.gd.every)
        for c, step in enumerate(s.checkpoints):
            th = jax.tree_util.tree_map(lambda a: np.asarray(a)[0, c], traj.params)
            lam = np.asarray(eigvalsh(assemble_hessian(th, X[0], y[0])))
            rec = next(r for r in s.records if r.heads == H and r.step == step)
            assert rec.neg_lo <= int(np.sum(lam < 0)) <= rec.neg_hi
            assert rec.neg_exact and rec.neg_lo == int(np.sum(lam < 0))
            tr = float(np.sum(np.minimum(lam, 0)))
            assert rec.trace_lo <= tr <= rec.trace_hi
            assert rec.lambda_min_lo <= lam[0] <= rec.lambda_min_hi
            assert rec.neg_lo <= rec.neg_B <= rec.bound          # N₋(A) <= N₋(B) <= H·d² (§3.6)
            if isinstance(rec, Kept):
                h = rec.histogram
                dense = np.histogram(lam, bins=np.asarray(h.edges))[0]
                ex = np.asarray(h.exact)
                assert ex.any()
                np.testing.assert_array_equal(np.asarray(h.counts_lo)[ex], dense[ex])
                assert np.all(np.asarray(h.counts_lo) <= dense) and np.all(dense <= np.asarray(h.counts_hi))
                assert rec.slq.num_probes == 2 and rec.slq.num_steps == 8
                checked += 1
    assert checked == 4 and s.verdict == "passed"
    assert s.trace_slope.heads == [1, 2] and s.trace_slope.slope is not None


# The verdict rule on hand-made records: test_census_judge.py.


@pytest.mark.parametrize("edges, match", [
    ("", "--edges is empty"),
    (",", "--edges is empty"),
    ("0.1,nan", r"--edges\[1\] = 'nan' is not finite"),
    ("-1,inf", r"--edges\[1\] = 'inf' is not finite"),
    ("0.1,0.0,0.2", r"strictly increasing: edges\[0\] = 0.1 >= edges\[1\] = 0.0"),
    ("0.1,0.1", "strictly increasing"),
    ("0.5", "at least two edges"),
    ("a,b", r"--edges\[0\] = 'a' is not a number"),
])
def test_bad_edges_refused(edges, match, capsys, tmp_path):
    with pytest.raises(InputError, match=match):
        parse_edges(edges)
    out = tmp_path / "c"
    assert main(["census", "--edges", edges, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and not out.exists()


@pytest.mark.parametrize("argv", [["--bins", "7"], ["--bins", "0"], ["--rtol", "nan"], ["--probes", "-1"],
                                  ["--heads", "0"]])
def test_bad_options_refused(argv, capsys, tmp_path):
    out = tmp_path / "c"
    assert main(["census", *argv, "--out", str(out), "--quiet"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1 and not out.exists()


def test_parse_edges_values_and_auto():
    assert parse_edges("auto") is None and parse_edges(" AUTO ") is None
    assert parse_edges("-1, 0, 2.5") == (-1.0, 0.0, 2.5)


@pytest.mark.slow
def test_the_width_preset_counts_equal_dense_eigvalsh_at_h_up_to_16():
    """``--preset width`` (2 seeds, θ₀ and GD steps 100, 200, no SLQ) restricted to H = 1, 4, 16
    (P <= 1792): every certified N₋ equals numpy's count on the assembled Hessian, every exact
    histogram bin its dense count, λmin and tr₋ lie in their brackets, and the sandwich
    N₋(B) − n <= N₋ <= N₋(B) of docs/theory.md §3.6 holds."""
    from mhajax.experiments.configs import updated
    from mhajax.experiments.registry import get_check
    cfg = updated(CensusConfig(), dict(get_check("census").presets["width"], heads=(1, 4, 16))).validate()
    s = run(cfg)
    seeds = s.seeds
    X, y = batched_data(cfg.data, seeds)
    bins = 0
    for H in (1, 4, 16):
        th0 = batched_init(cfg.data, seeds, H)
        traj = train(th0, X, y, cfg.gd.lr, steps=cfg.gd.steps, every=cfg.gd.every)
        for si, seed in enumerate(seeds):
            for c, step in enumerate(s.checkpoints):
                th = jax.tree_util.tree_map(lambda a: np.asarray(a)[si, c], traj.params)
                lam = np.linalg.eigvalsh(np.asarray(assemble_hessian(th, X[si], y[si])))
                rec = next(r for r in s.records if (r.heads, r.seed, r.step) == (H, seed, step))
                assert rec.neg_exact and rec.neg_lo == int(np.sum(lam < 0)), (H, seed, step)
                assert rec.trace_lo <= float(np.sum(np.minimum(lam, 0))) <= rec.trace_hi
                assert rec.lambda_min_lo <= lam[0] <= rec.lambda_min_hi
                assert rec.neg_B - rec.n <= rec.neg_lo <= rec.neg_B <= rec.bound
                assert rec.slq == NoSlq(available=False, reason="--probes 0: SLQ not run") if isinstance(rec, Kept) else True
                if isinstance(rec, Kept):
                    h = rec.histogram
                    ex = np.asarray(h.exact)
                    dense = np.histogram(lam, bins=np.asarray(h.edges))[0]
                    np.testing.assert_array_equal(np.asarray(h.counts_lo)[ex], dense[ex])
                    bins += int(ex.sum())
    assert s.checkpoints == [0, 100, 200] and bins > 0 and s.verdict == "passed"
    w = s.width
    assert w.heads == [1, 4, 16] and w.bound == pytest.approx(8 / 14, rel=1e-15, abs=0)
    assert set(w.steps) == {0, 100, 200} and all(e.trace_slope.slope is not None for e in w.steps.values())


@pytest.mark.slow
def test_probes_zero_runs_no_slq():
    cfg = make(CensusConfig, heads=(1,), **dict(SMALL, probes=0)).validate()
    s = run(cfg)
    kept = [r for r in s.records if isinstance(r, Kept)]
    assert kept and all(r.slq == NoSlq(available=False, reason="--probes 0: SLQ not run") for r in kept)
    assert s.slq_settings.num_probes == 0


def test_width_laws_read_the_records_per_step():
    """Per step and H the seed mean and range of N₋/P, N₋(B)/P and n/P, and the slope of
    |tr₋|/L̂ in H: 0.8 for records built as 2·H^0.8, over the grid and per step of it."""
    from mhajax.experiments.census import width_laws
    cfg = make(CensusConfig, heads=(1, 4, 16, 64), seeds=2, resamples=100).validate()
    recs = []
    for H in (1, 4, 16, 64):
        P = 112 * H
        for seed in (0, 1):
            recs.append(Point(**dict.fromkeys(Point._fields, 0) | dict(
                heads=H, seed=seed, step=0, P=P, n=64, diverged=False, neg_frac_lo=0.45 + 0.01 * seed,
                neg_frac_hi=0.45 + 0.01 * seed, neg_B=int(0.5 * P) + seed,
                abs_trace_over_loss=2.0 * H ** 0.8 * (1 + 0.01 * seed),
                lambda_min_lo=-0.1 / H ** 0.5, lambda_min_hi=-0.1 / H ** 0.5)))
    w = width_laws(recs, cfg, [0, 1], [0])
    e = w.steps[0]
    assert e.neg_frac_lo[0] == pytest.approx((0.455, 0.45, 0.46), rel=1e-12, abs=0)
    assert e.sandwich[3] == pytest.approx((64 / (112 * 64),) * 3, rel=1e-12, abs=0)
    assert e.trace_slope.slope == pytest.approx(0.8, abs=1e-12)
    assert e.trace_step_slopes == pytest.approx([0.8] * 3, abs=1e-12)
    assert e.lambda_min[2][0] == pytest.approx(-0.1 / 4, rel=1e-12, abs=0)


@pytest.mark.slow
def test_summary_json_loads_back_to_the_summary_run_returned(tmp_path):
    """summary.json of a real run, decoded by the registry, equals the typed summary ``run``
    returned (Kept, Point, SLQ and undefined SLQ steps, a slope with a CI), and renders the same."""
    cfg = make(CensusConfig, heads=(1, 2), **dict(SMALL, seeds=2)).validate()
    s, path = run_and_save(run, cfg, tmp_path)
    loaded = CHECKS["census"].load(json.loads(path.read_text()))
    assert isinstance(s, Summary) and loaded == s
    assert report(loaded) == report(s) and section(loaded) == section(s) and headline(loaded) == headline(s)


def _point(**kw):
    hints = get_type_hints(Point)
    return Point(**{f: False if hints[f] is bool else 0 for f in Point._fields} | kw)


def test_every_record_shape_comes_back_as_its_own_type():
    """The file's optional shapes: a diverged checkpoint, a checkpoint without histogram, SLQ not
    run, an undefined slope."""
    kept = Kept(*_point()[:-1], Histogram([0.0, 1.0], [1], [1], [True], [0, 0], [0, 0]),
                NoSlq(False, "--probes 0: SLQ not run"), False)
    unit = Unit([Diverged(0, 5, 1, True, 3), _point(step=2), kept], {"train_s": 1.0})
    back = roundtrip(Unit, unit)
    assert back == unit and [type(r) for r in back.records] == [Diverged, Point, Kept]
    assert type(back.records[2].slq) is NoSlq
    w = WidthStep([None], [None], [None], [None], [None], [None], NoSlope(None, None, "why", 0, [1, 2]), [None])
    assert roundtrip(WidthStep, w) == w and type(roundtrip(WidthStep, w).trace_slope) is NoSlope
