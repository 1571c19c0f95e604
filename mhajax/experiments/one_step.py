"""The one-step experiment behind ``python -m verify one-step`` (SPEC §5.5).

For every data setting (signal strength s, relevant fraction ζ), number of
heads H and first step size η₀, over seeds:

    θ₀ = θ₋₁ − η₀ S ∇L̂(θ₋₁)          (S = per-head signs, identity unless "zero-signs")
    γ̄_attn = γ̄ of the NTK features at θ₀,   γ̄₋₁ = the same at θ₋₁,
    γ̄_mean, γ̄_flat = linear max-margins on mean-pooled / flattened tokens,

every margin normalized by its own largest feature norm (γ̄ = γ / max_i ||g_i||;
the raw γ is kept beside it). Starts (θ₋₁):

* ``random-u`` (default): U ~ N(0, u_scale²) entrywise, W = 0 (``w_scale = 0``; with
  ``w_scale > 0`` the model's own random W);
* ``zero``: U = W = 0 — the step moves U only, identically in every head;
* ``zero-signs``: U = W = 0 and head h's step multiplied by a random s_h ∈ {±1}
  (this changes the parameters, not the NTK Gram at θ₀: see :mod:`mhajax.ntk`).

The paper's claim (as stated in SPEC §5.5) is ``γ_attn > γ_lin`` after one step.
Verdict: a (s, ζ, H) cell *holds* if for at least one η₀ of the sweep
``γ̄_attn > r · max(γ̄_mean, γ̄_flat)`` on every seed, with ``r = max(min_ratio,
1 + 1e-9)`` (default: strictly larger beyond rounding); the experiment passes if
every cell holds. All rows are reported, so where the claim fails is visible.
Reported beside it, not judged: whether the winning η₀ also keeps the theory's
initialization condition ``max_i |Φ(θ₀; X_i)| <= log n`` (``init_ok``,
``cells_holding_with_init``) — large first steps break it.

Other problems (``cfg.data``): the head model and loss of ``cfg.data`` are used
throughout (one step, NTK features). The sweep axes depend on the data model:
``mixture`` sweeps (s, ζ) as above; ``sparse`` sweeps the signal s only (its
relevant tokens are set by ``k_signal``; ``zetas`` is refused); ``npz`` sweeps
neither (a fixed file: ``signals``/``zetas`` are refused), so its cells are (H,).
The linear baselines are computed on any data, but the claim is the paper's about
the tokenized mixture: off the mixture the comparison is reported as
*informational* (``judged = False``, ``passed = None``). A start at which every NTK
feature vanishes (``relu`` at W = 0; ``linear``/``value``/``relu`` at θ = 0) is refused
with an :class:`InputError` (see :func:`mhajax.ntk.dead_point_reason`).

Resumable: each (s, ζ, H) cell is one unit (``s=…_z=…_H=…``) of a
:class:`mhajax.resume.ProgressStore`.

Compiles once per H (data shape and θ shape fixed; η₀ and the data values are
traced); the margins are n×n problems solved on the host.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import ClassVar
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from mhajax.analysis.margin import hard_margin, linear_margin
from mhajax.data.mixture import tokenized_mixture
from mhajax.data.seeds import seed_list, stream_keys
from mhajax.errors import InputError
from mhajax.experiments.base import batched_data, batched_init, verdict_fields
from mhajax.experiments.configs import Config, DataConfig, option, sub
from mhajax.experiments.registry import check
from mhajax.losses import LOGISTIC, empirical_risk
from mhajax.models.base import mha
from mhajax.models.softmax import SOFTMAX
from mhajax.runtime.format import fmt, md_table, table
from mhajax.runtime import memory as mem
from mhajax.analysis.ntk import (dead_point_reason, flattened, mean_pooled, ntk_features, one_step,
                                 random_head_signs)
from mhajax.validate import heads_list, parse_list, positive_float
from mhajax.verdict import Verdict

DEFAULT_SIGNALS = (0.5, 1.0, 2.0)
DEFAULT_ZETAS = (0.1, 0.25, 0.5)

STARTS = ("random-u", "zero", "zero-signs")
TIE_RTOL = 1e-9  # relative excess below which γ̄_attn and γ̄_lin count as tied (rounding)


@dataclass(frozen=True)
class OneStepConfig(Config):
    """One GD step θ₀ = θ₋₁ − η₀ S ∇L̂(θ₋₁) per (signal, ζ, H, η₀) and seed; NTK margins at
    θ₋₁ and θ₀ beside the linear max-margins."""

    heads: tuple = option((1, 4), "comma-separated numbers of heads H", kind="list")
    lrs: tuple = option((0.1, 1.0, 10.0, 100.0), "first step sizes η₀", kind="list")
    signals: tuple | None = option(None, "signal strengths s of μ± (default 0.5,1,2; --data mixture "
                                         "or sparse only)", kind="list")
    zetas: tuple | None = option(None, "relevant fractions ζ (default 0.1,0.25,0.5: 1, 2, 3 relevant "
                                       "tokens of T=6; --data mixture only)", kind="list")
    start: str = option("random-u", "θ₋₁: 'random-u' (W=0, U ~ N(0, u_scale²)), 'zero' (U=W=0) or "
                                    "'zero-signs' (U=W=0, head h's step times a random sign s_h)",
                        choices=STARTS)
    min_ratio: float = option(1.0, "'beats' needs γ̄_attn > r · max(γ̄_mean, γ̄_flat) with r = this "
                                   "(1: strictly larger)")
    seeds: int = option(4, "data sets / initializations per setting")
    seed0: int = option(0, "first seed")
    data: DataConfig = sub(DataConfig)
    EXCLUDE: ClassVar[tuple] = ("data.zeta", "data.signal")

    def validate(self):
        """Check every option (an :class:`InputError` names the bad one); returns self."""
        object.__setattr__(self, "heads", tuple(heads_list(self.heads)))
        object.__setattr__(self, "lrs", tuple(parse_list("--lrs", self.lrs, "float")))
        seed_list(self.seeds, self.seed0)
        positive_float("min_ratio", self.min_ratio)
        if self.start not in STARTS:
            raise InputError(f"--start must be one of {', '.join(STARTS)}, got {self.start!r}")
        self.data.validate()
        ds = self.data.dataset
        if ds != "mixture" and self.zetas is not None:
            raise InputError(f"--zetas sets the relevant fraction ζ of the mixture data model; "
                             f"--data {ds} has none" + (" (its relevant tokens: --k-signal)"
                                                        if ds == "sparse" else ""))
        if ds == "npz" and self.signals is not None:
            raise InputError("--signals sets the signal strength of a generated data model; "
                             "--data npz reads fixed data from --data-path")
        if ds != "npz":
            object.__setattr__(self, "signals", tuple(parse_list(
                "--signals", DEFAULT_SIGNALS if self.signals is None else self.signals, "float")))
        if ds == "mixture":
            object.__setattr__(self, "zetas", tuple(parse_list(
                "--zetas", DEFAULT_ZETAS if self.zetas is None else self.zetas, "float")))
            for z in self.zetas:
                if z > 1:
                    raise InputError(f"--zetas values must lie in (0, 1], got {z!r}")
        for dcfg in self.settings().values():
            dcfg.validate()
        d = self.data
        why = dead_point_reason(d.head_model(), d.tokens, d.dim, u_scale=d.u_scale,
                                w_scale=d.w_scale, zero=self.start != "random-u")
        if why:
            raise InputError(why + (f" (--start {self.start}); use --start random-u"
                                    if self.start != "random-u" else ""))
        return self

    def judged(self) -> bool:
        """Whether the paper's claim applies (tokenized-mixture data); else informational."""
        return self.data.dataset == "mixture"

    def settings(self) -> dict:
        """``{(signal, zeta): DataConfig}`` of the data sweep (``None`` where the data model
        has no such knob: ζ off the mixture, both for npz)."""
        sig = (None,) if self.signals is None else self.signals
        zet = (None,) if self.zetas is None else self.zetas
        out = {}
        for s in sig:
            for z in zet:
                kw = {} if s is None else dict(signal=s)
                if z is not None:
                    kw["zeta"] = z
                out[(s, z)] = replace(self.data, **kw)
        return out



def _attention_norm(p):
    """Frobenius norm of every parameter except the readout ``U`` (W, or W_Q/W_K, V, ...)."""
    leaves = [v for k, v in p._asdict().items() if k != "U"]
    return jnp.sqrt(sum(jnp.sum(v ** 2) for v in leaves))


@partial(jax.jit, static_argnames=("model", "loss"))
def one_step_batch(params, X, y, lrs, signs, model=SOFTMAX, loss=LOGISTIC):
    """For seeds (leading axis S of params, X, y, signs [S, H]) and step sizes
    ``lrs [E]``: NTK features at θ₋₁ ``[S, n, P]`` and at θ₀ ``[S, E, n, P]``,
    with ``L̂(θ₋₁) [S]``, ``L̂(θ₀) [S, E]``, ``max_i |Φ(θ₀)| [S, E]`` and the
    norms ``||U₀||, ||W₀|| [S, E]`` (W₀: every non-readout parameter)."""
    def per_seed(p, Xs, ys, s):
        G_m1 = ntk_features(p, Xs, model)
        L_m1 = empirical_risk(p, Xs, ys, model, loss)

        def per_lr(lr):
            p0 = one_step(p, Xs, ys, lr, s, model, loss)
            return (ntk_features(p0, Xs, model), empirical_risk(p0, Xs, ys, model, loss),
                    jnp.max(jnp.abs(mha(p0, Xs, model))),
                    jnp.sqrt(jnp.sum(p0.U ** 2)), _attention_norm(p0))
        return (G_m1, L_m1) + jax.vmap(per_lr)(lrs)
    return jax.vmap(per_seed)(params, X, y, signs)


def draw_data(dcfg: DataConfig, seeds):
    """``(X [S, n, T, d], y [S, n])``: the draws of :func:`mhajax.experiment.batched_data`
    (same PRNG keys), run op by op instead of as one compiled program, so that
    sweeping (signal, ζ) does not compile a new program per setting. Values
    agree with ``batched_data`` to rounding (<= a few ulps). Other data models:
    :func:`~mhajax.experiment.batched_data` itself."""
    dcfg.validate()
    if dcfg.dataset != "mixture":
        return batched_data(dcfg, seeds)
    keys = stream_keys(seeds, 0)
    return jax.vmap(lambda k: tokenized_mixture(k, dcfg.n, dcfg.tokens, dcfg.dim,
                                                **dcfg.mixture_kwargs()))(keys)


def initial_params(cfg: OneStepConfig, seeds, H: int):
    """``(θ₋₁ [S], signs [S, H])`` for the configured start (independent of
    the data setting: the same θ₋₁ for every (signal, ζ))."""
    S, d = len(seeds), cfg.data
    ones = jnp.ones((S, H))
    th = batched_init(d, seeds, H)  # d: the base setting; the model's own initializer
    if cfg.start == "random-u":
        return th, ones
    th = jax.tree_util.tree_map(jnp.zeros_like, th)
    if cfg.start == "zero":
        return th, ones
    keys = stream_keys(seeds, 3)  # a fourth stream: the head signs
    return th, jax.vmap(lambda k: random_head_signs(k, H))(keys)


def _ratio(a, b):
    return a / b if (a is not None and b is not None and b > 0) else None


def _linear(X, y):
    """Linear max-margins (mean-pooled, flattened) per seed of ``X [S, n, T, d]``."""
    Xh, yh = np.asarray(X), np.asarray(y)
    return [(linear_margin(np.asarray(mean_pooled(Xh[s])), yh[s]),
             linear_margin(np.asarray(flattened(Xh[s])), yh[s])) for s in range(Xh.shape[0])]


def _unit_name(signal, zeta, H) -> str:
    return f"s={signal!r}_z={zeta!r}_H={H}"


def _run_cell(cfg: OneStepConfig, signal, zeta, H, X, y, lin, seeds) -> dict:
    """One unit: every η₀ and seed at (signal, ζ, H). Returns ``{records, rows, cell, timings}``."""
    S = len(seeds)
    d = cfg.data
    model, loss = d.head_model(), d.loss_fn()
    r_n = d.n
    yh = np.asarray(y)
    timings = dict(features_s=0.0, margin_s=0.0)
    th, signs = initial_params(cfg, seeds, H)
    t = time.perf_counter()
    out = jax.block_until_ready(one_step_batch(th, X, y, jnp.asarray(cfg.lrs), signs, model, loss))
    timings["features_s"] += time.perf_counter() - t
    G_m1, L_m1, G0, L0, phi0_max, U0, W0 = (np.asarray(o) for o in out)
    t = time.perf_counter()
    m_m1 = [hard_margin(G_m1[s], yh[s]) for s in range(S)]
    m0 = [[hard_margin(G0[s, e], yh[s]) for e in range(len(cfg.lrs))] for s in range(S)]
    timings["margin_s"] += time.perf_counter() - t
    records, cell_rows = [], []
    for e, lr in enumerate(cfg.lrs):
        recs = []
        for s, seed in enumerate(seeds):
            a, b = m0[s][e], m_m1[s]
            lm, lf = lin[s]
            rec = dict(signal=signal, zeta=zeta, heads=H, lr0=lr, seed=seed,
                       P=int(G0.shape[-1]),
                       gamma_bar_attn=a.gamma_bar, gamma_attn=a.gamma,
                       status_attn=a.status, rel_gap_attn=a.rel_gap,
                       gamma_bar_m1=b.gamma_bar, gamma_m1=b.gamma, status_m1=b.status,
                       gamma_bar_mean=lm.gamma_bar, gamma_mean=lm.gamma,
                       gamma_bar_flat=lf.gamma_bar, gamma_flat=lf.gamma,
                       ratio_mean=_ratio(a.gamma_bar, lm.gamma_bar),
                       ratio_flat=_ratio(a.gamma_bar, lf.gamma_bar),
                       ratio_m1=_ratio(a.gamma_bar, b.gamma_bar),
                       loss_m1=float(L_m1[s]), loss0=float(L0[s, e]),
                       phi0_max=float(phi0_max[s, e]), U0_norm=float(U0[s, e]),
                       W0_norm=float(W0[s, e]),
                       max_rel_gap=max((r.rel_gap for r in (a, b, lm, lf)
                                        if r.rel_gap is not None), default=None))
            # the verdict quantity: γ̄_attn / max(γ̄_mean, γ̄_flat) (inf if neither
            # linear problem is separable; None if a margin is undecided)
            undecided = None in (a.gamma_bar, lm.gamma_bar, lf.gamma_bar)
            lin_best = None if undecided else max(lm.gamma_bar, lf.gamma_bar)
            if undecided:
                ratio_lin = None
            elif lin_best > 0:
                ratio_lin = a.gamma_bar / lin_best
            else:
                ratio_lin = float("inf") if a.separable else 0.0
            rec["ratio_lin"] = ratio_lin
            thresh = max(cfg.min_ratio, 1.0 + TIE_RTOL)
            rec["beats_linear"] = bool(a.separable and ratio_lin is not None
                                       and ratio_lin > thresh)
            recs.append(rec)
        records.extend(recs)

        def stat(key, fn, rs=recs):
            vals = [r[key] for r in rs if r[key] is not None]
            return float(fn(vals)) if vals else None

        row = dict(signal=signal, zeta=zeta, heads=H, lr0=lr,
                   gamma_bar_m1=stat("gamma_bar_m1", np.mean),
                   gamma_bar_attn=stat("gamma_bar_attn", np.mean),
                   gamma_attn=stat("gamma_attn", np.mean),
                   gamma_bar_mean=stat("gamma_bar_mean", np.mean),
                   gamma_bar_flat=stat("gamma_bar_flat", np.mean),
                   ratio_mean=stat("ratio_mean", np.mean),
                   ratio_mean_min=stat("ratio_mean", min),
                   ratio_flat=stat("ratio_flat", np.mean),
                   ratio_flat_min=stat("ratio_flat", min),
                   W0_norm=stat("W0_norm", np.mean),
                   max_rel_gap=stat("max_rel_gap", max),
                   separable=sum(r["status_attn"] == "separable" for r in recs),
                   mean_separable=sum(r["gamma_bar_mean"] is not None and r["gamma_bar_mean"] > 0
                                      for r in recs),
                   flat_separable=sum(r["gamma_bar_flat"] is not None and r["gamma_bar_flat"] > 0
                                      for r in recs),
                   seeds=S,
                   ratio_lin_min=(None if any(r["ratio_lin"] is None for r in recs)
                                  else min(r["ratio_lin"] for r in recs)),
                   phi0_max=stat("phi0_max", max),
                   init_ok=all(r["phi0_max"] <= np.log(r_n) for r in recs),
                   holds=all(r["beats_linear"] for r in recs))
        cell_rows.append(row)
    best = max(cell_rows, key=lambda r: -np.inf if r["ratio_lin_min"] is None
               else r["ratio_lin_min"])
    cell = (dict(signal=signal, zeta=zeta, heads=H,
                      holds=any(r["holds"] for r in cell_rows),
                      holds_with_init=any(r["holds"] and r["init_ok"] for r in cell_rows),
                      best_lr0=best["lr0"], best_ratio_lin_min=best["ratio_lin_min"],
                      best_ratio_mean=best["ratio_mean"],
                      best_ratio_flat=best["ratio_flat"]))
    return dict(records=records, rows=cell_rows, cell=cell, timings=timings)


def run(cfg: OneStepConfig, progress=None, store=None) -> dict:
    """Run the sweep; returns the summary dict (records, rows, cells, verdict).

    ``store`` (a :class:`mhajax.resume.ProgressStore`) keeps each finished (s, ζ, H)
    cell: a killed run resumes with identical numbers. ``progress(name)`` after each cell."""
    cfg.validate()
    t_start = time.perf_counter()
    seeds = seed_list(cfg.seeds, cfg.seed0)
    records, rows, cells, resumed = [], [], [], []
    timings = dict(features_s=0.0, margin_s=0.0)
    for (signal, zeta), dcfg in cfg.settings().items():
        data = None
        for H in cfg.heads:
            unit = _unit_name(signal, zeta, H)
            if store is not None and store.has(unit):
                res = store.load(unit)
                resumed.append(unit)
            else:
                if data is None:
                    X, y = draw_data(dcfg, seeds)
                    t = time.perf_counter()
                    data = (X, y, _linear(X, y))
                    timings["margin_s"] += time.perf_counter() - t
                res = _run_cell(cfg, signal, zeta, H, *data, seeds)
                if store is not None:
                    store.save(unit, res)
            records += res["records"]
            rows += res["rows"]
            cells.append(res["cell"])
            for k in timings:
                timings[k] += res["timings"][k]
            if progress:
                progress(unit)
    thresh = max(cfg.min_ratio, 1.0 + TIE_RTOL)
    judged = cfg.judged()
    return dict(records=records, rows=rows, cells=cells, seeds=seeds,
                model=cfg.data.model, loss=cfg.data.loss, dataset=cfg.data.dataset,
                swept=dict(signal=cfg.signals, zeta=cfg.zetas, heads=cfg.heads, lr0=cfg.lrs),
                rows_holding=sum(r["holds"] for r in rows), cells_holding=sum(c["holds"] for c in cells),
                cells_holding_with_init=sum(c["holds_with_init"] for c in cells),
                criterion=("a (signal, ζ, H) cell holds if some η₀ gives γ̄_attn > "
                           + (f"{thresh:.10g} · " if cfg.min_ratio > 1.0 + TIE_RTOL else "")
                           + "max(γ̄_mean, γ̄_flat) on every seed"
                           + ("" if cfg.min_ratio > 1.0 + TIE_RTOL else
                              f" (ties within a relative {TIE_RTOL:g} do not count)")),
                judged=judged,
                scope=None if judged else (
                    f"informational: the claim γ̄_attn > γ̄_lin (SPEC §5.5) is about the tokenized "
                    f"mixture; on --data {cfg.data.dataset} it is reported, not judged"),
                **_verdict(cells, judged, cfg.data.dataset),
                resumed_cells=resumed, timings=timings, wall_time_s=time.perf_counter() - t_start)


def _verdict(cells, judged, dataset) -> dict:
    """PASSED when every (s, ζ, H) cell holds (some η₀ beats the linear margins on every
    seed); FAILED otherwise; INFORMATIONAL off the tokenized mixture."""
    if not judged:
        return verdict_fields(Verdict.INFORMATIONAL, f"the claim is about the tokenized mixture, "
                                                     f"not --data {dataset}")
    bad = [c for c in cells if not c["holds"]]
    if bad:
        return verdict_fields(Verdict.FAILED, f"{len(bad)} of {len(cells)} cells do not hold")
    return verdict_fields(Verdict.PASSED, f"all {len(cells)} cells hold")


def _knob(x):
    return "-".rjust(4) if x is None else fmt(x, 4)


def report(summary) -> str:
    """Every (s, ζ, H, η₀) row: margins at θ₋₁ and θ₀, linear margins, ratios, init output."""
    rows = []
    for r in summary["rows"]:
        S = r["seeds"]
        rows.append([_knob(r["signal"]), _knob(r["zeta"]), r["heads"], fmt(r["lr0"], 6),
                     fmt(r["gamma_bar_m1"], 6), fmt(r["gamma_bar_attn"], 6), fmt(r["gamma_attn"], 6),
                     fmt(r["gamma_bar_mean"], 6) + ("" if r["mean_separable"] == S else f"({r['mean_separable']}/{S})"),
                     fmt(r["gamma_bar_flat"], 6) + ("" if r["flat_separable"] == S else f"({r['flat_separable']}/{S})"),
                     fmt(r["ratio_mean"], 6), fmt(r["ratio_flat"], 6), fmt(r["ratio_lin_min"], 6, 4),
                     fmt(r["max_rel_gap"], 7), fmt(r["phi0_max"], 8) + ("" if r["init_ok"] else "*"),
                     "yes" if r["holds"] else "NO"])
    head = ["s", "ζ", "H", "η₀", "γ̄(θ₋₁)", "γ̄_attn", "γ_attn", "γ̄_mean", "γ̄_flat",
            "attn/mean", "attn/flat", "min attn/lin", "gap", "max|Φ(θ₀)|", "beats"]
    out = [table(head, rows),
           "Seed means, except 'min attn/lin' = min over seeds of γ̄_attn / max(γ̄_mean, γ̄_flat) (the verdict "
           "quantity). γ̄ = γ / max_i ||feature_i||; γ_attn raw. (k/S): that linear problem is separable on "
           "only k of S seeds (γ̄ = 0 counted in the mean; the attn/mean, attn/flat means skip those seeds).",
           f"beats: min attn/lin > r. Verdict: {summary['criterion']}.",
           f"Swept: {_swept(summary)}.",
           "*: max_i |Φ(θ₀; X_i)| > log n on some seed (the theory's initialization condition fails at this η₀)."]
    if summary.get("scope"):
        out.append(summary["scope"] + ".")
    for c in summary["cells"]:
        if not c["holds"]:
            where = " ".join(f"{k}={c[key]:g}" for k, key in (("s", "signal"), ("ζ", "zeta"))
                             if c[key] is not None)
            out.append(f"claim NOT reproduced at {where + ' ' if where else ''}H={c['heads']}: best η₀="
                       f"{c['best_lr0']:g} gives min attn/lin = {fmt(c['best_ratio_lin_min'], 0, 4)} "
                       f"(seed means: attn/mean {fmt(c['best_ratio_mean'], 0)}, "
                       f"attn/flat {fmt(c['best_ratio_flat'], 0)})")
    return "\n".join(out)


def _swept(summary) -> str:
    sw = summary["swept"]
    parts = [f"{k} ∈ {{{', '.join(f'{v:g}' for v in sw[k])}}}" for k in ("signal", "zeta", "heads", "lr0")
             if sw.get(k) is not None]
    fixed = {"sparse": "ζ not a knob of --data sparse (its relevant tokens: --k-signal)",
             "npz": "fixed data from --data-path (no s, ζ)"}.get(summary["dataset"])
    return "; ".join(parts + ([fixed] if fixed else [])) + \
        f" (model {summary['model']}, loss {summary['loss']}, data {summary['dataset']})"


def headline(summary) -> str:
    """How many cells and rows hold, and at how many the init condition holds too."""
    axes = {"mixture": "s, ζ, H", "sparse": "s, H"}.get(summary["dataset"], "H")
    return (f"claim γ̄_attn > γ̄_lin held in {summary['cells_holding']}/{len(summary['cells'])} ({axes}) "
            f"cells, {summary['cells_holding_with_init']} of them at an η₀ with max|Φ(θ₀)| <= log n; "
            f"{summary['rows_holding']}/{len(summary['rows'])} rows"
            + (f", {len(summary['resumed_cells'])} cells resumed" if summary["resumed_cells"] else ""))


def section(summary) -> str:
    """REPORT.md: per cell the best η₀ and the margin ratio it reaches."""
    rows = [[c["signal"], c["zeta"], c["heads"], c["best_lr0"], c["best_ratio_lin_min"], c["holds"],
             c["holds_with_init"]] for c in summary["cells"]]
    judged = "" if summary.get("passed") is not None else \
        " The claim was not judged for this data model (informational)."
    return md_table(["s", "ζ", "H", "best η₀", "min γ̄_attn/γ̄_lin", "claim holds", "…with init condition"],
                    rows) + (f"\n\n{summary['criterion']}.{judged} Holding: {summary['cells_holding']}/"
                             f"{len(summary['cells'])} cells ({summary['cells_holding_with_init']} with the "
                             "initialization condition).")


# -- peak memory (issue 16): what `run` holds at once, checked by the CLI before it starts --

def memory(cfg: OneStepConfig, *, dtype: str = "float64", backend: str = "cpu"):
    """The estimated peak memory of :func:`run` (:func:`mhajax.runtime.memory.one_step`):
    per (setting, H), the NTK features at θ₋₁ and at θ₀ for every η₀ and seed at once
    (``[S, E+1, n, P]``) with one GD step's activations, then the margins per seed on the host."""
    d = cfg.data
    return mem.one_step(heads=tuple(cfg.heads), seeds=cfg.seeds, n=d.n, tokens=d.tokens, dim=d.dim,
                        lrs=tuple(cfg.lrs), model=d.model, dtype=dtype, backend=backend)


check("one-step", config=OneStepConfig, report=report, headline=headline, section=section,
      claim="after one GD step from a random init the mixture is NTK-separable with a margin",
      memory=memory)(run)


__all__ = ["OneStepConfig", "STARTS", "one_step_batch", "draw_data", "initial_params", "run"]
