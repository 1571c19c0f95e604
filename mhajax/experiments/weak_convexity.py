"""The weak-convexity check: GD trajectories per H and seed, the κ chain at every checkpoint.

Per H, ``seeds`` trajectories train together; every checkpoint θ gets the κ chain of
:mod:`mhajax.analysis.chain`, one program over the ``seeds × checkpoints`` points. Only the
inequalities the (model, loss) pair implies are judged (:mod:`mhajax.analysis.applicability`); a
coupled model (``two-layer``) has κ_emp alone and judges nothing.

The width law (docs/theory.md §15.7; ``--preset width``: H = 1 … 4096): per checkpoint step the
log-log slope in H of the seed mean of ρ = κ_emp/κ(θ), with a bootstrap CI over seeds, against
:data:`WIDTH_TOL` (above it: FAILED; containing it: INCONCLUSIVE).

Resuming: every finished H is kept; with ``save_every = N > 0`` GD also runs in segments of N
steps, each saved (``.npz``), so a killed run continues from its last segment with the very same
compiled programs and numbers.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import NamedTuple, Sequence

import jax
import numpy as np

from mhajax.analysis.applicability import requirements
from mhajax.analysis.chain import ChainRecord, finalize
from mhajax.analysis.kappa import CHAIN, SYMBOL, link_symbol
from mhajax.analysis.rates import Slope, bootstrap_slope, step_slopes
from mhajax.analysis.step_premise import StepPremise, premise_from_records, premise_line
from mhajax.curvature.spectrum import resolve_method
from mhajax.data.seeds import point_keys, seed_list
from mhajax.errors import InputError
from mhajax.experiments.base import (MIN_JUDGED_FRACTION, DivergedRun, Problem, ProblemNames, analyse_batch,
                                     batched_init, chain_memory, judged_enough, not_judged, params_per_head,
                                     point_index, resolve, sweep)
from mhajax.experiments.configs import BootConfig, Config, DataConfig, EigenConfig, GDConfig, option, sub
from mhajax.experiments.registry import check
from mhajax.models.base import is_coupled
from mhajax.runtime.format import fmt, md_table, table
from mhajax.runtime.records import fields
from mhajax.train import checkpoint_steps, opt_init, runs, segment_bounds
from mhajax.validate import heads_list, positive_int
from mhajax.verdict import Judgement, Verdict

#: default GD steps per saved segment (rounded down to a multiple of ``every``).
SAVE_EVERY = 500
#: the paper-scale preset (``--preset paper``): H up to 256, the core links of the chain
PAPER = {"heads": (1, 4, 16, 64, 256), "seeds": 2, "gd.steps": 200, "gd.every": 50, "eig.links": "core"}
#: the width preset (``--preset width``): H up to 4096 (P = 458,752 at T = 6, d = 8), θ₀ and two
#: GD checkpoints, every link of the chain (κ_mid, κ_Φ by :mod:`mhajax.curvature.headnorms`)
WIDTH = {"heads": (1, 4, 16, 64, 256, 1024, 4096), "seeds": 2, "gd.steps": 200, "gd.every": 100,
         "eig.links": "all"}
#: the width law (docs/theory.md §15.7) is judged on grids of at least WIDTH_POINTS distinct H
#: with H_max/H_min >= WIDTH_SPAN, with the tolerance WIDTH_TOL on the slope of κ_emp/κ(θ)
WIDTH_POINTS = 3
WIDTH_SPAN = 100
WIDTH_TOL = 0.1
#: the arrays of a saved GD segment besides θ (``p{i}``) and the optimizer state (``s{i}``)
SEGMENT = ("start", "stop", "finite", "finite_last", "losses", "loss_last")

# ---------------------------------------------------------------------------
# Records: one per checkpoint, per H, and the summary (summary.json, field for field)
# ---------------------------------------------------------------------------

_NUM, _FLAG = float | None, bool | None
#: one checkpoint: its seed and step, :func:`mhajax.analysis.chain.finalize`'s record, ``diverged``
Point = NamedTuple("Point", fields(("seed step", int), ChainRecord, ("diverged", bool)))


class Diverged(NamedTuple):
    """A checkpoint at or past a non-finite iterate: reported, never judged or averaged."""

    seed: int
    step: int
    heads: int
    diverged: bool
    diverged_at_step: int
    chain_holds: bool | None = None
    all_hold: bool | None = None
    # not fields: what a Point holds and a diverged checkpoint has not
    loss = lambda_max_upper = beta2 = kappa_bound = None
    loss_defined = False


#: one H of the sweep: its checkpoints (seed-major), and the GD step a saved segment resumed it from
HeadsUnit = NamedTuple("HeadsUnit", fields(("records", list[Point | Diverged]), ("timings", dict[str, float]),
                                            ("method", str), ("P resumed_from_step", int)))
#: an inequality the pair does not imply: at how many checkpoints it held, failed, was undefined; why
Tally = NamedTuple("Tally", fields(("held violated undefined", int), ("reason", str)))
#: one H: the largest κ of each kind, the smallest ratio ``next/prev`` of each link (>= 1: it held)
HeadsRow = NamedTuple("HeadsRow", fields(
    ("checkpoints undefined", int),
    ("max_kappa_emp max_kappa_block max_kappa_mid max_kappa_phi max_kappa_bound max_kappa_emp_lo max_kappa_emp_hi",
     _NUM),
    ("min_slack", dict[str, float]), ("bound_over_emp", _NUM), ("all_hold", _FLAG),
    ("max_residual max_rel_width", _NUM), ("all_converged", _FLAG), ("not_implied", dict[str, Tally]),
    ("method", str), ("P", int), ("premise", StepPremise)))


class Checkpoint(NamedTuple):
    """What the judge reads of one checkpoint: ``all_hold`` (every implied inequality held;
    ``None``: not judged), ``diverged``, ``loss_defined`` (L̂ above underflow)."""

    all_hold: bool | None
    diverged: bool = False
    loss_defined: bool = False


class WidthStep(NamedTuple):
    """The width law at one checkpoint step: the slope in H of ρ = κ_emp/κ(θ) and its CI
    (``None``: one seed; ``slope`` ``None``: undefined)."""

    step: int
    slope: float | None
    ci: tuple | None = None


#: per distinct H: κ_emp, κ(θ), ρ = κ_emp/κ(θ), λ_max/L̂ and β₂² + κ(θ)/√H
Curves = NamedTuple("Curves", fields(("kappa_emp kappa_bound ratio lambda_max_over_loss smoothness_coefficient",
                                       list[float | None])))
#: one checkpoint step of the width law: the seed mean, min and max of each of the Curves, its
#: slope in H (``None``: not every value > 0), and ρ's slope over each step of the grid
WidthEntry = NamedTuple("WidthEntry", fields(
    ("mean seed_min seed_max", Curves),
    ("slope_kappa_emp slope_kappa_bound slope_ratio slope_lambda_max_over_loss slope_smoothness_coefficient",
     Slope | None), ("step_slopes_ratio", list[float | None]), ("status", str)))
Boot = NamedTuple("Boot", fields(("resamples", int), ("level", float), ("seed", int)))


class WidthLaw(NamedTuple):
    """The width law: whether the grid is judged, the outcome (holds / violated / unresolved /
    undefined / not judged) and why; with the per-step numbers it was judged on."""

    judged: bool
    outcome: str
    reason: str
    tol: float = WIDTH_TOL
    heads: list[int] = []
    seeds: list[int] = []
    boot: Boot | None = None
    steps: dict[int, WidthEntry] = {}


#: the problem as the summary names it, and the model's note
Described = NamedTuple("Described", fields(ProblemNames, ("note", str)))
Violation = NamedTuple("Violation", fields(
    ("heads seed step", int), ("failed", list[str]),
    ("loss lambda_min lambda_min_block kappa_emp kappa_block kappa_mid kappa_phi kappa_bound", _NUM)))
#: what run returns; summary.json field for field
Summary = NamedTuple("Summary", fields(
    ("verdict verdict_reason", str), ("passed", _FLAG), ("records", list[Point | Diverged]),
    ("by_heads", dict[int, HeadsRow]), ("methods", dict[int, str]), ("width_law", WidthLaw), ("problem", Described),
    ("not_implied", dict[str, str]), ("judged", int), ("violations", list[Violation]),
    ("diverged", list[DivergedRun]), ("undefined", int), ("checkpoints seeds resumed_heads", list[int]),
    ("resumed_from_step", dict[int, int]), ("timings", dict[int, dict[str, float]]), ("wall_time_s", float)))


@dataclass(frozen=True)
class WeakConvexityConfig(Config):
    """GD trajectories per H and seed, the κ chain at every checkpoint.

    ``save_every``: GD steps per saved segment, a multiple of ``gd.every`` (0: save per H
    only; ``None``: :data:`SAVE_EVERY` rounded down to a multiple of ``every``, at least
    ``every`` — resolved by :meth:`validate`, so the config records the number used)."""

    heads: tuple = option((1, 4, 16), "comma-separated numbers of heads H", kind="list")
    seeds: int = option(2, "trajectories per H (seeds seed0..seed0+seeds-1)")
    seed0: int = option(0, "first seed")
    gd: GDConfig = sub(GDConfig)
    eig: EigenConfig = sub(EigenConfig)
    data: DataConfig = sub(DataConfig)
    save_every: int | None = option(None, "save the GD state every N steps, a multiple of --every "
                                          "(default: the largest multiple of --every not above 500, "
                                          "at least --every; 0: save per H only)", kind="int")

    @property
    def coupled(self) -> bool:
        """Whether ``data.model`` couples its heads (no block structure)."""
        return is_coupled(self.data.head_model())

    def validate(self):
        """The validated config, a new one (lists parsed, names normalized); an
        :class:`InputError` names the first bad option."""
        cfg = replace(self, heads=tuple(heads_list(self.heads)))
        seed_list(cfg.seeds, cfg.seed0)
        cfg.gd.validate()
        cfg.eig.validate()
        every = cfg.gd.every
        if cfg.save_every is None:
            cfg = replace(cfg, save_every=max(every, SAVE_EVERY // every * every))
        positive_int("save_every", cfg.save_every, minimum=0)
        if cfg.save_every % every:
            raise InputError(f"--save-every must be 0 or a multiple of --every ({every}), "
                             f"got {cfg.save_every}")
        cfg = replace(cfg, data=cfg.data.validate(coupled_ok=True))
        if cfg.coupled and cfg.eig.method not in ("auto", "lanczos"):
            raise InputError(f"--method {cfg.eig.method} does not apply to --model {cfg.data.model} "
                             "(coupled heads: only matrix-free Lanczos); use auto or lanczos")
        return cfg


# ---------------------------------------------------------------------------
# Compute: GD per H (in saved segments), the chain at every checkpoint
# ---------------------------------------------------------------------------

def _batch_size(cfg: WeakConvexityConfig, H: int, p: int, method: str, budget_bytes: float = 1.5e9):
    """Points analysed at once under ``vmap`` so that a batch stays under ``budget_bytes``
    (``P = H·p``): ``8·per`` bytes a point, ``per = n·P + n·H·(p + 4T²) + H·p²`` (J, its
    temporaries, B) ``+ 2·H·p² + 2·n·P`` (all but ``block``) ``+ 3·P²`` (``dense``) or
    ``+ 2·min(m, P)·P`` (``lanczos``) ``+ 3·H·p²`` (``links="all"``). ``None`` (one at a time)
    on CPU, where batching buys little and a batched Lanczos runs every θ as long as the slowest."""
    if jax.default_backend() == "cpu":
        return None
    n, T, P = cfg.data.n, cfg.data.tokens, H * p
    per = n * P + n * H * (p + 4 * T * T) + H * p * p
    if method != "block":
        per += 2 * H * p * p + 2 * n * P
    if method == "dense":
        per += 3 * P * P
    if method == "lanczos":
        per += 2 * min(cfg.eig.lanczos_steps, P) * P
    if cfg.eig.links == "all":
        per += 3 * H * p * p
    return max(1, int(budget_bytes // (8 * per)))


def _segment_unit(H: int, stop: int) -> str:
    return f"heads={H}.seg={stop}"


def train_resumable(cfg: WeakConvexityConfig, pb: Problem, H: int, th0, store=None, progress=None):
    """GD of every seed at this H on ``pb``, in the segments of :func:`mhajax.train.segment_bounds`;
    with a ``store`` and more than one segment, each finished segment is saved and a saved
    one is loaded instead of recomputed. Returns ``(params [S, C, ...], finite [S, steps+1],
    losses [S, steps+1], resumed_from_step, seconds of GD)``."""
    bounds = segment_bounds(cfg.gd.steps, cfg.gd.every, cfg.save_every)
    saving = store is not None and len(bounds) > 1
    p_def = jax.tree_util.tree_structure(th0)
    st = jax.vmap(opt_init)(th0)
    s_def = jax.tree_util.tree_structure(st)
    th = th0
    kept = [jax.tree_util.tree_map(lambda a: np.asarray(a)[:, None], th0)]
    finite, losses = [], []
    resumed_from, train_s = 0, 0.0
    for a, b in bounds:
        unit = _segment_unit(H, b)
        if saving and store.has_arrays(unit):
            z = store.load_arrays(unit)
            start, stop, fin, fin_last, L, L_last = (z[k] for k in SEGMENT)
            if (int(start), int(stop)) != (a, b):
                raise InputError(f"saved segment {unit} covers steps {int(start)}..{int(stop)}, "
                                 f"expected {a}..{b}; rerun with --fresh")
            new = jax.tree_util.tree_unflatten(p_def, [z[f"p{i}"] for i in range(p_def.num_leaves)])
            st = jax.tree_util.tree_unflatten(s_def, [z[f"s{i}"] for i in range(s_def.num_leaves)])
            resumed_from = b
        else:
            t = time.perf_counter()
            # with several devices the seeds are split over them; the analysis stays on one (_run_heads)
            traj = runs(th, pb.X, pb.y, cfg.gd.lr, steps=b - a, every=cfg.gd.every, model=pb.model, loss=pb.loss,
                        opt_state=st)
            traj = jax.block_until_ready(jax.device_put(traj, jax.devices()[0]))
            st = traj.opt_state
            train_s += time.perf_counter() - t
            new = jax.tree_util.tree_map(lambda a: np.asarray(a)[:, 1:], traj.params)
            fin, fin_last = np.asarray(traj.finite)[:, :-1], np.asarray(traj.finite)[:, -1]
            L, L_last = np.asarray(traj.losses)[:, :-1], np.asarray(traj.losses)[:, -1]
            if saving:
                arrays = {f"p{i}": v for i, v in enumerate(jax.tree_util.tree_leaves(new))}
                arrays.update({f"s{i}": v for i, v in enumerate(jax.tree_util.tree_leaves(st))})
                store.save_arrays(unit, dict(arrays, **dict(zip(SEGMENT, (a, b, fin, fin_last, L, L_last)))))
        kept.append(new)
        finite.append(fin)
        losses.append(L)
        th = jax.tree_util.tree_map(lambda a: a[:, -1], new)
        if progress and len(bounds) > 1:
            progress(f"H={H} step {b}/{cfg.gd.steps}")
    params = jax.tree_util.tree_map(lambda *a: np.concatenate(a, axis=1), *kept)
    finite = np.concatenate(finite + [np.asarray(fin_last)[:, None]], axis=1)
    losses = np.concatenate(losses + [np.asarray(L_last)[:, None]], axis=1)
    return params, finite, losses, resumed_from, train_s


def _run_heads(cfg: WeakConvexityConfig, pb: Problem, H: int, seeds, ck, store=None, progress=None) -> HeadsUnit:
    """One unit of the sweep: train every seed at this H, then analyse every checkpoint θ
    [S·C, H, ...] with one program (:func:`mhajax.experiments.base.analyse_batch`)."""
    model, loss, X, y = pb
    th0 = batched_init(cfg.data, seeds, H, model)
    p = params_per_head(th0)
    method = "lanczos" if is_coupled(model) else resolve_method(cfg.eig.method)
    S, C = len(seeds), len(ck)
    seed_index = point_index(S, C)
    keys = point_keys(H, S * C)
    params, finite, _, resumed_from, train_s = train_resumable(cfg, pb, H, th0, store, progress)
    flat = jax.tree_util.tree_map(lambda a: a.reshape((S * C,) + a.shape[2:]), params)   # host arrays
    # The analysis stays on one device: its eigensolvers call LAPACK inside XLA, and OpenBLAS
    # entered from several device threads at once was seen to hang.
    static = dict(method=cfg.eig.method, links=cfg.eig.links, lanczos_steps=cfg.eig.lanczos_steps,
                  max_cycles=cfg.eig.max_cycles, model=model, loss=loss,
                  batch_size=_batch_size(cfg, H, p, method))
    t = time.perf_counter()
    analyse_c = analyse_batch.lower(flat, seed_index, keys, X, y, **static).compile()
    tm = dict(train_s=train_s, analysis_compile_s=time.perf_counter() - t)
    t = time.perf_counter()
    raw = jax.block_until_ready(analyse_c(flat, seed_index, keys, X, y))
    tm.update(analysis_run_s=time.perf_counter() - t)
    raw = jax.tree_util.tree_map(np.asarray, raw)
    records = []
    for b in range(S * C):
        s, c = divmod(b, C)
        if not finite[s, : ck[c] + 1].all():
            records.append(Diverged(seeds[s], ck[c], H, True, int(np.argmin(finite[s]))))
        else:
            fin = finalize(jax.tree_util.tree_map(lambda v: v[b], raw), H, model=model, loss=loss)
            records.append(Point(seeds[s], ck[c], *fin, diverged=False))
    return HeadsUnit(records, tm, method, H * p, resumed_from)


def run(cfg: WeakConvexityConfig, progress=None, store=None) -> Summary:
    """Run the check. ``store`` (a :class:`mhajax.runtime.resume.ProgressStore`) keeps each
    finished H and, with ``cfg.save_every``, each GD segment, so a killed run resumes with
    identical numbers."""
    cfg = cfg.validate()
    t0 = time.perf_counter()
    seeds = seed_list(cfg.seeds, cfg.seed0)
    ck = checkpoint_steps(cfg.gd.steps, cfg.gd.every)
    pb = resolve(cfg.data, seeds)
    model, loss = pb.model, pb.loss

    def done(H):
        if store is not None:   # the finished H's segments (also those left by a kill right after the save)
            store.discard_arrays(_segment_unit(H, 0)[:-1])
        if progress:
            progress(f"H={H}")
    units, resumed = sweep(store, cfg.heads, lambda H: _run_heads(cfg, pb, H, seeds, ck, store, progress),
                           HeadsUnit, progress=done)
    records = [r for H in cfg.heads for r in units[H].records]
    points = [Checkpoint(r.all_hold, r.diverged, r.loss_defined) for r in records]
    req = requirements(model, loss)
    law = width_law(records, cfg.heads, seeds, ck, model)
    judgement = judge(points, any(ok for ok, _ in req.values()), law)
    by_heads = {H: summarize_heads(u.records, u.method, u.P, premise_from_records(   # informational: pointwise
        cfg.gd.lr, [r for r in records if r.heads == H], model, loss)) for H, u in units.items()}
    diverged = {}
    for r in records:
        if r.diverged:
            diverged.setdefault((r.heads, r.seed), DivergedRun(r.heads, r.seed, r.diverged_at_step))
    return Summary(
        **judgement.fields(), records=records, by_heads=by_heads, methods={H: u.method for H, u in units.items()},
        width_law=law, problem=Described(cfg.data.model, loss.name, cfg.data.dataset, model.note),
        not_implied={k: why for k, (ok, why) in req.items() if not ok},
        judged=sum(p.all_hold is not None for p in points),
        violations=[Violation(r.heads, r.seed, r.step, r.failed, r.loss, r.lambda_min, r.lambda_min_block,
                              r.kappa_emp, r.kappa_block, r.kappa_mid, r.kappa_phi, r.kappa_bound)
                    for r in records if r.all_hold is False],
        diverged=list(diverged.values()), undefined=sum(not p.loss_defined and not p.diverged for p in points),
        checkpoints=ck, seeds=seeds, resumed_heads=resumed,
        resumed_from_step={H: u.resumed_from_step for H, u in units.items()
                           if u.resumed_from_step and H not in resumed},
        timings={H: u.timings for H, u in units.items()}, wall_time_s=time.perf_counter() - t0)


def summarize_heads(recs, method: str, P: int, premise: StepPremise) -> HeadsRow:
    """One H's row over its checkpoints ``recs``: maxima and link slacks over those with L̂
    defined (not diverged); ``all_hold`` over every judged one, as the verdict counts them (at an
    underflowed L̂ a failed L̂-free link is judged: :func:`mhajax.analysis.chain.finalize`)."""
    ok = [r for r in recs if r.loss_defined and not r.diverged]
    maxima = {k: max((getattr(r, k) for r in ok if getattr(r, k) is not None), default=None)
              for k in CHAIN + ("kappa_emp_lo", "kappa_emp_hi")}
    present = [k for k in CHAIN if maxima[k] is not None]
    slack = {}
    for a, b in zip(present, present[1:]):
        ratios = [getattr(r, b) / getattr(r, a) for r in ok
                  if getattr(r, a) is not None and getattr(r, b) is not None and getattr(r, a) > 0]
        if ratios:
            slack[f"{b}/{a}"] = min(ratios)
    over = [r.kappa_bound / r.kappa_emp for r in ok if r.kappa_emp and r.kappa_emp > 0 and r.kappa_bound]
    judged = [r.all_hold for r in recs if r.all_hold is not None]
    ends = [(r.lambda_min_lo, r.lambda_min_hi) for r in ok if r.lambda_min_lo is not None and r.lambda_min_hi is not None]
    ni = {}
    for r in ok:
        for k, v in r.not_implied.items():
            held, violated, undefined, why = ni.get(k, (0, 0, 0, r.reasons[k]))
            ni[k] = Tally(held + (v is True), violated + (v is False), undefined + (v is None), why)
    return HeadsRow(
        checkpoints=len(recs), undefined=sum(not r.loss_defined for r in recs),
        **{f"max_{k}": v for k, v in maxima.items()}, min_slack=slack, bound_over_emp=max(over, default=None),
        all_hold=all(judged) if judged else None,
        max_residual=max((max(r.lambda_min_residual or 0.0, r.lambda_max_residual or 0.0) for r in ok), default=None),
        max_rel_width=max(((hi - lo) / max(abs(hi), abs(lo)) for lo, hi in ends if max(abs(hi), abs(lo)) > 0),
                          default=None),
        all_converged=all(r.eig_converged for r in ok) if ok else None, not_implied=ni, method=method, P=P,
        premise=premise)


# ---------------------------------------------------------------------------
# Judge: the pointwise inequalities, then the width law
# ---------------------------------------------------------------------------

def judge(points: Sequence[Checkpoint], implies_any: bool, law: WidthLaw | None = None) -> Judgement:
    """FAILED on a diverged checkpoint or a violated implied inequality; INFORMATIONAL when
    the (model, loss) pair implies nothing; INCONCLUSIVE when fewer than
    :data:`~mhajax.experiments.base.MIN_JUDGED_FRACTION` of the checkpoints could be judged;
    then the width law where it is judged: FAILED when violated, INCONCLUSIVE when unresolved
    or undefined; else PASSED. The GD step-size premise is reported, not judged (pointwise)."""
    diverged = sum(p.diverged for p in points)
    judged = [p for p in points if p.all_hold is not None]
    violations = sum(not p.all_hold for p in judged)
    if diverged:
        return Judgement(Verdict.FAILED, f"{diverged} trajectory point(s) became non-finite")
    if violations:
        return Judgement(Verdict.FAILED, f"an implied inequality failed at {violations} "
                                         f"of {len(judged)} judged checkpoints")
    if not implies_any:
        return Judgement(Verdict.INFORMATIONAL, "the (model, loss) pair implies no inequality")
    enough, text = judged_enough(len(judged), len(points), not_judged(
        (p.all_hold is not None, p.diverged, p.loss_defined) for p in points))
    if not enough:
        return Judgement(Verdict.INCONCLUSIVE, f"too little could be judged: {text}")
    if law is not None and law.judged:
        if law.outcome == "violated":
            return Judgement(Verdict.FAILED, f"every implied inequality held ({text}), but {law.reason}")
        if law.outcome != "holds":
            return Judgement(Verdict.INCONCLUSIVE, f"every implied inequality held ({text}); {law.reason}")
        return Judgement(Verdict.PASSED, f"every implied inequality held: {text}; {law.reason}")
    return Judgement(Verdict.PASSED, f"every implied inequality held: {text}")


def _classify(ci, slope, tol: float) -> str:
    """The status of a slope CI against the tolerance: holds, violated or unresolved (one seed: the point)."""
    lo, hi = ci if ci is not None else (slope, slope)
    if hi <= tol:
        return "holds"
    if lo > tol:
        return "violated"
    return "unresolved"


def width_law(records, heads, seeds, ck, model=None) -> WidthLaw:
    """The width law of docs/theory.md §15.7 over the records: per checkpoint step, ``Y [S, m]``
    (seeds × distinct H) of each :class:`Curves` quantity, its seed mean, min, max and bootstrap
    slope in H (ρ's judged against :data:`WIDTH_TOL`: :func:`width_outcome`)."""
    hs = sorted(set(heads))
    has_kappa = model is None or (not is_coupled(model) and model.kappa is not None)
    boot = Boot(**BootConfig().kwargs())
    S, m = len(seeds), len(hs)
    steps, typed = {}, []
    for step in ck:
        Y = Curves(*(np.full((S, m), np.nan) for _ in Curves._fields))
        for r in records:
            if r.step != step or r.diverged:
                continue
            i, j = seeds.index(r.seed), hs.index(r.heads)
            ke, kb, lmax, L = r.kappa_emp, r.kappa_bound, r.lambda_max, r.loss
            if ke is not None:
                Y.kappa_emp[i, j] = ke
            if kb is not None:
                Y.kappa_bound[i, j] = kb
            if ke is not None and kb:
                Y.ratio[i, j] = ke / kb
            if lmax is not None and r.loss_defined and L:
                Y.lambda_max_over_loss[i, j] = lmax / L
            if r.beta2 is not None and kb is not None:
                Y.smoothness_coefficient[i, j] = r.beta2 ** 2 + kb / math.sqrt(r.heads)
        stat = [Curves(*([None if not np.isfinite(v) else float(v) for v in f(y, axis=0)] for y in Y))
                for f in (np.mean, np.min, np.max)]
        slopes = Curves(*(bootstrap_slope(np.asarray(hs, float), y, **boot._asdict())
                          if m >= 2 and np.all(np.isfinite(y) & (y > 0)) else None for y in Y))
        sl = slopes.ratio
        typed.append(WidthStep(step, sl.slope if sl else None, sl.ci if sl else None))
        steps[step] = WidthEntry(*stat, *slopes, step_slopes(hs, np.mean(Y.ratio, axis=0)) if m >= 2 else [],
                                 width_status(typed[-1]))
    return width_outcome(typed, hs, has_kappa)._replace(heads=hs, seeds=list(seeds), boot=boot, steps=steps)


def width_status(s: WidthStep) -> str:
    """One checkpoint step's status: ``undefined`` without a slope, else :func:`_classify`
    of its CI against :data:`WIDTH_TOL`."""
    return "undefined" if s.slope is None else _classify(s.ci, s.slope, WIDTH_TOL)


def width_outcome(steps: Sequence[WidthStep], heads: Sequence[int], has_kappa: bool) -> WidthLaw:
    """The width law's rule over the checkpoint steps (``heads``: the distinct H, ascending).
    Not judged without the closed-form κ(θ) or on a grid of fewer than :data:`WIDTH_POINTS` H
    or H_max/H_min < :data:`WIDTH_SPAN`; else violated when a step's CI lies above
    :data:`WIDTH_TOL` (the first such step named), unresolved when one contains it, undefined
    when the slope is defined at fewer than :data:`MIN_JUDGED_FRACTION` of the steps (or none),
    else holds (the largest CI upper end named)."""
    hs = list(heads)
    span_ok = len(hs) >= WIDTH_POINTS and hs[-1] / hs[0] >= WIDTH_SPAN
    status = [width_status(s) for s in steps]
    defined = [st for st in status if st != "undefined"]
    judged = bool(span_ok and has_kappa)
    if not has_kappa:
        return WidthLaw(judged, "not judged", "the width law needs the closed-form κ(θ), which this model has not")
    if not span_ok:
        return WidthLaw(judged, "not judged", f"the width law is judged on at least {WIDTH_POINTS} H spanning "
                                              f"H_max/H_min >= {WIDTH_SPAN} (here {len(hs)} H, span "
                                              f"{hs[-1] / hs[0]:g})")
    if "violated" in status:
        s = steps[status.index("violated")]
        return WidthLaw(judged, "violated", f"κ_emp grows faster than κ(θ): slope of κ_emp/κ(θ) in H "
                                            f"{_slope_text(s)} > {WIDTH_TOL:g} at step {s.step}: the lemma's "
                                            "1/√H is not the width law on this grid")
    if "unresolved" in status:
        s = steps[status.index("unresolved")]
        return WidthLaw(judged, "unresolved", f"width law unresolved: slope of κ_emp/κ(θ) in H "
                                              f"{_slope_text(s)} contains {WIDTH_TOL:g} at step {s.step}")
    if len(defined) < MIN_JUDGED_FRACTION * len(status) or not defined:
        return WidthLaw(judged, "undefined", f"width law: the slope of κ_emp/κ(θ) is defined at {len(defined)} of "
                                             f"{len(status)} checkpoint steps (at least half needed)")
    worst = max(steps, key=lambda s: -np.inf if s.slope is None else (s.ci or (0, s.slope))[1])
    return WidthLaw(judged, "holds", f"width law holds at {len(defined)} of {len(status)} checkpoint steps (slope "
                                     f"of κ_emp/κ(θ) in H at most {_slope_text(worst)} <= {WIDTH_TOL:g})")


def _slope_text(s: WidthStep) -> str:
    """``slope [lo, hi]``, ``slope (one seed)`` or ``undefined``."""
    if s.slope is None:
        return "undefined"
    return f"{s.slope:.3f}" + (f" [{s.ci[0]:.3f}, {s.ci[1]:.3f}]" if s.ci else " (one seed)")


def _ci_text(sl: Slope | None) -> str:
    return _slope_text(WidthStep(0, sl.slope, sl.ci) if sl else WidthStep(0, None))


# ---------------------------------------------------------------------------
# Render: the terminal report, the verdict headline, the REPORT.md section
# ---------------------------------------------------------------------------

def _g(v, digits=3):
    return "-" if v is None else f"{v:.{digits}g}"


def report(summary: Summary) -> str:
    """The per-H table (largest κ of each kind, smallest slack of each link), one line per
    inequality the (model, loss) pair does not imply, the premise, the width law, what failed."""
    by_heads = summary.by_heads
    links = []
    for s in by_heads.values():
        links += [l for l in s.min_slack if l not in links]
    not_implied = {k for s in by_heads.values() for k in s.not_implied}

    def col(l):
        b, a = l.split("/")
        return "/".join(SYMBOL[k] for k in (b, a)) + ("*" if f"{a}<={b}" in not_implied else "")
    rows = [[H, s.P, s.method, s.checkpoints] + [fmt(getattr(s, f"max_{k}")) for k in CHAIN]
            + [fmt(s.min_slack.get(l)) for l in links]
            + [fmt(s.max_residual) if s.method != "inertia" else "-", fmt(s.max_rel_width),
               {True: "yes", False: "NO", None: "-"}[s.all_hold]] for H, s in by_heads.items()]
    head = ("H", "P", "method", "ckpts", *(SYMBOL[k] for k in CHAIN), *map(col, links), "resid", "width", "holds")
    p = summary.problem
    out = [f"model {p.model}, loss {p.loss}, data {p.data}: {p.note}", table(head, rows),
           "κ columns: largest value over checkpoints; x/y columns: smallest ratio over checkpoints"
           " (>= 1 means the link held everywhere; * = not implied, informational); resid: largest "
           "eigen-residual of a Lanczos/dense answer ('-': inertia, no Ritz vector); width: largest relative "
           "width (hi − lo)/|λ| of the certified λ_min enclosure; holds: every implied inequality held "
           "('-': none judged)."]
    certified = [(H, s) for H, s in by_heads.items() if s.max_kappa_emp_hi is not None]
    if certified:
        out.append("κ_emp certified by inertia counts (largest over checkpoints): " + "; ".join(
            f"H={H}: [{fmt(s.max_kappa_emp_lo).strip()}, {fmt(s.max_kappa_emp_hi).strip()}]" for H, s in certified))
    for k, why in summary.not_implied.items():
        tallies = [s.not_implied[k] for s in by_heads.values() if k in s.not_implied]
        held, violated = sum(t.held for t in tallies), sum(t.violated for t in tallies)
        tally = f"held at {held}, violated at {violated} checkpoint(s)" if held + violated else "not measured"
        out.append(f"not implied (informational): {link_symbol(k)}: {why}; {tally}")
    unconv = [r for r in summary.records if r.loss_defined and not r.eig_converged and r.num_matvecs > 0]
    if unconv:
        worst = max(unconv, key=lambda r: max(r.lambda_min_residual or 0, r.lambda_max_residual or 0))
        out.append(f"Lanczos did not reach its residual tolerance at {len(unconv)} checkpoint(s) "
                   f"(worst: H={worst.heads} seed={worst.seed} step={worst.step}, residual "
                   f"{worst.lambda_min_residual:.2e}); there κ_emp is a Ritz (lower) estimate, and the "
                   "weak-convexity verdict rests on the certified κ_blk as everywhere.")
    if summary.undefined:
        out.append(f"{summary.undefined} checkpoint(s) with underflowed L̂: ratios undefined, not counted.")
    out += [f"H={H}: {premise_line(s.premise)} (informational: the inequality is pointwise)"
            for H, s in by_heads.items()]
    out += width_lines(summary.width_law)
    for v in summary.violations[:10]:
        out.append(f"VIOLATED at H={v.heads} seed={v.seed} step={v.step}: {', '.join(v.failed)}; "
                   + ", ".join(f"{k}={getattr(v, k)!r}" for k in ("loss", "kappa_emp", "kappa_block", "kappa_mid",
                                                                  "kappa_phi", "kappa_bound")))
    out += [f"DIVERGED: H={d.heads} seed={d.seed} became non-finite at step {d.step} (reported, not averaged: "
            "try a smaller --lr)" for d in summary.diverged]
    if summary.resumed_heads:
        out.append(f"resumed from saved progress: H = {summary.resumed_heads}")
    out += [f"resumed H={H} mid-trajectory from the segment saved at step {step}"
            for H, step in summary.resumed_from_step.items()]
    return "\n".join(out)


def _width_rows(law: WidthLaw) -> list:
    """Per checkpoint step: step, slope of ρ [CI], its status, the slopes of κ_emp, κ(θ),
    λ_max/L̂, and ρ's slope per step of the grid."""
    return [[step, _ci_text(e.slope_ratio), e.status, _ci_text(e.slope_kappa_emp), _ci_text(e.slope_kappa_bound),
             _ci_text(e.slope_lambda_max_over_loss), " ".join(_g(v, 2) for v in e.step_slopes_ratio)]
            for step, e in law.steps.items()]


def width_lines(law: WidthLaw) -> list:
    """The width law's lines of the report: the outcome, per checkpoint step the slopes
    (ρ = κ_emp/κ(θ) judged, the others reported), and the seed means per H."""
    if not law.steps:
        return []
    rows = []
    for step, e in law.steps.items():
        mn, lo, hi = e.mean, e.seed_min, e.seed_max
        rows += [[step, H, f"{_g(mn.kappa_emp[j])} [{_g(lo.kappa_emp[j])}, {_g(hi.kappa_emp[j])}]",
                  _g(mn.kappa_bound[j]), _g(mn.ratio[j]), _g(mn.lambda_max_over_loss[j]),
                  _g(mn.smoothness_coefficient[j])] for j, H in enumerate(law.heads)]
    return [f"width law (docs/theory.md §15.7, tolerance {law.tol:g} on the slope of ρ = κ_emp/κ(θ) in H): "
            f"{law.outcome} — {law.reason}",
            table(("step", "slope ρ [CI]", "ρ", "slope κ_emp", "slope κ(θ)", "slope λmax/L̂", "ρ per step of H"),
                  _width_rows(law)),
            table(("step", "H", "κ_emp (seeds)", "κ(θ)", "ρ", "λmax/L̂", "β₂²+κ/√H"), rows),
            f"seed means (range over {len(law.seeds)} seeds); CIs: {law.boot.level:.0%} percentile bootstrap "
            f"over seeds ({law.boot.resamples} resamples)."]


def headline(summary: Summary) -> str:
    """``66 checkpoints, 66 judged``."""
    return f"{len(summary.records)} checkpoints, {summary.judged} judged"


def section(summary: Summary) -> str:
    """REPORT.md: the largest κ of each kind per H and whether every judged inequality held."""
    rows = [[H, v.P, v.method, v.checkpoints, v.max_kappa_emp, v.max_kappa_block, v.max_kappa_mid, v.max_kappa_phi,
             v.max_kappa_bound, v.bound_over_emp, v.all_hold] for H, v in summary.by_heads.items()]
    law = summary.width_law
    tail = "" if not law.steps else (
        f"\n\nwidth law (docs/theory.md §15.7): {law.outcome} — {law.reason}.\n\n"
        + md_table(("step", "slope of κ_emp/κ(θ) in H [CI]", "slope of κ_emp", "slope of κ(θ)"),
                   [[r[0], r[1], r[3], r[4]] for r in _width_rows(law)]))
    return md_table(("H", "P", "method", "ckpts", "max κ_emp", "max κ_blk", "max κ_mid", "max κ_Φ",
                     "max κ(θ)", "κ(θ)/κ_emp", "chain + self-bounded checks hold"), rows) + (
        f"\n\nviolations: {len(summary.violations)}, diverged: {len(summary.diverged)}, "
        f"undefined (L̂ underflow): {summary.undefined}.") + tail


def memory(cfg: WeakConvexityConfig) -> list:
    """The run's dominant arrays (checked by the CLI before it starts): :func:`chain_memory`."""
    return chain_memory(cfg, cfg.data.model)


run = check("weak-convexity", config=WeakConvexityConfig, report=report, headline=headline,
            section=section, claim="λ_min(∇²L̂(θ)) >= −(κ(θ)/√H)·L̂(θ) along GD (self-bounded weak convexity)",
            presets={"paper": PAPER, "width": WIDTH}, memory=memory, summary=Summary)(run)
