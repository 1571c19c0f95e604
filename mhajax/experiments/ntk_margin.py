"""The NTK-realizability experiment behind ``python -m verify ntk-margin`` (docs/theory.md §11, §15.4).

For each H and seed: draw data (``cfg.data``: any data model, head model and loss),
initialize θ₀ (optionally
followed by one GD step of size ``one_step_lr``), compute the NTK features
``g_i = ∇_θΦ(θ₀; X_i)`` for all seeds at once (one ``jit``-ed ``vmap`` per H),
solve the hard-margin problem per seed on the host (:func:`mhajax.analysis.margin.hard_margin`),
then evaluate the witness ``θ* = θ₀ + (log n/γ) w*`` for all seeds at once.

A record passes when (criteria printed by the CLI):

* ``separable``: the solver certifies a direction with a positive margin;
* ``gap``: the relative duality gap ``1 − m(w*)/||u||`` is <= ``gap_tol``;
* ``init``: ``max_i |Φ(θ₀; X_i)| <= init_const · log n``.

``L̂(θ*)``, ``L̂_lin(θ*)`` and the linearization error are reported, not judged:
the theory needs them small only for large H (the second-order term scales
like ``||θ* − θ₀||² / √H``), and how small they are at a given H is the finding.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from functools import partial
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from mhajax.analysis.margin import GAP_TOL, hard_margin
from mhajax.analysis.ntk import dead_point_reason, one_step, witness_values
from mhajax.curvature.operators import per_sample_jacobian
from mhajax.data.seeds import seed_list
from mhajax.errors import InputError
from mhajax.experiments.base import batched_data, batched_init
from mhajax.experiments.configs import Config, DataConfig, option, sub
from mhajax.experiments.registry import check
from mhajax.losses import LOGISTIC
from mhajax.models.base import head_size, output
from mhajax.models.softmax import SOFTMAX
from mhajax.runtime import memory as mem
from mhajax.runtime.resume import load_or_run
from mhajax.runtime.format import fmt, md_table, table
from mhajax.validate import heads_list, positive_float
from mhajax.verdict import Judgement, Verdict

#: the paper-scale preset (``--preset paper``): n = 1024 training samples
PAPER = {"data.n": 1024}


@dataclass(frozen=True)
class NTKMarginConfig(Config):
    """Per H and seed: the NTK margin at θ₀ (optionally after one GD step), its duality gap,
    the witness θ* and the initialization condition."""

    heads: tuple = option((1, 4, 16), "comma-separated numbers of heads H", kind="list")
    seeds: int = option(4, "data sets / initializations per H")
    seed0: int = option(0, "first seed")
    init_const: float = option(1.0, "init condition: max_i |Φ(θ₀;X_i)| <= C · log n with this C")
    gap_tol: float = option(GAP_TOL, "largest relative duality gap accepted")
    one_step_lr: float = option(0.0, "if > 0, θ₀ is one GD step of this size from the "
                                     "initialization (0: θ₀ = init)")
    data: DataConfig = sub(DataConfig)

    def validate(self):
        """The validated config, a new one (lists parsed, names normalized); an
        :class:`InputError` names the first bad option."""
        cfg = replace(self, heads=tuple(heads_list(self.heads)))
        seed_list(cfg.seeds, cfg.seed0)
        positive_float("init_const", cfg.init_const)
        positive_float("gap_tol", cfg.gap_tol)
        positive_float("one_step_lr", cfg.one_step_lr, allow_zero=True)
        cfg = replace(cfg, data=cfg.data.validate())
        d = cfg.data
        why = dead_point_reason(d.head_model(), d.tokens, d.dim, u_scale=d.u_scale,
                                w_scale=d.w_scale)
        if why:
            raise InputError(why)
        return cfg



@partial(jax.jit, static_argnames=("model", "loss"))
def features_batch(params, X, y, lr, model=SOFTMAX, loss=LOGISTIC):
    """For each seed: θ₀ (one step of size ``lr`` first when lr > 0), its NTK
    features ``G [S, n, P]`` and outputs ``Φ(θ₀; X) [S, n]``."""
    def one(p, Xs, ys):
        p = jax.lax.cond(lr > 0, lambda q: one_step(q, Xs, ys, lr, None, model, loss),
                         lambda q: q, p)
        return p, per_sample_jacobian(p, Xs, model), output(p, Xs, model)
    return jax.vmap(one)(params, X, y)


@partial(jax.jit, static_argnames=("model", "loss"))
def witness_batch(params, X, y, w, step, model=SOFTMAX, loss=LOGISTIC):
    """:func:`mhajax.analysis.ntk.witness_values` for every seed (leading axis S)."""
    return jax.vmap(lambda p, Xs, ys, ws, st: witness_values(p, Xs, ys, ws, st, model, loss))(
        params, X, y, w, step)


class MarginChecks(NamedTuple):
    """The three criteria of one (H, seed) record (the module docstring)."""

    separable: bool     # the solver certifies a positive margin
    gap: bool           # separable and the relative duality gap <= gap_tol
    init: bool          # max_i |Φ(θ₀; X_i)| <= init_const · log n


def passes(c: MarginChecks) -> bool:
    """A record passes when all three criteria hold."""
    return all(c)


def init_holds(phi0_max: float, init_const: float, log_n: float) -> bool:
    """The initialization condition ``max_i |Φ(θ₀; X_i)| <= C · log n`` (equality holds)."""
    return phi0_max <= init_const * log_n


def margin_checks(separable: bool, rel_gap: float | None, gap_tol: float, init: bool) -> MarginChecks:
    """The criteria from the solver's outcome (``rel_gap`` None: no gap measured, the gap fails)
    and the initialization condition ``init`` (:func:`init_holds`)."""
    return MarginChecks(separable, bool(separable and rel_gap is not None and rel_gap <= gap_tol), bool(init))


def _run_heads(cfg: NTKMarginConfig, H: int, X, y, seeds) -> dict:
    """One unit of the sweep: every seed at H heads. Returns ``{records, by_heads, timings}``
    (JSON-able, so that a resumed run reads back exactly what an uninterrupted one kept)."""
    d = cfg.data
    model, loss = d.head_model(), d.loss_fn()
    yh = np.asarray(y)
    n = d.n
    log_n = math.log(n)
    t = time.perf_counter()
    th0 = batched_init(d, seeds, H)
    th0, G, phi0 = jax.block_until_ready(
        features_batch(th0, X, y, jnp.asarray(cfg.one_step_lr), model, loss))
    t_feat = time.perf_counter() - t
    t = time.perf_counter()
    G = np.asarray(G)
    margins = [hard_margin(G[s], yh[s]) for s in range(len(seeds))]
    t_margin = time.perf_counter() - t
    t = time.perf_counter()
    P = G.shape[-1]
    W = np.stack([m.w if m.separable else np.zeros(P) for m in margins])
    steps = np.array([log_n / m.gamma if m.separable else 0.0 for m in margins])
    wv = jax.block_until_ready(witness_batch(th0, X, y, jnp.asarray(W), jnp.asarray(steps),
                                             model, loss))
    wv = {k: np.asarray(v) for k, v in wv._asdict().items()}
    t_wit = time.perf_counter() - t
    rs, ok = [], []
    for s, seed in enumerate(seeds):
        m = margins[s]
        phi0_max = float(np.max(np.abs(np.asarray(phi0[s]))))
        init = init_holds(phi0_max, cfg.init_const, log_n)
        rec = dict(heads=H, seed=seed, P=P, n=n, log_n=log_n, **m.summary(),
                   phi0_max=phi0_max, init_ratio=phi0_max / log_n, init_holds=init)
        if m.separable:
            rec.update(step=float(steps[s]),
                       loss0=float(wv["loss0"][s]), loss_star=float(wv["loss_star"][s]),
                       loss_linear=float(wv["loss_linear"][s]),
                       loss_linear_bound=float(loss.value(jnp.asarray(
                           log_n * m.gamma_lower / m.gamma - phi0_max))),
                       lin_error=float(wv["lin_error"][s]),
                       loss_effect=float(abs(wv["loss_star"][s] - wv["loss_linear"][s])),
                       lin_margin_min=float(wv["lin_margin_min"][s]),
                       star_margin_min=float(wv["phi_star_margin_min"][s]))
        else:
            rec.update(step=None, loss0=float(wv["loss0"][s]), loss_star=None, loss_linear=None,
                       loss_linear_bound=None, lin_error=None, loss_effect=None,
                       lin_margin_min=None, star_margin_min=None)
        checks = margin_checks(m.separable, m.rel_gap, cfg.gap_tol, init)
        ok.append(passes(checks))
        rec.update(checks=checks._asdict(), passed=ok[-1])
        rs.append(rec)
    sep = [r for r, m in zip(rs, margins) if m.separable]

    def agg(key, fn, rows=sep):
        vals = [r[key] for r in rows if r[key] is not None]
        return float(fn(vals)) if vals else None

    by_heads = dict(
        P=P, seeds=len(rs), separable=len(sep),
        gamma_bar_mean=agg("gamma_bar", np.mean), gamma_bar_min=agg("gamma_bar", min),
        gamma_mean=agg("gamma", np.mean), max_rel_gap=agg("rel_gap", max),
        phi0_max=agg("phi0_max", max, rs), loss_star_max=agg("loss_star", max),
        loss_linear_max=agg("loss_linear", max), lin_error_max=agg("lin_error", max),
        loss_effect_max=agg("loss_effect", max), step_max=agg("step", max),
        passed=all(ok))
    return dict(records=rs, by_heads=by_heads,
                timings=dict(features_s=t_feat, margin_s=t_margin, witness_s=t_wit))


def run(cfg: NTKMarginConfig, progress=None, store=None) -> dict:
    """Run the experiment; returns the summary dict (records, per-H rows, verdict).

    NTK features, the one-step map and the witness use ``cfg.data.head_model()`` and
    ``cfg.data.loss_fn()``. ``store`` (a :class:`mhajax.runtime.resume.ProgressStore`) keeps each
    finished H (unit ``heads=H``): a killed run resumes with identical numbers;
    ``progress("H=…")`` is called after each H."""
    cfg = cfg.validate()
    t_start = time.perf_counter()
    seeds = seed_list(cfg.seeds, cfg.seed0)
    d = cfg.data
    data = None
    log_n = math.log(d.n)
    records, by_heads, timings, resumed = [], {}, {}, []
    def compute(H):
        nonlocal data
        if data is None:   # drawn once, and only when an H is not resumed
            data = batched_data(d, seeds)
        return _run_heads(cfg, H, *data, seeds)
    for H in cfg.heads:
        res = load_or_run(store, f"heads={H}", lambda H=H: compute(H), resumed, H)
        records += res["records"]
        by_heads[H], timings[H] = res["by_heads"], res["timings"]
        if progress:
            progress(f"H={H}")
    return dict(records=records, by_heads=by_heads, seeds=seeds, log_n=log_n,
                model=d.model, loss=d.loss, dataset=d.dataset,
                criteria=dict(separable="solver certifies min_i y_i<g_i,w*> > 0 beyond rounding",
                              gap=f"relative duality gap <= {cfg.gap_tol:g}",
                              init=f"max_i |Φ(θ₀;X_i)| <= {cfg.init_const:g} · log n = "
                                   f"{cfg.init_const * log_n:.3f}"),
                **judge([MarginChecks(**r["checks"]) for r in records]).fields(), resumed_heads=resumed,
                timings=timings, wall_time_s=time.perf_counter() - t_start)


def judge(records: Sequence[MarginChecks]) -> Judgement:
    """PASSED when every (H, seed) is certified separable with a small duality gap and the
    initialization condition holds; FAILED, naming how many did not; INCONCLUSIVE when
    nothing was run (no record: nothing judged)."""
    if not records:
        return Judgement(Verdict.INCONCLUSIVE, "no (H, seed) was run: nothing judged")
    bad = sum(not passes(r) for r in records)
    if bad:
        return Judgement(Verdict.FAILED, f"{bad} of {len(records)} (H, seed) fail a criterion")
    return Judgement(Verdict.PASSED, f"all {len(records)} (H, seed) certified separable, gap and "
                                     "init condition hold")


def report(summary) -> str:
    """One row per (H, seed): margin, gap, support, init output, witness losses."""
    rows = []
    for r in summary["records"]:
        rows.append([r["heads"], r["seed"], r["P"], r["status"], fmt(r["gamma_bar"]), fmt(r["gamma"]),
                     fmt(r["rel_gap"]), r["support_size"], fmt(r["phi0_max"]), fmt(r["step"]),
                     fmt(r["loss0"]), fmt(r["loss_star"]), fmt(r["loss_linear"]), fmt(r["lin_error"]),
                     "yes" if r["passed"] else "NO"])
    head = ["H", "seed", "P", "status", "γ̄", "γ", "rel_gap", "|supp|", "max|Φ₀|", "log n/γ",
            "L̂(θ₀)", "L̂(θ*)", "L̂_lin(θ*)", "lin_err", "pass"]
    c = summary["criteria"]
    out = [table(head, rows),
           f"γ̄ = γ / max_i ||g_i|| (scale-free); γ raw. log n = {summary['log_n']:.3f}.",
           "θ* = θ₀ + (log n/γ) w*;  L̂_lin uses Φ(θ₀;X) + <g, θ*−θ₀>;  lin_err = max_i |Φ(θ*;X_i) − Φ_lin|.",
           "pass = " + "; ".join(f"{k}: {v}" for k, v in c.items()),
           "L̂(θ*), L̂_lin(θ*) and lin_err are reported, not judged (the theory needs them small only for large H)."]
    for H, s in summary["by_heads"].items():
        out.append(f"H={H}: γ̄ mean {fmt(s['gamma_bar_mean'], 0)}, L̂(θ*) max {fmt(s['loss_star_max'], 0)}"
                   f" vs L̂_lin(θ*) max {fmt(s['loss_linear_max'], 0)}, lin_err max {fmt(s['lin_error_max'], 0)}")
    return "\n".join(out)


def headline(summary) -> str:
    """``12/12 (H, seed) pass``, with the problem when it is not the paper's."""
    npass = sum(r["passed"] for r in summary["records"])
    default = (summary["dataset"], summary["model"], summary["loss"]) == ("mixture", "softmax", "logistic")
    problem = "" if default else \
        f"model {summary['model']}, loss {summary['loss']}, data {summary['dataset']}; "
    done = summary["resumed_heads"]
    resumed = f", resumed H={','.join(map(str, done))}" if done else ""
    return f"{problem}{npass}/{len(summary['records'])} (H, seed) pass{resumed}"


def section(summary) -> str:
    """REPORT.md: per H the separable count, margins, init output and witness loss."""
    rows = [[H, v["P"], f"{v['separable']}/{v['seeds']}", v["gamma_bar_mean"], v["gamma_bar_min"],
             v["phi0_max"], v["loss_star_max"], v["passed"]] for H, v in summary["by_heads"].items()]
    return md_table(["H", "P", "separable", "mean γ̄", "min γ̄", "max |Φ(θ₀)|", "max L̂(θ*)", "passed"],
                    rows) + ("\n\ncriteria: " + "; ".join(f"{k}: {v}" for k, v in summary["criteria"].items())
                            + ".")


# -- memory: the run's dominant arrays, checked by the CLI before it starts --

def memory(cfg: NTKMarginConfig) -> list:
    """The dominant arrays (:mod:`mhajax.runtime.memory`) at the largest H: the data, the NTK
    features of all seeds and their host copy, the attention weights of a pass over the data,
    and with ``one_step_lr`` > 0 a gradient step."""
    d, S, H = cfg.data, cfg.seeds, max(mem.ints(cfg.heads))
    P = H * head_size(d.model, d.tokens, d.dim)
    return ([mem.data(S, d.n, d.tokens, d.dim), ("NTK features G [S, n, P]", (S, d.n, P)),
             ("G on the host [S, n, P]", (S, d.n, P)),
             ("attention weights [S, n, H, T, T]", (S, d.n, H, d.tokens, d.tokens))]
            + (mem.step(S, d.n, d.tokens, d.dim, H) if cfg.one_step_lr > 0 else []))


check("ntk-margin", config=NTKMarginConfig, report=report, headline=headline, section=section,
      claim="realizability through the NTK: separable features at θ₀, witness θ*, |Φ(θ₀)| = O(log n)",
      presets={"paper": PAPER}, memory=memory)(run)


__all__ = ["NTKMarginConfig", "features_batch", "witness_batch", "run"]
