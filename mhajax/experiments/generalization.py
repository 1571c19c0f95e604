"""The generalization experiment (docs/theory.md §15.2): with K ≈ n steps, test − train = Õ(1/n).

For each n on a grid, ``seeds`` GD runs (one ``vmap``-ed, ``jit``-ed :func:`mhajax.train.train`,
one compile per n) train H heads for ``K = max(1, round(steps_per_n · n))`` steps on n samples of
stream 0 of each seed, from the same θ_0 (stream 1), tested on the same ``n_test`` fresh samples
(stream 2). Per seed and n:

    train  L̂(θ_K)        (exact, on the training set)
    test   L(θ_K) ≈ (1/n_test) Σ_j ℓ(y_j Φ(θ_K; X_j)),   se = std_j(ℓ_j)/√n_test
    gap    L(θ_K) − L̂(θ_K)

**The gap estimate** (S >= 3 seeds): the control-variate gap of :mod:`mhajax.analysis.gap`, from
every model also evaluated on every other seed's training set (``C [S, S]`` per n), with its
delete-one jackknife se_J; with fewer seeds the plain mean and ``std_s(gap_s)/√S``. n is
*resolved* when the estimate exceeds 2 se; the gap slope is fitted to the seed-wise values on the
resolved n only (at least :data:`MIN_RESOLVED`, else undefined), and each unresolved n is reported
with its upper bound and the seeds that would resolve it. The slopes over n (log-log, bootstrap CI
over seeds; :mod:`mhajax.analysis.rates`) of the test loss and the gap are compared with −1.

**GD step-size premise** (docs/theory.md §15): ``η·λ̄_max(∇²L̂(θ₀)) <= 1`` per n on every seed's
training set (:func:`~mhajax.analysis.step_premise.gd_step_premise`); where the rate is claimed and it
fails, the verdict is PREMISE_VIOLATED. Where the rate analysis does not cover the (model, loss)
pair (:func:`mhajax.analysis.rates.rate_applies`) the slopes are informational. ``--data npz``
needs ``--test-path`` (:class:`InputError` without held-out data).
"""
from __future__ import annotations

import time
from collections import namedtuple
from dataclasses import dataclass, replace
from typing import ClassVar, NamedTuple

import numpy as np

from mhajax.analysis.evaluation import cross_losses, evaluate, final_params
from mhajax.analysis.gap import RESOLVED_SE, control_variate_gap, jackknife_slope, seeds_needed
from mhajax.analysis.rates import (RATE_TOLERANCE, Band, Slope, bootstrap_slope, classify_slope, mean_band,
                                   rate_applies, rule_text, upper_bound_holds)
from mhajax.analysis.step_premise import StepPremise, gd_step_premise, premise_line, premise_violated
from mhajax.data.seeds import seed_list
from mhajax.experiments.base import ProblemNames, batched_data, batched_init, require_test_data, steps_for, sweep
from mhajax.experiments.configs import Config, BootConfig, DataConfig, GDConfig, option, sub
from mhajax.experiments.registry import check
from mhajax.runtime.format import diverged_lines, fmt, fmt_ci, fmt_window, md_table, table
from mhajax.runtime import memory as mem
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


# -- the records (summary.json and the units of the sweep) --

_V, _M = list[float | None], list[list[float | None]]      # [S] or [m]; [S, m] or [S, S] (None: NaN)
CURVES = ("train", "test", "test_se", "gap", "test_error", "train_error")
#: one n: K; per seed ``[S]`` the losses after K steps (:data:`CURVES`); ``cross [S, S]`` = C[s, s']
Row = NamedTuple("Row", [("n", int), ("steps", int), *[(k, _V) for k in CURVES], ("cross", _M)])
#: a GD run (n, seed) that became non-finite, at ``step``
DivergedRun = NamedTuple("DivergedRun", [("n", int), ("seed", int), ("step", int)])
#: one unit of the sweep (:func:`_run_n`)
Unit = NamedTuple("Unit", [("row", Row), ("diverged", list[DivergedRun]), ("premise", StepPremise), ("time_s", float)])
#: the :class:`Row` losses of every n, ``[S, m]`` each
Curves = NamedTuple("Curves", [(k, _M) for k in CURVES])
#: the gap estimate (:class:`GapEstimate`), ``[m]`` each; ``per_seed [S, m]``
GapFields = NamedTuple("GapFields", [("method", str), *[(k, _V) for k in ("mean", "se", "plain_se", "corr")],
                                     ("per_seed", _M)])
#: an unresolved n: the estimate ± se, its bound gap + 2 se beside log n/n, the seeds that would resolve it
Unresolved = NamedTuple("Unresolved", [("n", int), ("gap", float | None), ("se", float | None),
                                       ("upper", float | None), ("log_n_over_n", float),
                                       ("se_test", float | None), ("seeds_needed", int | None)])
#: :func:`mhajax.analysis.gap.jackknife_slope`
Jackknife = NamedTuple("Jackknife", [("slope", float | None), ("se", float | None),
                                     ("ci", tuple[float, float] | None), ("per_leave_out", _V), ("level", float)])
#: the slopes over n (the gap's on the resolved n; None with fewer than :data:`MIN_RESOLVED`)
Fits = NamedTuple("Fits", [("test", Slope), ("test_log_corrected", Slope), ("train", Slope),
                           ("train_log_corrected", Slope), ("gap_jackknife", Jackknife | None),
                           ("gap", Slope | None), ("gap_log_corrected", Slope | None)])


class SlopeVerdict(NamedTuple):
    """One slope over n against −1 (:func:`mhajax.analysis.rates.classify_slope`)."""

    classification: str     # "matches", "steeper", "shallower" or "undefined"
    holds: bool | None      # Õ(1/n) not contradicted (None: undefined)


#: :class:`SlopeVerdict` of each slope (the train slope is reported, not judged)
Verdicts = NamedTuple("Verdicts", [("test", SlopeVerdict), ("gap", SlopeVerdict), ("train", SlopeVerdict)])


class Summary(NamedTuple):
    """summary.json: per n (``[m]``) and per seed (``[S, m]``) numbers, the fits and the verdict."""

    verdict: str
    verdict_reason: str
    passed: bool | None
    ns: list[int]
    steps: list[int]
    seeds: list[int]
    per_seed: Curves
    bands: dict[str, Band]          # train, test, gap, and gap_cv with the control variate
    se_test: list[float | None]
    se_gap: list[float | None]
    gap_estimate: GapFields
    resolved: list[bool]
    unresolved: list[Unresolved]
    resolved_rule: str
    premise: dict[int, StepPremise]
    fits: Fits
    verdicts: Verdicts
    diverged: list[DivergedRun]
    tolerance: float
    theory_applies: bool
    theory_note: str
    resumed_ns: list[int]
    heads: int
    n_test: int
    level: float
    log_power: float
    problem: ProblemNames
    timings_s: dict[int, float]
    wall_time_s: float


# -- compute --

def _run_n(cfg, n, th0, test, seeds, model, loss) -> Unit:
    """One unit (one n): the step premise at θ₀, train every seed for K ≈ n steps, test, and
    every model on every training set (the control variate)."""
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
    diverged = [DivergedRun(n, seed, int(np.argmin(finite[s])))
                for s, seed in enumerate(seeds) if not finite[s].all()]
    train_loss = np.asarray(traj.losses[:, -1])
    return Unit(Row(n, K, train_loss, test_l, se, test_l - train_loss, err, train_err, cross), diverged, premise,
                time.perf_counter() - t)


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
    ``std_s/√S`` (``method`` "plain")."""
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
            r = control_variate_gap(g, np.asarray(cross[j], dtype=np.float64))
            if r["mean"] is not None:
                mean[j], se[j], per[:, j], loo[:, j], corr[j] = (r[k] for k in ("mean", "se", "per_seed",
                                                                                "leave_one_out", "corr"))
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


def slope_verdict(ci, slope) -> SlopeVerdict:
    """The slope's class and whether the upper bound Õ(1/n) holds; ``ci`` (lo, hi) or None
    (no fit: ``undefined``, holds None)."""
    return SlopeVerdict(classify_slope(ci, slope), upper_bound_holds(ci, slope))


def _slope_of(fit: Slope | None) -> SlopeVerdict:
    return slope_verdict(None, None) if fit is None else slope_verdict(fit.ci, fit.slope)


class GeneralizationRecord(NamedTuple):
    """What :func:`judge` reads."""

    test: bool | None           # the test-loss slope: Õ(1/n) holds (None: undefined)
    gap: bool | None            # the gap slope (resolved n only): Õ(1/n) holds (None: undefined)
    diverged: int               # runs that became non-finite
    covered: bool               # the rate is claimed for the (model, loss) pair
    why: str                    # why not, where it is not
    premise: Judgement | None   # PREMISE_VIOLATED of a failed step premise, else None


def run(cfg: GeneralizationConfig, progress=None, store=None) -> Summary:
    """Run the experiment. ``store`` (a :class:`mhajax.resume.ProgressStore`) keeps each
    finished n; a rerun loads them (``resumed_ns``) and computes the rest."""
    cfg = cfg.validate()
    t0 = time.perf_counter()
    d = cfg.data
    model, loss = d.head_model(), d.loss_fn()
    seeds = seed_list(cfg.seeds, cfg.seed0)
    test = batched_data(d, seeds, stream=2, n=cfg.n_test)
    th0 = batched_init(d, seeds, cfg.heads)
    units, resumed = sweep(store, cfg.ns, lambda n: _run_n(cfg, n, th0, test, seeds, model, loss), Unit,
                           unit=lambda n: f"n={n}", progress=progress)
    rows = [units[n].row for n in cfg.ns]
    ns = np.asarray(cfg.ns, dtype=np.float64)
    per = Curves(*(np.stack([np.asarray(getattr(r, k), dtype=np.float64) for r in rows], axis=1)
                   for k in Curves._fields))
    est = gap_estimates(per.gap, [r.cross for r in rows], per.test_se)
    resolved = est.resolved
    boot = cfg.boot.kwargs()
    lc = dict(boot, log_power=cfg.boot.log_power)
    gap_fit = gap_lc = gap_jk = None
    if gap_fitted(resolved):
        gap_fit = bootstrap_slope(ns[resolved], est.per_seed[:, resolved], **boot)
        gap_lc = bootstrap_slope(ns[resolved], est.per_seed[:, resolved], **lc)
        if est.loo is not None:
            gap_jk = Jackknife(**jackknife_slope(ns[resolved], est.mean[resolved], est.loo[:, resolved],
                                                 level=cfg.boot.level))
    fits = Fits(test=bootstrap_slope(ns, per.test, **boot), test_log_corrected=bootstrap_slope(ns, per.test, **lc),
                train=bootstrap_slope(ns, per.train, **boot), train_log_corrected=bootstrap_slope(ns, per.train, **lc),
                gap_jackknife=gap_jk, gap=gap_fit, gap_log_corrected=gap_lc)
    verdicts = Verdicts(*(_slope_of(f) for f in (fits.test, fits.gap, fits.train)))
    premises = {n: units[n].premise for n in cfg.ns}
    diverged = [x for n in cfg.ns for x in units[n].diverged]
    covered, why = rate_applies(model, loss)
    judgement = judge(GeneralizationRecord(test=verdicts.test.holds, gap=verdicts.gap.holds, diverged=len(diverged),
                                           covered=covered, why=why, premise=premise_violated(list(premises.values()))))
    bands = dict(train=mean_band(per.train, **boot), test=mean_band(per.test, **boot), gap=mean_band(per.gap, **boot))
    if est.method == "control variate":
        bands.update(gap_cv=mean_band(est.per_seed, **boot))
    unresolved = [Unresolved(n, est.mean[j], est.se[j], est.mean[j] + RESOLVED_SE * est.se[j], float(np.log(n) / n),
                             float(est.se_test[j]), est.seeds_needed[j])
                  for j, n in enumerate(cfg.ns) if not resolved[j]]
    return Summary(
        **judgement.fields(), ns=list(cfg.ns), steps=[r.steps for r in rows], seeds=seeds, per_seed=per,
        bands=bands, se_test=est.se_test, se_gap=est.se,
        gap_estimate=GapFields(est.method, est.mean, est.se, est.plain_se, est.corr, est.per_seed),
        resolved=resolved.tolist(), unresolved=unresolved,
        resolved_rule=(f"gap estimate ({est.method}) > {RESOLVED_SE:g} x its standard error "
                       + ("(jackknife over seeds)" if est.method == "control variate" else "(std_s(gap)/sqrt(S))")),
        premise=premises, fits=fits, verdicts=verdicts, diverged=diverged, tolerance=RATE_TOLERANCE,
        theory_applies=covered, theory_note=why, resumed_ns=resumed, heads=cfg.heads, n_test=cfg.n_test,
        level=cfg.boot.level, log_power=cfg.boot.log_power, problem=ProblemNames(d.model, d.loss, d.dataset),
        timings_s={n: units[n].time_s for n in cfg.ns}, wall_time_s=time.perf_counter() - t0)


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


# -- render --

PerN = namedtuple("PerN", "n K train test gap plain_se est est_se corr se_test resolved test_err")


def _per_n(s: Summary) -> list:
    """:class:`PerN` of every n: seed-mean losses, the plain gap's se, the gap estimate with its se
    and corr(gap, −c), se(test), whether resolved, and the seed-mean test error."""
    b, ge, S = s.bands, s.gap_estimate, len(s.seeds)
    return [PerN(n, s.steps[j], b["train"].mean[j], b["test"].mean[j], b["gap"].mean[j], ge.plain_se[j],
                 ge.mean[j], ge.se[j], ge.corr[j], s.se_test[j], s.resolved[j],
                 sum(s.per_seed.test_error[i][j] for i in range(S)) / S) for j, n in enumerate(s.ns)]


def _slopes(s: Summary) -> list:
    """``(name, label, fit, log-corrected fit, verdict)`` of the test, gap and train slopes."""
    f, v, cv = s.fits, s.verdicts, s.gap_estimate.method == "control variate"
    return [("test", "test loss L(θ_K)", f.test, f.test_log_corrected, v.test),
            ("gap", f"gap{' (CV)' if cv else ''} L − L̂ (resolved n)", f.gap, f.gap_log_corrected, v.gap),
            ("train", "train loss L̂(θ_K)", f.train, f.train_log_corrected, v.train)]


def report(s: Summary) -> str:
    """Per n the seed-mean losses and the gap estimate with its standard errors (and, per
    unresolved n, why); then the slopes over n of the test loss, the gap and the train loss
    with their CIs and verdicts, and the GD step-size premise."""
    S, cv = len(s.seeds), s.gap_estimate.method == "control variate"
    rows = [[r.n, r.K] + [fmt(x) for x in (r.train, r.test, r.gap, r.plain_se) + ((r.est, r.est_se, r.corr) if cv else ())]
            + [fmt(r.se_test), "yes" if r.resolved else "no", fmt(r.test_err)] for r in _per_n(s)]
    head = (["n", "K", "train L̂", "test L", "gap (plain)", "se plain"]
            + (["gap (CV)", "se_J (CV)", "corr(gap,−c)"] if cv else []) + ["se(test)", "resolved", "test err"])
    out = [table(head, rows),
           f"seed means over {S} seeds, H={s.heads}, n_test={s.n_test}; se plain = std over "
           f"seeds / √S (includes test sampling); se(test) = test-sampling error of the seed-mean test loss "
           f"alone; {s.resolved_rule}."]
    if cv:
        out.append("gap (CV) = mean_s (gap_s + c_s), c_s = mean over the other seeds' models of "
                   "(their loss on training set s − their held-out loss): E[c_s] = 0, same expectation as the "
                   "plain gap, smaller spread; se_J = delete-one jackknife over seeds.")
    rows = [[label, fmt_ci(f), fmt_window(f), fmt_ci(lc), v.classification,
             {True: "yes", False: "NO", None: "undef"}[v.holds]] for _, label, f, lc, v in _slopes(s)]
    out += ["", table(["slope over n", f"slope [{100 * s.level:g}% CI]", "lower/upper half",
                       f"slope of y/log^{s.log_power:g}n", "vs -1", "Õ(1/n) not contradicted"], rows),
            rule_text(s.level),
            "verdict uses the test-loss and gap rows; the train row (K = n, so it is the convergence rate) is "
            "informational."]
    jk = s.fits.gap_jackknife
    if jk is not None and jk.slope is not None:
        out.append(f"gap slope, jackknife over seeds (the CV terms share models): {jk.slope:.3f} "
                   f"[{jk.ci[0]:.3f}, {jk.ci[1]:.3f}] ({100 * jk.level:g}%, normal, se {jk.se:.3f}).")
    res_ns = [n for n, r in zip(s.ns, s.resolved) if r]
    if res_ns:
        out.append(f"gap fitted on {len(res_ns)} resolved n = {res_ns}"
                   + (f" (n = {min(res_ns)}…{max(res_ns)})" if len(res_ns) > 1 else "") + ".")
    out.append(f"problem: --model {s.problem.model} --loss {s.problem.loss} --data {s.problem.data}.")
    if not s.theory_applies:
        out.append(f"INFORMATIONAL: the Õ(1/n) rate is not claimed for this (model, loss) pair "
                   f"({s.theory_note}); the slopes are reported, not judged.")
    if s.resumed_ns:
        out.append(f"resumed from saved progress: n = {s.resumed_ns}")
    out += [_unresolved_line(u, S) for u in s.unresolved]
    g = s.fits.gap
    if g is not None and g.undefined_resamples:
        out.append(f"{g.undefined_resamples} of {g.resamples} bootstrap resamples had a "
                   f"non-positive mean gap somewhere and no slope.")
    lines = {premise_line(p) for p in s.premise.values()}
    if len(lines) == 1:
        out.append(lines.pop() + f" [every n of {list(s.premise)}]")
    else:
        out.extend(f"n={n}: {premise_line(p)}" for n, p in s.premise.items())
    out.extend(diverged_lines(s.diverged))
    return "\n".join(out)


def _unresolved_line(u: Unresolved, S: int) -> str:
    """Why the gap at one n is not resolved, and what would resolve it."""
    if u.gap is None:
        return f"n={u.n}: gap not resolved (estimate <= 2·se or undefined): excluded from the gap fit."
    return (f"n={u.n}: gap not resolved: {u.gap:.3g} ± {u.se:.2g} (se), so gap <= {u.upper:.3g} "
            f"(estimate + 2 se; log n/n = {u.log_n_over_n:.3g}, {u.upper / u.log_n_over_n:.2g}x of it); "
            f"test-sampling se alone {u.se_test:.2g}; "
            + (f"≈ {u.seeds_needed} seeds would resolve it at this spread (have {S})" if u.seeds_needed else
               "no seed count resolves a gap whose upper bound is not positive")
            + "; excluded from the gap fit.")


def headline(s: Summary) -> str:
    """``slope over n: test -1.29 [...] (steeper), gap -1.92 [...] (steeper), resolved n = 32…1024``."""
    return (f"slope over n: test {fmt_ci(s.fits.test)} ({s.verdicts.test.classification}), "
            f"gap {fmt_ci(s.fits.gap)} ({s.verdicts.gap.classification}; {sum(s.resolved)} of {len(s.ns)} n "
            f"resolved)")


def section(s: Summary) -> str:
    """REPORT.md: per-n means, the gap estimate and its se, and the three slopes with their verdicts."""
    t1 = md_table(["n", "K", "train L̂", "test L", "gap (plain)", f"gap ({s.gap_estimate.method})", "se",
                   "gap resolved"], [[r.n, r.K, r.train, r.test, r.gap, r.est, r.est_se, r.resolved] for r in _per_n(s)])
    t2 = md_table(["slope over n of", "slope [CI]", "vs −1", "Õ(1/n) not contradicted"],
                  [[name, fmt_ci(f), v.classification, v.holds] for name, _, f, _, v in _slopes(s)])
    extra = [_unresolved_line(u, len(s.seeds)) for u in s.unresolved]
    return t1 + "\n\n" + t2 + ("\n\n" + "\n".join(f"- {e}" for e in extra) if extra else "")


# -- memory: the run's dominant arrays, checked by the CLI before it starts --

def memory(cfg: GeneralizationConfig) -> list:
    """The dominant arrays (:mod:`mhajax.runtime.memory`) at the largest n: the test set, the
    training data and GD of all seeds (K = round(steps_per_n·n) steps, 2 checkpoints)."""
    d, S, n = cfg.data, cfg.seeds, max(mem.ints(cfg.ns))
    p, K = head_size(d.model, d.tokens, d.dim), steps_for(n, cfg.steps_per_n)
    return ([("test data [S, n_test, T, d]", (S, cfg.n_test, d.tokens, d.dim)), mem.data(S, n, d.tokens, d.dim)]
            + mem.gd(S, n, d.tokens, d.dim, cfg.heads, p, 2, K))


run = check("generalization", config=GeneralizationConfig, report=report, headline=headline,
            section=section, claim="test − train loss = Õ(1/n) after K ≈ n GD steps", presets={"paper": PAPER},
            memory=memory, summary=Summary)(run)
