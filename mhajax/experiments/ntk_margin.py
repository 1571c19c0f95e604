"""The NTK-realizability check, ``python -m verify ntk-margin`` (docs/theory.md §11, §15.4).

Per H and seed, on data of ``cfg.data`` (any data model, head model and loss): θ₀ (optionally
after one GD step of size ``one_step_lr``), its NTK features ``g_i = ∇_θΦ(θ₀; X_i)`` (one
``jit``-ed ``vmap`` over seeds per H), the hard margin per seed on the host
(:func:`mhajax.analysis.margin.hard_margin`) and the witness ``θ* = θ₀ + (log n/γ) w*``.
A record passes when ``separable`` (a certified positive margin), ``gap`` (relative duality gap
``1 − m(w*)/||u||`` <= ``gap_tol``) and ``init`` (``max_i |Φ(θ₀; X_i)| <= init_const · log n``) hold.
``L̂(θ*)``, ``L̂_lin(θ*)`` and the linearization error are reported, not judged: the theory needs
them small only for large H (the second-order term scales like ``||θ* − θ₀||² / √H``).
Resumable per H (unit ``heads=H``).
"""
from __future__ import annotations

import functools
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
from mhajax.experiments.base import Problem, batched_init, resolve, sweep
from mhajax.experiments.configs import Config, DataConfig, option, sub
from mhajax.experiments.registry import check
from mhajax.losses import LOGISTIC
from mhajax.models.base import head_size, output
from mhajax.models.softmax import SOFTMAX
from mhajax.runtime import memory as mem
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
        """The validated config, a new one; an :class:`InputError` names the first bad option."""
        cfg = replace(self, heads=tuple(heads_list(self.heads)))
        seed_list(cfg.seeds, cfg.seed0)
        positive_float("init_const", cfg.init_const)
        positive_float("gap_tol", cfg.gap_tol)
        positive_float("one_step_lr", cfg.one_step_lr, allow_zero=True)
        cfg = replace(cfg, data=cfg.data.validate())
        d = cfg.data
        why = dead_point_reason(d.head_model(), d.tokens, d.dim, u_scale=d.u_scale, w_scale=d.w_scale)
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


#: the three criteria of one (H, seed) (the module docstring): a certified positive margin;
#: separable with a relative duality gap <= gap_tol; max_i |Φ(θ₀; X_i)| <= init_const · log n
MarginChecks = NamedTuple("MarginChecks", [("separable", bool), ("gap", bool), ("init", bool)])


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


_opt = float | None
#: one (H, seed): the margin (:meth:`mhajax.analysis.margin.MarginResult.summary`), the init
#: condition, and at the witness θ* (None where not separable) the step log n/γ, the losses
#: L̂(θ₀), L̂(θ*), L̂_lin(θ*) and its bound, the linearization error, |L̂(θ*) − L̂_lin(θ*)|, the margins
Rec = NamedTuple("Rec", [
    ("heads", int), ("seed", int), ("P", int), ("n", int), ("log_n", float), ("gamma", _opt), ("gamma_bar", _opt),
    ("gamma_lower", _opt), ("gamma_upper", float), ("scale", float), ("gap", float), ("rel_gap", _opt),
    ("iterations", int), ("status", str), ("separable", bool), ("support_size", int), ("resolution", float),
    ("phi0_max", float), ("init_ratio", float), ("init_holds", bool), ("step", _opt), ("loss0", float),
    ("loss_star", _opt), ("loss_linear", _opt), ("loss_linear_bound", _opt), ("lin_error", _opt),
    ("loss_effect", _opt), ("lin_margin_min", _opt), ("star_margin_min", _opt), ("checks", MarginChecks),
    ("passed", bool)])
#: one H over its seeds: the separable count; over the separable seeds the mean and min γ̄, the mean
#: γ, the max gap and the max witness values; max |Φ(θ₀)| over all; whether every seed passed
ByHeads = NamedTuple("ByHeads", [
    ("P", int), ("seeds", int), ("separable", int), ("gamma_bar_mean", _opt), ("gamma_bar_min", _opt),
    ("gamma_mean", _opt), ("max_rel_gap", _opt), ("phi0_max", _opt), ("loss_star_max", _opt),
    ("loss_linear_max", _opt), ("lin_error_max", _opt), ("loss_effect_max", _opt), ("step_max", _opt),
    ("passed", bool)])
#: one H: every seed, the per-H row, the seconds spent (features_s, margin_s, witness_s)
Unit = NamedTuple("Unit", [("records", list[Rec]), ("by_heads", ByHeads), ("timings", dict)])
#: the three criteria in words, with this run's thresholds
Criteria = NamedTuple("Criteria", [("separable", str), ("gap", str), ("init", str)])
#: summary.json of ``ntk-margin``
Summary = NamedTuple("Summary", [
    ("records", list[Rec]), ("by_heads", dict[int, ByHeads]), ("seeds", list[int]), ("log_n", float),
    ("model", str), ("loss", str), ("dataset", str), ("criteria", Criteria), ("verdict", str),
    ("verdict_reason", str), ("passed", bool | None), ("resumed_heads", list[int]), ("timings", dict[int, dict]),
    ("wall_time_s", float)])


def _agg(values, fn):
    """``fn`` over the values that are not None (None: none)."""
    vals = [v for v in values if v is not None]
    return float(fn(vals)) if vals else None


def _run_heads(cfg: NTKMarginConfig, pb: Problem, H: int, seeds) -> Unit:
    """One unit of the sweep: every seed at H heads."""
    d = cfg.data
    model, loss, X, y = pb
    yh, n, log_n = np.asarray(y), d.n, math.log(d.n)
    t = time.perf_counter()
    th0, G, phi0 = jax.block_until_ready(features_batch(batched_init(d, seeds, H, model), X, y,
                                                        jnp.asarray(cfg.one_step_lr), model, loss))
    t_feat = time.perf_counter() - t
    t = time.perf_counter()
    G = np.asarray(G)
    margins = [hard_margin(G[s], yh[s]) for s in range(len(seeds))]
    t_margin = time.perf_counter() - t
    t = time.perf_counter()
    P = G.shape[-1]
    W = np.stack([m.w if m.separable else np.zeros(P) for m in margins])
    steps = np.array([log_n / m.gamma if m.separable else 0.0 for m in margins])
    wv = jax.block_until_ready(witness_batch(th0, X, y, jnp.asarray(W), jnp.asarray(steps), model, loss))
    wv = jax.tree_util.tree_map(np.asarray, wv)
    t_wit = time.perf_counter() - t
    rs = []
    for s, (seed, m) in enumerate(zip(seeds, margins)):
        phi0_max = float(np.max(np.abs(np.asarray(phi0[s]))))
        init = init_holds(phi0_max, cfg.init_const, log_n)
        at = lambda v: float(v[s]) if m.separable else None  # the witness exists
        checks = margin_checks(m.separable, m.rel_gap, cfg.gap_tol, init)
        rs.append(Rec(H, seed, P, n, log_n, **m.summary(), phi0_max=phi0_max, init_ratio=phi0_max / log_n,
                      init_holds=init, step=at(steps), loss0=float(wv.loss0[s]), loss_star=at(wv.loss_star),
                      loss_linear=at(wv.loss_linear),
                      loss_linear_bound=float(loss.value(jnp.asarray(log_n * m.gamma_lower / m.gamma - phi0_max)))
                      if m.separable else None, lin_error=at(wv.lin_error),
                      loss_effect=at(np.abs(wv.loss_star - wv.loss_linear)), lin_margin_min=at(wv.lin_margin_min),
                      star_margin_min=at(wv.phi_star_margin_min), checks=checks, passed=passes(checks)))
    cols = lambda rows: Rec(*zip(*rows)) if rows else Rec(*[()] * len(Rec._fields))  # fields as columns
    c, a = cols([r for r in rs if r.separable]), cols(rs)
    by_heads = ByHeads(P=P, seeds=len(rs), separable=len(c.seed), gamma_bar_mean=_agg(c.gamma_bar, np.mean),
                       gamma_bar_min=_agg(c.gamma_bar, min), gamma_mean=_agg(c.gamma, np.mean),
                       max_rel_gap=_agg(c.rel_gap, max), phi0_max=_agg(a.phi0_max, max),
                       loss_star_max=_agg(c.loss_star, max), loss_linear_max=_agg(c.loss_linear, max),
                       lin_error_max=_agg(c.lin_error, max), loss_effect_max=_agg(c.loss_effect, max),
                       step_max=_agg(c.step, max), passed=all(a.passed))
    return Unit(rs, by_heads, dict(features_s=t_feat, margin_s=t_margin, witness_s=t_wit))


def run(cfg: NTKMarginConfig, progress=None, store=None) -> Summary:
    """The H sweep, one unit ``heads=H`` per H (``store``: resumable, with identical numbers;
    ``progress("H=…")`` after each), then the verdict. The data are drawn once, when an H is
    not resumed; features, the step and the witness use ``cfg.data``'s head model and loss."""
    cfg = cfg.validate()
    t_start = time.perf_counter()
    seeds = seed_list(cfg.seeds, cfg.seed0)
    d, log_n = cfg.data, math.log(cfg.data.n)
    pb = functools.cache(lambda: resolve(d, seeds))
    units, resumed = sweep(store, cfg.heads, lambda H: _run_heads(cfg, pb(), H, seeds), Unit,
                           progress=progress and (lambda H: progress(f"H={H}")))
    records = [r for H in cfg.heads for r in units[H].records]
    return Summary(
        records=records, by_heads={H: units[H].by_heads for H in cfg.heads}, seeds=seeds, log_n=log_n,
        model=d.model, loss=d.loss, dataset=d.dataset,
        criteria=Criteria(separable="solver certifies min_i y_i<g_i,w*> > 0 beyond rounding",
                          gap=f"relative duality gap <= {cfg.gap_tol:g}",
                          init=f"max_i |Φ(θ₀;X_i)| <= {cfg.init_const:g} · log n = {cfg.init_const * log_n:.3f}"),
        **judge([r.checks for r in records]).fields(), resumed_heads=resumed,
        timings={H: units[H].timings for H in cfg.heads}, wall_time_s=time.perf_counter() - t_start)


def _criteria(s: Summary) -> str:
    return "; ".join(f"{k}: {v}" for k, v in s.criteria._asdict().items())


def report(summary: Summary) -> str:
    """One row per (H, seed): margin, gap, support, init output, witness losses; a line per H."""
    s = summary
    rows = [[r.heads, r.seed, r.P, r.status, fmt(r.gamma_bar), fmt(r.gamma), fmt(r.rel_gap), r.support_size,
             fmt(r.phi0_max), fmt(r.step), fmt(r.loss0), fmt(r.loss_star), fmt(r.loss_linear), fmt(r.lin_error),
             "yes" if r.passed else "NO"] for r in s.records]
    head = ["H", "seed", "P", "status", "γ̄", "γ", "rel_gap", "|supp|", "max|Φ₀|", "log n/γ",
            "L̂(θ₀)", "L̂(θ*)", "L̂_lin(θ*)", "lin_err", "pass"]
    return "\n".join([
        table(head, rows), f"γ̄ = γ / max_i ||g_i|| (scale-free); γ raw. log n = {s.log_n:.3f}.",
        "θ* = θ₀ + (log n/γ) w*;  L̂_lin uses Φ(θ₀;X) + <g, θ*−θ₀>;  lin_err = max_i |Φ(θ*;X_i) − Φ_lin|.",
        "pass = " + _criteria(s),
        "L̂(θ*), L̂_lin(θ*) and lin_err are reported, not judged (the theory needs them small only for large H)."]
        + [f"H={H}: γ̄ mean {fmt(v.gamma_bar_mean, 0)}, L̂(θ*) max {fmt(v.loss_star_max, 0)} vs L̂_lin(θ*) max "
           f"{fmt(v.loss_linear_max, 0)}, lin_err max {fmt(v.lin_error_max, 0)}" for H, v in s.by_heads.items()])


def headline(summary: Summary) -> str:
    """``12/12 (H, seed) pass``, with the problem when it is not the paper's."""
    s = summary
    problem = ("" if (s.dataset, s.model, s.loss) == ("mixture", "softmax", "logistic")
               else f"model {s.model}, loss {s.loss}, data {s.dataset}; ")
    resumed = f", resumed H={','.join(map(str, s.resumed_heads))}" if s.resumed_heads else ""
    return f"{problem}{sum(r.passed for r in s.records)}/{len(s.records)} (H, seed) pass{resumed}"


def section(summary: Summary) -> str:
    """REPORT.md: per H the separable count, margins, init output and witness loss."""
    rows = [[H, v.P, f"{v.separable}/{v.seeds}", v.gamma_bar_mean, v.gamma_bar_min, v.phi0_max, v.loss_star_max,
             v.passed] for H, v in summary.by_heads.items()]
    return (md_table(["H", "P", "separable", "mean γ̄", "min γ̄", "max |Φ(θ₀)|", "max L̂(θ*)", "passed"], rows)
            + f"\n\ncriteria: {_criteria(summary)}.")


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


run = check("ntk-margin", config=NTKMarginConfig, report=report, headline=headline, section=section,
            claim="realizability through the NTK: separable features at θ₀, witness θ*, |Φ(θ₀)| = O(log n)",
            presets={"paper": PAPER}, memory=memory, summary=Summary)(run)


__all__ = ["NTKMarginConfig", "features_batch", "witness_batch", "judge", "run", "Summary"]
