"""The whole Hessian spectrum along GD, counted exactly: N₋, tr(∇²L̂)₋, λmin and the histogram.

For each H, ``seeds`` GD trajectories; at every checkpoint θ the certified census of ∇²L̂(θ)
(docs/theory.md §3.5, :mod:`mhajax.curvature.census`) brackets N₋ = #{λ < 0}, tr₋ = Σ_{λ<0} λ
(as |tr₋|/L̂) and λmin, beside N₋(B) of the data term B; the histogram's edges are ``auto``
(``bins/2`` equal bins on [L, 0] and on [0, λ̄max], certified ends) or in units of L̂(θ). At the
first and last checkpoints SLQ estimates the same bins (its errors reported; ``--probes 0``: none).
Across H: N₋/P beside N₋(B)/P, the sandwich width n/P, the bound d/(T + d), and the log-log slope of
|tr₋|/L̂ against H with a bootstrap CI over seeds, and per step of H (docs/theory.md §3.6).

**The rule** (docs/theory.md §3.6; the paper claims nothing about the full spectrum): for softmax
heads (Φ linear in every U_h) and ℓ'' >= 0, N₋(∇²L̂) <= N₋(B) <= H·d². FAILED when a trajectory
diverges or a certified count exceeds H·d²; INCONCLUSIVE when a bracket straddles it; INFORMATIONAL
for a head model the bound is not derived for; else PASSED. Slope and SLQ errors are not judged.
Not part of ``verify all``.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import ClassVar, NamedTuple, Sequence, get_type_hints

import jax
import numpy as np

from mhajax.analysis.rates import Slope, bootstrap_slope, step_slopes
from mhajax.curvature import inertia
from mhajax.curvature.census import batch_size, histogram_of, lower_edge
from mhajax.curvature.operators import hessian_parts
from mhajax.curvature.slq import slq_histogram
from mhajax.data.seeds import seed_list
from mhajax.errors import InputError
from mhajax.experiments.base import Problem, batched_init, resolve, sweep
from mhajax.experiments.configs import BootConfig, Config, DataConfig, GDConfig, option, sub
from mhajax.experiments.registry import check
from mhajax.losses import risk
from mhajax.runtime import memory as mem
from mhajax.runtime.format import fmt, md_table, table
from mhajax.runtime.jaxsetup import sized_jit
from mhajax.train import checkpoint_steps, num_checkpoints, runs
from mhajax.validate import heads_list, positive_float, positive_int
from mhajax.verdict import Judgement, Verdict

#: ``--preset paper``: H up to 256 (P = 28,672 at T = 6, d = 8)
PAPER = {"heads": (1, 4, 16, 64, 256), "seeds": 2, "gd.steps": 200, "gd.every": 100}
#: ``--preset width``: H up to 4096 (P = 458,752), θ₀ and two GD checkpoints, no SLQ (docs/theory.md §3.6)
WIDTH = {"heads": (1, 4, 16, 64, 256, 1024, 4096), "seeds": 2, "gd.steps": 200, "gd.every": 100, "probes": 0}
#: the head models for which N₋ <= H·d² is derived (docs/theory.md §3.6: Φ linear in U)
BOUND_MODELS = ("softmax",)


# ---------------------------------------------------------------------------
# Records: summary.json field for field
# ---------------------------------------------------------------------------

class Checkpoint(NamedTuple):
    """What the judge reads of one checkpoint record: where it is, whether it diverged, whether its
    structure is valid with ℓ'' >= 0 at every sample, ``neg_lo <= N₋ <= neg_hi`` and H·d²."""

    heads: int
    seed: int
    step: int
    diverged: bool = False
    valid: bool = False
    n_neg_weights: int = 0
    neg_lo: int = 0
    neg_hi: int = 0
    bound: int = 0


Num = float | None   # None: not finite, or undefined

_POINT = [("seed", int), ("step", int), ("heads", int), ("P", int), ("p", int), ("q", int), ("n", int),
          ("bound", int), ("loss", float), ("neg_B", int), ("neg_B_head_max", int), ("n_neg_weights", int),
          ("valid", bool), ("lambda_min_lo", Num), ("lambda_min_hi", Num), ("neg_lo", int), ("neg_hi", int),
          ("neg_exact", bool), ("neg_frac_lo", float), ("neg_frac_hi", float), ("trace_lo", Num),
          ("trace_hi", Num), ("trace_ok", bool), ("num_counts", int), ("bins_exact", int), ("bins", int),
          ("abs_trace_over_loss_lo", Num), ("abs_trace_over_loss_hi", Num), ("abs_trace_over_loss", Num)]
#: the census at one checkpoint: P = H·p, q = d², n, ``bound`` = H·q; L̂; N₋(B) (and its largest per
#: head); the structure; certified brackets of λmin, N₋ (and N₋/P), tr₋, |tr₋|/L̂; exact bins
Point = NamedTuple("Point", _POINT + [("diverged", bool)])
#: SLQ over a kept checkpoint's edges (``counts``, ``sem`` per bin; N₋ as ``negative``) and its errors
#: SLQ − exact on the exact bins (``None`` elsewhere) and on an exact N₋
Slq = NamedTuple("Slq", [("available", bool), ("num_probes", int), ("num_steps", int), ("counts", list[float]),
                         ("sem", list[float]), ("error", list[Num]), ("error_in_sem", list[Num]),
                         ("max_abs_error", Num), ("l1_error", Num), ("negative", float), ("negative_sem", float),
                         ("negative_error", Num), ("negative_error_in_sem", Num)])
#: SLQ not run (``--probes 0``, or matfree missing)
NoSlq = NamedTuple("NoSlq", [("available", bool), ("reason", str)])
#: the certified histogram over ``edges [m + 1]``: count brackets per bin ``[m]``, and below/above the edges
Histogram = NamedTuple("Histogram", [("edges", list[float]), ("counts_lo", list[int]), ("counts_hi", list[int]),
                                     ("exact", list[bool]), ("under", list[int]), ("over", list[int])])
#: the first and last checkpoints: a :data:`Point` with its histogram and SLQ's estimate of it
Kept = NamedTuple("Kept", _POINT + [("histogram", Histogram), ("slq", Slq | NoSlq), ("diverged", bool)])
#: a checkpoint whose trajectory became non-finite (first at ``diverged_at_step``)
Diverged = NamedTuple("Diverged", [("seed", int), ("step", int), ("heads", int), ("diverged", bool),
                                   ("diverged_at_step", int)])
Record = Kept | Point | Diverged   # in the order a file's record is tried
#: one H: the records of every seed and checkpoint (seed-major), the timings
Unit = NamedTuple("Unit", [("records", list[Record]), ("timings", dict)])

_STEP = [("neg_frac_lo", float), ("neg_frac_hi", float), ("neg_exact", bool), ("abs_trace_over_loss", Num),
         ("abs_trace_over_loss_lo", Num), ("abs_trace_over_loss_hi", Num), ("lambda_min_lo", Num),
         ("lambda_min_hi", Num), ("loss", float), ("neg_B", float), ("neg_B_frac", float), ("sandwich", float)]
#: seed means at one (H, step) over its non-diverged records (``None`` where one is missing), N₋(B)/P, n/P
Step = NamedTuple("Step", _STEP)
#: a kept step: also SLQ's largest bin error, its mean N₋ error and largest N₋ error in standard errors
SlqStep = NamedTuple("SlqStep", _STEP + [("slq_max_abs_error", float), ("slq_negative_error", Num),
                                         ("slq_negative_error_in_sem", Num)])
#: one H: P, H·d², the steps' seed means, the largest certified N₋/(H·d²) (``None``: all diverged)
HeadsEntry = NamedTuple("HeadsEntry", [("P", int | None), ("bound", int | None), ("steps", dict[int, SlqStep | Step]),
                                       ("max_neg_over_bound", Num)])

#: the slope of |tr₋|/L̂ against H at ``step`` (:class:`~mhajax.analysis.rates.Slope`), and the
#: seed-mean curve ``mean [len(heads)]``
TraceSlope = NamedTuple("TraceSlope", [*get_type_hints(Slope).items(), ("step", int), ("heads", list[int]),
                                       ("mean", list[float])])
#: the slope undefined at ``step``, and why
NoSlope = NamedTuple("NoSlope", [("slope", None), ("ci", None), ("reason", str), ("step", int),
                                 ("heads", list[int])])
Stats = list[tuple[float, float, float] | None]   # per H: seed mean, min, max (None: a seed missing)
#: at one step, per H of ``Width.heads``: N₋/P (both ends), N₋(B)/P, n/P, |tr₋|/L̂ and λmin; the
#: slope of |tr₋|/L̂ in H, and per step of H
WidthStep = NamedTuple("WidthStep", [("neg_frac_lo", Stats), ("neg_frac_hi", Stats), ("neg_B_frac", Stats),
                                     ("sandwich", Stats), ("abs_trace_over_loss", Stats), ("lambda_min", Stats),
                                     ("trace_slope", TraceSlope | NoSlope | None),
                                     ("trace_step_slopes", list[Num])])
#: the laws in H (docs/theory.md §3.6) per checkpoint step; ``bound`` = d/(T + d)
Width = NamedTuple("Width", [("heads", list[int]), ("bound", float), ("steps", dict[int, WidthStep])])
SlqSettings = NamedTuple("SlqSettings", [("num_probes", int), ("num_steps", int)])
#: what :func:`run` returns (summary.json): the verdict, every checkpoint, per H, the laws in H
Summary = NamedTuple("Summary", [
    ("verdict", str), ("verdict_reason", str), ("passed", bool | None), ("records", list[Record]),
    ("by_heads", dict[int, HeadsEntry]), ("trace_slope", TraceSlope | NoSlope | None), ("checkpoints", list[int]),
    ("seeds", list[int]), ("width", Width), ("problem", dict), ("slq_settings", SlqSettings),
    ("timings", dict[int, dict]), ("wall_time_s", float)])


def parse_edges(value) -> tuple | None:
    """``None`` for ``auto``; else the edges (units of L̂), a strictly increasing tuple of at least
    two finite floats; an :class:`InputError` names the bad value."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return None
    parts = [p.strip() for p in value.split(",") if p.strip()] if isinstance(value, str) else list(value)
    if not parts:
        raise InputError("--edges is empty: give 'auto' or at least two comma-separated numbers")
    vals = []
    for i, p in enumerate(parts):
        try:
            vals.append(float(p))
        except (TypeError, ValueError):
            raise InputError(f"--edges[{i}] = {p!r} is not a number") from None
        if not math.isfinite(vals[-1]):
            raise InputError(f"--edges[{i}] = {p!r} is not finite")
    if len(vals) < 2:
        raise InputError(f"--edges needs at least two edges, got {len(vals)}")
    for i in range(len(vals) - 1):
        if not vals[i] < vals[i + 1]:
            raise InputError(f"--edges must be strictly increasing: edges[{i}] = {vals[i]!r} >= "
                             f"edges[{i + 1}] = {vals[i + 1]!r}")
    return tuple(vals)


@dataclass(frozen=True)
class CensusConfig(Config):
    """GD per H and seed; the certified census of ∇²L̂ at every checkpoint, SLQ beside it at
    the first and last."""

    EXCLUDE: ClassVar[tuple] = ("boot.log_power",)

    heads: tuple = option((1, 4, 16), "comma-separated numbers of heads H", kind="list")
    seeds: int = option(2, "trajectories per H (seeds seed0..seed0+seeds-1)")
    seed0: int = option(0, "first seed")
    gd: GDConfig = field(default_factory=lambda: GDConfig(steps=100, every=50))
    data: DataConfig = sub(DataConfig)
    edges: str = option("auto", "histogram edges in units of L̂(θ), comma-separated and strictly increasing, "
                                "or 'auto' (--bins equal bins on [L, 0] and [0, λ̄max], certified ends)",
                        kind="str")
    bins: int = option(24, "bins of the auto histogram (an even number >= 2: half left of 0, half right)")
    rtol: float = option(0.05, "relative width the tr₋ bracket is refined to (one refinement round at most)")
    probes: int = option(10, "SLQ probe vectors (Rademacher; 0: no SLQ)")
    lanczos: int = option(100, "SLQ Lanczos steps per probe (clipped to P)")
    boot: BootConfig = sub(BootConfig)

    def validate(self):
        """The validated config, a new one (lists parsed, names normalized); an
        :class:`InputError` names the first bad option."""
        cfg = replace(self, heads=tuple(heads_list(self.heads)))
        seed_list(cfg.seeds, cfg.seed0)
        cfg.gd.validate()
        parse_edges(cfg.edges)
        b = positive_int("bins", cfg.bins, minimum=2)
        if b % 2:
            raise InputError(f"--bins must be even (half the bins on each side of 0), got {b}")
        if not 0 <= positive_float("rtol", cfg.rtol, allow_zero=True) < 1:
            raise InputError(f"--rtol must lie in [0, 1), got {cfg.rtol!r}")
        positive_int("probes", cfg.probes, minimum=0)
        positive_int("lanczos", cfg.lanczos, minimum=2)
        cfg.boot.validate()
        cfg = replace(cfg, data=cfg.data.validate())
        return cfg


# ---------------------------------------------------------------------------
# One checkpoint
# ---------------------------------------------------------------------------

def _theta_size(params, *args, **kwargs) -> int:
    return sum(math.prod(leaf.shape) for leaf in jax.tree_util.tree_leaves(params))


@sized_jit(size=_theta_size, static_argnames=("model", "loss"))
def _factors(params, X, y, model, loss):
    """The factors (B, J, w) of ∇²L̂(θ) and L̂, in a program of their own: the decomposition that
    follows splits its head blocks over the devices when there are several, and these factors
    stay the one-device numbers bit for bit (docs/reliability.md, 'Sharding')."""
    return hessian_parts(params, X, y, model, loss), risk(params, X, y, model, loss)


@sized_jit(size=lambda B, *a: B.shape[0] * B.shape[1])
def _decompose(B, J, w):
    """The decomposed structure, λmin's certified enclosure, the certified lower edge L and an
    upper bound of λmax (for the auto edges)."""
    st = inertia.decompose(B, J, w)
    enc = inertia.enclose(st, "min")
    _, top = inertia.initial_bracket(st, "max")
    top = top + 2 * inertia.widening(st, top) + 1e-6 * st.scale
    return st, enc, lower_edge(st), top


def auto_edges(L: float, top: float, bins: int) -> np.ndarray:
    """``bins/2`` equal bins on [L, 0] and on [0, top] (0 an edge)."""
    half = bins // 2
    left = np.linspace(min(L, -1e-300), 0.0, half + 1)
    right = np.linspace(0.0, max(top, 1e-300), half + 1)
    return np.concatenate([left, right[1:]])


def _num(v):
    v = float(v)
    return v if math.isfinite(v) else None


def analyse_point(params, X, y, cfg: CensusConfig, H: int, seed: int, step: int, *, model, loss, keep: bool,
                  key=None) -> Point | Kept:
    """The census at one θ (leaves ``[H, ...]``) of ``model`` and ``loss``; with ``keep`` also the
    histogram and SLQ's estimate of it."""
    S, Lhat = _factors(params, X, y, model, loss)
    st, enc, L, top = _decompose(S.B, S.J, S.w)
    Lhat, rel = float(Lhat), parse_edges(cfg.edges)
    edges = None if rel is None else np.asarray(rel) * Lhat
    if edges is None or not np.all(np.diff(edges) > 0):   # auto, or L̂ underflowed to 0: relative edges collapse
        edges = auto_edges(float(L), float(top), cfg.bins)
    lam = np.asarray(st.lam)
    P, q = int(lam.size), cfg.data.dim ** 2
    h = histogram_of(st, edges, rtol=cfg.rtol)
    tlo, thi = _num(h.trace_lo), _num(h.trace_hi)
    ok = Lhat > 0 and tlo is not None and thi is not None
    lo, hi = (-thi / Lhat, -tlo / Lhat) if ok else (None, None)
    pt = Point(seed=seed, step=step, heads=H, P=P, p=P // H, q=q, n=int(X.shape[0]), bound=H * q, loss=Lhat,
               neg_B=int(np.sum(lam < 0)), neg_B_head_max=int(np.max(np.sum(lam.reshape(H, P // H) < 0, axis=1))),
               n_neg_weights=int(st.n_neg), valid=bool(st.valid), lambda_min_lo=_num(enc.lo),
               lambda_min_hi=_num(enc.hi), neg_lo=h.neg_lo, neg_hi=h.neg_hi, neg_exact=h.neg_lo == h.neg_hi,
               neg_frac_lo=h.neg_lo / P, neg_frac_hi=h.neg_hi / P, trace_lo=tlo, trace_hi=thi,
               trace_ok=h.trace_ok, num_counts=h.num_counts, bins_exact=int(np.sum(h.exact)),
               bins=int(h.exact.size), abs_trace_over_loss_lo=lo, abs_trace_over_loss_hi=hi,
               abs_trace_over_loss=0.5 * (lo + hi) if ok else None, diverged=False)
    if not keep:
        return pt
    hist = Histogram(edges.tolist(), h.counts_lo.tolist(), h.counts_hi.tolist(), h.exact.tolist(),
                     [h.under_lo, h.under_hi], [h.over_lo, h.over_hi])
    return Kept(*pt[:-1], hist, slq_record(params, X, y, edges, h, cfg, key, model, loss), False)


def slq_record(params, X, y, edges, h, cfg: CensusConfig, key, model, loss) -> Slq | NoSlq:
    """SLQ's estimate over the same edges and its error against the census (bins whose count
    is exact only)."""
    if cfg.probes == 0:
        return NoSlq(False, "--probes 0: SLQ not run")
    try:
        s = slq_histogram(params, X, y, edges, key=key, num_probes=cfg.probes, num_steps=cfg.lanczos,
                          model=model, loss=loss)
    except ImportError as e:
        return NoSlq(False, str(e))
    counts, sem, exact = np.asarray(s.counts), np.asarray(s.sem), np.asarray(h.exact)
    err = np.where(exact, counts - np.asarray(h.counts_lo), np.nan)
    z = np.where(exact & (sem > 0), np.abs(err) / np.where(sem > 0, sem, 1.0), np.nan)
    some = np.isfinite(err).any()
    neg_err = float(s.negative) - h.neg_lo if h.neg_lo == h.neg_hi else None
    neg_sem = float(s.negative_sem)
    return Slq(True, s.num_probes, s.num_steps, counts.tolist(), sem.tolist(), [_num(v) for v in err],
               [_num(v) for v in z], _num(np.nanmax(np.abs(err))) if some else None,
               _num(np.nansum(np.abs(err))) if some else None, float(s.negative), neg_sem, neg_err,
               abs(neg_err) / neg_sem if neg_err is not None and neg_sem > 0 else None)


# ---------------------------------------------------------------------------
# The sweep
# ---------------------------------------------------------------------------

def _run_heads(cfg: CensusConfig, pb: Problem, H: int, seeds, ck, progress=None) -> Unit:
    model, loss, X, y = pb
    th0 = batched_init(cfg.data, seeds, H, model)
    t = time.perf_counter()
    traj = runs(th0, X, y, cfg.gd.lr, steps=cfg.gd.steps, every=cfg.gd.every, model=model, loss=loss)
    params = jax.tree_util.tree_map(np.asarray, traj.params)
    finite = np.asarray(traj.finite)
    train_s, t = time.perf_counter() - t, time.perf_counter()
    records = []
    for si, s in enumerate(seeds):
        for c, step in enumerate(ck):
            if not finite[si, : step + 1].all():
                records.append(Diverged(s, step, H, True, int(np.argmin(finite[si]))))
            else:
                th = jax.tree_util.tree_map(lambda a: a[si, c], params)
                records.append(analyse_point(th, X[si], y[si], cfg, H, s, step, model=model, loss=loss,
                                             keep=c in (0, len(ck) - 1),
                                             key=jax.random.PRNGKey(1000 * s + c)))
            if progress:
                progress(f"H={H} seed={s} step={step}")
    return Unit(records, dict(train_s=train_s, census_s=time.perf_counter() - t))


def run(cfg: CensusConfig, progress=None, store=None) -> Summary:
    """The census sweep, one resumable unit per H; per H, the laws in H, the verdict."""
    cfg = cfg.validate()
    t0 = time.perf_counter()
    seeds = seed_list(cfg.seeds, cfg.seed0)
    ck = checkpoint_steps(cfg.gd.steps, cfg.gd.every)
    pb = resolve(cfg.data, seeds)
    units, _ = sweep(store, cfg.heads, lambda H: _run_heads(cfg, pb, H, seeds, ck, progress), Unit)
    records = [r for H in cfg.heads for r in units[H].records]
    width = width_laws(records, cfg, seeds, ck)
    judgement = judge([checkpoint(r) for r in records], cfg.data.model)
    return Summary(**judgement.fields(), records=records,
                   by_heads={H: summarize_heads(u.records, ck) for H, u in units.items()},
                   trace_slope=width.steps[ck[-1]].trace_slope, checkpoints=ck, seeds=seeds, width=width,
                   problem=dict(model=cfg.data.model, loss=cfg.data.loss, data=cfg.data.dataset),
                   slq_settings=SlqSettings(cfg.probes, cfg.lanczos),
                   timings={H: u.timings for H, u in units.items()}, wall_time_s=time.perf_counter() - t0)


def _mean(vals):
    return None if None in vals else float(np.mean(vals))


def _stats(vals) -> tuple | None:
    return None if None in vals else (float(np.mean(vals)), float(min(vals)), float(max(vals)))


def _columns(rs) -> Point:
    """The records ``rs`` as one :class:`Point` of tuples, field by field."""
    return Point(*(tuple(getattr(r, f) for r in rs) for f in Point._fields))


def summarize_heads(recs, ck) -> HeadsEntry:
    """Per checkpoint step, seed means over the non-diverged records; SLQ's errors at the kept
    steps; the largest N₋/(H·d²)."""
    ok = [r for r in recs if not r.diverged]
    steps = {}
    for step in ck:
        rs = [r for r in ok if r.step == step]
        if not rs:
            continue
        c, P = _columns(rs), rs[0].P
        e = Step(_mean(c.neg_frac_lo), _mean(c.neg_frac_hi), all(c.neg_exact), _mean(c.abs_trace_over_loss),
                 _mean(c.abs_trace_over_loss_lo), _mean(c.abs_trace_over_loss_hi), _mean(c.lambda_min_lo),
                 _mean(c.lambda_min_hi), _mean(c.loss), _mean(c.neg_B), _mean(c.neg_B) / P, rs[0].n / P)
        slq = [r.slq for r in rs if isinstance(r, Kept) and r.slq.available]
        if slq:
            errs = [s.negative_error for s in slq if s.negative_error is not None]
            zs = [s.negative_error_in_sem for s in slq if s.negative_error_in_sem is not None]
            e = SlqStep(*e, max((s.max_abs_error or 0.0) for s in slq), float(np.mean(errs)) if errs else None,
                        max(zs) if zs else None)
        steps[step] = e
    return HeadsEntry(ok[0].P if ok else None, ok[0].bound if ok else None, steps,
                      max((r.neg_hi / r.bound for r in ok), default=None))


def trace_slope(records, cfg: CensusConfig, seeds, step) -> TraceSlope | NoSlope | None:
    """Log-log slope of |tr₋|/L̂ at checkpoint ``step`` against H, bootstrap CI over seeds;
    None with fewer than two distinct H."""
    heads = sorted(set(cfg.heads))
    if len(heads) < 2:
        return None
    Y = np.full((len(seeds), len(heads)), np.nan)
    for r in records:
        if r.step == step and not r.diverged and r.abs_trace_over_loss is not None:
            Y[seeds.index(r.seed), heads.index(r.heads)] = r.abs_trace_over_loss
    if not np.all(np.isfinite(Y)) or np.any(Y <= 0):
        return NoSlope(None, None, "|tr₋|/L̂ missing or 0 at some (H, seed)", step, heads)
    return TraceSlope(*bootstrap_slope(np.asarray(heads, float), Y, **cfg.boot.kwargs()), step, heads,
                      Y.mean(axis=0).tolist())


def width_laws(records, cfg: CensusConfig, seeds, ck) -> Width:
    """Per checkpoint step, against H (docs/theory.md §3.6): seed stats of N₋/P, N₋(B)/P, n/P,
    |tr₋|/L̂ and λmin; the slope of |tr₋|/L̂ in H and per step of H."""
    heads = sorted(set(cfg.heads))
    d, T = cfg.data.dim, cfg.data.tokens
    steps = {}
    for step in ck:
        rs = {(r.heads, r.seed): r for r in records if r.step == step and not r.diverged}

        def col(f):
            return [_stats([f(rs[H, s]) if (H, s) in rs else None for s in seeds]) for H in heads]
        trace = col(lambda r: r.abs_trace_over_loss)
        steps[step] = WidthStep(
            col(lambda r: r.neg_frac_lo), col(lambda r: r.neg_frac_hi), col(lambda r: r.neg_B / r.P),
            col(lambda r: r.n / r.P), trace,
            col(lambda r: None if r.lambda_min_lo is None else 0.5 * (r.lambda_min_lo + r.lambda_min_hi)),
            trace_slope(records, cfg, seeds, step),
            step_slopes(heads, [np.nan if x is None else x[0] for x in trace]) if len(heads) > 1 else [])
    return Width(heads, d / (T + d), steps)


def checkpoint(r: Record) -> Checkpoint:
    """The :class:`Checkpoint` of one record (a diverged one has no counts)."""
    if r.diverged:
        return Checkpoint(r.heads, r.seed, r.step, diverged=True)
    return Checkpoint(r.heads, r.seed, r.step, False, r.valid, r.n_neg_weights, r.neg_lo, r.neg_hi, r.bound)


def judge(points: Sequence[Checkpoint], model: str) -> Judgement:
    """The rule of the module docstring (docs/theory.md §3.6), in this order: FAILED on a
    diverged checkpoint; INFORMATIONAL for a head model outside :data:`BOUND_MODELS`;
    INCONCLUSIVE when no checkpoint is judged (a valid structure with ℓ'' >= 0); FAILED when a
    judged certified count exceeds the bound (``neg_lo > H·d²``, the first such checkpoint
    named); INCONCLUSIVE when a bracket straddles it (``neg_hi > H·d²``) or a checkpoint is not
    judged; else PASSED, with the largest ``neg_hi/(H·d²)``."""
    diverged = sum(p.diverged for p in points)
    if diverged:
        return Judgement(Verdict.FAILED, f"{diverged} trajectory point(s) became non-finite")
    if model not in BOUND_MODELS:
        return Judgement(Verdict.INFORMATIONAL, f"N₋ <= H·d² is derived for softmax heads (linear in U), "
                                                f"not --model {model}: counts reported only")
    judged = [p for p in points if p.valid and p.n_neg_weights == 0]
    if not judged:
        return Judgement(Verdict.INCONCLUSIVE, "no checkpoint had a valid structure with ℓ'' >= 0")
    over = [p for p in judged if p.neg_lo > p.bound]
    if over:
        p = over[0]
        return Judgement(Verdict.FAILED, f"N₋ >= {p.neg_lo} > H·d² = {p.bound} at H={p.heads} "
                                         f"seed={p.seed} step={p.step} ({len(over)} checkpoint(s))")
    straddle = sum(p.neg_hi > p.bound for p in judged)
    if straddle or len(judged) < len(points):
        return Judgement(Verdict.INCONCLUSIVE, f"{straddle} bracket(s) straddle H·d², "
                                               f"{len(points) - len(judged)} checkpoint(s) not judged")
    worst = max(p.neg_hi / p.bound for p in judged)
    return Judgement(Verdict.PASSED, f"N₋ <= H·d² at all {len(judged)} checkpoints "
                                     f"(largest certified N₋/(H·d²) = {worst:.3g})")


# ---------------------------------------------------------------------------
# Presentation
# ---------------------------------------------------------------------------

def _bracket(lo, hi, digits=3):
    if lo is None or hi is None:
        return "-"
    return f"{lo:.{digits}g}" if lo == hi else f"[{lo:.{digits}g}, {hi:.{digits}g}]"


def _brackets(e: Step | None) -> list:
    """The certified N₋/P, |tr₋|/L̂ and λmin of one step, as the tables show them."""
    if e is None:
        return ["-"] * 3
    return [_bracket(e.neg_frac_lo, e.neg_frac_hi), _bracket(e.abs_trace_over_loss_lo, e.abs_trace_over_loss_hi),
            _bracket(e.lambda_min_lo, e.lambda_min_hi, 4)]


def report(summary: Summary) -> str:
    """Per H and checkpoint: N₋/P, |tr₋|/L̂, λmin, N₋(B)/(H·d²); SLQ's errors; the slope."""
    rows = []
    for H, s in summary.by_heads.items():
        for step, e in s.steps.items():
            slq = ((e.slq_negative_error, e.slq_negative_error_in_sem, e.slq_max_abs_error)
                   if isinstance(e, SlqStep) else (None,) * 3)
            rows.append([H, s.P, step, fmt(e.loss), *_brackets(e), fmt(e.neg_B / s.bound), *map(fmt, slq)])
    head = ["H", "P", "step", "L̂", "N₋/P", "|tr₋|/L̂", "λmin", "N₋(B)/Hd²", "SLQ ΔN₋", "|ΔN₋|/se", "SLQ max|Δbin|"]
    slq = summary.slq_settings
    out = [table(head, rows),
           "seed means; N₋/P, |tr₋|/L̂ and λmin are certified brackets (one number: exact or width below 3 digits); "
           + (f"SLQ: {slq.num_probes} probes × {slq.num_steps} Lanczos steps, at the first and last checkpoint, "
              "its errors against the exact counts (Δ = SLQ − exact)." if slq.num_probes else
              "SLQ: not run (--probes 0).")]
    sl = summary.trace_slope
    if isinstance(sl, NoSlope):
        out.append(f"slope of |tr₋|/L̂ against H: undefined ({sl.reason})")
    elif sl is not None:
        out.append(f"slope of |tr₋|/L̂ against H at step {sl.step}: {sl.slope:.3f}"
                   + (f" ({sl.level:.0%} CI [{sl.ci[0]:.3f}, {sl.ci[1]:.3f}], bootstrap over {sl.seeds} seeds)"
                      if sl.ci else " (no CI: one seed)"))
    for H, s in summary.by_heads.items():
        out.append(f"H={H}: largest certified N₋/(H·d²) = {fmt(s.max_neg_over_bound).strip()} (bound H·d² = "
                   f"{s.bound}, P = {s.P})")
    return "\n".join(out + width_lines(summary.width))


def _stat(x, digits=3):
    if not x:
        return "-"
    m, lo, hi = x
    return f"{m:.{digits}g}" if lo == hi else f"{m:.{digits}g} [{lo:.{digits}g}, {hi:.{digits}g}]"


def _slope_text(sl) -> str:
    if sl is None or sl.slope is None:
        return "undefined" + (f" ({sl.reason})" if isinstance(sl, NoSlope) else "")
    return f"{sl.slope:.3f}" + (f" [{sl.ci[0]:.3f}, {sl.ci[1]:.3f}]" if sl.ci else " (one seed)")


def width_lines(width: Width) -> list:
    """The laws in H (docs/theory.md §3.6): per checkpoint step and H, N₋/P (certified) beside
    N₋(B)/P and the sandwich width n/P; the slope of |tr₋|/L̂ in H with its CI, and per step."""
    if len(width.heads) < 2:
        return []
    rows = []
    for step, e in width.steps.items():
        for j, H in enumerate(width.heads):
            lo, hi = e.neg_frac_lo[j], e.neg_frac_hi[j]
            nf = _stat(lo) if lo == hi else f"[{_stat(lo)}, {_stat(hi)}]"
            rows.append([step, H, nf, _stat(e.neg_B_frac[j]), _stat(e.sandwich[j], 2),
                         _stat(e.abs_trace_over_loss[j]), _stat(e.lambda_min[j], 4)])
    out = [f"laws in H (docs/theory.md §3.6; seed mean [range]): N₋/P certified beside N₋(B)/P — the sandwich "
           f"N₋(B) − n <= N₋ <= N₋(B) gives both one limit; bound d/(T + d) = {width.bound:.3f}",
           table(["step", "H", "N₋/P", "N₋(B)/P", "n/P", "|tr₋|/L̂", "λmin"], rows)]
    for step, e in width.steps.items():
        out.append(f"step {step}: slope of |tr₋|/L̂ against H {_slope_text(e.trace_slope)}; per step of H: "
                   + " ".join("-" if v is None else f"{v:.2f}" for v in e.trace_step_slopes))
    return out


def headline(summary: Summary) -> str:
    """``18 checkpoints, N₋/P <= 0.12``."""
    top = max((r.neg_frac_hi for r in summary.records if not r.diverged), default=None)
    return f"{len(summary.records)} checkpoints, N₋/P <= {fmt(top).strip()}"


def section(summary: Summary) -> str:
    """REPORT.md: per H, the last checkpoint's N₋/P, |tr₋|/L̂ and λmin, and the slope."""
    rows = []
    for H, s in summary.by_heads.items():
        step = max(s.steps, default=None)
        rows.append([H, s.P, step, *_brackets(s.steps.get(step)), s.max_neg_over_bound])
    sl = summary.trace_slope
    tail = "" if not isinstance(sl, TraceSlope) or sl.slope is None else (
        f"\n\nslope of |tr₋|/L̂ against H: {sl.slope:.3f}, CI {None if sl.ci is None else list(sl.ci)}.")
    return md_table(["H", "P", "step", "N₋/P", "|tr₋|/L̂", "λmin", "max N₋/(H·d²)"], rows) + tail


def memory(cfg: CensusConfig) -> list:
    """GD of all seeds with the checkpoints kept, the structure at one checkpoint and one batch
    of thresholds (:func:`mhajax.curvature.census.batch_size`: the row weights of each and their
    temporaries, about four ``[k, P]``)."""
    d, S, H = cfg.data, cfg.seeds, max(mem.ints(cfg.heads))
    p = d.tokens * d.dim + d.dim ** 2
    return ([mem.data(S, d.n, d.tokens, d.dim)]
            + mem.gd(S, d.n, d.tokens, d.dim, H, p, num_checkpoints(cfg.gd.steps, cfg.gd.every), cfg.gd.steps)
            + mem.analysis(d.n, d.tokens, H, p, "inertia", 64, False)
            + [("a batch of thresholds' row weights [4, k, P]", (4, batch_size(H * p), H * p))])


run = check("census", config=CensusConfig, report=report, headline=headline, section=section,
            claim="N₋(∇²L̂) <= N₋(B) <= H·d² along GD (docs/theory.md §3.6; the paper claims nothing about the "
                  "full spectrum)", in_all=False, presets={"paper": PAPER, "width": WIDTH}, memory=memory,
            summary=Summary)(run)
