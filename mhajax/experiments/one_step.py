"""The one-step experiment behind ``python -m verify one-step`` (docs/theory.md §11.1, §15.5).

What the paper states about the tokenized mixture: after a single gradient step from a
random initialization the data are NTK-separable, with a margin that then sets the rates.
For each start θ₋₁ (``--starts``), each n of an n-sweep (``--ns``) and each seed::

    θ₀ = θ₋₁ − η₀ S ∇L̂(θ₋₁)        (S = per-head signs, identity unless "zero-signs")
    g_i = ∇_θ Φ(θ₀; X_i) [P],  γ = certified NTK margin (Wolfe),  γ̄ = γ / max_i ||g_i||

on the training set drawn at noise σ (``--sigma``) and, the *noiseless sweep*, on the same
draw with σ = 0 (same PRNG key: the same labels, positions and clusters). The verdict
judges, for every start run, at its own η₀ (``--lr-zero``, ``--lr-random``):

* (a) the features at θ₀ are certified NTK-separable on every (n, seed) at noise σ;
* (b) γ̄ does not shrink with n: the log-log slope of the seed-mean γ̄ against n, with a
  bootstrap CI over seeds, lies above τ = −0.1 (:data:`~mhajax.analysis.finite_sample.SLOPE_TOLERANCE`,
  stated before looking) — (b1) on the noiseless sweep, and (b2) at noise σ once the
  finite-sample effect is divided out: the *excess slope* of γ̄/γ̄_pred, with the prediction
  (P) ``γ̄_pred(n) = (γ₀ − σ s_w a_n)/(G₀ + σ s_g a_n)`` of
  :mod:`mhajax.analysis.finite_sample` (γ₀, G₀: raw margin and largest feature norm of the
  noiseless sweep at the largest n; s_w, s_g: per-unit-σ spreads of the margins along w* and
  of the feature norms between the noisy and the noiseless draw, at the noisy θ₀ of the
  largest n). The raw slope at σ and the predicted one are printed beside it;
* (c) the initialization condition ``max_i |Φ(θ₀; X_i)| <= C·log n``, C = 1
  (:data:`INIT_CONST`), on every (n, seed).

A part is *violated* (FAILED) when it fails with certainty: a margin certified 0, a slope
CI entirely below τ, or the condition broken; *unresolved* (INCONCLUSIVE) when a margin is
undecided or a CI contains τ. Starts: ``zero`` (U = W = 0: the step moves U only, by the
same amount in every head), ``random-u`` (W = 0, U ~ N(0, u_scale²): the paper's random
initialization) and ``zero-signs`` (zero, with a random sign per head's step: the same
Gram matrix as ``zero``). Why both defaults are judged, each at its η₀: θ₋₁ = 0 at η₀ = 10
makes θ₀ the product of the step alone (at η₀ → 0 the NTK is mean pooling) and keeps (c) with
room; random U at η₀ = 1 is the paper's literal start at the largest decade of η₀ where (c)
holds with C = 1 (at η₀ = 10 it needs C ≈ 1.15 at n = 64).

*Comparison, not a claim* (docs/theory.md §11.1): the linear max-margins on mean-pooled and on
flattened tokens (:func:`mhajax.analysis.ntk.linear_margins`) of the same noisy draw, and
``γ̄_attn / max(γ̄_mean, γ̄_flat)`` per (start, n, seed); reported, never in the verdict.

Other data models: ``sparse`` runs the same sweep (it has a σ); ``npz`` has no noise knob,
so only the raw slope is reported. Off the tokenized mixture the result is INFORMATIONAL.
A start at which every NTK feature vanishes is refused (:func:`mhajax.analysis.ntk.dead_point_reason`).

Resumable: each n is one unit (``n=…``) of a :class:`mhajax.runtime.resume.ProgressStore`.
One compile per n (η₀, the start and the data values are traced); the margins are n×n
problems solved on the host.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from functools import partial
from typing import ClassVar, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from mhajax.analysis.finite_sample import (HOLDS, SLOPE_TOLERANCE, UNDEFINED, VIOLATED, excess_slope,
                                           n_slope, paired_spreads, predicted_margin)
from mhajax.analysis.margin import GAP_TOL, hard_margin
from mhajax.analysis.ntk import dead_point_reason, linear_margins, one_step, random_head_signs
from mhajax.curvature.operators import per_sample_jacobian
from mhajax.data.seeds import seed_list, stream_keys
from mhajax.errors import InputError
from mhajax.experiments.base import batched_data, batched_init
from mhajax.experiments.configs import BootConfig, Config, DataConfig, option, sub
from mhajax.experiments.registry import check
from mhajax.losses import risk
from mhajax.models.base import head_size, output
from mhajax.runtime import memory as mem
from mhajax.runtime.format import fmt, fmt_ci, md_table, table
from mhajax.runtime.io import to_jsonable
from mhajax.runtime.resume import load_or_run
from mhajax.validate import parse_list, positive_float, positive_int
from mhajax.verdict import Judgement, Verdict

STARTS = ("zero", "random-u", "zero-signs")
#: C of the initialization condition max_i |Φ(θ₀; X_i)| <= C·log n (stated, not tuned)
INIT_CONST = 1.0
TIE_RTOL = 1e-9  # γ̄_attn within this relative distance of γ̄_lin counts as a tie (comparison)
NOISY_DATA = ("mixture", "sparse")  # data models with a noise knob σ (a noiseless sweep exists)

#: which starts the verdict uses, and why (printed and stored in summary.json)
START_CHOICE = ("The verdict judges every start run, each at its η₀: θ₋₁ = 0 (θ₀ is made by the step alone; its "
                "features are permutation-invariant, so the noiseless margin reaches its population value early) "
                "and W = 0, U random (the paper's random initialization, at the largest η₀ decade where (c) holds "
                "with C = 1).")

#: the paper-scale sizes: n = 64…4096, one per doubling, 8 seeds; also the defaults (over
#: n <= 512 with 4 seeds the slope's CI cannot decide the claim either way: docs/results.md)
PAPER = {"ns": (64, 128, 256, 512, 1024, 2048, 4096), "seeds": 8}


@dataclass(frozen=True)
class OneStepConfig(Config):
    """One GD step θ₀ = θ₋₁ − η₀ S ∇L̂(θ₋₁) per (start, n, seed); certified NTK margins at θ₀
    at noise σ and noiseless, the initialization condition, and the linear margins beside them."""

    ns: tuple = option((64, 128, 256, 512, 1024, 2048, 4096), "comma-separated training-set sizes n of the sweep, "
                                            "increasing, >= 2, at least 3 (the slope fit)", kind="list",
                 sizes="train")
    heads: int = option(4, "number of heads H")
    starts: tuple = option(("zero", "random-u"), "starts θ₋₁, each judged at its η₀: 'zero' (U=W=0), "
                                                 "'random-u' (W=0, U ~ N(0, u_scale²)), 'zero-signs' (U=W=0, "
                                                 "head h's step times a random sign)", kind="list")
    lr_zero: float = option(10.0, "first step η₀ from θ₋₁ = 0 ('zero', 'zero-signs')")
    lr_random: float = option(1.0, "first step η₀ from random U ('random-u')")
    seeds: int = option(8, "data sets / initializations per n (>= 2: the slope CI is over seeds)")
    seed0: int = option(0, "first seed")
    boot: BootConfig = sub(BootConfig)
    data: DataConfig = sub(DataConfig)
    EXCLUDE: ClassVar[tuple] = ("data.n", "boot.log_power")

    def validate(self):
        """The validated config, a new one (lists parsed, names normalized); an
        :class:`InputError` names the first bad option."""
        cfg = replace(self, ns=tuple(parse_list("--ns", self.ns, "int", minimum=2, increasing=True,
                                                min_len=3)))
        positive_int("heads", cfg.heads)
        cfg = replace(cfg, starts=tuple(parse_list("--starts", cfg.starts, "name", choices=STARTS)))
        if len(set(cfg.starts)) != len(cfg.starts):
            raise InputError(f"--starts lists a start twice: {','.join(cfg.starts)}")
        positive_float("lr_zero", cfg.lr_zero)
        positive_float("lr_random", cfg.lr_random)
        seed_list(cfg.seeds, cfg.seed0)
        positive_int("seeds", cfg.seeds, minimum=2)
        cfg.boot.validate()
        cfg = replace(cfg, data=replace(cfg.data, n=max(cfg.ns)).validate())
        d = cfg.data
        for start in cfg.starts:
            why = dead_point_reason(d.head_model(), d.tokens, d.dim, u_scale=d.u_scale,
                                    w_scale=d.w_scale, zero=start != "random-u")
            if why:
                raise InputError(why + (f" (--starts {start}); use --starts random-u" if start != "random-u" else ""))
        return cfg

    def lr(self, start: str) -> float:
        """η₀ of ``start``."""
        return self.lr_random if start == "random-u" else self.lr_zero

    def judged(self) -> bool:
        """Whether the paper's claim applies (tokenized-mixture data); else informational."""
        return self.data.dataset == "mixture"

    def noiseless(self) -> bool:
        """Whether a separate noiseless sweep runs (a data model with σ, and σ > 0)."""
        return self.data.dataset in NOISY_DATA and self.data.sigma > 0


# ---------------------------------------------------------------------------
# One n: the step, the features, the margins
# ---------------------------------------------------------------------------

@partial(jax.jit, static_argnames=("model", "loss", "clean"))
def step_features(params, X, Xc, y, lr, signs, model, loss, clean: bool):
    """For seeds (leading axis S of ``params``, ``X``, ``Xc [S, n, T, d]``, ``y [S, n]``,
    ``signs [S, H]``): θ₀ = one step on X and its features ``G [S, n, P]``, ``max_i |Φ(θ₀)| [S]``,
    ``L̂(θ₀) [S]``; with ``clean``, also the features of the noiseless draw ``Xc`` at the same
    θ₀ (``Gx``, the paired draw of (P)) and, at θ₀c = one step on Xc, ``Gc`` and ``max|Φ(θ₀c)|``."""
    def per_seed(p, Xs, Xcs, ys, s):
        p0 = one_step(p, Xs, ys, lr, s, model, loss)
        out = dict(G=per_sample_jacobian(p0, Xs, model), phi=jnp.max(jnp.abs(output(p0, Xs, model))),
                   loss0=risk(p0, Xs, ys, model, loss))
        if clean:
            p0c = one_step(p, Xcs, ys, lr, s, model, loss)
            out.update(Gx=per_sample_jacobian(p0, Xcs, model), Gc=per_sample_jacobian(p0c, Xcs, model),
                       phic=jnp.max(jnp.abs(output(p0c, Xcs, model))))
        return out
    return jax.vmap(per_seed)(params, X, Xc, y, signs)


def initial_params(cfg: OneStepConfig, seeds, start: str):
    """``(θ₋₁ [S], signs [S, H])`` of ``start`` (independent of n: the same θ₋₁ at every n)."""
    S, d, H = len(seeds), cfg.data, cfg.heads
    th = batched_init(d, seeds, H)  # the model's own initializer (stream 1)
    if start == "random-u":
        return th, jnp.ones((S, H))
    th = jax.tree_util.tree_map(jnp.zeros_like, th)
    if start == "zero":
        return th, jnp.ones((S, H))
    keys = stream_keys(seeds, 3)  # a fourth stream: the head signs
    return th, jax.vmap(lambda k: random_head_signs(k, H))(keys)


def _margin_record(m) -> dict:
    return dict(gamma=m.gamma, gamma_bar=m.gamma_bar, scale=m.scale, status=m.status, rel_gap=m.rel_gap)


def _run_n(cfg: OneStepConfig, n: int, seeds, inits) -> dict:
    """One unit (one n): every start and seed, at noise σ and noiseless. JSON-able."""
    t0 = time.perf_counter()
    d = cfg.data
    model, loss = d.head_model(), d.loss_fn()
    clean = cfg.noiseless()
    X, y = batched_data(d, seeds, stream=0, n=n)
    Xc = batched_data(replace(d, sigma=0.0), seeds, stream=0, n=n)[0] if clean else X
    yh = np.asarray(y)
    t = time.perf_counter()
    lin = [linear_margins(np.asarray(X[s]), yh[s]) for s in range(len(seeds))]
    t_lin, t_feat, t_margin = time.perf_counter() - t, 0.0, 0.0
    records = []
    for start in cfg.starts:
        th, signs = inits[start]
        t = time.perf_counter()
        out = jax.block_until_ready(step_features(th, X, Xc, y, cfg.lr(start), signs, model, loss, clean))
        out = {k: np.asarray(v) for k, v in out.items()}
        t_feat += time.perf_counter() - t
        t = time.perf_counter()
        for s, seed in enumerate(seeds):
            m = hard_margin(out["G"][s], yh[s])
            lm, lf = lin[s].mean, lin[s].flat
            rec = dict(start=start, n=n, seed=seed, lr0=cfg.lr(start), noisy=_margin_record(m),
                       phi0_max=float(out["phi"][s]), loss0=float(out["loss0"][s]),
                       gamma_bar_mean=lm.gamma_bar, gamma_bar_flat=lf.gamma_bar,
                       P=int(out["G"].shape[-1]))
            if clean:
                rec.update(noiseless=_margin_record(hard_margin(out["Gc"][s], yh[s])),
                           phi0_max_noiseless=float(out["phic"][s]))
                if m.w is not None:
                    a, b = out["G"][s], out["Gx"][s]
                    s_w, s_g = paired_spreads(yh[s] * (a @ m.w), yh[s] * (b @ m.w), np.linalg.norm(a, axis=1),
                                              np.linalg.norm(b, axis=1), d.sigma)
                    rec.update(s_w=s_w, s_g=s_g)
            records.append(rec)
        t_margin += time.perf_counter() - t
    return to_jsonable(dict(records=records, timings=dict(linear_s=t_lin, features_s=t_feat, margin_s=t_margin),
                            time_s=time.perf_counter() - t0))


# ---------------------------------------------------------------------------
# The sweep and its verdict
# ---------------------------------------------------------------------------

def run(cfg: OneStepConfig, progress=None, store=None) -> dict:
    """Run the n-sweep; returns the summary dict (records, per-start slopes and parts, verdict).

    ``store`` (a :class:`mhajax.runtime.resume.ProgressStore`) keeps each finished n: a killed
    run resumes with identical numbers. ``progress(name)`` after each n."""
    cfg = cfg.validate()
    t_start = time.perf_counter()
    seeds = seed_list(cfg.seeds, cfg.seed0)
    inits = {start: initial_params(cfg, seeds, start) for start in cfg.starts}
    records, timings, resumed = [], {}, []
    for n in cfg.ns:
        res = load_or_run(store, f"n={n}", lambda: _run_n(cfg, n, seeds, inits), resumed, n)
        records += res["records"]
        timings[n] = res["timings"]
        if progress:
            progress(f"n={n}")
    analysed = {start: analyse(cfg, [r for r in records if r["start"] == start], seeds) for start in cfg.starts}
    by_start = {start: a for start, (a, _) in analysed.items()}
    judged = cfg.judged()
    judgement = judge(OneStepRecord(tuple((start, p) for start, (_, p) in analysed.items()), judged,
                                    cfg.data.dataset))
    return dict(records=records, by_start=by_start, ns=list(cfg.ns), heads=cfg.heads, seeds=seeds,
                starts=list(cfg.starts), lr0={s: cfg.lr(s) for s in cfg.starts}, sigma=cfg.data.sigma,
                noiseless_sweep=cfg.noiseless(), tolerance=SLOPE_TOLERANCE, init_const=INIT_CONST,
                level=cfg.boot.level, model=cfg.data.model, loss=cfg.data.loss, dataset=cfg.data.dataset,
                judged=judged, criterion=criterion(), verdict_starts=list(cfg.starts), start_choice=START_CHOICE,
                comparison_note="comparison, not a claim: γ̄_attn against the linear max-margins on "
                                "mean-pooled and flattened tokens (docs/theory.md §11.1); never in the verdict",
                scope=None if judged else (f"informational: the claim is about the tokenized mixture; on --data "
                                           f"{cfg.data.dataset} it is reported, not judged"),
                **judgement.fields(),
                resumed_ns=resumed, timings_s=timings, wall_time_s=time.perf_counter() - t_start)


def criterion() -> str:
    """The rule in words (what PASSED means)."""
    return (f"per start, at its η₀: (a) NTK-separable at θ₀ (certified) on every (n, seed); (b) the slope of "
            f"the seed-mean γ̄ against n has its {'bootstrap CI'} above τ = {SLOPE_TOLERANCE:g} on the noiseless "
            f"sweep (b1) and, divided by the finite-sample prediction (P), at noise σ (b2); (c) max_i |Φ(θ₀; X_i)| "
            f"<= {INIT_CONST:g}·log n on every (n, seed)")


def _curve(recs, ns, seeds, get):
    """``[S, m]`` of ``get(record)`` (NaN where None)."""
    idx = {(r["n"], r["seed"]): r for r in recs}
    return np.array([[np.nan if get(idx[(n, s)]) is None else get(idx[(n, s)]) for n in ns] for s in seeds],
                    dtype=np.float64)


class MarginOutcome(NamedTuple):
    """The solver's outcome for the noisy margin of one (n, seed)."""

    status: str                 # "separable", "not_separable" or "undecided"
    rel_gap: float | None       # relative duality gap (None: not measured)


class Separability(NamedTuple):
    """(a) counted over the (n, seed) of one start (:func:`separability`)."""

    separable: int
    not_separable: int
    undecided: int
    total: int
    max_rel_gap: float | None   # over the measured gaps (None: none)
    converged: int              # separable with rel_gap <= GAP_TOL


def separability(margins: Sequence[MarginOutcome]) -> Separability:
    """Counts of each status, the largest measured gap, and the separable ones with a converged gap."""
    status = [m.status for m in margins]
    gaps = [m.rel_gap for m in margins if m.rel_gap is not None]
    return Separability(separable=status.count("separable"), not_separable=status.count("not_separable"),
                        undecided=status.count("undecided"), total=len(status), max_rel_gap=max(gaps, default=None),
                        converged=sum(1 for m in margins if m.status == "separable"
                                      and m.rel_gap is not None and m.rel_gap <= GAP_TOL))


class InitCondition(NamedTuple):
    """(c), the initialization condition (:func:`init_condition`)."""

    const: float        # C
    per_n_max: list     # [m] max over seeds of max_i |Φ(θ₀; X_i)| / log n
    max_ratio: float    # the max over all (seed, n)
    room: float         # C / max_ratio (> 1: the factor to spare)
    failing: int        # (seed, n) with max_i |Φ(θ₀; X_i)| > C·log n (or undefined)
    total: int          # (seed, n) counted


class SlopeRule(NamedTuple):
    """A slope part's outcome (:mod:`mhajax.analysis.finite_sample`) and its CI in words."""

    rule: str
    ci: str


class Part(NamedTuple):
    """One part's outcome: ``holds``, ``violated``, ``unresolved`` or ``undefined``, with a reason."""

    rule: str
    text: str


class Parts(NamedTuple):
    """The parts (a), (b1), (b2), (c) of one start."""

    a: Part
    b1: Part
    b2: Part
    c: Part


class OneStepRecord(NamedTuple):
    """What :func:`judge` reads."""

    by_start: tuple     # (start, Parts) per start, in run order
    judged: bool        # the claim is about this data (the tokenized mixture)
    dataset: str


def _slope_rule(fit) -> SlopeRule | None:
    """A slope fit (a dict of :mod:`mhajax.analysis.finite_sample`, or None) as a :class:`SlopeRule`."""
    return None if fit is None else SlopeRule(fit["rule"], fmt_ci(fit))


def analyse(cfg: OneStepConfig, recs, seeds) -> tuple:
    """The parts (a), (b1), (b2), (c) and the comparison of one start, from its records:
    ``(summary dict, Parts)``."""
    ns = list(cfg.ns)
    boot = cfg.boot.kwargs()
    sigma = cfg.data.sigma
    sep = separability([MarginOutcome(r["noisy"]["status"], r["noisy"]["rel_gap"]) for r in recs])
    noisy = _curve(recs, ns, seeds, lambda r: r["noisy"]["gamma_bar"])
    curves = dict(noisy=noisy.tolist())
    out = dict(lr0=cfg.lr(recs[0]["start"]) if recs else None, separability=sep._asdict(), curves=curves)
    noisy_slope = _slope(ns, noisy, boot)
    noiseless_fit = excess_fit = None
    if cfg.noiseless():
        clean = _curve(recs, ns, seeds, lambda r: r["noiseless"]["gamma_bar"])
        curves.update(noiseless=clean.tolist())
        noiseless_fit = _slope(ns, clean, boot)
        last = {r["seed"]: r for r in recs if r["n"] == ns[-1]}
        inputs = []
        pred = []
        for s in seeds:
            r = last[s]
            g0, G0 = r["noiseless"]["gamma"], r["noiseless"]["scale"]
            sw, sg = r.get("s_w"), r.get("s_g")
            inputs.append(dict(seed=s, gamma0=g0, G0=G0, s_w=sw, s_g=sg))
            ok = None not in (g0, G0, sw, sg) and G0 > 0
            pred.append(predicted_margin(g0, G0, sigma, sw, sg, ns) if ok else np.full(len(ns), np.nan))
        pred = np.array(pred, dtype=np.float64)
        curves.update(predicted=pred.tolist())
        out.update(prediction_inputs=inputs)
        excess_fit = (excess_slope(ns, noisy, pred, **boot) if np.all(np.isfinite(pred)) and
                      np.all(np.isfinite(noisy)) else
                      dict(slope=None, ci=None, rule=UNDEFINED, predicted_slope=None,
                           note="(P) or a measured margin is undefined at some (seed, n)"))
    elif cfg.data.dataset in NOISY_DATA:  # σ = 0: the sweep is itself noiseless, (P) is flat
        noiseless_fit = noisy_slope
        excess_fit = dict(noisy_slope, predicted_slope=0.0, note="σ = 0: no finite-sample term")
    slopes = dict(noisy=noisy_slope, **({} if noiseless_fit is None else
                                        dict(noiseless=noiseless_fit, excess=excess_fit)))
    ini = init_condition(_curve(recs, ns, seeds, lambda r: r["phi0_max"]), ns)
    pts = parts(sep, _slope_rule(noiseless_fit), _slope_rule(excess_fit), ini)
    out.update(slopes=slopes, init=ini._asdict(), parts={k: p._asdict() for k, p in pts._asdict().items()},
               comparison=_comparison(recs, ns))
    return out, pts


def init_condition(phi_max, ns, const: float = INIT_CONST) -> InitCondition:
    """(c) from ``phi_max [S, m]`` = max_i |Φ(θ₀; X_i)| per (seed, n): ``failing`` counts the
    (seed, n) with ``phi_max > const·log n`` (equality holds; NaN fails); ``max_ratio`` = max of
    ``phi_max / log n``; ``room`` = ``const / max_ratio`` (> 1: the factor to spare)."""
    phi = np.asarray(phi_max, dtype=np.float64)
    logn = np.log(np.asarray(ns, dtype=np.float64))
    ratio = phi / logn
    worst = float(np.nanmax(ratio))
    return InitCondition(const=const, per_n_max=np.nanmax(ratio, axis=0).tolist(), max_ratio=worst,
                         room=const / worst if worst > 0 else math.inf,
                         failing=int(np.sum(~(phi <= const * logn))), total=int(phi.size))


def _slope(ns, Y, boot) -> dict:
    if not np.all(np.isfinite(Y)) or not np.all(Y > 0):
        return dict(slope=None, ci=None, rule=UNDEFINED, tolerance=SLOPE_TOLERANCE,
                    note="γ̄ undefined or 0 at some (seed, n)")
    return n_slope(ns, Y, **boot)


def parts(sep: Separability, noiseless: SlopeRule | None, excess: SlopeRule | None,
          init: InitCondition) -> Parts:
    """Each part's outcome: (a) from the separability counts, (b1) the noiseless slope, (b2) the
    excess slope (None: not measured, undefined), (c) the initialization condition."""
    if sep.not_separable:
        pa = Part(VIOLATED, f"not separable on {sep.not_separable} of {sep.total} (n, seed)")
    elif sep.undecided:
        pa = Part("unresolved", f"margin undecided on {sep.undecided} of {sep.total} (n, seed)")
    else:
        pa = Part(HOLDS, f"certified separable on {sep.separable}/{sep.total} (n, seed)")
    pb1 = (Part(noiseless.rule, f"noiseless slope {noiseless.ci}") if noiseless
           else Part(UNDEFINED, "no noiseless sweep"))
    pb2 = Part(excess.rule, f"excess slope {excess.ci}") if excess else Part(UNDEFINED, "no prediction (P)")
    pc = Part(HOLDS if init.failing == 0 else VIOLATED,
              f"max|Φ(θ₀)|/log n = {init.max_ratio:.3g} {'>' if init.failing else '<='} C = {init.const:g}: "
              f"room ×{init.room:.3g} (failing on {init.failing} of {init.total} (n, seed))")
    return Parts(pa, pb1, pb2, pc)


def _comparison(recs, ns) -> list:
    """Per n: seed means of γ̄_attn, γ̄_mean, γ̄_flat; min over seeds of γ̄_attn/max(γ̄_mean, γ̄_flat);
    on how many seeds the attention margin loses (ratio <= 1 + 1e-9)."""
    rows = []
    for n in ns:
        rs = [r for r in recs if r["n"] == n]
        ratios = []
        for r in rs:
            a, lm, lf = r["noisy"]["gamma_bar"], r["gamma_bar_mean"], r["gamma_bar_flat"]
            if None in (a, lm, lf):
                ratios.append(None)
            else:
                best = max(lm, lf)
                ratios.append(a / best if best > 0 else math.inf)
        defined = [x for x in ratios if x is not None]
        mean = lambda k: float(np.mean([r[k] for r in rs if r[k] is not None])) if rs else None
        rows.append(dict(n=n, gamma_bar_attn=float(np.mean([r["noisy"]["gamma_bar"] or 0.0 for r in rs])),
                         gamma_bar_mean=mean("gamma_bar_mean"), gamma_bar_flat=mean("gamma_bar_flat"),
                         ratio_min=min(defined) if defined else None,
                         ratio_mean=float(np.mean([x for x in defined if math.isfinite(x)])) if defined else None,
                         lost=sum(1 for x in defined if x <= 1 + TIE_RTOL), seeds=len(rs)))
    return rows


def judge(r: OneStepRecord) -> Judgement:
    """INFORMATIONAL off the mixture; FAILED when a part of some start is violated; INCONCLUSIVE
    when one is unresolved or undefined; PASSED when (a), (b1), (b2) and (c) hold for every start."""
    if not r.judged:
        return Judgement(Verdict.INFORMATIONAL, f"the claim is about the tokenized mixture, not --data {r.dataset}")
    bad, unsure = [], []
    for start, ps in r.by_start:
        for k, p in ps._asdict().items():
            if p.rule == VIOLATED:
                bad.append(f"{start} ({k}): {p.text}")
            elif p.rule != HOLDS:
                unsure.append(f"{start} ({k}): {p.text} [{p.rule}]")
    if bad:
        return Judgement(Verdict.FAILED, "; ".join(bad))
    if unsure:
        return Judgement(Verdict.INCONCLUSIVE, "; ".join(unsure))
    return Judgement(Verdict.PASSED, f"(a), (b1), (b2), (c) hold from every start "
                                     f"({', '.join(s for s, _ in r.by_start)})")


# ---------------------------------------------------------------------------
# Reports
# ---------------------------------------------------------------------------

def _start_text(start, lr) -> str:
    return {"zero": "θ₋₁ = 0", "zero-signs": "θ₋₁ = 0, random sign per head",
            "random-u": "W = 0, U random"}[start] + f", η₀ = {lr:g}"


def _mean_col(curve, j):
    v = [row[j] for row in curve if row[j] is not None and np.isfinite(row[j])]
    return float(np.mean(v)) if v else None


def report(summary) -> str:
    """Per start: the n-sweep (γ̄ at σ, noiseless, (P)), separability, the init condition and
    the linear comparison; then the slopes and each part's outcome."""
    out = []
    ns = summary["ns"]
    for start, a in summary["by_start"].items():
        c = a["curves"]
        cmp = {r["n"]: r for r in a["comparison"]}
        recs = [r for r in summary["records"] if r["start"] == start]
        rows = []
        for j, n in enumerate(ns):
            rs = [r for r in recs if r["n"] == n]
            sep = sum(r["noisy"]["status"] == "separable" for r in rs)
            k = cmp[n]
            rows.append([n, fmt(_mean_col(c["noisy"], j)), fmt(_mean_col(c["noiseless"], j)) if "noiseless" in c
                         else "-", fmt(_mean_col(c["predicted"], j)) if "predicted" in c else "-",
                         f"{sep}/{len(rs)}", fmt(a["init"]["per_n_max"][j]), fmt(k["gamma_bar_mean"]),
                         fmt(k["gamma_bar_flat"]), fmt(k["ratio_min"], 9, 4), f"{k['lost']}/{k['seeds']}"])
        sl = a["slopes"]
        out += [f"start {_start_text(start, a['lr0'])} (H = {summary['heads']}, {len(summary['seeds'])} seeds):",
                table(["n", f"γ̄ σ={summary['sigma']:g}", "γ̄ σ=0", "γ̄ (P)", "separable", "max|Φ₀|/log n",
                       "γ̄_mean*", "γ̄_flat*", "min attn/lin*", "lost*"], rows),
                f"  slope of γ̄ over n [{100 * summary['level']:g}% CI]: at σ = {summary['sigma']:g} (raw) "
                f"{fmt_ci(sl['noisy'])}; predicted by (P) {fmt(sl.get('excess', {}).get('predicted_slope'), 1)}; "
                f"noiseless {fmt_ci(sl.get('noiseless'))}; excess over (P) {fmt_ci(sl.get('excess'))}"]
        for k, label in (("a", "(a) separable"), ("b1", "(b1) noiseless slope > τ"), ("b2", "(b2) excess slope > τ"),
                         ("c", "(c) init condition")):
            p = a["parts"][k]
            out.append(f"  {label}: {p['rule']} — {p['text']}")
        out.append("")
    out += [f"Verdict rule: {summary['criterion']}. τ = {summary['tolerance']:g} was fixed before any sweep was run.",
            "(P): γ̄_pred(n) = (γ₀ − σ s_w a_n)/(G₀ + σ s_g a_n), a_n = E max of n N(0,1): the empirical margin is a "
            "minimum over n noisy samples, so it falls with n even when the noiseless margin is constant; (b2) "
            "judges what (P) does not explain.",
            summary.get("start_choice", START_CHOICE),
            f"* {summary['comparison_note']}. 'lost': seeds where γ̄_attn <= max(γ̄_mean, γ̄_flat) (ties within "
            f"{TIE_RTOL:g})."]
    if summary.get("scope"):
        out.append(summary["scope"] + ".")
    if summary.get("resumed_ns"):
        out.append(f"resumed from saved progress: n = {summary['resumed_ns']}")
    return "\n".join(out)


def headline(summary) -> str:
    """Per start: the noiseless and excess slopes and the init ratio."""
    parts = []
    for start, a in summary["by_start"].items():
        sl = a["slopes"]
        parts.append(f"{start}: noiseless slope {fmt_ci(sl.get('noiseless'))}, excess {fmt_ci(sl.get('excess'))}, "
                     f"raw {fmt_ci(sl['noisy'])}, max|Φ₀|/log n {a['init']['max_ratio']:.2f}")
    return "; ".join(parts)


def section(summary) -> str:
    """REPORT.md: per start the slopes and the parts; then the linear comparison (not a claim)."""
    rows = []
    for start, a in summary["by_start"].items():
        sl, p = a["slopes"], a["parts"]
        rows.append([start, a["lr0"], fmt_ci(sl["noisy"]), fmt(sl.get("excess", {}).get("predicted_slope"), 1).strip(),
                     fmt_ci(sl.get("noiseless")), fmt_ci(sl.get("excess")),
                     f"{a['separability']['separable']}/{a['separability']['total']}", a["init"]["max_ratio"],
                     " ".join(f"{k}:{p[k]['rule']}" for k in ("a", "b1", "b2", "c"))])
    t1 = md_table(["start", "η₀", "raw slope (σ)", "(P) slope", "noiseless slope", "excess slope", "separable",
                   "max|Φ₀|/log n", "parts"], rows)
    rows = []
    for start, a in summary["by_start"].items():
        for r in a["comparison"]:
            rows.append([start, r["n"], r["gamma_bar_attn"], r["gamma_bar_mean"], r["gamma_bar_flat"], r["ratio_min"],
                         f"{r['lost']}/{r['seeds']}"])
    t2 = md_table(["start", "n", "γ̄_attn", "γ̄_mean", "γ̄_flat", "min attn/lin", "lost"], rows)
    return (f"n = {summary['ns']}, H = {summary['heads']}, {len(summary['seeds'])} seeds, σ = {summary['sigma']:g}; "
            f"τ = {summary['tolerance']:g}, C = {summary['init_const']:g}.\n\n" + t1
            + f"\n\n{summary['criterion']}. {summary.get('start_choice', START_CHOICE)}\n\n"
            f"Linear margins — *{summary['comparison_note']}*:\n\n" + t2)


# -- memory: the run's dominant arrays, checked by the CLI before it starts --

def memory(cfg: OneStepConfig) -> list:
    """The dominant arrays (:mod:`mhajax.runtime.memory`) at the largest n: the noisy and the
    noiseless draws, three feature sets of all seeds (θ₀ on both draws, θ₀ of the noiseless
    one) and their host copy, the two steps (on either draw)."""
    d, S, H, n = cfg.data, cfg.seeds, cfg.heads, max(mem.ints(cfg.ns))
    P = H * head_size(d.model, d.tokens, d.dim)
    return [("draws X, Xc [2, S, n, T, d]", (2, S, n, d.tokens, d.dim)), ("features G, Gx, Gc [3, S, n, P]", (3, S, n, P)),
            ("their host copy [3, S, n, P]", (3, S, n, P))] + mem.step(2 * S, n, d.tokens, d.dim, H)


check("one-step", config=OneStepConfig, report=report, headline=headline, section=section,
      claim="after one GD step from a random init the mixture is NTK-separable with a margin that does not "
            "shrink with n, and max|Φ(θ₀)| = O(log n)",
      presets={"paper": PAPER}, memory=memory)(run)


__all__ = ["OneStepConfig", "STARTS", "INIT_CONST", "PAPER", "step_features", "initial_params", "criterion",
           "analyse", "init_condition", "parts", "judge", "run"]
