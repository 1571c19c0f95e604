"""The generalization experiment (docs/theory.md §15.2): with K ≈ n steps, test − train = Õ(1/n).

For each n on a grid, ``seeds`` GD runs (one ``vmap``-ed, ``jit``-ed
:func:`mhajax.train.train`, one compile per n) train H heads for
``K = max(1, round(steps_per_n · n))`` steps on n samples of stream 0 of
each seed. Every run of a seed starts from the same θ_0 (stream 1) and is
tested on the same ``n_test`` fresh samples (stream 2), so the n-dependence
is not blurred by changing test sets. Per seed and n:

    train  L̂(θ_K)        (exact, on the training set)
    test   L(θ_K) ≈ (1/n_test) Σ_j ℓ(y_j Φ(θ_K; X_j)),   se = std_j(ℓ_j)/√n_test
    gap    L(θ_K) − L̂(θ_K)

The gap can be smaller than its noise: the test-sampling error
``se_test = √(Σ_s se_s²)/S`` of the seed-mean test loss, and — at large n the
larger part — the seed-to-seed spread of the gap itself (L̂ is an average of
n losses of one training set; its fluctuation around L is of either sign).
A grid point is *resolved* when the seed-mean gap exceeds ``2 · se_gap`` with
``se_gap = std_s(gap_s)/√S`` (ddof = 1; it includes the test-sampling noise of
each seed). The gap slope is fitted on resolved points only (at least 3,
else undefined), and the unresolved points are listed: selecting points by
their gap biases the slope, so the fit is only as good as the resolved set.
Slopes (log-log, bootstrap CI over seeds; :mod:`mhajax.analysis.rates`) of the test
loss and of the gap are compared with −1.

**Control-variate gap** (:mod:`mhajax.analysis.gap`, S >= 3 seeds). Every model is also
evaluated on every other seed's training set: ``C[s, s'] = L̂_s(θ_{s'}) − L(θ_{s'})``
(``[S, S]`` per n, S² forward passes over n samples). θ_{s'} is independent of set s, so
``c_s = mean_{s'≠s} C[s, s']`` has mean 0 and measures how "hard" set s is; the estimate
``ĝ = mean_s (gap_s + c_s)`` has the plain gap's expectation and, at large n, a much smaller
spread. Its standard error is the delete-one jackknife over seeds; n is resolved when
``ĝ > 2·se_J``, and every unresolved n is printed with ĝ + 2 se_J (an upper bound) and the
seeds that would resolve it. The gap slope is fitted to the seed-wise ``gap_s + c_s`` on the
resolved n (bootstrap CI, as the other slopes) and, beside it, its jackknife CI. With fewer
than 3 seeds the plain gap and ``se = std_s(gap_s)/√S`` are used.

**GD step-size premise** (docs/theory.md §15): ``η·λ̄_max(∇²L̂(θ₀)) <= 1`` with the certified λ̄_max at
θ₀ on every seed's training set, per n (:func:`~mhajax.experiments.base.gd_step_premise`).
Where the rate is claimed and the premise fails, the verdict is PREMISE_VIOLATED.

**Paper preset** (``--preset paper``): n = 32…4096 (8 points), H = 1, 12 seeds,
n_test = 65536; on the default data the gap is resolved up to about n = 1024 (6 points).

Training and testing use ``cfg.data.head_model()`` and ``cfg.data.loss_fn()``. Where the
rate analysis does not cover the pair (:func:`mhajax.analysis.rates.rate_applies`) the slopes are
informational and ``passed`` is None (False if a run diverged). ``--data npz`` needs
``--test-path``: without held-out data the check refuses to run (:class:`InputError`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import ClassVar, NamedTuple

import jax
import numpy as np
from functools import partial

from mhajax.analysis.gap import RESOLVED_SE, control_variate_gap, jackknife_slope, seeds_needed
from mhajax.analysis.rates import (RATE_TOLERANCE, bootstrap_slope, classify_slope, mean_band,
                                   rate_applies, rule_text, upper_bound_holds)
from mhajax.data.seeds import seed_list
from mhajax.experiments.base import (batched_data, batched_init, evaluate, final_params, gd_step_premise,
                                     premise_line, premise_violated, require_test_data, steps_for)
from mhajax.experiments.configs import Config, BootConfig, DataConfig, GDConfig, option, sub
from mhajax.experiments.registry import check
from mhajax.runtime.format import diverged_lines, fmt, fmt_ci, fmt_window, md_table, table
from mhajax.runtime import memory as mem
from mhajax.runtime.io import to_jsonable
from mhajax.runtime.resume import load_or_run
from mhajax.models.base import head_size
from mhajax.train import runs
from mhajax.validate import parse_list, positive_float, positive_int
from mhajax.verdict import Judgement, Verdict

#: ``--preset paper``: 8 points up to n = 4096, H = 1, n_test = 65536. 12 seeds:
#: the number an 8-seed run's measured spread said would resolve the gap at n = 512 and 1024
#: (12 and 9); n = 2048, 4096 would need ~66 and ~56 and are reported as unresolved.
PAPER = {"ns": (32, 64, 128, 256, 512, 1024, 2048, 4096), "heads": 1, "seeds": 12, "n_test": 65536}
#: the gap slope is fitted only on at least this many resolved n (else undefined)
MIN_RESOLVED = 3


@dataclass(frozen=True)
class GeneralizationConfig(Config):
    """GD runs of K = round(steps_per_n · n) steps per n; slopes over n of the test loss and
    of the test − train gap. ``data.n`` is set to ``max(ns)`` (the grid sets n)."""

    ns: tuple = option((32, 64, 128, 256, 512), "comma-separated training-set sizes n, increasing, "
                                                ">= 2, at least 3", kind="list", sizes="train")
    heads: int = option(4, "number of heads H")
    seeds: int = option(8, "GD runs per n (>= 2)")
    seed0: int = option(0, "first seed")
    steps_per_n: float = option(1.0, "K = round(steps_per_n · n) GD steps")
    gd: GDConfig = sub(GDConfig)
    n_test: int = option(32768, "fresh test samples per seed (stream 2)", sizes="test")
    boot: BootConfig = sub(BootConfig)
    data: DataConfig = sub(DataConfig)
    EXCLUDE: ClassVar[tuple] = ("gd.steps", "gd.every", "data.n")

    def validate(self):
        """The validated config, a new one (lists parsed, names normalized); an
        :class:`InputError` names the first bad option."""
        cfg = replace(self, ns=tuple(parse_list("--ns", self.ns, "int", minimum=2,
                                                increasing=True, min_len=3)))
        positive_int("heads", cfg.heads)
        seed_list(cfg.seeds, cfg.seed0)
        positive_int("seeds", cfg.seeds, minimum=2)
        positive_float("steps_per_n", cfg.steps_per_n)
        cfg.gd.validate()
        positive_int("n_test", cfg.n_test, minimum=2)
        cfg.boot.validate()
        cfg = replace(cfg, data=replace(cfg.data, n=max(cfg.ns)).validate())
        cfg.data.check_test_size(cfg.n_test)
        require_test_data(cfg.data, "generalization")
        return cfg



def _floats(v) -> np.ndarray:
    """A saved list back to float64, ``None`` (a NaN/inf in JSON) as NaN."""
    return np.array([np.nan if x is None else x for x in v], dtype=np.float64)


@partial(jax.jit, static_argnames=("model", "loss"))
def cross_losses(th, X, y, model, loss):
    """``M [S, S]``: ``M[s, s'] = L̂_s(θ_{s'})``, model s' (leaves ``[S, ...]``) on training
    set s of ``X [S, n, T, d]``, ``y [S, n]``."""
    return jax.vmap(lambda a, b: evaluate(th, jax.numpy.broadcast_to(a, (y.shape[0],) + a.shape),
                                          jax.numpy.broadcast_to(b, (y.shape[0],) + b.shape),
                                          model, loss)[0])(X, y)


def _run_n(cfg, n, th0, test, seeds, model, loss) -> dict:
    """One unit (one n): the step premise at θ₀, train every seed for K ≈ n steps, test, and
    every model on every training set (the control variate). JSON-able."""
    t = time.perf_counter()
    K = steps_for(n, cfg.steps_per_n)
    X, y = batched_data(cfg.data, seeds, stream=0, n=n)
    premise = gd_step_premise(cfg.gd.lr, th0, X, y, model=model, loss=loss)   # docs/theory.md §15, at θ₀
    traj = runs(th0, X, y, cfg.gd.lr, steps=K, every=K, model=model, loss=loss)
    th = final_params(traj)
    test_l, se, err = (np.asarray(a) for a in evaluate(th, test[0], test[1], model, loss))
    _, _, train_err = (np.asarray(a) for a in evaluate(th, X, y, model, loss))
    cross = np.asarray(cross_losses(th, X, y, model, loss)) - test_l[None, :]
    finite = np.asarray(traj.finite)
    diverged = [dict(n=n, seed=seed, step=int(np.argmin(finite[s])))
                for s, seed in enumerate(seeds) if not finite[s].all()]
    train_loss = np.asarray(traj.losses[:, -1])
    row = dict(n=n, steps=K, train=train_loss, test=test_l, test_se=se, gap=test_l - train_loss,
               test_error=err, train_error=train_err, cross=cross)
    return to_jsonable(dict(row=row, diverged=diverged, premise=premise, time_s=time.perf_counter() - t))


class GapEstimate(NamedTuple):
    """:func:`gap_estimates`: per n (m of them) over S seeds."""

    method: str                 # "control variate" or "plain"
    mean: np.ndarray            # [m] the gap estimate
    se: np.ndarray              # [m] its standard error
    plain_se: np.ndarray        # [m] std_s(gap_s)/√S
    resolved: np.ndarray        # [m] bool: mean > RESOLVED_SE · se
    per_seed: np.ndarray        # [S, m] gap_s + c_s (or gap_s)
    loo: np.ndarray | None      # [S, m] leave-one-seed-out estimates (control variate only)
    corr: list                  # [m] corr(gap, −c) or None
    se_test: np.ndarray         # [m] test-sampling error of the seed-mean test loss
    seeds_needed: list          # [m] seeds that would resolve an unresolved n (None where resolved)


def gap_estimates(gap, cross, test_se) -> GapEstimate:
    """Per n (columns of ``gap [S, m]``; ``cross``: m matrices ``[S, S]`` or None): the gap
    estimate, its standard error and whether it is resolved, with the control variate when
    S >= 3 (``method`` "control variate", jackknife se) else the plain mean and
    ``std_s/√S`` (``method`` "plain"). ``per_seed [S, m]``: the seed-wise values whose mean is
    the estimate (gap_s + c_s, or gap_s); ``loo [S, m]`` (or None): leave-one-seed-out estimates."""
    gap = np.asarray(gap, dtype=np.float64)
    S, m = gap.shape
    use_cv = S >= 3 and cross is not None and all(c is not None for c in cross)
    mean, se, per, loo, plain_se, corr = (np.full(m, np.nan), np.full(m, np.nan), gap.copy(),
                                          np.full((S, m), np.nan) if use_cv else None,
                                          np.full(m, np.nan), [None] * m)
    for j in range(m):
        g = gap[:, j]
        plain_se[j] = np.std(g, ddof=1) / np.sqrt(S) if S > 1 else np.nan
        if use_cv:
            r = control_variate_gap(g, _floats2(cross[j]))
            if r["mean"] is not None:
                mean[j], se[j], per[:, j], loo[:, j], corr[j] = (r["mean"], r["se"], r["per_seed"],
                                                                 r["leave_one_out"], r["corr"])
            continue
        mean[j], se[j] = g.mean(), plain_se[j]
    resolved = resolved_points(mean, se)
    se_test = np.sqrt((np.asarray(test_se) ** 2).sum(axis=0)) / S
    needed = [seeds_needed(float(a), float(b), S) if not r else None for a, b, r in zip(mean, se, resolved)]
    return GapEstimate(method="control variate" if use_cv else "plain", mean=mean, se=se, plain_se=plain_se,
                       resolved=resolved, per_seed=per, loo=loo, corr=corr, se_test=se_test, seeds_needed=needed)


def resolved_points(mean, se) -> np.ndarray:
    """``[m]`` bool: n is resolved when its gap estimate exceeds ``RESOLVED_SE · se``
    (``mean``, ``se`` ``[m]``; a NaN or None on either side is not resolved)."""
    return np.asarray(mean, dtype=np.float64) > RESOLVED_SE * np.asarray(se, dtype=np.float64)


def gap_fitted(resolved) -> bool:
    """Whether the gap slope is fitted: at least :data:`MIN_RESOLVED` of the ``[m]`` n are resolved."""
    return int(np.sum(resolved)) >= MIN_RESOLVED


class SlopeVerdict(NamedTuple):
    """One slope over n against −1 (:func:`mhajax.analysis.rates.classify_slope`)."""

    classification: str     # "matches", "steeper", "shallower" or "undefined"
    holds: bool | None      # Õ(1/n) not contradicted (None: undefined)


def slope_verdict(ci, slope) -> SlopeVerdict:
    """The slope's class and whether the upper bound Õ(1/n) holds; ``ci`` (lo, hi) or None
    (no fit: ``undefined``, holds None)."""
    return SlopeVerdict(classify_slope(ci, slope), upper_bound_holds(ci, slope))


class GeneralizationRecord(NamedTuple):
    """What :func:`judge` reads."""

    test: bool | None           # the test-loss slope: Õ(1/n) holds (None: undefined)
    gap: bool | None            # the gap slope (resolved n only): Õ(1/n) holds (None: undefined)
    diverged: int               # runs that became non-finite
    covered: bool               # the rate is claimed for the (model, loss) pair
    why: str                    # why not, where it is not
    premise: Judgement | None   # PREMISE_VIOLATED of a failed step premise, else None


def _slope_of(fit) -> SlopeVerdict:
    """:func:`slope_verdict` of a :func:`~mhajax.analysis.rates.bootstrap_slope` fit (None: no fit)."""
    return slope_verdict(*((None, None) if fit is None else (fit["ci"], fit["slope"])))


class Curves(NamedTuple):
    """Per seed and n (``[S, m]`` each): the losses after K steps and their standard errors."""

    train: np.ndarray
    test: np.ndarray
    test_se: np.ndarray
    gap: np.ndarray
    test_error: np.ndarray
    train_error: np.ndarray



def _floats2(M) -> np.ndarray:
    """A saved matrix back to float64, ``None`` as NaN."""
    return np.array([[np.nan if x is None else x for x in row] for row in M], dtype=np.float64)


def run(cfg: GeneralizationConfig, progress=None, store=None) -> dict:
    """Run the experiment; returns the summary dict (per-n numbers, fits, verdict).

    ``store`` (a :class:`mhajax.resume.ProgressStore`) keeps each finished n; a rerun
    loads them (``resumed_ns``) and computes the rest."""
    cfg = cfg.validate()
    t0 = time.perf_counter()
    d = cfg.data
    model, loss = d.head_model(), d.loss_fn()
    seeds = seed_list(cfg.seeds, cfg.seed0)
    test = batched_data(d, seeds, stream=2, n=cfg.n_test)
    th0 = batched_init(d, seeds, cfg.heads)
    rows, timings, diverged, resumed, premises = [], {}, [], [], {}
    for n in cfg.ns:
        unit = f"n={n}"
        res = load_or_run(store, unit, lambda: _run_n(cfg, n, th0, test, seeds, model, loss), resumed, n)
        r = res["row"]
        rows.append(dict(r, **{k: _floats(r[k]) for k in Curves._fields}))
        timings[n] = res["time_s"]
        diverged += res["diverged"]
        premises[n] = res.get("premise")
        if progress:
            progress(n)
    ns = np.asarray(cfg.ns, dtype=np.float64)
    per = Curves(*(np.stack([r[k] for r in rows], axis=1) for k in Curves._fields))
    est = gap_estimates(per.gap, [r.get("cross") for r in rows], per.test_se)
    resolved = est.resolved
    boot = cfg.boot.kwargs()
    lc = dict(boot, log_power=cfg.boot.log_power)
    test_fit, test_lc = bootstrap_slope(ns, per.test, **boot), bootstrap_slope(ns, per.test, **lc)
    train_fit, train_lc = bootstrap_slope(ns, per.train, **boot), bootstrap_slope(ns, per.train, **lc)
    gap_fit = gap_lc = gap_jk = None
    if gap_fitted(resolved):
        gap_fit = bootstrap_slope(ns[resolved], est.per_seed[:, resolved], **boot)
        gap_lc = bootstrap_slope(ns[resolved], est.per_seed[:, resolved], **lc)
        if est.loo is not None:
            gap_jk = jackknife_slope(ns[resolved], est.mean[resolved], est.loo[:, resolved], level=cfg.boot.level)
    fits = dict(test=test_fit, test_log_corrected=test_lc, train=train_fit, train_log_corrected=train_lc,
                gap_jackknife=gap_jk, gap=gap_fit, gap_log_corrected=gap_lc)
    test_v, gap_v, train_v = (_slope_of(f) for f in (test_fit, gap_fit, train_fit))
    covered, why = rate_applies(model, loss)
    judgement = judge(GeneralizationRecord(test=test_v.holds, gap=gap_v.holds, diverged=len(diverged),
                                           covered=covered, why=why,
                                           premise=premise_violated(list(premises.values()))))
    curves = {k: v.tolist() for k, v in per._asdict().items()}
    bands = dict(train=mean_band(per.train, **boot), test=mean_band(per.test, **boot), gap=mean_band(per.gap, **boot))
    if est.method == "control variate":
        bands.update(gap_cv=mean_band(est.per_seed, **boot))
    unresolved = [dict(n=int(n), gap=_num(est.mean[j]), se=_num(est.se[j]),
                       upper=_num(est.mean[j] + RESOLVED_SE * est.se[j]),
                       log_n_over_n=float(np.log(n) / n), se_test=float(est.se_test[j]),
                       seeds_needed=est.seeds_needed[j])
                  for j, n in enumerate(cfg.ns) if not resolved[j]]
    return dict(**judgement.fields(), ns=list(cfg.ns), steps=[r["steps"] for r in rows], seeds=seeds,
                per_seed=curves, bands=bands, se_test=est.se_test.tolist(), se_gap=_nums(est.se),
                gap_estimate=dict(method=est.method, mean=_nums(est.mean), se=_nums(est.se),
                                  plain_se=_nums(est.plain_se), corr=est.corr,
                                  per_seed=est.per_seed.tolist()),
                resolved=resolved.tolist(), unresolved=unresolved,
                resolved_rule=(f"gap estimate ({est.method}) > {RESOLVED_SE:g} x its standard error "
                               + ("(jackknife over seeds)" if est.method == "control variate"
                                  else "(std_s(gap)/sqrt(S))")),
                premise=premises, fits=fits,
                verdicts=dict(test=test_v._asdict(), gap=gap_v._asdict(), train=train_v._asdict()),
                diverged=diverged, tolerance=RATE_TOLERANCE,
                theory_applies=covered, theory_note=why, resumed_ns=resumed, heads=cfg.heads,
                n_test=cfg.n_test, level=cfg.boot.level, log_power=cfg.boot.log_power,
                problem=dict(model=d.model, loss=d.loss, data=d.dataset),
                timings_s=timings, wall_time_s=time.perf_counter() - t0)


def _num(v):
    v = float(v)
    return v if np.isfinite(v) else None


def _nums(a) -> list:
    return [_num(v) for v in a]


def judge(r: GeneralizationRecord) -> Judgement:
    """PREMISE_VIOLATED when the rate is claimed but the step size breaks the GD premise
    measured at θ₀ at some n (the numbers are still reported); FAILED on a diverged run, or
    when the test-loss or gap slope CI lies entirely above the tolerance band; INFORMATIONAL
    where the rate is not claimed for the (model, loss) pair; INCONCLUSIVE where a judged
    slope is undefined (e.g. the gap resolved at fewer than 3 n); else PASSED."""
    if r.covered and r.premise is not None:
        return r.premise
    if r.diverged:
        return Judgement(Verdict.FAILED, f"{r.diverged} run(s) became non-finite")
    judged = (("test", r.test), ("gap", r.gap))
    if not r.covered:
        return Judgement(Verdict.INFORMATIONAL, f"the Õ(1/n) rate is not claimed here: {r.why}")
    bad = [k for k, h in judged if h is False]
    if bad:
        return Judgement(Verdict.FAILED, f"the {' and '.join(bad)} slope decays more slowly than "
                                         "Õ(1/n) allows")
    undefined = [k for k, h in judged if h is None]
    if undefined:
        return Judgement(Verdict.INCONCLUSIVE, f"the {' and '.join(undefined)} slope is undefined")
    return Judgement(Verdict.PASSED, "test loss and gap decay at least as fast as Õ(1/n)")


def report(summary) -> str:
    """Per n the seed-mean losses and the gap estimate with its standard errors (and, per
    unresolved n, why); then the slopes over n of the test loss, the gap and the train loss
    with their CIs and verdicts, and the GD step-size premise."""
    b = summary["bands"]
    S = len(summary["seeds"])
    ge = summary.get("gap_estimate") or dict(method="plain", mean=b["gap"]["mean"], se=summary["se_gap"],
                                             plain_se=summary["se_gap"], corr=[None] * len(summary["ns"]))
    cv = ge["method"] == "control variate"
    rows = []
    for j, n in enumerate(summary["ns"]):
        rows.append([n, summary["steps"][j], fmt(b["train"]["mean"][j]), fmt(b["test"]["mean"][j]),
                     fmt(b["gap"]["mean"][j]), fmt(ge["plain_se"][j])]
                    + ([fmt(ge["mean"][j]), fmt(ge["se"][j]), fmt(ge["corr"][j])] if cv else [])
                    + [fmt(summary["se_test"][j]), "yes" if summary["resolved"][j] else "no",
                       fmt(sum(summary["per_seed"]["test_error"][s][j] for s in range(S)) / S)])
    head = (["n", "K", "train L̂", "test L", "gap (plain)", "se plain"]
            + (["gap (CV)", "se_J (CV)", "corr(gap,−c)"] if cv else []) + ["se(test)", "resolved", "test err"])
    out = [table(head, rows),
           f"seed means over {S} seeds, H={summary['heads']}, n_test={summary['n_test']}; se plain = std over "
           f"seeds / √S (includes test sampling); se(test) = test-sampling error of the seed-mean test loss "
           f"alone; {summary['resolved_rule']}."]
    if cv:
        out.append("gap (CV) = mean_s (gap_s + c_s), c_s = mean over the other seeds' models of "
                   "(their loss on training set s − their held-out loss): E[c_s] = 0, same expectation as the "
                   "plain gap, smaller spread; se_J = delete-one jackknife over seeds.")
    f, v = summary["fits"], summary["verdicts"]
    rows = []
    for name, label in (("test", "test loss L(θ_K)"), ("gap", f"gap{' (CV)' if cv else ''} L − L̂ (resolved n)"),
                        ("train", "train loss L̂(θ_K)")):
        rows.append([label, fmt_ci(f[name]), fmt_window(f[name]), fmt_ci(f[name + "_log_corrected"]),
                     v[name]["classification"],
                     {True: "yes", False: "NO", None: "undef"}[v[name]["holds"]]])
    level = summary["level"]
    out += ["", table(["slope over n", f"slope [{100 * level:g}% CI]", "lower/upper half",
                       f"slope of y/log^{summary['log_power']:g}n", "vs -1", "Õ(1/n) not contradicted"],
                      rows),
            rule_text(level),
            "verdict uses the test-loss and gap rows; the train row (K = n, so it is the convergence rate) is "
            "informational."]
    jk = f.get("gap_jackknife")
    if jk and jk.get("slope") is not None:
        out.append(f"gap slope, jackknife over seeds (the CV terms share models): {jk['slope']:.3f} "
                   f"[{jk['ci'][0]:.3f}, {jk['ci'][1]:.3f}] ({100 * jk['level']:g}%, normal, se {jk['se']:.3f}).")
    res_ns = [n for n, r in zip(summary["ns"], summary["resolved"]) if r]
    if res_ns:
        out.append(f"gap fitted on {len(res_ns)} resolved n = {res_ns}"
                   + (f" (n = {min(res_ns)}…{max(res_ns)})" if len(res_ns) > 1 else "") + ".")
    prob = summary["problem"]
    out.append(f"problem: --model {prob['model']} --loss {prob['loss']} --data {prob['data']}.")
    if not summary["theory_applies"]:
        out.append(f"INFORMATIONAL: the Õ(1/n) rate is not claimed for this (model, loss) pair "
                   f"({summary['theory_note']}); the slopes are reported, not judged.")
    if summary.get("resumed_ns"):
        out.append(f"resumed from saved progress: n = {summary['resumed_ns']}")
    for u in summary.get("unresolved") or _old_unresolved(summary):
        out.append(_unresolved_line(u, S))
    if f["gap"] is not None and f["gap"]["undefined_resamples"]:
        out.append(f"{f['gap']['undefined_resamples']} of {f['gap']['resamples']} bootstrap resamples had a "
                   f"non-positive mean gap somewhere and no slope.")
    prem = summary.get("premise") or {}
    lines = {premise_line(p) for p in prem.values() if p}
    if len(lines) == 1:
        out.append(lines.pop() + f" [every n of {list(prem)}]")
    else:
        out.extend(f"n={n}: {premise_line(p)}" for n, p in prem.items() if p)
    out.extend(diverged_lines(summary["diverged"]))
    return "\n".join(out)


def _old_unresolved(summary) -> list:
    """Unresolved n of a summary written before the per-n reasons were recorded."""
    return [dict(n=n, gap=None) for n, r in zip(summary["ns"], summary["resolved"]) if not r]


def _unresolved_line(u, S) -> str:
    """Why the gap at one n is not resolved, and what would resolve it."""
    if u.get("gap") is None:
        return f"n={u['n']}: gap not resolved (estimate <= 2·se or undefined): excluded from the gap fit."
    need = u.get("seeds_needed")
    return (f"n={u['n']}: gap not resolved: {u['gap']:.3g} ± {u['se']:.2g} (se), so gap <= {u['upper']:.3g} "
            f"(estimate + 2 se; log n/n = {u['log_n_over_n']:.3g}, {u['upper'] / u['log_n_over_n']:.2g}x of it); "
            f"test-sampling se alone {u['se_test']:.2g}; "
            + (f"≈ {need} seeds would resolve it at this spread (have {S})" if need else
               "no seed count resolves a gap whose upper bound is not positive")
            + "; excluded from the gap fit.")


def headline(summary) -> str:
    """``slope over n: test -1.29 [...] (steeper), gap -1.92 [...] (steeper), resolved n = 32…1024``."""
    f, v = summary["fits"], summary["verdicts"]
    res_ns = [n for n, r in zip(summary["ns"], summary["resolved"]) if r]
    return (f"slope over n: test {fmt_ci(f['test'])} ({v['test']['classification']}), "
            f"gap {fmt_ci(f['gap'])} ({v['gap']['classification']}; {len(res_ns)} of {len(summary['ns'])} n "
            f"resolved)")


def section(summary) -> str:
    """REPORT.md: per-n means, the gap estimate and its se, and the three slopes with their verdicts."""
    b = summary["bands"]
    ge = summary.get("gap_estimate") or dict(method="plain", mean=b["gap"]["mean"], se=summary["se_gap"])
    rows = [[n, summary["steps"][j], b["train"]["mean"][j], b["test"]["mean"][j], b["gap"]["mean"][j],
             ge["mean"][j], ge["se"][j], summary["resolved"][j]] for j, n in enumerate(summary["ns"])]
    t1 = md_table(["n", "K", "train L̂", "test L", "gap (plain)", f"gap ({ge['method']})", "se", "gap resolved"],
                  rows)
    rows = [[k, fmt_ci(summary["fits"].get(k)), summary["verdicts"][k]["classification"],
             summary["verdicts"][k]["holds"]] for k in ("test", "gap", "train")]
    t2 = md_table(["slope over n of", "slope [CI]", "vs −1", "Õ(1/n) not contradicted"], rows)
    extra = [_unresolved_line(u, len(summary["seeds"])) for u in summary.get("unresolved") or []]
    return t1 + "\n\n" + t2 + ("\n\n" + "\n".join(f"- {e}" for e in extra) if extra else "")


# -- memory: the run's dominant arrays, checked by the CLI before it starts --

def memory(cfg: GeneralizationConfig) -> list:
    """The dominant arrays (:mod:`mhajax.runtime.memory`) at the largest n: the test set, the
    training data and GD of all seeds (K = round(steps_per_n·n) steps, 2 checkpoints)."""
    d, S, n = cfg.data, cfg.seeds, max(mem.ints(cfg.ns))
    p, K = head_size(d.model, d.tokens, d.dim), steps_for(n, cfg.steps_per_n)
    return ([("test data [S, n_test, T, d]", (S, cfg.n_test, d.tokens, d.dim)), mem.data(S, n, d.tokens, d.dim)]
            + mem.gd(S, n, d.tokens, d.dim, cfg.heads, p, 2, K))


check("generalization", config=GeneralizationConfig, report=report, headline=headline,
      section=section, claim="test − train loss = Õ(1/n) after K ≈ n GD steps", presets={"paper": PAPER},
      memory=memory)(run)
