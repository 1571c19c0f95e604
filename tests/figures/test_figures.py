"""Figures: each is built from small synthetic, schema-correct summary.json
files, written to PNG + PDF, and plots exactly the numbers of those files."""
from __future__ import annotations

import json
import shutil
import math

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from mhajax.figures import FIGURES  # noqa: E402
from mhajax.figures.main import build, main as figures_main  # noqa: E402
from mhajax.figures.report import write_report

META = lambda cfg, seeds: dict(config=cfg, config_hash="0123456789abcdef", seeds=seeds,
                               versions={"python": "3.11", "jax": "0.10.2", "numpy": "2"},
                               dtype="float64", x64=True, backend="cpu", devices=["cpu:0"],
                               argv=["/x/verify/__main__.py", "demo", "--seeds", "2"], platform="test",
                               created="2026-01-01T00:00:00+00:00")
DATA = dict(n=16, tokens=4, dim=6, zeta=0.25, num_clusters=2, signal=1.0, sigma=0.1, antipodal=False,
            u_scale=1.0, w_scale=0.0)


def band(rng, m, scale=1.0):
    mean = scale * rng.uniform(0.1, 1.0, m)
    return dict(mean=mean.tolist(), lo=(0.8 * mean).tolist(), hi=(1.2 * mean).tolist(),
                std=(0.1 * mean).tolist(), level=0.95)


def fit(slope=-1.1, intercept=0.5):
    return dict(slope=slope, intercept=intercept, ci=[slope - 0.1, slope + 0.1], level=0.95, rms=0.01,
                per_seed=[slope, slope], undefined_resamples=0, resamples=200, distinct_resamples=3,
                seeds=2, log_power=0.0, window=None)


def synth_weak_convexity(rng):
    recs = []
    for H in (1, 4):
        for seed in (0, 1):
            for step in (0, 10, 20):
                loss = float(rng.uniform(0.01, 1.0))
                lmin = float(-rng.uniform(1e-3, 1e-1)) if (H, seed, step) != (4, 1, 20) else 1e-4
                recs.append(dict(seed=seed, step=step, heads=H, loss=loss, lambda_min=lmin,
                                 lambda_max=float(rng.uniform(0.01, 0.3)), lambda_min_block=lmin * 1.1,
                                 kappa_emp=-math.sqrt(H) * lmin / loss,
                                 kappa_block=-math.sqrt(H) * lmin * 1.1 / loss,
                                 kappa_mid=None if H == 1 else float(rng.uniform(1, 2)),
                                 kappa_phi=None if H == 1 else float(rng.uniform(2, 5)),
                                 kappa_bound=float(rng.uniform(50, 200)), beta2=float(rng.uniform(10, 30)),
                                 all_hold=True, eig_converged=True, num_matvecs=0, diverged=False))
    by = {str(H): dict(P=10 * H, method="dense", checkpoints=6, undefined=0, max_kappa_emp=0.2,
                       max_kappa_block=0.3, max_kappa_mid=None, max_kappa_phi=None, max_kappa_bound=200.0,
                       min_slack={}, bound_over_emp=1000.0, all_hold=True, max_residual=1e-16,
                       all_converged=True) for H in (1, 4)}
    cfg = dict(heads=[1, 4], seeds=2, seed0=0, steps=20, every=10, lr=1.0, method="auto", links="all", data=DATA)
    return dict(passed=True, records=recs, by_heads=by, methods={}, violations=[], diverged=[], undefined=0,
                checkpoints=[0, 10, 20], seeds=[0, 1], timings={}, wall_time_s=1.0, meta=META(cfg, [0, 1]))


def synth_convergence(rng, heads=(1, 2, 4), test_curves=True):
    steps = [0, 1, 2, 4, 8, 16]
    ck = [0, 4, 8, 12, 16]
    tk = [0, 2, 8, 16]
    by = {}
    for H in heads:
        curves = dict(steps=steps, loss=[[0.5] * 6] * 2, loss_band=band(rng, 6),
                      checkpoints=ck, distance=[[1.0] * 5] * 2, distance_band=band(rng, 5, 10))
        if test_curves:
            tb = band(rng, 4)
            tb["mean"][1] = None            # an undefined seed mean: a gap in the line, not a zero
            curves.update(test_checkpoints=tk, test_loss=[[0.6] * 4] * 2, test_loss_band=tb,
                          train_loss_at_checkpoints=[[0.5] * 4] * 2)
        by[str(H)] = dict(P=10 * H, loss_slope=fit(), loss_slope_log_corrected=fit(), classification="matches",
                          holds=True, distance_slope=fit(0.3), distance_log_fit=dict(a=1.0, b=0.5),
                          witness=dict(gamma=[0.5, 0.6], gamma_bar=[0.2, 0.3]), separable_certified=True,
                          final_loss=[0.01, 0.02], curves=curves)
    cfg = dict(heads=list(heads), seeds=2, steps=16, lr=1.0, data=DATA)
    return dict(passed=True, by_heads=by, diverged=[], seeds=[0, 1], fit_steps=[2, 4, 8, 16], window=[2, 16],
                tolerance=0.3, timings_s={}, wall_time_s=2.0, meta=META(cfg, [0, 1]))


def synth_generalization(rng):
    ns = [8, 16, 32, 64]
    gap = band(rng, 4, 0.1)
    gap["mean"][-1] = -1e-4  # an unresolved, non-positive gap: left out of the log plot
    v = dict(classification="matches", holds=True)
    cfg = dict(ns=ns, heads=2, seeds=2, n_test=100, steps_per_n=1.0, lr=1.0, data=DATA)
    return dict(passed=True, ns=ns, steps=ns, seeds=[0, 1], per_seed={}, bands=dict(train=band(rng, 4),
                test=band(rng, 4), gap=gap, gap_cv=band(rng, 4, 0.1)), se_test=[0.0] * 4, se_gap=[0.0] * 4,
                resolved=[True, True, True, False], resolved_rule="rule",
                fits=dict(test=fit(), train=fit(), gap=fit(-1.5, 0.2), test_log_corrected=fit(),
                          train_log_corrected=fit(), gap_log_corrected=fit()),
                verdicts=dict(test=v, gap=v, train=v), diverged=[], tolerance=0.3, timings_s={},
                wall_time_s=3.0, meta=META(cfg, [0, 1]))


def synth_heads(rng):
    by_n = {}
    for n, hmin, ht in ((16, 2, 3.0e8), (32, None, 5.0e8), (64, 1, None)):
        by_n[str(n)] = dict(steps=n, threshold=math.log(n) / n, log6=math.log(n) ** 6, reached=[] if hmin is None else [hmin],
                            smallest_heads=hmin, upward_closed=True, H_theory=ht,
                            tightness=None if ht is None or hmin is None else ht / hmin,
                            by_heads={str(H): dict(mean_test=float(rng.uniform(0.01, 0.1)), reached=False)
                                      for H in (1, 2)})
    cfg = dict(ns=[16, 32, 64], heads=[1, 2], seeds=2, data=DATA)
    return dict(passed=False, by_n=by_n, heads=[1, 2], ns=[16, 32, 64], seeds=[0, 1], regime_rule="test <= log(n)/n",
                diverged=[], wall_time_s=4.0, meta=META(cfg, [0, 1]))


def synth_one_step(rng):
    ns, seeds = [16, 32, 64], [0, 1]
    by = {}
    for start, lr in (("zero", 10.0), ("random-u", 1.0)):
        noisy = rng.uniform(0.1, 0.3, (2, 3)).tolist()
        noisy[1][2] = None                   # an undefined margin: the seed mean is over the others
        cmp = [dict(n=n, gamma_bar_attn=0.2, gamma_bar_mean=float(rng.uniform(0.1, 0.3)),
                    gamma_bar_flat=float(rng.uniform(0.1, 0.3)), ratio_min=0.9, ratio_mean=1.0,
                    lost=int(rng.integers(0, 3)), seeds=2) for n in ns]
        sl = dict(fit(-0.05), ci=[-0.08, -0.02], rule="holds", tolerance=-0.1)
        by[start] = dict(lr0=lr, separability=dict(separable=6, not_separable=0, undecided=0, total=6,
                                                   max_rel_gap=1e-14, converged=6),
                         curves=dict(noisy=noisy, noiseless=rng.uniform(0.2, 0.4, (2, 3)).tolist(),
                                     predicted=rng.uniform(0.05, 0.2, (2, 3)).tolist()),
                         prediction_inputs=[dict(seed=k, gamma0=0.5, G0=2.0, s_w=1.0, s_g=1.0) for k in seeds],
                         slopes=dict(noisy=dict(sl, slope=-0.15, ci=[-0.2, -0.12], rule="violated"), noiseless=sl,
                                     excess=dict(sl, predicted_slope=-0.1)),
                         init=dict(const=1.0, per_n_max=[0.5] * 3, max_ratio=0.5, room=2.0, failing=0, total=6),
                         parts={k: dict(rule="holds", text="t") for k in ("a", "b1", "b2", "c")}, comparison=cmp)
    cfg = dict(ns=ns, heads=2, starts=["zero", "random-u"], lr_zero=10.0, lr_random=1.0, seeds=2, data=DATA)
    return dict(records=[], by_start=by, ns=ns, heads=2, seeds=seeds, starts=["zero", "random-u"],
                lr0={"zero": 10.0, "random-u": 1.0}, sigma=0.1, noiseless_sweep=True, tolerance=-0.1,
                init_const=1.0, level=0.95, model="softmax", loss="logistic", dataset="mixture", judged=True,
                criterion="(a), (b1), (b2), (c)", verdict_starts=["zero", "random-u"], start_choice="both",
                comparison_note="comparison, not a claim", scope=None, verdict="passed", verdict_reason="ok", passed=True,
                resumed_ns=[], timings_s={}, wall_time_s=5.0, meta=META(cfg, seeds))


def synth_census(rng):
    recs, by = [], {}
    edges = [-0.04, -0.02, 0.0, 0.1, 0.2]
    for H in (1, 4):
        P = 100 * H
        for seed in (0, 1):
            for step in (0, 10, 20):
                neg = int(rng.integers(20 * H, 40 * H))
                r = dict(seed=seed, step=step, heads=H, P=P, bound=64 * H, loss=0.5, neg_lo=neg, neg_hi=neg,
                         neg_frac_lo=neg / P, neg_frac_hi=neg / P, diverged=False)
                if step in (0, 20):
                    c = [neg // 2, neg - neg // 2, P - neg - 1, 1]
                    r["histogram"] = dict(edges=edges, counts_lo=c, counts_hi=c, exact=[True] * 4, under=[0, 0],
                                          over=[0, 0])
                    r["slq"] = dict(available=True, num_probes=10, num_steps=100, counts=[x + 1.5 for x in c],
                                    sem=[1.0] * 4)
                recs.append(r)
        by[str(H)] = dict(P=P, bound=64 * H, max_neg_over_bound=0.5, steps={
            str(k): dict(neg_frac_lo=0.3, neg_frac_hi=0.31, abs_trace_over_loss_lo=0.5 * H ** 0.8,
                         abs_trace_over_loss_hi=0.55 * H ** 0.8) for k in (0, 10, 20)})
    cfg = dict(heads=[1, 4], seeds=2, seed0=0, gd=dict(steps=20, every=10, lr=1.0), data=DATA)
    return dict(records=recs, by_heads=by, checkpoints=[0, 10, 20], seeds=[0, 1], slq_settings=dict(
        num_probes=10, num_steps=100), trace_slope=fit(0.8), verdict="passed", verdict_reason="ok", passed=True,
        timings={}, wall_time_s=1.0, meta=META(cfg, [0, 1]))


WIDTH_HEADS = [1, 4, 16, 64]


def synth_wc_width(rng):
    """A weak-convexity summary of the width preset: ``width_law`` with two steps."""
    base = synth_weak_convexity(rng)
    m = len(WIDTH_HEADS)

    def col(scale):
        v = scale * rng.uniform(0.5, 1.5, m)
        return v.tolist(), (0.9 * v).tolist(), (1.1 * v).tolist()
    steps = {}
    for k in ("0", "100"):
        mean, lo, hi = {}, {}, {}
        for key, scale in (("kappa_emp", 0.2), ("kappa_bound", 150.0), ("ratio", 1e-3),
                           ("lambda_max_over_loss", 0.5), ("smoothness_coefficient", 1500.0)):
            mean[key], lo[key], hi[key] = col(scale)
        steps[k] = dict(mean=mean, seed_min=lo, seed_max=hi, status="holds", step_slopes_ratio=[0.01] * (m - 1),
                        slope_ratio=fit(0.02), slope_kappa_emp=fit(0.05), slope_kappa_bound=fit(0.03),
                        slope_lambda_max_over_loss=fit(-0.05), slope_smoothness_coefficient=fit(0.0))
    base["width_law"] = dict(judged=True, outcome="holds", reason="r", tol=0.1, heads=WIDTH_HEADS, seeds=[0, 1],
                             boot=dict(resamples=200, level=0.95, seed=0), steps=steps)
    return base


def synth_census_width(rng):
    """A census summary of the width preset: ``width`` with two steps (seed mean, min, max)."""
    base = synth_census(rng)
    m = len(WIDTH_HEADS)

    def st(scale):
        v = scale * rng.uniform(0.5, 1.5, m)
        return [[float(x), 0.9 * float(x), 1.1 * float(x)] for x in v]
    base["width"] = dict(heads=WIDTH_HEADS, bound=8 / 14, steps={k: dict(
        neg_frac_lo=st(0.45), neg_frac_hi=st(0.46), neg_B_frac=st(0.5), sandwich=st(0.01),
        abs_trace_over_loss=st(2.0), lambda_min=st(-0.01), trace_slope=fit(0.85), trace_step_slopes=[0.8] * (m - 1))
        for k in ("0", "100")})
    return base


SYNTH_WIDTH = {"weak-convexity": synth_wc_width, "census": synth_census_width}

SYNTH = {"weak-convexity": synth_weak_convexity, "convergence": synth_convergence,
         "generalization": synth_generalization, "heads": synth_heads, "one-step": synth_one_step,
         "census": synth_census}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("figs")
    rng = np.random.default_rng(0)
    res = root / "results"
    data = {}
    for name, f in SYNTH.items():
        data[name] = f(rng)
        (res / name).mkdir(parents=True)
        (res / name / "summary.json").write_text(json.dumps(data[name]))
    for name, f in SYNTH_WIDTH.items():                    # figure 8 reads results-width beside results
        data[f"{name}@width"] = f(rng)
        (root / "results-width" / name).mkdir(parents=True)
        (root / "results-width" / name / "summary.json").write_text(json.dumps(data[f"{name}@width"]))
    out = root / "figures"
    figs = {}
    for name in FIGURES:
        paths, fig = build(name, res, out, run_missing=False)
        figs[name] = (paths, fig)
    return data, figs, res, out


def lines(ax, label):
    return [l for l in ax.get_lines() if l.get_label() == label]


def eq(a, b):
    np.testing.assert_array_equal(np.asarray(a, dtype=float), np.asarray(b, dtype=float))


def nan(v):
    return np.array([np.nan if x is None else x for x in v], dtype=float)


def band_vertices_match(coll, x, lo, hi):
    """The fill_between polygon ``coll`` has exactly the vertices (x_k, lo_k) and
    (x_k, hi_k) (the stored band's edges), nothing else."""
    got = {tuple(v) for p in coll.get_paths() for v in p.vertices}
    want = {(float(a), float(b)) for a, b in zip(x, lo)} | {(float(a), float(b)) for a, b in zip(x, hi)}
    assert got == want


def has_finite_data(ax) -> bool:
    for l in ax.get_lines():
        xy = np.column_stack([np.asarray(l.get_xdata(), float), np.asarray(l.get_ydata(), float)])
        if np.isfinite(xy).all(axis=1).any():
            return True
    for c in ax.collections:
        off = np.asarray(c.get_offsets(), float)
        if off.size and np.isfinite(off).all(axis=1).any():
            return True
    return False


@pytest.mark.slow
@pytest.mark.parametrize("name", FIGURES)
def test_files_written(built, name):
    paths, fig = built[1][name]
    assert paths is not None and fig is not None
    assert {p.suffix for p in paths} == {".png", ".pdf"}
    for p in paths:
        assert p.is_file() and p.stat().st_size > 1000
    for ax in fig.axes:  # nothing unlabelled: every drawn line has a legend entry or a label
        for l in ax.get_lines():
            assert not l.get_label().startswith("_"), (name, l)


@pytest.mark.slow
@pytest.mark.parametrize("name", FIGURES)
def test_no_empty_panel(built, name):
    fig = built[1][name][1]
    for ax in fig.axes:
        assert has_finite_data(ax), (name, ax.get_title())
        sp = ax.get_subplotspec()                     # axis labels on the outer panels
        assert ax.get_xlabel() or not sp.is_last_row(), (name, "x label")
        assert ax.get_ylabel() or not sp.is_first_col(), (name, "y label")
    assert fig.get_suptitle().startswith("Fig. ")       # the caption-like title


@pytest.mark.slow
def test_fig1_data(built):
    data, figs = built[0], built[1]
    ax_a, ax_b = figs["fig1_loss"][1].axes[:2]
    for i, (H, s) in enumerate(data["convergence"]["by_heads"].items()):
        c = s["curves"]
        (l,) = lines(ax_a, f"H={H}")
        K = np.asarray(c["steps"])
        eq(l.get_xdata(), K[K >= 1])
        eq(l.get_ydata(), nan(c["loss_band"]["mean"])[K >= 1])
        b = c["loss_band"]
        band_vertices_match(ax_a.collections[i], K[K >= 1], np.asarray(b["lo"])[K >= 1],
                            np.asarray(b["hi"])[K >= 1])
        (l,) = lines(ax_b, f"H={H}")                   # (b): test loss along K, same H
        K = np.asarray(c["test_checkpoints"])
        eq(l.get_xdata(), K[K >= 1])
        eq(l.get_ydata(), nan(c["test_loss_band"]["mean"])[K >= 1])
        b = c["test_loss_band"]
        band_vertices_match(ax_b.collections[i], K[K >= 1], np.asarray(b["lo"])[K >= 1],
                            np.asarray(b["hi"])[K >= 1])
    assert "H = [1, 2, 4] (H = [8, 16, 32] not in this run)" in figs["fig1_loss"][1].get_suptitle().replace("\n", " ")


def test_fig1_without_test_curves_uses_generalization():
    """An older convergence file (no test curves): panel (b) is the generalization
    check's train / test after K = n, its numbers exactly."""
    from mhajax.figures import fig1_loss
    rng = np.random.default_rng(1)
    conv, g = synth_convergence(rng, test_curves=False), synth_generalization(rng)
    fig = fig1_loss.plot({"convergence": conv, "generalization": g})
    ax_b = fig.axes[1]
    eq(lines(ax_b, "train $\\hat L$")[0].get_ydata(), g["bands"]["train"]["mean"])
    eq(lines(ax_b, "test $L$")[0].get_ydata(), g["bands"]["test"]["mean"])
    eq(lines(ax_b, "test $L$")[0].get_xdata(), g["steps"])
    assert "no test curves" in ax_b.get_title(loc="left")
    matplotlib.pyplot.close(fig)


def test_fig2_data(built):
    from mhajax.figures.fig2_weak_convexity import KINDS
    wc = built[0]["weak-convexity"]
    fig = built[1]["fig2_weak_convexity"][1]
    for a, H in enumerate((1, 4)):
        ax = fig.axes[a]
        for key, lab, *_ in KINDS:
            drawn = lines(ax, lab)  # one line per seed
            vals = [r[key] for r in wc["records"] if r["heads"] == H]
            if all(v is None for v in vals):
                assert not drawn
                continue
            assert len(drawn) == 2
            for seed, ln in zip((0, 1), drawn):
                rs = sorted((r for r in wc["records"] if r["heads"] == H and r["seed"] == seed),
                            key=lambda r: r["step"])
                eq(ln.get_ydata(), [r[key] if r[key] > 0 else np.nan for r in rs])
                eq(ln.get_xdata(), [r["step"] for r in rs])


def test_fig3_data(built):
    wc = built[0]["weak-convexity"]
    ax_a, ax_b = built[1]["fig3_self_bounded"][1].axes[:2]
    for i, H in enumerate((1, 4)):
        rs = [r for r in wc["records"] if r["heads"] == H]
        neg = [r for r in rs if r["lambda_min"] < 0]
        meas, bound = ax_a.collections[2 * i], ax_a.collections[2 * i + 1]
        eq(meas.get_offsets(), [[r["loss"], -r["lambda_min"]] for r in neg])
        eq(bound.get_offsets(), [[r["loss"], r["kappa_bound"] / math.sqrt(H) * r["loss"]] for r in neg])
        meas, bound = ax_b.collections[2 * i], ax_b.collections[2 * i + 1]
        eq(meas.get_offsets(), [[r["loss"], r["lambda_max"]] for r in rs])
        eq(bound.get_offsets(), [[r["loss"], (r["beta2"] ** 2 + r["kappa_bound"] / math.sqrt(H)) * r["loss"]]
                                 for r in rs])


def test_fig4_data(built):
    g = built[0]["generalization"]
    ax = built[1]["fig4_generalization"][1].axes[0]
    res = np.asarray(g["resolved"])
    ns = np.asarray(g["ns"], dtype=float)
    (pts,) = lines(ax, "gap $L-\\hat L$ (seed mean, control variate)")
    eq(pts.get_ydata(), np.asarray(g["bands"]["gap_cv"]["mean"])[res])   # the estimate the check fits
    f = g["fits"]["gap"]
    (fl,) = [l for l in ax.get_lines() if l.get_label().startswith("fit: slope")]
    eq(fl.get_ydata(), np.exp(f["intercept"]) * ns[res] ** f["slope"])
    (ref,) = lines(ax, "reference slope $-1$")
    y = np.asarray(ref.get_ydata())
    np.testing.assert_allclose(np.diff(np.log(y)) / np.diff(np.log(ns[res])), -1.0)


def test_fig5_data(built):
    from mhajax.figures.fig5_ntk_margin import LINEAR, SERIES
    s = built[0]["one-step"]
    fig = built[1]["fig5_ntk_margin"][1]
    for a, (start, an) in enumerate(s["by_start"].items()):
        ax = fig.axes[a]
        for key, lab, *_ in SERIES:
            (ln,) = lines(ax, lab)
            cur = nan(sum(an["curves"][key], [])).reshape(2, 3)
            want = [np.mean([v for v in cur[:, j] if np.isfinite(v)]) for j in range(3)]
            eq(ln.get_xdata(), s["ns"])
            np.testing.assert_allclose(ln.get_ydata(), want, rtol=1e-15)
        for key, lab, _ in LINEAR:
            assert "comparison, not a claim" in lab
            eq(lines(ax, lab)[0].get_ydata(), [r[key] for r in an["comparison"]])
        lost = sum(r["lost"] for r in an["comparison"])
        assert f"lost to linear on {lost}/6 (n, seed)" in ax.get_title(loc="left")
    total = sum(r["lost"] for an in s["by_start"].values() for r in an["comparison"])
    assert f"lost it on {total}/12" in fig.get_suptitle().replace("\n", " ")


def test_one_step_section_reads_the_synthetic_summary(built):
    """The summary above is schema-correct: REPORT.md's one-step section renders from it."""
    from mhajax.experiments.registry import CHECKS
    text = CHECKS["one-step"].section(CHECKS["one-step"].load(built[0]["one-step"]))
    assert "| zero | 10 | -0.15 [-0.2, -0.12] | -0.1 |" in text and "*comparison, not a claim*" in text


def test_fig6_data(built):
    hd, conv = built[0]["heads"], built[0]["convergence"]
    ax_a, ax_b = built[1]["fig6_heads_distance"][1].axes[:2]
    eq(lines(ax_a, r"$H_{\min}(n)$")[0].get_ydata(),
       [np.nan if v["smallest_heads"] is None else v["smallest_heads"] for v in hd["by_n"].values()])
    eq(lines(ax_a, r"$\log^6 n$")[0].get_ydata(), [v["log6"] for v in hd["by_n"].values()])
    assert lines(ax_a, r"not reached for $H\leq2$")[0].get_xdata().tolist() == [32]
    # H_theory beside them (NaN where not measured), the tightness H_theory/H_min in the title
    eq(lines(ax_a, r"$H_{\rm theory}(n)$")[0].get_ydata(), [3.0e8, 5.0e8, np.nan])
    assert "1.5e+08" in ax_a.get_title()
    for H, s in conv["by_heads"].items():
        K = np.asarray(s["curves"]["checkpoints"])
        eq(lines(ax_b, f"H={H}")[0].get_ydata(), np.asarray(s["curves"]["distance_band"]["mean"])[K >= 1])


def test_report(built, tmp_path):
    res, out = built[2], built[3]
    p = write_report(res, tmp_path / "REPORT.md", out)
    text = p.read_text()
    assert "## Verdicts" in text and "## Provenance" in text
    for name in SYNTH:
        assert f"### {name}" in text
    assert "python -m verify demo --seeds 2" in text     # the command from the meta block
    assert "No result file" in text                      # ntk-margin and quasi-convexity are absent
    for name in FIGURES:
        assert f"{name}.png)" in text


@pytest.mark.slow
def test_cli_quiet_and_missing(built, tmp_path, capsys):
    res = built[2]
    rc = figures_main(["--from", str(res), "--out", str(tmp_path), "--only", "4,fig5",
                       "--report", str(tmp_path / "R.md"), "--quiet"])
    assert rc == 0 and capsys.readouterr().out == ""
    assert (tmp_path / "fig4_generalization.png").is_file() and (tmp_path / "fig5_ntk_margin.pdf").is_file()
    assert not (tmp_path / "fig1_loss.png").exists()
    rc = figures_main(["--from", str(tmp_path / "empty"), "--out", str(tmp_path), "--only", "2",
                       "--no-run", "--no-report", "--quiet"])
    assert rc == 1  # no result file and --no-run: skipped, reported by the exit code


@pytest.mark.slow
def test_no_run_over_every_figure_lists_checks_not_run_without_failing(built, tmp_path, capsys):
    """After a main job (census is not part of it), ``figures --no-run`` draws what it can and
    exits 0; the figure of a check without results is listed as not run, never drawn."""
    res = tmp_path / "results"
    shutil.copytree(built[2], res)
    shutil.rmtree(res / "census")
    rc = figures_main(["--from", str(res), "--out", str(tmp_path), "--no-run", "--no-report"])
    out = capsys.readouterr().out
    assert rc == 0 and "not run (no results, --no-run):" in out and "fig7_census" in out, out
    assert not (tmp_path / "fig7_census.png").exists() and (tmp_path / "fig4_generalization.png").is_file()


@pytest.mark.slow
def test_fresh_results_dir_runs_every_check_once(tmp_path, monkeypatch):
    """A fresh checkout (no results): ``python -m figures`` runs each missing check
    once through the registry with ``--out DIR/<check>`` (convergence with figure 1's H
    grid), with ``sys.argv`` set to that command for the meta block; then every figure
    is built and the report covers every check."""
    import sys

    import mhajax.figures.data
    import mhajax.figures.style
    from mhajax.figures.data import CHECKS
    calls = []
    rng = np.random.default_rng(3)

    def fake_run_main(main, argv):
        check = sys.argv[1]
        calls.append((check, list(argv), list(sys.argv)))
        out = argv[argv.index("--out") + 1]
        from pathlib import Path
        Path(out).mkdir(parents=True)
        if "--preset" in argv:                                      # figure 8: the width preset
            s = SYNTH_WIDTH[check](rng)
        else:
            s = SYNTH[check](rng) if check in SYNTH else dict(passed=True, seeds=[0], meta=META({}, [0]))
        (Path(out) / "summary.json").write_text(json.dumps(s))
        return 0

    monkeypatch.setattr(mhajax.figures.data, "run_main", fake_run_main)
    monkeypatch.setattr(mhajax.figures.style, "DPI", 60)      # the pixels are not under test here; keep it fast
    res = tmp_path / "results"
    rc = figures_main(["--from", str(res), "--out", str(tmp_path / "figs"), "--report", str(tmp_path / "R.md"),
                       "--quiet"])
    assert rc == 0
    width = [c for c in calls if "--preset" in c[1]]
    calls = [c for c in calls if "--preset" not in c[1]]
    assert sorted(c[0] for c in calls) == sorted(CHECKS)          # each once, none twice
    for check, argv, sysargv in calls:
        assert argv[:3] == ["--out", str(res / check), "--quiet"]
        assert sysargv == ["python -m verify", check] + argv
    assert sorted((c[0], tuple(c[1])) for c in width) == [     # figure 8: its two checks, --preset width, once
        (c, ("--out", str(tmp_path / "results-width" / c), "--quiet", "--preset", "width"))
        for c in ("census", "weak-convexity")]
    conv = next(c for c in calls if c[0] == "convergence")
    assert conv[1][3:] == ["--heads", "1,2,4,8,16,32"]
    for name in FIGURES:
        assert (tmp_path / "figs" / f"{name}.png").stat().st_size > 1000
    text = (tmp_path / "R.md").read_text()
    assert "not run" not in text and all(f"### {c}" in text for c in CHECKS)


def test_report_tables_escape_pipes_and_variants_verdicts():
    import re

    from mhajax.experiments.variants import HeadsRow, ModelRow, Summary, section as variants
    from mhajax.runtime.format import md_table
    t = md_table(["H", "max |Φ(θ₀)|"], [[1, 2.5], ["a|b", None]])
    cols = [len(re.split(r"(?<!\\)\|", row)) for row in t.splitlines()]
    assert len(set(cols)) == 1                               # every row has the header's columns

    def typed(T, **kw):                                      # the fields the section reads; None elsewhere
        return T(**{**dict.fromkeys(T._fields), **kw})
    r = lambda passed, ni=None: typed(HeadsRow, final_loss=0.1, max_kappa_emp=0.2, passed=passed,  # noqa: E731
                                      not_implied_held=ni or {})
    s = typed(Summary, by_model={
        "softmax": typed(ModelRow, by_heads={1: r(True), 4: r(True)}, slope_kappa_emp=0.01, survives=True),
        "relu": typed(ModelRow, by_heads={1: r(True), 4: r(False, {"kappa_mid": False})}, slope_kappa_emp=0.4,
                      survives=False),
        "two-layer": typed(ModelRow, by_heads={1: r(None)}, slope_kappa_emp=None, survives=None)},
        failures=[None], diverged=[], undefined=0, judged=5, survives_below=0.25, loss="logistic")
    rows = {l.split(" | ")[0].strip("| "): l for l in variants(s).splitlines() if l.startswith("| ")}
    assert rows["softmax"].endswith("| yes | yes | - |")
    assert rows["relu"].endswith("| **no** | **no** | kappa_mid |")
    assert rows["two-layer"].endswith("| undef | not judged | - |")


def test_unplottable_result_is_an_error_not_a_traceback(tmp_path, capsys):
    """A result file of a schema the figure cannot read: a message naming the figure,
    exit code 1, and no stale figure claimed."""
    res = tmp_path / "results"
    (res / "generalization").mkdir(parents=True)
    (res / "generalization" / "summary.json").write_text(json.dumps({"passed": True, "ns": [8, 16]}))
    rc = figures_main(["--from", str(res), "--out", str(tmp_path / "f"), "--only", "4", "--no-run",
                       "--no-report", "--quiet"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "fig4_generalization" in err and "KeyError" in err and "Traceback" not in err
    assert not (tmp_path / "f" / "fig4_generalization.png").exists()


def test_fig7_data(built):
    data, figs = built[0], built[1]
    fig = figs["fig7_census"][1]
    c = data["census"]
    rec = next(r for r in c["records"] if r["heads"] == 4 and r["seed"] == 0 and r["step"] == 0)
    ax = fig.axes[0]
    census = lines(ax, "census")[0]
    eq(census.get_xdata(), rec["histogram"]["edges"])
    eq(census.get_ydata()[:-1], rec["histogram"]["counts_hi"])
    nl = lines(fig.axes[2], "step 20")[0]
    eq(nl.get_ydata(), [c["by_heads"][h]["steps"]["20"]["neg_frac_hi"] for h in ("1", "4")])


def test_fig8_data(built):
    """Figure 8 plots the width results' numbers as stored: κ_emp, κ(θ) and λ_max/L̂ (weak-convexity
    ``width_law``), N₋/P and |tr₋|/L̂ (census ``width``), the bound d²·κ(θ)·√H from them."""
    data, figs = built[0], built[1]
    fig = figs["fig8_width"][1]
    wc, cs = data["weak-convexity@width"], data["census@width"]
    H = np.asarray(WIDTH_HEADS, float)
    for k in ("0", "100"):
        m = wc["width_law"]["steps"][k]["mean"]
        eq(lines(fig.axes[0], f"κ_emp, step {k}")[0].get_ydata(), m["kappa_emp"])
        eq(lines(fig.axes[0], f"κ(θ), step {k}")[0].get_ydata(), m["kappa_bound"])
        eq(lines(fig.axes[3], f"λmax/L̂, step {k}")[0].get_ydata(), m["lambda_max_over_loss"])
        eq(lines(fig.axes[3], f"β₂² + κ(θ)/√H, step {k}")[0].get_ydata(), m["smoothness_coefficient"])
        e = cs["width"]["steps"][k]
        eq(lines(fig.axes[1], f"N₋/P, step {k}")[0].get_ydata(), [r[0] for r in e["neg_frac_hi"]])
        eq(lines(fig.axes[1], f"N₋(B)/P, step {k}")[0].get_ydata(), [r[0] for r in e["neg_B_frac"]])
        eq(lines(fig.axes[2], f"|tr₋|/L̂, step {k}")[0].get_ydata(), [r[0] for r in e["abs_trace_over_loss"]])
        np.testing.assert_allclose(lines(fig.axes[2], f"d²·κ(θ)·√H, step {k}")[0].get_ydata(),
                                   36 * np.asarray(m["kappa_bound"]) * np.sqrt(H), rtol=1e-15, atol=0)
    eq(lines(fig.axes[1], "d/(T + d)")[0].get_ydata(), [8 / 14] * 2)


@pytest.mark.slow
def test_fig7_renders_from_a_small_run(tmp_path):
    from mhajax.cli.verify import main as verify_main
    res = tmp_path / "results"
    assert verify_main(["census", "--heads", "1,2", "--seeds", "2", "--n", "8", "--tokens", "3", "--dim", "4",
                        "--clusters", "2", "--steps", "4", "--every", "2", "--probes", "2", "--lanczos", "8",
                        "--resamples", "100", "--out", str(res / "census"), "--quiet"]) == 0
    paths, fig = build("fig7_census", res, tmp_path / "figs", run_missing=False)
    assert paths is not None and all(p.stat().st_size > 1000 for p in paths)
    assert all(has_finite_data(ax) for ax in fig.axes)
