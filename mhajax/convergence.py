"""The convergence experiment (SPEC §5.1): ``L̂(θ_K) = Õ(1/K)`` on NTK-separable data.

For each H, ``seeds`` GD trajectories (one ``vmap``-ed, ``jit``-ed
:func:`mhajax.train.train` per H) run ``steps`` steps of size η on the
tokenized mixture. Measured, per seed:

* ``L̂(θ_K)`` at every K (the trajectory keeps the loss of every iterate);
* ``‖θ_K − θ_0‖`` at the checkpoints (every ``every`` steps);
* the witness margin γ_w at θ_0 (:mod:`mhajax.witness`): γ_w > 0 certifies that
  the training set is NTK-separable at initialization, the theory's premise.

The rate is the log-log slope of the seed-mean ``L̂(θ_K)`` over K on ``fit_points``
log-spaced steps in ``[fit_start, steps]``, with a bootstrap CI over seeds
(:mod:`mhajax.rates`); the slope of ``L̂/log^p K`` is reported beside it. The
theory bounds ‖θ_K − θ_0‖ by a multiple of the witness radius, which grows
like log K; its log-log slope and the fit ``‖θ_K − θ_0‖ ≈ a + b log K`` are
reported (informational: no constant is claimed).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from .errors import InputError
from .experiment import DataConfig, batched_data, batched_init, heads_list, seed_list
from .rates import (bootstrap_slope, classify_slope, log_grid, mean_band, upper_bound_holds,
                    RATE_TOLERANCE)
from .train import checkpoint_steps, train
from .validate import positive_float, positive_int
from .witness import class_direction, witness


@dataclass(frozen=True)
class ConvergenceConfig:
    heads: tuple = (1, 4, 16)
    seeds: int = 4
    seed0: int = 0
    steps: int = 2000
    every: int = 0            # distance checkpoints; 0 -> max(1, steps // 100)
    fit_start: int = 0        # first K of the fit window; 0 -> max(1, steps // 16)
    fit_points: int = 24
    lr: float = 1.0
    log_power: float = 2.0
    resamples: int = 2000
    level: float = 0.95
    boot_seed: int = 0
    data: DataConfig = field(default_factory=DataConfig)

    def validate(self):
        object.__setattr__(self, "heads", tuple(heads_list(self.heads)))
        seed_list(self.seeds, self.seed0)
        positive_int("seeds", self.seeds, minimum=2)
        positive_int("steps", self.steps, minimum=0)
        if self.steps < 8:
            raise InputError(f"steps must be >= 8 for a rate over K, got {self.steps!r}")
        positive_int("every", self.every, minimum=0)
        positive_int("fit_start", self.fit_start, minimum=0)
        positive_int("fit_points", self.fit_points, minimum=3)
        positive_float("lr", self.lr)
        positive_float("log_power", self.log_power, allow_zero=True)
        positive_int("resamples", self.resamples, minimum=100)
        if not 0 < positive_float("level", self.level) < 1:
            raise InputError(f"level must lie in (0, 1), got {self.level!r}")
        positive_int("boot_seed", self.boot_seed, minimum=0)
        self.data.validate()
        if self.window()[0] >= self.steps - 1:
            raise InputError(f"fit_start={self.fit_start} leaves no fit window below steps={self.steps}")
        return self

    def checkpoint_every(self) -> int:
        return self.every or max(1, self.steps // 100)

    def window(self) -> tuple:
        """``(K_lo, K_hi)`` of the fit; K_lo >= 2 so that log K > 0 for the log correction."""
        return max(2, self.fit_start or self.steps // 16), self.steps

    def to_dict(self):
        return asdict(self)


_witness = jax.jit(jax.vmap(witness, in_axes=(0, 0, 0, None)))


@jax.jit
def _distances(params, params0):
    """``‖θ_c − θ_0‖`` for leaves ``[S, C, ...]`` and ``[S, ...]`` -> ``[S, C]``."""
    sq = [jnp.sum((a - b[:, None]) ** 2, axis=tuple(range(2, a.ndim)))
          for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(params0))]
    return jnp.sqrt(sum(sq))


def run(cfg: ConvergenceConfig, progress=None) -> dict:
    """Run the experiment; returns the summary dict (per-H fits, curves, verdict)."""
    cfg.validate()
    t0 = time.perf_counter()
    d = cfg.data
    seeds = seed_list(cfg.seeds, cfg.seed0)
    X, y = batched_data(d, seeds)
    e = class_direction(d.dim, d.antipodal)
    every = cfg.checkpoint_every()
    ck = np.asarray(checkpoint_steps(cfg.steps, every))
    lo, hi = cfg.window()
    fit_K = log_grid(lo, hi, cfg.fit_points)
    curve_K = np.union1d([0], log_grid(1, cfg.steps, 200))
    ck_sel = (ck >= lo) & (ck <= hi)
    boot = dict(resamples=cfg.resamples, level=cfg.level, seed=cfg.boot_seed)
    by_heads, timings, diverged = {}, {}, []
    for H in cfg.heads:
        t = time.perf_counter()
        th0 = batched_init(d, seeds, H)
        traj = jax.block_until_ready(train(th0, X, y, cfg.lr, steps=cfg.steps, every=every))
        wit = jax.tree_util.tree_map(np.asarray, _witness(th0, X, y, e))
        dist = np.asarray(_distances(traj.params, th0))
        losses, finite = np.asarray(traj.losses), np.asarray(traj.finite)
        timings[H] = time.perf_counter() - t
        for s, seed in enumerate(seeds):
            if not finite[s].all():
                diverged.append(dict(heads=H, seed=seed, step=int(np.argmin(finite[s]))))
        loss_fit = bootstrap_slope(fit_K, losses[:, fit_K], **boot)
        loss_fit_log = bootstrap_slope(fit_K, losses[:, fit_K], log_power=cfg.log_power, **boot)
        dist_fit = bootstrap_slope(ck[ck_sel], dist[:, ck_sel], **boot) if ck_sel.sum() >= 2 else None
        dmean = dist[:, ck_sel].mean(axis=0)
        if ck_sel.sum() >= 2 and np.all(np.isfinite(dmean)):
            b, a = np.polyfit(np.log(ck[ck_sel]), dmean, 1)
            log_fit = dict(a=float(a), b=float(b))
        else:
            log_fit = None
        cls = classify_slope(loss_fit["ci"], loss_fit["slope"])
        by_heads[H] = dict(
            P=H * (d.tokens * d.dim + d.dim ** 2),
            loss_slope=loss_fit, loss_slope_log_corrected=loss_fit_log,
            classification=cls, holds=upper_bound_holds(loss_fit["ci"], loss_fit["slope"]),
            distance_slope=dist_fit, distance_log_fit=log_fit,
            witness={k: v.tolist() for k, v in wit.items()},
            separable_certified=bool(np.all(wit["gamma"] > 0)),
            final_loss=losses[:, -1].tolist(),
            curves=dict(steps=curve_K.tolist(), loss=losses[:, curve_K].tolist(),
                        loss_band=mean_band(losses[:, curve_K], **boot),
                        checkpoints=ck.tolist(), distance=dist.tolist(),
                        distance_band=mean_band(dist, **boot)),
        )
        if progress:
            progress(H)
    holds = [v["holds"] for v in by_heads.values()]
    passed = all(h is True for h in holds) and not diverged
    return dict(passed=passed, by_heads=by_heads, diverged=diverged, seeds=seeds,
                fit_steps=fit_K.tolist(), window=[lo, hi], tolerance=RATE_TOLERANCE,
                timings_s=timings, wall_time_s=time.perf_counter() - t0)
