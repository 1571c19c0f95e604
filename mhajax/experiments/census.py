"""The whole Hessian spectrum along GD, counted exactly: N₋, tr(∇²L̂)₋, λmin and the histogram.

For each H, ``seeds`` GD trajectories; at every checkpoint θ the certified census of
docs/theory.md §3.5 (:mod:`mhajax.curvature.census`) counts the eigenvalues of ∇²L̂(θ) below
every histogram edge and 0, and brackets

* N₋ = #{λ < 0} (reported as N₋/P),
* tr(∇²L̂)₋ = Σ_{λ<0} λ, reported as |tr₋|/L̂ (the histogram's certified lower and upper sums),
* λmin (certified enclosure by inertia counts, §3.4),
* N₋(B), the negative eigenvalues of the block-diagonal data term B, and the bound H·d².

The histogram's edges are either ``auto`` (``bins/2`` equal bins on [L, 0] and on
[0, λ̄max], L a certified lower bound of λmin, λ̄max a certified upper bound of λmax) or given
in units of L̂(θ). At the first and last checkpoints the histogram is kept, and SLQ
(:mod:`mhajax.curvature.slq`, ``probes`` × ``lanczos`` steps) estimates the same bins: its
error per bin against the exact counts, in counts and in its own standard errors, and its
error in N₋ (``--probes 0``: no SLQ). Across H, at every checkpoint step (``width``): N₋/P beside
N₋(B)/P, the width n/P of the sandwich N₋(B) − n <= N₋ <= N₋(B) (so both have one limit as H
grows) and the bound d/(T + d); the log-log slope of |tr₋|/L̂ against H with a bootstrap CI over
seeds (:mod:`mhajax.analysis.rates`) and its slope over each step of the grid (docs/theory.md §3.6).

**The rule** (docs/theory.md §3.6). The paper claims nothing about the full spectrum; the
bound judged is the project's own: for softmax heads (Φ linear in every U_h) and a loss with
ℓ'' >= 0, N₋(∇²L̂) <= N₋(B) <= H·d². FAILED when a trajectory diverges or a certified count
exceeds H·d² (lo_count > H·d²); INCONCLUSIVE when a bracket straddles it; INFORMATIONAL for a
head model the bound is not derived for; else PASSED. The slope and the SLQ errors are
reported, not judged. The check is not part of ``verify all``.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import ClassVar, NamedTuple, Sequence

import jax
import numpy as np

from mhajax.analysis.rates import bootstrap_slope, step_slopes
from mhajax.curvature import inertia
from mhajax.curvature.census import batch_size, histogram_of, lower_edge
from mhajax.curvature.operators import hessian_parts
from mhajax.curvature.slq import slq_histogram
from mhajax.data.seeds import seed_list
from mhajax.errors import InputError
from mhajax.experiments.base import batched_data, batched_init, params_per_head
from mhajax.experiments.configs import BootConfig, Config, DataConfig, GDConfig, option, sub
from mhajax.experiments.registry import check
from mhajax.losses import risk
from mhajax.runtime import memory as mem
from mhajax.runtime.format import fmt, md_table, table
from mhajax.runtime.resume import load_or_run
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


class Checkpoint(NamedTuple):
    """What the judge reads of one checkpoint record: where it is (H, seed, GD step), whether
    the trajectory diverged, whether the structure is valid (``valid``) with ℓ'' >= 0 at every
    sample (``n_neg_weights`` = 0), the certified bracket ``neg_lo <= N₋ <= neg_hi`` and the
    bound H·d²."""

    heads: int
    seed: int
    step: int
    diverged: bool = False
    valid: bool = False
    n_neg_weights: int = 0
    neg_lo: int = 0
    neg_hi: int = 0
    bound: int = 0


def parse_edges(value) -> tuple | None:
    """``None`` for ``auto``; else the edges as a tuple of floats (units of L̂), or an
    :class:`InputError` naming the bad value: empty, not a number, not finite, not strictly
    increasing, fewer than two."""
    if isinstance(value, str):
        if value.strip().lower() == "auto":
            return None
        parts = [p.strip() for p in value.split(",") if p.strip()]
    else:
        parts = list(value)
    if not parts:
        raise InputError("--edges is empty: give 'auto' or at least two comma-separated numbers")
    vals = []
    for i, p in enumerate(parts):
        try:
            v = float(p)
        except (TypeError, ValueError):
            raise InputError(f"--edges[{i}] = {p!r} is not a number") from None
        if not math.isfinite(v):
            raise InputError(f"--edges[{i}] = {p!r} is not finite")
        vals.append(v)
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


def analyse_point(params, X, y, cfg: CensusConfig, H: int, *, keep: bool, key=None) -> dict:
    """The census at one θ (leaves ``[H, ...]``): a JSON-ready record; with ``keep`` also the
    histogram and SLQ's estimate of it."""
    model, loss = cfg.data.head_model(), cfg.data.loss_fn()
    S, Lhat = _factors(params, X, y, model, loss)
    st, enc, L, top = _decompose(S.B, S.J, S.w)
    Lhat = float(Lhat)
    rel = parse_edges(cfg.edges)
    edges = auto_edges(float(L), float(top), cfg.bins) if rel is None else np.asarray(rel) * Lhat
    if rel is not None and not np.all(np.diff(edges) > 0):
        edges = None                       # L̂ underflowed to 0: relative edges collapse
    lam = np.asarray(st.lam)
    P = int(lam.size)
    p = P // H
    q = cfg.data.dim ** 2
    neg_B = int(np.sum(lam < 0))
    rec = dict(heads=H, P=P, p=p, q=q, n=int(X.shape[0]), bound=H * q, loss=Lhat, neg_B=neg_B,
               neg_B_head_max=int(np.max(np.sum(lam.reshape(H, p) < 0, axis=1))),
               n_neg_weights=int(st.n_neg), valid=bool(st.valid),
               lambda_min_lo=_num(enc.lo), lambda_min_hi=_num(enc.hi))
    if edges is None:
        edges = auto_edges(float(L), float(top), cfg.bins)
    h = histogram_of(st, edges, rtol=cfg.rtol)
    tlo, thi = _num(h.trace_lo), _num(h.trace_hi)
    rec.update(neg_lo=h.neg_lo, neg_hi=h.neg_hi, neg_exact=h.neg_lo == h.neg_hi,
               neg_frac_lo=h.neg_lo / P, neg_frac_hi=h.neg_hi / P,
               trace_lo=tlo, trace_hi=thi, trace_ok=h.trace_ok,
               num_counts=h.num_counts, bins_exact=int(np.sum(h.exact)), bins=int(h.exact.size))
    ok = Lhat > 0 and tlo is not None and thi is not None
    lo, hi = (-thi / Lhat, -tlo / Lhat) if ok else (None, None)
    rec.update(abs_trace_over_loss_lo=lo, abs_trace_over_loss_hi=hi,
               abs_trace_over_loss=0.5 * (lo + hi) if ok else None)
    if keep:
        rec.update(histogram=dict(edges=edges.tolist(), counts_lo=h.counts_lo.tolist(),
                                  counts_hi=h.counts_hi.tolist(), exact=h.exact.tolist(),
                                  under=[h.under_lo, h.under_hi], over=[h.over_lo, h.over_hi]),
                   slq=slq_record(params, X, y, edges, h, cfg, key))
    return rec


def slq_record(params, X, y, edges, h, cfg: CensusConfig, key) -> dict:
    """SLQ's estimate over the same edges and its error against the census (bins whose
    count is exact only); ``available`` False (with the reason) without matfree or with
    ``--probes 0``."""
    if cfg.probes == 0:
        return dict(available=False, reason="--probes 0: SLQ not run")
    try:
        s = slq_histogram(params, X, y, edges, key=key, num_probes=cfg.probes, num_steps=cfg.lanczos,
                          model=cfg.data.head_model(), loss=cfg.data.loss_fn())
    except ImportError as e:
        return dict(available=False, reason=str(e))
    counts, sem = np.asarray(s.counts), np.asarray(s.sem)
    exact = np.asarray(h.exact)
    err = np.where(exact, counts - np.asarray(h.counts_lo), np.nan)
    z = np.where(exact & (sem > 0), np.abs(err) / np.where(sem > 0, sem, 1.0), np.nan)
    neg_err = float(s.negative) - h.neg_lo if h.neg_lo == h.neg_hi else None
    return dict(available=True, num_probes=s.num_probes, num_steps=s.num_steps, counts=counts.tolist(),
                sem=sem.tolist(), error=[_num(v) if np.isfinite(v) else None for v in err],
                error_in_sem=[_num(v) if np.isfinite(v) else None for v in z],
                max_abs_error=_num(np.nanmax(np.abs(err))) if np.isfinite(err).any() else None,
                l1_error=_num(np.nansum(np.abs(err))) if np.isfinite(err).any() else None,
                negative=float(s.negative), negative_sem=float(s.negative_sem), negative_error=neg_err,
                negative_error_in_sem=(abs(neg_err) / float(s.negative_sem)
                                       if neg_err is not None and float(s.negative_sem) > 0 else None))


# ---------------------------------------------------------------------------
# The sweep
# ---------------------------------------------------------------------------

def _run_heads(cfg: CensusConfig, H: int, X, y, seeds, ck, progress=None) -> dict:
    model, loss = cfg.data.head_model(), cfg.data.loss_fn()
    th0 = batched_init(cfg.data, seeds, H)
    t = time.perf_counter()
    traj = runs(th0, X, y, cfg.gd.lr, steps=cfg.gd.steps, every=cfg.gd.every, model=model, loss=loss)
    params = jax.tree_util.tree_map(np.asarray, traj.params)
    finite = np.asarray(traj.finite)
    tm = dict(train_s=time.perf_counter() - t)
    t = time.perf_counter()
    records = []
    C = len(ck)
    for si, s in enumerate(seeds):
        for c, step in enumerate(ck):
            rec = dict(seed=s, step=step)
            if not finite[si, : step + 1].all():
                rec.update(heads=H, diverged=True, diverged_at_step=int(np.argmin(finite[si])))
            else:
                th = jax.tree_util.tree_map(lambda a: a[si, c], params)
                key = jax.random.PRNGKey(1000 * s + c)
                rec.update(analyse_point(th, X[si], y[si], cfg, H, keep=c in (0, C - 1), key=key),
                           diverged=False)
            records.append(rec)
            if progress:
                progress(f"H={H} seed={s} step={step}")
    tm["census_s"] = time.perf_counter() - t
    return dict(records=records, timings=tm, P=H * params_per_head(th0))


def run(cfg: CensusConfig, progress=None, store=None) -> dict:
    """Run the census sweep; returns the summary dict (records, per-H table, slope, verdict)."""
    cfg = cfg.validate()
    t0 = time.perf_counter()
    seeds = seed_list(cfg.seeds, cfg.seed0)
    ck = checkpoint_steps(cfg.gd.steps, cfg.gd.every)
    X, y = batched_data(cfg.data, seeds)
    records, timings, by_heads, done = [], {}, {}, {}
    for H in cfg.heads:
        res = load_or_run(store, f"heads={H}", lambda H=H: _run_heads(cfg, H, X, y, seeds, ck, progress), memo=done)
        records += res["records"]
        timings[H] = res["timings"]
        by_heads[H] = summarize_heads(res["records"], H, ck)
    slope = trace_slope(records, cfg, seeds, ck[-1])
    judgement = judge([checkpoint(r) for r in records], cfg.data.model)
    return dict(**judgement.fields(), records=records, by_heads=by_heads, trace_slope=slope, checkpoints=ck, seeds=seeds,
                width=width_laws(records, cfg, seeds, ck),
                problem=dict(model=cfg.data.model, loss=cfg.data.loss, data=cfg.data.dataset),
                slq_settings=dict(num_probes=cfg.probes, num_steps=cfg.lanczos),
                timings=timings, wall_time_s=time.perf_counter() - t0)


def summarize_heads(recs, H: int, ck) -> dict:
    """Per H and checkpoint step: seed means of N₋/P (both ends), |tr₋|/L̂, λmin (enclosure
    ends), N₋(B), and the largest N₋/(H·d²); SLQ's errors at the kept checkpoints."""
    ok = [r for r in recs if not r.get("diverged")]
    steps = {}

    def mean(rs, k):
        v = [r[k] for r in rs if r.get(k) is not None]
        return float(np.mean(v)) if v and len(v) == len(rs) else None
    for step in ck:
        rs = [r for r in ok if r["step"] == step]
        if not rs:
            continue
        neg_B, P = mean(rs, "neg_B"), rs[0]["P"]
        e = dict(neg_frac_lo=mean(rs, "neg_frac_lo"), neg_frac_hi=mean(rs, "neg_frac_hi"),
                 neg_exact=all(r["neg_exact"] for r in rs), abs_trace_over_loss=mean(rs, "abs_trace_over_loss"),
                 abs_trace_over_loss_lo=mean(rs, "abs_trace_over_loss_lo"),
                 abs_trace_over_loss_hi=mean(rs, "abs_trace_over_loss_hi"),
                 lambda_min_lo=mean(rs, "lambda_min_lo"), lambda_min_hi=mean(rs, "lambda_min_hi"),
                 loss=mean(rs, "loss"), neg_B=neg_B, neg_B_frac=neg_B / P if neg_B is not None else None,
                 sandwich=rs[0].get("n", 0) / P)
        slq = [r["slq"] for r in rs if r.get("slq") and r["slq"].get("available")]
        if slq:
            errs = [s["negative_error"] for s in slq if s["negative_error"] is not None]
            zs = [s["negative_error_in_sem"] for s in slq if s["negative_error_in_sem"] is not None]
            e.update(slq_max_abs_error=max((s["max_abs_error"] or 0.0) for s in slq),
                     slq_negative_error=float(np.mean(errs)) if errs else None,
                     slq_negative_error_in_sem=max(zs) if zs else None)
        steps[step] = e
    fr = [r["neg_hi"] / r["bound"] for r in ok]
    return dict(P=ok[0]["P"] if ok else None, bound=ok[0]["bound"] if ok else None, steps=steps,
                max_neg_over_bound=max(fr) if fr else None)


def trace_slope(records, cfg: CensusConfig, seeds, step) -> dict | None:
    """Log-log slope of |tr₋|/L̂ at checkpoint ``step`` against H, bootstrap CI over seeds;
    None with fewer than two distinct H, a reason when a value is missing or not positive."""
    heads = sorted(set(cfg.heads))
    if len(heads) < 2:
        return None
    Y = np.full((len(seeds), len(heads)), np.nan)
    for r in records:
        if r.get("step") == step and not r.get("diverged") and r.get("abs_trace_over_loss") is not None:
            Y[seeds.index(r["seed"]), heads.index(r["heads"])] = r["abs_trace_over_loss"]
    if not np.all(np.isfinite(Y)) or np.any(Y <= 0):
        return dict(slope=None, ci=None, reason="|tr₋|/L̂ missing or 0 at some (H, seed)", step=step, heads=heads)
    out = bootstrap_slope(np.asarray(heads, float), Y, **cfg.boot.kwargs())
    out.update(step=step, heads=heads, mean=Y.mean(axis=0).tolist())
    return out


def width_laws(records, cfg: CensusConfig, seeds, ck) -> dict:
    """Per checkpoint step, against H (docs/theory.md §3.6, reported): the seed mean and range of
    the certified N₋/P (both bracket ends) and of N₋(B)/P, the sandwich width n/P, the bound
    d/(T + d); the slope of |tr₋|/L̂ in H with a bootstrap CI over seeds and its slope over each
    step of the grid."""
    heads = sorted(set(cfg.heads))
    d, T = cfg.data.dim, cfg.data.tokens
    steps = {}
    for step in ck:
        rs = {(r["heads"], r["seed"]): r for r in records if r.get("step") == step and not r.get("diverged")}

        def col(f):
            return [[f(rs[(H, s)]) if (H, s) in rs else None for s in seeds] for H in heads]

        def stats(vals):
            v = [x for x in vals if x is not None]
            return [float(np.mean(v)), float(min(v)), float(max(v))] if v and len(v) == len(vals) else None
        trace = [stats(v) for v in col(lambda r: r.get("abs_trace_over_loss"))]
        e = dict(neg_frac_lo=[stats(v) for v in col(lambda r: r["neg_frac_lo"])],
                 neg_frac_hi=[stats(v) for v in col(lambda r: r["neg_frac_hi"])],
                 neg_B_frac=[stats(v) for v in col(lambda r: r["neg_B"] / r["P"])],
                 sandwich=[stats(v) for v in col(lambda r: r.get("n", 0) / r["P"])],
                 abs_trace_over_loss=trace,
                 lambda_min=[stats(v) for v in col(lambda r: None if r.get("lambda_min_lo") is None
                                                      else 0.5 * (r["lambda_min_lo"] + r["lambda_min_hi"]))],
                 trace_slope=trace_slope(records, cfg, seeds, step))
        tr = [x[0] if x else None for x in trace]
        e["trace_step_slopes"] = (step_slopes(heads, [np.nan if v is None else v for v in tr])
                                  if len(heads) > 1 else [])
        steps[step] = e
    return dict(heads=heads, bound=d / (T + d), steps=steps)


def checkpoint(rec) -> Checkpoint:
    """The :class:`Checkpoint` of one JSON record (a diverged one has no counts)."""
    if rec.get("diverged"):
        return Checkpoint(rec["heads"], rec["seed"], rec["step"], diverged=True)
    return Checkpoint(rec["heads"], rec["seed"], rec["step"], False, rec["valid"], rec["n_neg_weights"],
                      rec["neg_lo"], rec["neg_hi"], rec["bound"])


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
    if lo == hi:
        return f"{lo:.{digits}g}"
    return f"[{lo:.{digits}g}, {hi:.{digits}g}]"


def report(summary) -> str:
    """Per H and checkpoint: N₋/P, |tr₋|/L̂, λmin, N₋(B)/(H·d²); SLQ's errors; the slope."""
    rows = []
    for H, s in summary["by_heads"].items():
        for step, e in s["steps"].items():
            rows.append([H, s["P"], step, fmt(e["loss"]), _bracket(e["neg_frac_lo"], e["neg_frac_hi"]),
                         _bracket(e["abs_trace_over_loss_lo"], e["abs_trace_over_loss_hi"]),
                         _bracket(e["lambda_min_lo"], e["lambda_min_hi"], 4),
                         fmt(e["neg_B"] / s["bound"] if e["neg_B"] is not None else None),
                         fmt(e.get("slq_negative_error")), fmt(e.get("slq_negative_error_in_sem")),
                         fmt(e.get("slq_max_abs_error"))])
    head = ["H", "P", "step", "L̂", "N₋/P", "|tr₋|/L̂", "λmin", "N₋(B)/Hd²", "SLQ ΔN₋", "|ΔN₋|/se", "SLQ max|Δbin|"]
    slq = summary["slq_settings"]
    out = [table(head, rows),
           "seed means; N₋/P, |tr₋|/L̂ and λmin are certified brackets (one number: exact or width below 3 digits); "
           + (f"SLQ: {slq['num_probes']} probes × {slq['num_steps']} Lanczos steps, at the first and last checkpoint, "
              "its errors against the exact counts (Δ = SLQ − exact)." if slq["num_probes"] else
              "SLQ: not run (--probes 0).")]
    sl = summary.get("trace_slope")
    if sl:
        if sl.get("slope") is None:
            out.append(f"slope of |tr₋|/L̂ against H: undefined ({sl.get('reason')})")
        else:
            ci = sl.get("ci")
            out.append(f"slope of |tr₋|/L̂ against H at step {sl['step']}: {sl['slope']:.3f}"
                       + (f" ({sl['level']:.0%} CI [{ci[0]:.3f}, {ci[1]:.3f}], bootstrap over {sl['seeds']} seeds)"
                          if ci else " (no CI: one seed)"))
    for H, s in summary["by_heads"].items():
        out.append(f"H={H}: largest certified N₋/(H·d²) = {fmt(s['max_neg_over_bound']).strip()} (bound H·d² = "
                   f"{s['bound']}, P = {s['P']})")
    return "\n".join(out + width_lines(summary.get("width")))


def _stat(x, digits=3):
    if not x:
        return "-"
    m, lo, hi = x
    return f"{m:.{digits}g}" if lo == hi else f"{m:.{digits}g} [{lo:.{digits}g}, {hi:.{digits}g}]"


def _slope_text(sl) -> str:
    if not sl or sl.get("slope") is None:
        return "undefined" + (f" ({sl['reason']})" if sl and sl.get("reason") else "")
    ci = sl.get("ci")
    return f"{sl['slope']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else " (one seed)")


def width_lines(width) -> list:
    """The laws in H (docs/theory.md §3.6): per checkpoint step and H, N₋/P (certified) beside
    N₋(B)/P and the sandwich width n/P; the slope of |tr₋|/L̂ in H with its CI, and per step."""
    if not width or len(width.get("heads", [])) < 2:
        return []
    rows = []
    for step, e in width["steps"].items():
        for j, H in enumerate(width["heads"]):
            lo, hi = e["neg_frac_lo"][j], e["neg_frac_hi"][j]
            nf = _stat(lo) if lo == hi else f"[{_stat(lo)}, {_stat(hi)}]"
            rows.append([step, H, nf, _stat(e["neg_B_frac"][j]), _stat(e["sandwich"][j], 2),
                         _stat(e["abs_trace_over_loss"][j]), _stat(e["lambda_min"][j], 4)])
    out = [f"laws in H (docs/theory.md §3.6; seed mean [range]): N₋/P certified beside N₋(B)/P — the sandwich "
           f"N₋(B) − n <= N₋ <= N₋(B) gives both one limit; bound d/(T + d) = {width['bound']:.3f}",
           table(["step", "H", "N₋/P", "N₋(B)/P", "n/P", "|tr₋|/L̂", "λmin"], rows)]
    for step, e in width["steps"].items():
        out.append(f"step {step}: slope of |tr₋|/L̂ against H {_slope_text(e['trace_slope'])}; per step of H: "
                   + " ".join("-" if v is None else f"{v:.2f}" for v in e["trace_step_slopes"]))
    return out


def headline(summary) -> str:
    """``18 checkpoints, N₋/P <= 0.12``."""
    ok = [r for r in summary["records"] if not r.get("diverged")]
    top = max((r["neg_frac_hi"] for r in ok), default=None)
    return f"{len(summary['records'])} checkpoints, N₋/P <= {fmt(top).strip()}"


def section(summary) -> str:
    """REPORT.md: per H, the last checkpoint's N₋/P, |tr₋|/L̂ and λmin, and the slope."""
    rows = []
    for H, s in summary["by_heads"].items():
        step = max(s["steps"], key=lambda k: int(k)) if s["steps"] else None
        e = s["steps"].get(step, {})
        rows.append([H, s["P"], step, _bracket(e.get("neg_frac_lo"), e.get("neg_frac_hi")),
                     _bracket(e.get("abs_trace_over_loss_lo"), e.get("abs_trace_over_loss_hi")),
                     _bracket(e.get("lambda_min_lo"), e.get("lambda_min_hi"), 4), s["max_neg_over_bound"]])
    sl = summary.get("trace_slope") or {}
    tail = ""
    if sl.get("slope") is not None:
        tail = f"\n\nslope of |tr₋|/L̂ against H: {sl['slope']:.3f}, CI {sl.get('ci')}."
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


check("census", config=CensusConfig, report=report, headline=headline, section=section,
      claim="N₋(∇²L̂) <= N₋(B) <= H·d² along GD (docs/theory.md §3.6; the paper claims nothing about the "
            "full spectrum)", in_all=False, presets={"paper": PAPER, "width": WIDTH}, memory=memory)(run)
