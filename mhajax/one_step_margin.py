"""The one-step experiment behind ``python -m verify one-step`` (SPEC §5.5).

For every data setting (signal strength s, relevant fraction ζ), number of
heads H and first step size η₀, over seeds:

    θ₀ = θ₋₁ − η₀ S ∇L̂(θ₋₁)          (S = per-head signs, identity unless "zero-signs")
    γ̄_attn = γ̄ of the NTK features at θ₀,   γ̄₋₁ = the same at θ₋₁,
    γ̄_mean, γ̄_flat = linear max-margins on mean-pooled / flattened tokens,

every margin normalized by its own largest feature norm (γ̄ = γ / max_i ||g_i||;
the raw γ is kept beside it). Starts (θ₋₁):

* ``random-u`` (default): W = 0, U ~ N(0, u_scale²) entrywise;
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

Compiles once per H (data shape and θ shape fixed; η₀ and the data values are
traced); the margins are n×n problems solved on the host.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .data import tokenized_mixture
from .errors import InputError
from .experiment import DataConfig, batched_init, heads_list, seed_list, stream_keys
from .losses import LOGISTIC, empirical_risk
from .margin import hard_margin, linear_margin
from .model import SOFTMAX, mha
from .ntk import flattened, mean_pooled, ntk_features, one_step, random_head_signs, zero_params
from .validate import positive_float

STARTS = ("random-u", "zero", "zero-signs")
TIE_RTOL = 1e-9  # relative excess below which γ̄_attn and γ̄_lin count as tied (rounding)


def float_list(name: str, value) -> list:
    """Parse ``"0.1,1,10"`` (or a sequence) into a list of finite numbers > 0."""
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
        if not value.strip() or any(p == "" for p in parts):
            raise InputError(f"--{name} must be a comma-separated list of numbers > 0, got {value!r}")
        out = []
        for p in parts:
            try:
                out.append(float(p))
            except ValueError:
                raise InputError(f"--{name} must be a comma-separated list of numbers > 0, "
                                 f"got {value!r} ({p!r} is not a number)") from None
    else:
        out = [float(v) for v in value]
        if not out:
            raise InputError(f"{name} must be a non-empty list of numbers > 0, got []")
    for v in out:
        positive_float(name, v)
    return out


@dataclass(frozen=True)
class OneStepConfig:
    heads: tuple = (1, 4)
    seeds: int = 4
    seed0: int = 0
    lrs: tuple = (0.1, 1.0, 10.0, 100.0)
    signals: tuple = (0.5, 1.0, 2.0)
    zetas: tuple = (0.1, 0.25, 0.5)
    start: str = "random-u"
    min_ratio: float = 1.0   # "beats": γ̄_attn > max(min_ratio, 1 + TIE_RTOL) · max(γ̄_mean, γ̄_flat)
    data: DataConfig = field(default_factory=DataConfig)

    def validate(self):
        object.__setattr__(self, "heads", tuple(heads_list(self.heads)))
        object.__setattr__(self, "lrs", tuple(float_list("lrs", self.lrs)))
        object.__setattr__(self, "signals", tuple(float_list("signals", self.signals)))
        object.__setattr__(self, "zetas", tuple(float_list("zetas", self.zetas)))
        for z in self.zetas:
            if z > 1:
                raise InputError(f"--zetas values must lie in (0, 1], got {z!r}")
        seed_list(self.seeds, self.seed0)
        positive_float("min_ratio", self.min_ratio)
        if self.start not in STARTS:
            raise InputError(f"--start must be one of {', '.join(STARTS)}, got {self.start!r}")
        self.data.validate()
        for s in self.signals:
            for z in self.zetas:
                replace(self.data, signal=s, zeta=z).validate()
        return self

    def to_dict(self):
        return asdict(self)


@partial(jax.jit, static_argnames=("model", "loss"))
def one_step_batch(params, X, y, lrs, signs, model=SOFTMAX, loss=LOGISTIC):
    """For seeds (leading axis S of params, X, y, signs [S, H]) and step sizes
    ``lrs [E]``: NTK features at θ₋₁ ``[S, n, P]`` and at θ₀ ``[S, E, n, P]``,
    with ``L̂(θ₋₁) [S]``, ``L̂(θ₀) [S, E]``, ``max_i |Φ(θ₀)| [S, E]`` and the
    norms ``||U₀||, ||W₀|| [S, E]``."""
    def per_seed(p, Xs, ys, s):
        G_m1 = ntk_features(p, Xs, model)
        L_m1 = empirical_risk(p, Xs, ys, model, loss)

        def per_lr(lr):
            p0 = one_step(p, Xs, ys, lr, s, model, loss)
            return (ntk_features(p0, Xs, model), empirical_risk(p0, Xs, ys, model, loss),
                    jnp.max(jnp.abs(mha(p0, Xs, model))),
                    jnp.sqrt(jnp.sum(p0.U ** 2)), jnp.sqrt(jnp.sum(p0.W ** 2)))
        return (G_m1, L_m1) + jax.vmap(per_lr)(lrs)
    return jax.vmap(per_seed)(params, X, y, signs)


def draw_data(dcfg: DataConfig, seeds):
    """``(X [S, n, T, d], y [S, n])``: the draws of :func:`mhajax.experiment.batched_data`
    (same PRNG keys), run op by op instead of as one compiled program, so that
    sweeping (signal, ζ) does not compile a new program per setting. Values
    agree with ``batched_data`` to rounding (<= a few ulps)."""
    dcfg.validate()
    keys = stream_keys(seeds, 0)
    return jax.vmap(lambda k: tokenized_mixture(k, dcfg.n, dcfg.tokens, dcfg.dim,
                                                **dcfg.mixture_kwargs()))(keys)


def initial_params(cfg: OneStepConfig, seeds, H: int):
    """``(θ₋₁ [S], signs [S, H])`` for the configured start (independent of
    the data setting: the same θ₋₁ for every (signal, ζ))."""
    S, d = len(seeds), cfg.data
    ones = jnp.ones((S, H))
    if cfg.start == "random-u":
        return batched_init(replace(d, w_scale=0.0), seeds, H), ones  # d: the base setting
    z = zero_params(H, d.tokens, d.dim)
    th = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (S,) + a.shape), z)
    if cfg.start == "zero":
        return th, ones
    keys = stream_keys(seeds, 3)  # a fourth stream: the head signs
    return th, jax.vmap(lambda k: random_head_signs(k, H))(keys)


def _ratio(a, b):
    return a / b if (a is not None and b is not None and b > 0) else None


def run(cfg: OneStepConfig) -> dict:
    """Run the sweep; returns the summary dict (records, rows, cells, verdict)."""
    cfg.validate()
    t_start = time.perf_counter()
    seeds = seed_list(cfg.seeds, cfg.seed0)
    S = len(seeds)
    lrs = jnp.asarray(cfg.lrs)
    records, rows, cells, timings = [], [], [], dict(features_s=0.0, margin_s=0.0)
    r_n = cfg.data.n
    for signal in cfg.signals:
        for zeta in cfg.zetas:
            dcfg = replace(cfg.data, signal=signal, zeta=zeta)
            X, y = draw_data(dcfg, seeds)
            yh = np.asarray(y)
            Xh = np.asarray(X)
            t = time.perf_counter()
            lin = [(linear_margin(np.asarray(mean_pooled(Xh[s])), yh[s]),
                    linear_margin(np.asarray(flattened(Xh[s])), yh[s])) for s in range(S)]
            timings["margin_s"] += time.perf_counter() - t
            for H in cfg.heads:
                th, signs = initial_params(cfg, seeds, H)
                t = time.perf_counter()
                out = jax.block_until_ready(one_step_batch(th, X, y, lrs, signs))
                timings["features_s"] += time.perf_counter() - t
                G_m1, L_m1, G0, L0, phi0_max, U0, W0 = (np.asarray(o) for o in out)
                t = time.perf_counter()
                m_m1 = [hard_margin(G_m1[s], yh[s]) for s in range(S)]
                m0 = [[hard_margin(G0[s, e], yh[s]) for e in range(len(cfg.lrs))] for s in range(S)]
                timings["margin_s"] += time.perf_counter() - t
                cell_rows = []
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
                    rows.append(row)
                    cell_rows.append(row)
                best = max(cell_rows, key=lambda r: -np.inf if r["ratio_lin_min"] is None
                           else r["ratio_lin_min"])
                cells.append(dict(signal=signal, zeta=zeta, heads=H,
                                  holds=any(r["holds"] for r in cell_rows),
                                  holds_with_init=any(r["holds"] and r["init_ok"] for r in cell_rows),
                                  best_lr0=best["lr0"], best_ratio_lin_min=best["ratio_lin_min"],
                                  best_ratio_mean=best["ratio_mean"],
                                  best_ratio_flat=best["ratio_flat"]))
    return dict(records=records, rows=rows, cells=cells, seeds=seeds,
                rows_holding=sum(r["holds"] for r in rows), cells_holding=sum(c["holds"] for c in cells),
                cells_holding_with_init=sum(c["holds_with_init"] for c in cells),
                criterion=(f"a (signal, ζ, H) cell holds if some η₀ gives γ̄_attn > "
                           f"{max(cfg.min_ratio, 1.0 + TIE_RTOL):.10g} · max(γ̄_mean, γ̄_flat) on every seed"),
                passed=all(c["holds"] for c in cells),
                timings=timings, wall_time_s=time.perf_counter() - t_start)


__all__ = ["OneStepConfig", "STARTS", "float_list", "one_step_batch", "draw_data", "initial_params", "run"]
