"""The convergence experiment (docs/theory.md §15.1): ``L̂(θ_K) = Õ(1/K)`` on NTK-separable data.

Per H, ``seeds`` GD runs (:func:`mhajax.train.runs`): the log-log slope of the seed-mean L̂(θ_K) over
``fit_points`` log-spaced K with a bootstrap CI (:mod:`mhajax.analysis.rates`); at the checkpoints
‖θ_K − θ_0‖ and the held-out loss (stream 2); the witness margin γ_w at θ_0 (> 0 certifies NTK
separability, :mod:`mhajax.analysis.witness`). The distance fits are informational.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import NamedTuple, Sequence

import jax
import numpy as np

from mhajax.analysis.evaluation import checkpoint_risks, distances
from mhajax.analysis.rates import (RATE_TOLERANCE, Band, Slope, bootstrap_slope, classify_slope, log_grid,
                                   mean_band, rate_applies, rule_text, upper_bound_holds)
from mhajax.analysis.step_premise import StepPremise, gd_step_premise, premise_line, premise_violated
from mhajax.analysis.witness import WitnessMargin, class_direction, witness
from mhajax.data.seeds import seed_list
from mhajax.errors import InputError
from mhajax.experiments.base import (DivergedRun, Problem, ProblemNames, batched_data, batched_init, resolve, sweep,
                                     witness_applies)
from mhajax.experiments.configs import Config, BootConfig, DataConfig, GDConfig, option, sub
from mhajax.experiments.registry import check
from mhajax.models.base import head_size
from mhajax.runtime import memory as mem
from mhajax.runtime.format import diverged_lines, fmt, fmt_ci, fmt_window, md_table, table
from mhajax.train import checkpoint_steps, num_checkpoints, runs
from mhajax.validate import heads_list, positive_int
from mhajax.verdict import Judgement, Verdict


class HeadRate(NamedTuple):
    """What the judge reads of one H: ``holds`` (:func:`mhajax.analysis.rates.upper_bound_holds`;
    ``None``: undefined) and ``separable`` (γ_w > 0 for every seed; ``None``: no witness)."""

    holds: bool | None
    separable: bool | None = None


@dataclass(frozen=True)
class ConvergenceConfig(Config):
    """GD runs per H; the log-log slope of L̂(θ_K) over K with a bootstrap CI.

    ``gd.every = 0`` keeps θ every ``steps/100`` steps (for ‖θ_K − θ_0‖ and the test
    curve); ``fit_start = 0`` starts the fit window at ``steps/16``."""

    heads: tuple = option((1, 4, 16), "comma-separated numbers of heads H", kind="list")
    seeds: int = option(4, "GD runs per H (>= 2; seeds seed0..seed0+seeds-1)")
    seed0: int = option(0, "first seed")
    gd: GDConfig = sub(lambda: GDConfig(steps=2000, every=0))
    fit_start: int = option(0, "first K of the fit window (0: steps/16)")
    fit_points: int = option(24, "log-spaced K in the fit window")
    n_test: int = option(1024, "held-out samples per seed for the test loss at the checkpoints "
                               "(stream 2)", sizes="test")
    boot: BootConfig = sub(BootConfig)
    data: DataConfig = sub(DataConfig)

    def validate(self):
        """The validated config, a new one; an :class:`InputError` names the first bad option."""
        cfg = replace(self, heads=tuple(heads_list(self.heads)))
        seed_list(cfg.seeds, cfg.seed0)
        positive_int("seeds", cfg.seeds, minimum=2)
        cfg.gd.validate(min_every=0)
        if cfg.gd.steps < 8:
            raise InputError(f"steps must be >= 8 for a rate over K, got {cfg.gd.steps!r}")
        positive_int("fit_start", cfg.fit_start, minimum=0)
        positive_int("fit_points", cfg.fit_points, minimum=3)
        cfg.boot.validate()
        positive_int("n_test", cfg.n_test, minimum=1)
        cfg = replace(cfg, data=cfg.data.validate())
        cfg.data.check_test_size(cfg.n_test)
        if cfg.window()[0] >= cfg.gd.steps - 1:
            raise InputError(f"fit_start={cfg.fit_start} leaves no fit window below steps={cfg.gd.steps}")
        return cfg

    def checkpoint_every(self) -> int:
        """Steps between kept iterates: ``gd.every``, or ``steps/100`` when it is 0."""
        return self.gd.every or max(1, self.gd.steps // 100)

    def window(self) -> tuple:
        """``(K_lo, K_hi)`` of the fit; K_lo >= 2 so that log K > 0 for the log correction."""
        return max(2, self.fit_start or self.gd.steps // 16), self.gd.steps


#: ``‖θ_K − θ_0‖ ≈ a + b log K``, least squares on the seed mean in the fit window
LogFit = NamedTuple("LogFit", [("a", float), ("b", float)])
#: :class:`~mhajax.analysis.witness.WitnessMargin` per seed (``[S]`` each), its fields sorted
Witness = NamedTuple("Witness", [(f, list[float | None]) for f in sorted(WitnessMargin._fields)])


class Curves(NamedTuple):
    """Per seed ``[S][m]``, with seed-mean bands: L̂ at ``steps``; ‖θ_K − θ_0‖ and L̂ at ``checkpoints``;
    the test loss at ``test_checkpoints`` (``None``: no held-out data)."""

    steps: list[int]
    loss: list
    loss_band: Band
    checkpoints: list[int]
    distance: list
    distance_band: Band
    train_loss_at_checkpoints: list
    test_checkpoints: list[int] | None
    test_loss: list | None
    test_loss_band: Band | None


class Entry(NamedTuple):
    """One H (``witness`` ``None``: not applicable, ``witness_note`` says why)."""

    P: int
    loss_slope: Slope
    loss_slope_log_corrected: Slope
    classification: str
    holds: bool | None
    distance_slope: Slope | None
    distance_log_fit: LogFit | None
    witness: Witness | None
    witness_note: str
    separable_certified: bool | None
    final_loss: list[float | None]
    curves: Curves
    premise: StepPremise


Unit = NamedTuple("Unit", [("entry", Entry), ("diverged", list[DivergedRun]), ("time_s", float)])


class Summary(NamedTuple):
    """The check's summary.json."""

    verdict: str
    verdict_reason: str
    passed: bool | None
    by_heads: dict[int, Entry]
    diverged: list[DivergedRun]
    seeds: list[int]
    fit_steps: list[int]
    window: list[int]
    tolerance: float
    level: float
    log_power: float
    resamples: int
    theory_applies: bool
    theory_note: str
    test_note: str
    problem: ProblemNames
    resumed_heads: list[int]
    timings_s: dict[int, float]
    wall_time_s: float


_witness = jax.jit(jax.vmap(witness, in_axes=(0, 0, 0, None)))

#: the paper-scale preset (``--preset paper``): the H grid of fig. 1, 2000 steps, 4 seeds
PAPER = {"heads": (1, 2, 4, 8, 16, 32), "seeds": 4, "gd.steps": 2000}


def _unit(cfg, pb: Problem, H, test, seeds, fit_K) -> Unit:
    """One H: train on ``pb`` (``X [S, n, T, d]``), measure on ``test`` (or ``None``), fit on ``fit_K``."""
    t = time.perf_counter()
    d, boot, (lo, hi) = cfg.data, cfg.boot.kwargs(), cfg.window()
    model, loss, X, y = pb
    ck = np.asarray(checkpoint_steps(cfg.gd.steps, cfg.checkpoint_every()))
    sel, K = (ck >= lo) & (ck <= hi), np.union1d([0], log_grid(1, cfg.gd.steps, 200))
    th0 = batched_init(d, seeds, H, model)
    premise = gd_step_premise(cfg.gd.lr, th0, X, y, model=model, loss=loss)   # docs/theory.md §15, at θ₀
    traj = jax.block_until_ready(runs(th0, X, y, cfg.gd.lr, steps=cfg.gd.steps, every=cfg.checkpoint_every(),
                                       model=model, loss=loss))
    dist = np.asarray(distances(traj.params, th0))
    losses, finite = np.asarray(traj.losses), np.asarray(traj.finite)
    fit = bootstrap_slope(fit_K, losses[:, fit_K], **boot)
    dmean = dist[:, sel].mean(axis=0)
    ok, why = witness_applies(d)
    wit = Witness(**_witness(th0, X, y, class_direction(d.dim, d.antipodal))._asdict()) if ok else None
    tl = None if test is None else np.asarray(checkpoint_risks(traj.params, *test, model, loss))
    curves = Curves(K, losses[:, K], mean_band(losses[:, K], **boot), ck, dist, mean_band(dist, **boot),
                    losses[:, ck], None if tl is None else ck, tl,
                    mean_band(tl, **boot) if tl is not None and np.all(np.isfinite(tl)) else None)
    entry = Entry(P=int(sum(np.size(a[0]) for a in jax.tree_util.tree_leaves(th0))), loss_slope=fit,
                  loss_slope_log_corrected=bootstrap_slope(fit_K, losses[:, fit_K], log_power=cfg.boot.log_power,
                                                           **boot),
                  classification=classify_slope(fit.ci, fit.slope), holds=upper_bound_holds(fit.ci, fit.slope),
                  distance_slope=bootstrap_slope(ck[sel], dist[:, sel], **boot) if sel.sum() >= 2 else None,
                  distance_log_fit=LogFit(*np.polyfit(np.log(ck[sel]), dmean, 1)[::-1])
                  if sel.sum() >= 2 and np.all(np.isfinite(dmean)) else None,
                  witness=wit, witness_note=why, separable_certified=bool(np.all(wit.gamma > 0)) if ok else None,
                  final_loss=losses[:, -1], curves=curves, premise=premise)
    return Unit(entry, [DivergedRun(H, seed, int(np.argmin(finite[s])))
                        for s, seed in enumerate(seeds) if not finite[s].all()], time.perf_counter() - t)


def run(cfg: ConvergenceConfig, progress=None, store=None) -> Summary:
    """Run the check, one resumable unit per H (``resumed_heads``: loaded from ``store``)."""
    cfg = cfg.validate()
    t0 = time.perf_counter()
    d = cfg.data
    seeds = seed_list(cfg.seeds, cfg.seed0)
    pb = resolve(d, seeds)
    test = batched_data(d, seeds, stream=2, n=cfg.n_test) if d.has_test_data() else None
    fit_K = log_grid(*cfg.window(), cfg.fit_points)
    units, resumed = sweep(store, cfg.heads, lambda H: _unit(cfg, pb, H, test, seeds, fit_K), Unit,
                           progress=progress)
    by_heads = {H: u.entry for H, u in units.items()}
    diverged = [r for u in units.values() for r in u.diverged]
    covered, why = rate_applies(pb.model, pb.loss)
    premise = premise_violated([e.premise for e in by_heads.values()]) if covered else None
    judgement = judge([HeadRate(e.holds, e.separable_certified) for e in by_heads.values()],
                      len(diverged), covered, why, premise)
    return Summary(**judgement.fields(), by_heads=by_heads, diverged=diverged, seeds=seeds,
                   fit_steps=fit_K.tolist(), window=list(cfg.window()), tolerance=RATE_TOLERANCE,
                   level=cfg.boot.level, log_power=cfg.boot.log_power, resamples=cfg.boot.resamples,
                   theory_applies=covered, theory_note=why, test_note=(
                       f"test loss on n_test = {cfg.n_test} held-out samples per seed (stream 2), at every "
                       "checkpoint" if test is not None else
                       "no test curve: --data npz without --test-path has no held-out data"),
                   problem=ProblemNames(d.model, d.loss, d.dataset), resumed_heads=resumed,
                   timings_s={H: u.time_s for H, u in units.items()}, wall_time_s=time.perf_counter() - t0)


def judge(rates: Sequence[HeadRate], diverged: int, covered: bool, why: str,
          premise: Judgement | None = None) -> Judgement:
    """In this order: ``premise`` (the PREMISE_VIOLATED judgement of the GD step size measured
    at θ₀, :func:`~mhajax.analysis.step_premise.premise_violated`; ``None``: it held or was not
    measured) where the rate is claimed (``covered``); FAILED on ``diverged`` > 0 runs or a slope
    CI entirely above −0.7 ('shallower', ``holds`` False) where NTK separability at θ₀ (the
    theorem's premise) is certified by the witness at every such H; INCONCLUSIVE for such a
    slope where it is not (``separable`` None or False); INFORMATIONAL where the rate is not
    claimed for the (model, loss) pair (``why`` says why); INCONCLUSIVE where a slope is
    undefined; else PASSED."""
    if covered and premise is not None:
        return premise
    if diverged:
        return Judgement(Verdict.FAILED, f"{diverged} run(s) became non-finite")
    slow = [r for r in rates if r.holds is False]
    if covered and slow:
        if all(r.separable is True for r in slow):
            return Judgement(Verdict.FAILED, "the loss decays more slowly than Õ(1/K) allows "
                                             "(slope CI entirely above the tolerance band)")
        return Judgement(Verdict.INCONCLUSIVE, "the loss decays more slowly than Õ(1/K) allows, but NTK "
                                               "separability at θ₀, the theorem's premise, is not certified "
                                               "there (the explicit witness applies to the tokenized "
                                               "mixture with softmax heads only)")
    if not covered:
        return Judgement(Verdict.INFORMATIONAL, f"the Õ(1/K) rate is not claimed here: {why}")
    if any(r.holds is None for r in rates):
        return Judgement(Verdict.INCONCLUSIVE, "a slope is undefined (a non-positive mean loss)")
    return Judgement(Verdict.PASSED, "every H decays at least as fast as Õ(1/K)")


def _mean(values):
    """Seed mean, or ``None`` (printed 'undef') when a seed's value is missing (diverged)."""
    return None if None in values else float(np.mean(values))


def _test_final(e: Entry):
    return e.curves.test_loss_band.mean[-1] if e.curves.test_loss_band else None


def report(s: Summary) -> str:
    """Per H: the witness margin, L̂ at the start and end, the slope with its CI and its
    halves, the log-corrected slope, ‖θ_K − θ_0‖ and its growth per e-fold of K."""
    rows = [[H, e.P, fmt(min(e.witness.gamma_bar)) if e.witness else "n/a", fmt(e.curves.loss_band.mean[0]),
             fmt(_mean(e.final_loss)), fmt(_test_final(e)) if e.curves.test_loss_band else "n/a",
             fmt_ci(e.loss_slope), fmt_window(e.loss_slope), fmt_ci(e.loss_slope_log_corrected), e.classification,
             fmt(e.curves.distance_band.mean[-1]), fmt_ci(e.distance_slope),
             fmt(e.distance_log_fit.b) if e.distance_log_fit else "undef",
             "n/a" if not e.witness else fmt(float(np.mean([1 / g for g in e.witness.gamma]))
                                             if min(e.witness.gamma) > 0 else None)]
            for H, e in s.by_heads.items()]
    lo, hi = s.window
    head = ["H", "P", "min γ̄_w", "L̂(θ_0)", "L̂(θ_K)", "test L(θ_K)", f"slope of L̂ [{100 * s.level:g}% CI]",
            "lower/upper half", f"slope of L̂/log^{s.log_power:g}K", "vs -1",
            "‖θ_K−θ_0‖", "slope of ‖θ_K−θ_0‖", "b", "1/γ_w"]
    out = [table(head, rows),
           f"fit window K in [{lo}, {hi}] ({len(s.fit_steps)} log-spaced K), seed-mean curves, "
           f"{len(s.seeds)} seeds, {s.resamples} bootstrap resamples; 'lower/upper half': "
           f"slopes on the two halves of the window (a bend shows there).",
           rule_text(s.level),
           f"problem: --model {s.problem.model} --loss {s.problem.loss} --data {s.problem.data}; {s.test_note}.",
           "γ̄_w: witness margin at θ_0 / max_i ‖∇Φ(θ_0;X_i)‖ (> 0 certifies NTK separability); "
           "b: fit ‖θ_K−θ_0‖ ≈ a + b·log K (growth per e-fold); 1/γ_w: growth per e-fold of the witness "
           "radius log(K)/γ_w (seed mean); analyses of this kind keep ‖θ_K−θ_0‖ = O(‖θ*−θ_0‖) — "
           "informational, no constant is claimed."]
    if not s.theory_applies:
        out.append(f"INFORMATIONAL: the Õ(1/K) rate is not claimed for this (model, loss) pair "
                   f"({s.theory_note}); the slopes above are reported, not judged.")
    notes = {e.witness_note for e in s.by_heads.values() if e.witness is None}
    out.extend(f"witness: {n}; the theory's premise (NTK separability at θ_0) is not certified here "
               f"(`python -m verify ntk-margin` with the same flags checks it)" for n in sorted(notes))
    if s.resumed_heads:
        out.append(f"resumed from saved progress: H = {s.resumed_heads}")
    out.extend(f"NOTE H={H}: the explicit witness does not certify NTK separability for every seed "
               f"(γ_w = {e.witness.gamma}); the theory's premise is unverified there."
               for H, e in s.by_heads.items() if e.separable_certified is False)
    out.extend(f"H={H}: {premise_line(e.premise)}" for H, e in s.by_heads.items())
    return "\n".join(out + diverged_lines(s.diverged))


def headline(s: Summary) -> str:
    """``slope of L̂(θ_K) vs K: H=1: -1.13 [-1.18, -1.07] (matches), ...``."""
    return "slope of L̂(θ_K) vs K: " + ", ".join(
        f"H={H}: {fmt_ci(e.loss_slope)} ({e.classification})" for H, e in s.by_heads.items())


def section(s: Summary) -> str:
    """REPORT.md: per H the witness margin, final losses and the slopes with their CIs."""
    rows = [[H, e.P, min(e.witness.gamma_bar) if e.witness else "n/a",
             sum(e.final_loss) / len(e.final_loss) if None not in e.final_loss else None, _test_final(e),
             fmt_ci(e.loss_slope), fmt_ci(e.loss_slope_log_corrected), e.classification, e.holds,
             e.curves.distance_band.mean[-1]] for H, e in s.by_heads.items()]
    return md_table(["H", "P", "min γ̄_w", "mean L̂(θ_K)", "mean test L(θ_K)", "slope of L̂ vs K [CI]",
                     f"slope of L̂/log^{s.log_power:g} K", "vs −1", "Õ(1/K) holds", "‖θ_K−θ₀‖"],
                    rows) + f"\n\nfit window K ∈ {s.window}, diverged: {len(s.diverged)}." + (
                        f" {s.test_note}." if s.test_note else "")


# -- memory: the run's dominant arrays, checked by the CLI before it starts --

def memory(cfg: ConvergenceConfig) -> list:
    """The dominant arrays (:mod:`mhajax.runtime.memory`) at the largest H: the training and
    test data, GD of all seeds (θ kept every ``steps/100``), and the test loss of one
    (seed, checkpoint) over all n_test samples (:func:`~mhajax.analysis.evaluation.checkpoint_risks`)."""
    d, S, H, M = cfg.data, cfg.seeds, max(mem.ints(cfg.heads)), cfg.n_test
    p, C = head_size(d.model, d.tokens, d.dim), num_checkpoints(cfg.gd.steps, cfg.checkpoint_every())
    return ([mem.data(S, d.n, d.tokens, d.dim), ("test data [S, n_test, T, d]", (S, M, d.tokens, d.dim))]
            + mem.gd(S, d.n, d.tokens, d.dim, H, p, C, cfg.gd.steps)
            + [("test attention weights [n_test, H, T, T]", (M, H, d.tokens, d.tokens))])


run = check("convergence", config=ConvergenceConfig, report=report, headline=headline, section=section,
            claim="L̂(θ_K) = Õ(1/K) on NTK-separable data", presets={"paper": PAPER}, memory=memory,
            summary=Summary)(run)
