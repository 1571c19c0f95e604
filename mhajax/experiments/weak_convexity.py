"""The weak-convexity experiment: GD trajectories, and the κ chain at every checkpoint.

For each H, ``seeds`` trajectories are trained together (one ``vmap``-ed,
``jit``-ed GD per shape); every checkpoint θ of every trajectory then gets the
full curvature analysis of :mod:`mhajax.analysis.chain` — batched with ``lax.map`` over
the ``seeds × checkpoints`` points, one compile per H.

The problem is ``cfg.data``: its data model, head model (``cfg.data.head_model()``) and
loss (``cfg.data.loss_fn()``). A coupled model (``two-layer``,
:mod:`mhajax.models.two_layer`) has no head blocks, so only κ_emp is measured
(matrix-free Lanczos) and no inequality is judged. Each record's verdicts count only
where the (model, loss) pair implies them (:mod:`mhajax.analysis.applicability`); the
others are reported as *not implied* (informational).

The width law (docs/theory.md §15.7): on a grid of H spanning two decades (``--preset width``:
H = 1 … 4096, P up to 458,752; ``--preset paper``), at every checkpoint step the log-log slope
in H of the seed mean of κ_emp/κ(θ), with a bootstrap CI over seeds, against the tolerance
:data:`WIDTH_TOL`: a CI above it FAILS the check (κ_emp outgrows κ(θ): the lemma's 1/√H is not
the width law), one that contains it makes it INCONCLUSIVE. The slopes of κ_emp, κ(θ) and
λ_max/L̂ are reported beside it.

Resuming: with a :class:`mhajax.runtime.resume.ProgressStore`, every finished H is kept; with
``save_every = N > 0`` (a multiple of ``every``; default ~:data:`SAVE_EVERY`) each H's GD is
also run in segments of N steps, and after each segment the iterate, optimizer state, checkpoints, losses and finite
flags are saved (``.npz``), so a killed run continues from the last saved segment. The
segmentation is part of the config, so a resumed run runs the very same compiled
programs as an uninterrupted one and gives identical numbers.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import NamedTuple, Sequence

import jax
import numpy as np

from mhajax.analysis.applicability import requirements
from mhajax.analysis.kappa import CHAIN, SYMBOL, link_symbol
from mhajax.analysis.chain import finalize
from mhajax.analysis.rates import bootstrap_slope, step_slopes
from mhajax.curvature.spectrum import resolve_method
from mhajax.data.seeds import point_keys, seed_list
from mhajax.errors import InputError
from mhajax.experiments.base import (MIN_JUDGED_FRACTION, analyse_batch, chain_memory, point_index, batched_data,
                                     batched_init, judged_enough,
                                     params_per_head, premise_from_records, premise_line)
from mhajax.experiments.configs import BootConfig, Config, DataConfig, EigenConfig, GDConfig, option, sub
from mhajax.experiments.registry import check
from mhajax.models.base import is_coupled
from mhajax.runtime.format import fmt, md_table, table
from mhajax.runtime.resume import load_or_run
from mhajax.train import checkpoint_steps, opt_init, segment_bounds, runs
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
#: the reasons a checkpoint is not judged, as the verdict's text names them
DIVERGED, UNDERFLOWED, NO_INEQUALITY = ("diverged", "with L̂ underflowed to 0 (ratios undefined)",
                                        "with no implied inequality defined")


class Checkpoint(NamedTuple):
    """What the judge reads of one checkpoint record: ``all_hold`` (every implied inequality
    held there; ``None``: not judged), ``diverged`` (a non-finite iterate), ``loss_defined``
    (L̂ above underflow, so the ratios over it are defined)."""

    all_hold: bool | None
    diverged: bool = False
    loss_defined: bool = False


class NotJudged(NamedTuple):
    """How many checkpoints were not judged, per reason."""

    diverged: int = 0
    underflowed: int = 0
    no_inequality: int = 0


class WidthStep(NamedTuple):
    """The width law at one checkpoint step: the log-log slope in H of ρ = κ_emp/κ(θ) and its
    bootstrap CI over seeds (``None``: one seed; ``slope`` ``None``: undefined)."""

    step: int
    slope: float | None
    ci: tuple | None = None


class WidthLaw(NamedTuple):
    """The width law's outcome (holds / violated / unresolved / undefined / not judged), whether
    the grid is judged at all, and one line saying why."""

    judged: bool
    outcome: str
    reason: str


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



def _batch_size(cfg: WeakConvexityConfig, H: int, p: int, method: str, budget_bytes: float = 1.5e9):
    """How many θ to analyse at once under ``vmap`` so that one batch's arrays stay under
    ``budget_bytes`` (``p`` parameters per head, ``P = H·p``, ``method`` concrete): entries per
    point ``n·P + n·H·(p + 4T²) + H·p²`` (J, its build temporaries, B), ``+ 2·H·p² + 2·n·P``
    (B's eigenvectors, a residual check, K and QᵀK; all but ``block``), ``+ 3·P²`` (``dense``)
    or ``+ 2·min(m, P)·P`` (``lanczos``), ``+ 3·H·p²`` (``links="all"``: one sample's head matrices),
    times 8 bytes.

    ``None`` (one θ at a time) on CPU: there, batching buys little, and a
    batched Lanczos ``while_loop`` would run every θ for as many restarts as
    the slowest one needs."""
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


def train_resumable(cfg: WeakConvexityConfig, H: int, th0, X, y, store=None, progress=None):
    """GD of every seed at this H, in the segments of :func:`mhajax.train.segment_bounds`;
    with a ``store`` and more than one segment, each finished segment is saved and a saved
    one is loaded instead of recomputed. Returns ``(params [S, C, ...], finite [S, steps+1],
    losses [S, steps+1], resumed_from_step, timings)``."""
    model, loss = cfg.data.head_model(), cfg.data.loss_fn()
    bounds = segment_bounds(cfg.gd.steps, cfg.gd.every, cfg.save_every)
    saving = store is not None and len(bounds) > 1
    p_leaves, p_def = jax.tree_util.tree_flatten(th0)
    st = jax.vmap(opt_init)(th0)
    s_def = jax.tree_util.tree_structure(st)
    th = th0
    kept = [jax.tree_util.tree_map(lambda a: np.asarray(a)[:, None], th0)]
    finite, losses = [], []
    resumed_from, tm = 0, dict(train_s=0.0)
    for a, b in bounds:
        unit = _segment_unit(H, b)
        if saving and store.has_arrays(unit):
            z = store.load_arrays(unit)
            if (int(z["start"]), int(z["stop"])) != (a, b):
                raise InputError(f"saved segment {unit} covers steps {int(z['start'])}..{int(z['stop'])}, "
                                 f"expected {a}..{b}; rerun with --fresh")
            new = jax.tree_util.tree_unflatten(p_def, [z[f"p{i}"] for i in range(len(p_leaves))])
            st = jax.tree_util.tree_unflatten(s_def, [z[f"s{i}"] for i in range(s_def.num_leaves)])
            fin, fin_last, L, L_last = z["finite"], z["finite_last"], z["losses"], z["loss_last"]
            resumed_from = b
        else:
            t = time.perf_counter()
            # the command's own memory estimate covered GD (force: not checked twice); with several
            # devices the seeds are split over them, and the analysis stays on one (_run_heads)
            traj = runs(th, X, y, cfg.gd.lr, steps=b - a, every=cfg.gd.every, model=model, loss=loss,
                         opt_state=st)
            traj = jax.block_until_ready(jax.device_put(traj, jax.devices()[0]))
            st = traj.opt_state
            tm["train_s"] += time.perf_counter() - t
            new = jax.tree_util.tree_map(lambda a: np.asarray(a)[:, 1:], traj.params)
            fin, fin_last = np.asarray(traj.finite)[:, :-1], np.asarray(traj.finite)[:, -1]
            L, L_last = np.asarray(traj.losses)[:, :-1], np.asarray(traj.losses)[:, -1]
            if saving:
                arrays = {f"p{i}": v for i, v in enumerate(jax.tree_util.tree_leaves(new))}
                arrays.update({f"s{i}": v for i, v in enumerate(jax.tree_util.tree_leaves(st))})
                store.save_arrays(unit, dict(arrays, start=a, stop=b, finite=fin, finite_last=fin_last,
                                             losses=L, loss_last=L_last))
        kept.append(new)
        finite.append(fin)
        losses.append(L)
        th = jax.tree_util.tree_map(lambda a: a[:, -1], new)
        if progress and len(bounds) > 1:
            progress(f"H={H} step {b}/{cfg.gd.steps}")
    params = jax.tree_util.tree_map(lambda *a: np.concatenate(a, axis=1), *kept)
    finite = np.concatenate(finite + [np.asarray(fin_last)[:, None]], axis=1)
    losses = np.concatenate(losses + [np.asarray(L_last)[:, None]], axis=1)
    return params, finite, losses, resumed_from, tm


def _run_heads(cfg: WeakConvexityConfig, H: int, X, y, seeds, ck, store=None, progress=None) -> dict:
    """One unit of the sweep: train every seed at this H, then analyse every checkpoint θ
    [S·C, H, ...] with one program (:func:`mhajax.experiments.base.analyse_batch`).
    Returns ``dict(records=[...], timings={...}, method=..., P=..., resumed_from_step=...)``
    (JSON-ready)."""
    model, loss = cfg.data.head_model(), cfg.data.loss_fn()
    th0 = batched_init(cfg.data, seeds, H)
    p = params_per_head(th0)
    method = "lanczos" if cfg.coupled else resolve_method(cfg.eig.method, H * p)
    S, C = len(seeds), len(ck)
    seed_index = point_index(S, C)
    keys = point_keys(H, S * C)
    params, finite, _, resumed_from, tm = train_resumable(cfg, H, th0, X, y, store, progress)
    flat = jax.tree_util.tree_map(lambda a: a.reshape((S * C,) + a.shape[2:]), params)   # host arrays
    # The analysis stays on one device: its eigensolvers call LAPACK inside XLA, and OpenBLAS
    # entered from several device threads at once was seen to hang.
    static = dict(method=cfg.eig.method, links=cfg.eig.links, lanczos_steps=cfg.eig.lanczos_steps,
                  max_cycles=cfg.eig.max_cycles, model=model, loss=loss,
                  batch_size=_batch_size(cfg, H, p, method))
    t = time.perf_counter()
    analyse_c = analyse_batch.lower(flat, seed_index, keys, X, y, **static).compile()
    tm["analysis_compile_s"] = time.perf_counter() - t
    t = time.perf_counter()
    raw = jax.block_until_ready(analyse_c(flat, seed_index, keys, X, y))
    tm["analysis_run_s"] = time.perf_counter() - t
    raw = jax.tree_util.tree_map(np.asarray, raw)
    records = []
    for b in range(S * C):
        s, c = divmod(b, C)
        rec = dict(seed=seeds[s], step=ck[c])
        if not finite[s, : ck[c] + 1].all():
            # A non-finite iterate: reported as diverged, never averaged or passed.
            rec.update(heads=H, diverged=True, diverged_at_step=int(np.argmin(finite[s])),
                       chain_holds=None, all_hold=None)
        else:
            rec.update(finalize(jax.tree_util.tree_map(lambda v: v[b], raw), H, model=model, loss=loss),
                       diverged=False)
        records.append(rec)
    return dict(records=records, timings=tm, method=method, P=H * p, resumed_from_step=resumed_from)


def problem_note(cfg: WeakConvexityConfig) -> str:
    """What the closed form of the model is, or why the coupled model has none."""
    return cfg.data.head_model().note


def run(cfg: WeakConvexityConfig, progress=None, store=None) -> dict:
    """Run the experiment; returns the summary dict (records, per-H table, verdict).

    ``store`` (a :class:`mhajax.resume.ProgressStore`) keeps each finished H on
    disk — and, with ``cfg.save_every``, each finished GD segment — so a killed run
    resumes where it stopped with identical numbers. The verdict is INFORMATIONAL when
    the (model, loss) pair implies no inequality at all (:func:`judge`)."""
    cfg = cfg.validate()
    t0 = time.perf_counter()
    model, loss = cfg.data.head_model(), cfg.data.loss_fn()
    seeds = seed_list(cfg.seeds, cfg.seed0)
    ck = checkpoint_steps(cfg.gd.steps, cfg.gd.every)
    X, y = batched_data(cfg.data, seeds)
    records, per_heads, methods, timings, resumed, resumed_steps, done = [], {}, {}, {}, [], {}, {}
    for H in cfg.heads:
        def compute(H=H):
            res = _run_heads(cfg, H, X, y, seeds, ck, store, progress)
            if res["resumed_from_step"]:
                resumed_steps[H] = res["resumed_from_step"]
            return res
        res = load_or_run(store, f"heads={H}", compute, resumed, H, memo=done)
        if store is not None:   # the finished H's segments (also those left by a kill right after the save)
            store.discard_arrays(_segment_unit(H, 0)[:-1])
        records += res["records"]
        methods[H], timings[H] = res["method"], res["timings"]
        per_heads[H] = dict(summarize_heads(res["records"]), method=res["method"], P=res["P"])
        if progress:
            progress(f"H={H}")
    req = requirements(model, loss)
    implies_any = any(ok for ok, _ in req.values())
    diverged = [dict(heads=r["heads"], seed=r["seed"], step=r["diverged_at_step"])
                for r in records if r.get("diverged")]
    points = [checkpoint(r) for r in records]
    for H in cfg.heads:   # informational here: the inequality is pointwise
        per_heads[H]["premise"] = premise_from_records(cfg.gd.lr, [r for r in records if r["heads"] == H],
                                                       model, loss)
    law, outcome = _width_law(records, cfg.heads, seeds, ck, model)
    judgement = judge(points, implies_any, outcome)
    return dict(**judgement.fields(), records=records, by_heads=per_heads, methods=methods, width_law=law,
                problem=dict(model=cfg.data.model, loss=loss.name, data=cfg.data.dataset,
                             note=problem_note(cfg)),
                not_implied={k: why for k, (ok, why) in req.items() if not ok},
                judged=sum(p.all_hold is not None for p in points),
                violations=[_violation(r) for r, p in zip(records, points) if p.all_hold is not None and not p.all_hold],
                diverged=_unique(diverged),
                undefined=sum(not p.loss_defined and not p.diverged for p in points),
                checkpoints=ck, seeds=seeds, resumed_heads=resumed, resumed_from_step=resumed_steps,
                timings=timings, wall_time_s=time.perf_counter() - t0)


def checkpoint(rec) -> Checkpoint:
    """The :class:`Checkpoint` of one JSON record (a key it lacks: not judged, not diverged,
    L̂ not defined)."""
    return Checkpoint(rec.get("all_hold"), bool(rec.get("diverged")), bool(rec.get("loss_defined")))


def _why_not_judged(points: Sequence[Checkpoint]) -> NotJudged:
    """Per reason, the checkpoints not judged (``all_hold`` None): diverged first, then L̂
    underflowed, else no implied inequality defined there."""
    diverged = underflowed = none = 0
    for p in points:
        if p.all_hold is not None:
            continue
        if p.diverged:
            diverged += 1
        elif not p.loss_defined:
            underflowed += 1
        else:
            none += 1
    return NotJudged(diverged, underflowed, none)


def _reasons(why: NotJudged) -> dict:
    """Reason text -> count, in the order the verdict's text lists them."""
    return {DIVERGED: why.diverged, UNDERFLOWED: why.underflowed, NO_INEQUALITY: why.no_inequality}


def judge(points: Sequence[Checkpoint], implies_any: bool, law: WidthLaw | None = None) -> Judgement:
    """FAILED on a diverged checkpoint or a violated implied inequality; INFORMATIONAL when
    the (model, loss) pair implies nothing; INCONCLUSIVE when fewer than
    :data:`~mhajax.experiments.base.MIN_JUDGED_FRACTION` of the checkpoints could be judged
    (the reason says how many, and why the others were not: L̂ underflowed, ...); then the
    width law where it is judged (:func:`width_outcome`): FAILED when a checkpoint step violates
    it, INCONCLUSIVE when one leaves it unresolved or too few steps are defined; else
    PASSED. The inequality is pointwise: the GD step-size premise is reported, not judged."""
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
    enough, text = judged_enough(len(judged), len(points), _reasons(_why_not_judged(points)))
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


def width_law(records, heads, seeds, ck, model=None) -> dict:
    """The width law of docs/theory.md §15.7, JSON-ready (:func:`_width_law`'s first part)."""
    return _width_law(records, heads, seeds, ck, model)[0]


def _width_law(records, heads, seeds, ck, model=None) -> tuple:
    """The width law of docs/theory.md §15.7: (the JSON-ready dict, its :class:`WidthLaw`). Per
    checkpoint step, the log-log
    slope in H of the seed mean of ρ = κ_emp/κ(θ) with its bootstrap CI over seeds (judged
    against :data:`WIDTH_TOL`), the slopes of κ_emp, κ(θ), λ_max/L̂ and (6.8)'s coefficient
    β₂² + κ(θ)/√H (reported), the seed means per H and the slope of ρ over each step of the
    grid. ``judged``: the grid has at least :data:`WIDTH_POINTS` distinct H spanning
    :data:`WIDTH_SPAN`; ``outcome``: holds / violated / unresolved / undefined / not judged."""
    hs = sorted(set(heads))
    has_kappa = model is None or (not is_coupled(model) and model.kappa is not None)
    boot = BootConfig().kwargs()
    S, m = len(seeds), len(hs)
    keys = ("kappa_emp", "kappa_bound", "ratio", "lambda_max_over_loss", "smoothness_coefficient")
    steps, typed = {}, []
    for step in ck:
        Y = {k: np.full((S, m), np.nan) for k in keys}
        for r in records:
            if r.get("step") != step or r.get("diverged") or r["heads"] not in hs:
                continue
            i, j = seeds.index(r["seed"]), hs.index(r["heads"])
            ke, kb, lmax, L = r.get("kappa_emp"), r.get("kappa_bound"), r.get("lambda_max"), r.get("loss")
            if ke is not None:
                Y["kappa_emp"][i, j] = ke
            if kb is not None:
                Y["kappa_bound"][i, j] = kb
            if ke is not None and kb:
                Y["ratio"][i, j] = ke / kb
            if lmax is not None and r.get("loss_defined") and L:
                Y["lambda_max_over_loss"][i, j] = lmax / L
            if r.get("beta2") is not None and kb is not None:
                Y["smoothness_coefficient"][i, j] = r["beta2"] ** 2 + kb / math.sqrt(r["heads"])
        e = dict(mean={k: [None if not np.isfinite(v) else float(v) for v in np.mean(Y[k], axis=0)] for k in keys},
                 seed_min={k: [None if not np.isfinite(v) else float(v) for v in np.min(Y[k], axis=0)] for k in keys},
                 seed_max={k: [None if not np.isfinite(v) else float(v) for v in np.max(Y[k], axis=0)] for k in keys})
        for k in keys:
            ok = bool(np.all(np.isfinite(Y[k]) & (Y[k] > 0))) and m >= 2
            e[f"slope_{k}"] = bootstrap_slope(np.asarray(hs, float), Y[k], **boot) if ok else None
        e["step_slopes_ratio"] = step_slopes(hs, np.mean(Y["ratio"], axis=0)) if m >= 2 else []
        sl = e["slope_ratio"] or {}
        typed.append(WidthStep(step, sl.get("slope"), sl.get("ci")))
        e["status"] = width_status(typed[-1])
        steps[step] = e
    law = width_outcome(typed, hs, has_kappa)
    return dict(judged=law.judged, outcome=law.outcome, reason=law.reason, tol=WIDTH_TOL, heads=hs,
                seeds=list(seeds), boot=boot, steps=steps), law


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


def _ci_text(sl) -> str:
    sl = sl or {}
    return _slope_text(WidthStep(0, sl.get("slope"), sl.get("ci")))


def _unique(items):
    seen, out = set(), []
    for it in items:
        key = (it["heads"], it["seed"])
        if key not in seen:
            seen.add(key)
            out.append(it)
    return out


def _violation(r):
    return dict(heads=r["heads"], seed=r["seed"], step=r["step"], failed=r["failed"],
                **{k: r[k] for k in ("loss", "lambda_min", "lambda_min_block", "kappa_emp",
                                      "kappa_block", "kappa_mid", "kappa_phi", "kappa_bound")})


def summarize_heads(recs) -> dict:
    """Per-H summary: the largest value of each κ, and the slack of each link
    (the smallest ratio ``next/prev`` over checkpoints; >= 1 means it held).
    ``not_implied``: per inequality the (model, loss) pair does not imply, how often
    it held and was violated (informational), and why it is not implied.
    ``max_kappa_emp_lo``/``max_kappa_emp_hi``: the certified interval of the largest κ_emp
    (the max over checkpoints of each end of the per-checkpoint intervals)."""
    ok = [r for r in recs if r.get("loss_defined") and not r.get("diverged")]
    maxima = {}
    for k in CHAIN + ("kappa_emp_lo", "kappa_emp_hi"):
        vals = [r[k] for r in ok if r.get(k) is not None]
        maxima[k] = max(vals) if vals else None
    present = [k for k in CHAIN if maxima[k] is not None]
    slack = {}
    for a, b in zip(present, present[1:]):
        ratios = [r[b] / r[a] for r in ok
                  if r.get(a) is not None and r.get(b) is not None and r[a] > 0]
        slack[f"{b}/{a}"] = min(ratios) if ratios else None
    over = [r["kappa_bound"] / r["kappa_emp"] for r in ok
            if r.get("kappa_emp") and r["kappa_emp"] > 0 and r.get("kappa_bound")]
    # every judged checkpoint, as the verdict counts them: at an underflowed L̂ a record is
    # judged only when an L̂-free link failed there (chain.finalize), and that failure counts
    judged = [r["all_hold"] for r in recs if r.get("all_hold") is not None]
    widths = [(r["lambda_min_hi"] - r["lambda_min_lo"]) / max(abs(r["lambda_min_hi"]), abs(r["lambda_min_lo"]))
              for r in ok if r.get("lambda_min_lo") is not None and r.get("lambda_min_hi") is not None
              and max(abs(r["lambda_min_hi"]), abs(r["lambda_min_lo"])) > 0]
    ni = {}
    for r in ok:
        for k, v in (r.get("not_implied") or {}).items():
            e = ni.setdefault(k, dict(held=0, violated=0, undefined=0, reason=r["reasons"][k]))
            e["held" if v is True else "violated" if v is False else "undefined"] += 1
    return dict(checkpoints=len(recs), undefined=sum(not r.get("loss_defined") for r in recs),
                **{f"max_{k}": v for k, v in maxima.items()},
                min_slack={k: v for k, v in slack.items() if v is not None},
                bound_over_emp=max(over) if over else None,
                all_hold=all(judged) if judged else None,
                max_residual=max((max(r["lambda_min_residual"] or 0.0, r["lambda_max_residual"] or 0.0)
                                  for r in ok), default=None),
                max_rel_width=max(widths, default=None),   # of the certified λ_min enclosure [lo, hi]
                all_converged=all(r["eig_converged"] for r in ok) if ok else None,
                not_implied=ni)


# ---------------------------------------------------------------------------
# Presentation: the terminal table, the verdict headline, the REPORT.md section
# ---------------------------------------------------------------------------

def report(summary) -> str:
    """The per-H verdict table (largest κ of each kind, smallest slack of each link), then
    one line per inequality the (model, loss) pair does not imply."""
    by_heads = summary["by_heads"]
    links = []
    for s in by_heads.values():
        links += [l for l in s["min_slack"] if l not in links]
    not_implied = set()
    for s in by_heads.values():
        not_implied |= set(s.get("not_implied", {}))

    def col(l):
        b, a = l.split("/")
        name = "/".join(SYMBOL[k] for k in l.split("/"))
        return name + ("*" if f"{a}<={b}" in not_implied else "")
    rows = []
    for H, s in by_heads.items():
        rows.append([H, s["P"], s["method"], s["checkpoints"]]
                    + [fmt(s[f"max_{k}"]) for k in CHAIN]
                    + [fmt(s["min_slack"].get(l)) for l in links]
                    + ["-" if s["method"] == "inertia" else fmt(s["max_residual"]),
                       fmt(s.get("max_rel_width")),
                       "yes" if s["all_hold"] else ("-" if s["all_hold"] is None else "NO")])
    head = (["H", "P", "method", "ckpts"] + [SYMBOL[k] for k in CHAIN] + [col(l) for l in links]
            + ["resid", "width", "holds"])
    prob = summary.get("problem") or {}
    out = []
    if prob:
        out.append(f"model {prob['model']}, loss {prob['loss']}, data {prob['data']}: {prob['note']}")
    out += [table(head, rows),
            "κ columns: largest value over checkpoints; x/y columns: smallest ratio over checkpoints"
            " (>= 1 means the link held everywhere; * = not implied, informational); resid: largest "
            "eigen-residual of a Lanczos/dense answer ('-': inertia, no Ritz vector); width: largest relative "
            "width (hi − lo)/|λ| of the certified λ_min enclosure; holds: every implied inequality held "
            "('-': none judged)."]
    certified = [(H, s) for H, s in by_heads.items() if s.get("max_kappa_emp_hi") is not None]
    if certified:
        out.append("κ_emp certified by inertia counts (largest over checkpoints): " + "; ".join(
            f"H={H}: [{fmt(s['max_kappa_emp_lo']).strip()}, {fmt(s['max_kappa_emp_hi']).strip()}]"
            for H, s in certified))
    agg = {}
    for s in by_heads.values():
        for k, e in s.get("not_implied", {}).items():
            a = agg.setdefault(k, dict(held=0, violated=0, undefined=0, reason=e["reason"]))
            for f in ("held", "violated", "undefined"):
                a[f] += e[f]
    for k, why in (summary.get("not_implied") or {}).items():
        a = agg.get(k)
        tally = (f"held at {a['held']}, violated at {a['violated']} checkpoint(s)"
                 if a and a["held"] + a["violated"] else "not measured")
        out.append(f"not implied (informational): {link_symbol(k)}: {why}; {tally}")
    unconv = [r for r in summary["records"]
              if r.get("loss_defined") and not r["eig_converged"] and r["num_matvecs"] > 0]
    if unconv:
        worst = max(unconv, key=lambda r: max(r["lambda_min_residual"] or 0, r["lambda_max_residual"] or 0))
        out.append(f"Lanczos did not reach its residual tolerance at {len(unconv)} checkpoint(s) "
                   f"(worst: H={worst['heads']} seed={worst['seed']} step={worst['step']}, residual "
                   f"{worst['lambda_min_residual']:.2e}); there κ_emp is a Ritz (lower) estimate, and the "
                   "weak-convexity verdict rests on the certified κ_blk as everywhere.")
    if summary["undefined"]:
        out.append(f"{summary['undefined']} checkpoint(s) with underflowed L̂: ratios undefined, not counted.")
    for H, s in by_heads.items():
        if s.get("premise"):
            out.append(f"H={H}: {premise_line(s['premise'])} (informational: the inequality is pointwise)")
    out += width_lines(summary.get("width_law"))
    for v in summary["violations"][:10]:
        out.append(f"VIOLATED at H={v['heads']} seed={v['seed']} step={v['step']}: {', '.join(v['failed'])}; "
                   + ", ".join(f"{k}={v[k]!r}" for k in ("loss", "kappa_emp", "kappa_block", "kappa_mid",
                                                          "kappa_phi", "kappa_bound")))
    for d in summary["diverged"]:
        out.append(f"DIVERGED: H={d['heads']} seed={d['seed']} became non-finite at step {d['step']}"
                   " (reported, not averaged: try a smaller --lr)")
    if summary.get("resumed_heads"):
        out.append(f"resumed from saved progress: H = {summary['resumed_heads']}")
    for H, step in (summary.get("resumed_from_step") or {}).items():
        out.append(f"resumed H={H} mid-trajectory from the segment saved at step {step}")
    return "\n".join(out)


def _g(v, digits=3):
    return "-" if v is None else f"{v:.{digits}g}"


def width_lines(law) -> list:
    """The width law's lines of the report: the rule's outcome, per checkpoint step the slopes
    (ρ = κ_emp/κ(θ) judged, the others reported), and the seed means per H."""
    if not law or not law.get("steps"):
        return []
    out = [f"width law (docs/theory.md §15.7, tolerance {law['tol']:g} on the slope of ρ = κ_emp/κ(θ) in H): "
           f"{law['outcome']} — {law['reason']}"]
    rows = []
    for step, e in law["steps"].items():
        rows.append([step, _ci_text(e["slope_ratio"]), e["status"], _ci_text(e["slope_kappa_emp"]),
                     _ci_text(e["slope_kappa_bound"]), _ci_text(e["slope_lambda_max_over_loss"]),
                     " ".join(_g(v, 2) for v in e["step_slopes_ratio"])])
    out.append(table(["step", "slope ρ [CI]", "ρ", "slope κ_emp", "slope κ(θ)", "slope λmax/L̂", "ρ per step of H"],
                     rows))
    rows = []
    for step, e in law["steps"].items():
        mn, lo, hi = e["mean"], e["seed_min"], e["seed_max"]
        for j, H in enumerate(law["heads"]):
            rows.append([step, H, f"{_g(mn['kappa_emp'][j])} [{_g(lo['kappa_emp'][j])}, {_g(hi['kappa_emp'][j])}]",
                         _g(mn["kappa_bound"][j]), _g(mn["ratio"][j]), _g(mn["lambda_max_over_loss"][j]),
                         _g(mn["smoothness_coefficient"][j])])
    out += [table(["step", "H", "κ_emp (seeds)", "κ(θ)", "ρ", "λmax/L̂", "β₂²+κ/√H"], rows),
            f"seed means (range over {len(law['seeds'])} seeds); CIs: {law['boot']['level']:.0%} percentile bootstrap "
            f"over seeds ({law['boot']['resamples']} resamples)."]
    return out


def headline(summary) -> str:
    """``66 checkpoints, 66 judged``."""
    return f"{len(summary['records'])} checkpoints, {summary['judged']} judged"


def section(summary) -> str:
    """REPORT.md: the largest κ of each kind per H and whether every judged inequality held."""
    rows = [[H, v["P"], v["method"], v["checkpoints"], v["max_kappa_emp"], v["max_kappa_block"],
             v.get("max_kappa_mid"), v.get("max_kappa_phi"), v["max_kappa_bound"], v["bound_over_emp"],
             v["all_hold"]] for H, v in summary["by_heads"].items()]
    law = summary.get("width_law") or {}
    tail = ""
    if law.get("steps"):
        tail = (f"\n\nwidth law (docs/theory.md §15.7): {law['outcome']} — {law['reason']}.\n\n"
                + md_table(["step", "slope of κ_emp/κ(θ) in H [CI]", "slope of κ_emp", "slope of κ(θ)"],
                           [[k, _ci_text(e["slope_ratio"]), _ci_text(e["slope_kappa_emp"]),
                             _ci_text(e["slope_kappa_bound"])] for k, e in law["steps"].items()]))
    return md_table(["H", "P", "method", "ckpts", "max κ_emp", "max κ_blk", "max κ_mid", "max κ_Φ",
                     "max κ(θ)", "κ(θ)/κ_emp", "chain + self-bounded checks hold"], rows) + (
        f"\n\nviolations: {len(summary['violations'])}, diverged: {len(summary['diverged'])}, "
        f"undefined (L̂ underflow): {summary['undefined']}.") + tail


# -- memory: the run's dominant arrays, checked by the CLI before it starts --

def memory(cfg: WeakConvexityConfig) -> list:
    """:func:`chain_memory` of the config's model."""
    return chain_memory(cfg, cfg.data.model)


check("weak-convexity", config=WeakConvexityConfig, report=report, headline=headline,
      section=section, claim="λ_min(∇²L̂(θ)) >= −(κ(θ)/√H)·L̂(θ) along GD (self-bounded weak convexity)",
      presets={"paper": PAPER, "width": WIDTH}, memory=memory)(run)
