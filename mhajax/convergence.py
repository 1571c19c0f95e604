"""The convergence experiment (SPEC §5.1): ``L̂(θ_K) = Õ(1/K)`` on NTK-separable data.

For each H, ``seeds`` GD trajectories (one ``vmap``-ed, ``jit``-ed
:func:`mhajax.train.train` per H) run ``steps`` steps of size η on the
tokenized mixture. Measured, per seed:

* ``L̂(θ_K)`` at every K (the trajectory keeps the loss of every iterate);
* ``‖θ_K − θ_0‖`` at the checkpoints (every ``every`` steps);
* the held-out loss ``L(θ_K) ≈ (1/m) Σ_j ℓ(y_j Φ(θ_K; X_j))`` on ``n_test`` fresh samples
  (stream 2) and ``L̂(θ_K)`` at the same checkpoints (``curves.test_loss``,
  ``curves.train_loss_at_checkpoints``, [S][C]), so both can be plotted on one K grid;
* the witness margin γ_w at θ_0 (:mod:`mhajax.witness`): γ_w > 0 certifies that
  the training set is NTK-separable at initialization, the theory's premise
  (softmax heads on the mixture only; elsewhere reported as not applicable).

The head model and loss are ``cfg.data.head_model()`` / ``cfg.data.loss_fn()`` (training
and test alike). Where the rate analysis does not cover the pair
(:func:`mhajax.rates.rate_applies`, e.g. the squared hinge, which is not self-bounded),
the slopes are reported as informational and ``passed`` is None (False if a run diverged).

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
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .errors import InputError
from .experiment import DataConfig, batched_data, batched_init, heads_list, seed_list
from .io import to_jsonable
from .losses import LOGISTIC, empirical_risk
from .model import SOFTMAX
from .rates import (bootstrap_slope, classify_slope, log_grid, mean_band, rate_applies,
                    upper_bound_holds, RATE_TOLERANCE)
from .resume import load_or_run
from .train import checkpoint_steps, train_runs
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
    n_test: int = 1024        # held-out samples per seed for the test curve (stream 2)
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
        positive_int("n_test", self.n_test, minimum=1)
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

#: elements of the largest intermediate (``[b, m, H, T, T]`` attention weights) per chunk of
#: :func:`checkpoint_risks`: bounds its memory whatever S, C, m and H are.
_CHUNK_ELEMENTS = 2 ** 24


@jax.jit
def _distances(params, params0):
    """``‖θ_c − θ_0‖`` for leaves ``[S, C, ...]`` and ``[S, ...]`` -> ``[S, C]``."""
    sq = [jnp.sum((a - b[:, None]) ** 2, axis=tuple(range(2, a.ndim)))
          for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(params0))]
    return jnp.sqrt(sum(sq))


@partial(jax.jit, static_argnames=("model", "loss", "batch"))
def _checkpoint_risks(params, X, y, *, model, loss, batch):
    leaves = jax.tree_util.tree_leaves(params)
    S, C = leaves[0].shape[:2]
    flat = jax.tree_util.tree_map(lambda a: a.reshape((S * C,) + a.shape[2:]), params)
    seed_of = jnp.repeat(jnp.arange(S), C)
    risk = lambda a: empirical_risk(a[0], X[a[1]], y[a[1]], model, loss)
    return jax.lax.map(risk, (flat, seed_of), batch_size=batch).reshape(S, C)


def checkpoint_risks(params, X, y, model=SOFTMAX, loss=LOGISTIC):
    """``L(θ_{s,c}) = (1/m) Σ_j ℓ(y_{s,j} Φ(θ_{s,c}; X_{s,j}))`` for every seed s and
    checkpoint c: params leaves ``[S, C, ...]``, ``X [S, m, T, d]``, ``y [S, m]`` -> ``[S, C]``.

    One jitted program, vmapped over the S·C (seed, checkpoint) pairs in chunks of ``b``
    pairs (``lax.map`` with ``batch_size``) so that memory stays bounded for large H."""
    leaves = jax.tree_util.tree_leaves(params)
    S, C = leaves[0].shape[:2]
    m, T = X.shape[1], X.shape[2]
    H = leaves[0].shape[2] if leaves[0].ndim > 2 else 1
    batch = int(max(1, min(S * C, _CHUNK_ELEMENTS // max(1, m * H * T * T))))
    return _checkpoint_risks(params, X, y, model=model, loss=loss, batch=batch)


def witness_applies(d: DataConfig) -> tuple:
    """``(applies, reason)``: the explicit witness (:mod:`mhajax.witness`) moves the
    softmax readouts along the mixture's class direction, so it certifies NTK
    separability only for the tokenized mixture with softmax heads."""
    if d.dataset == "mixture" and d.model == "softmax":
        return True, "softmax heads on the tokenized mixture"
    return False, (f"not applicable: the explicit witness is built for softmax heads on the "
                   f"tokenized mixture (class direction of μ±), not --model {d.model} --data {d.dataset}")


def _run_heads(cfg, H, X, y, test, seeds, fit_K, curve_K, ck, ck_sel, boot):
    """One unit of the sweep (one H): train, measure, fit. Returns a JSON-able dict
    ``{"entry": by_heads[H], "diverged": [...], "time_s": seconds}``."""
    t = time.perf_counter()
    d = cfg.data
    model, loss = d.head_model(), d.loss_fn()
    th0 = batched_init(d, seeds, H)
    traj = jax.block_until_ready(train_runs(th0, X, y, cfg.lr, steps=cfg.steps, every=cfg.checkpoint_every(),
                                       model=model, loss=loss))
    dist = np.asarray(_distances(traj.params, th0))
    losses, finite = np.asarray(traj.losses), np.asarray(traj.finite)
    diverged = [dict(heads=H, seed=seed, step=int(np.argmin(finite[s])))
                for s, seed in enumerate(seeds) if not finite[s].all()]
    loss_fit = bootstrap_slope(fit_K, losses[:, fit_K], **boot)
    loss_fit_log = bootstrap_slope(fit_K, losses[:, fit_K], log_power=cfg.log_power, **boot)
    dist_fit = bootstrap_slope(ck[ck_sel], dist[:, ck_sel], **boot) if ck_sel.sum() >= 2 else None
    dmean = dist[:, ck_sel].mean(axis=0)
    if ck_sel.sum() >= 2 and np.all(np.isfinite(dmean)):
        b, a = np.polyfit(np.log(ck[ck_sel]), dmean, 1)
        log_fit = dict(a=float(a), b=float(b))
    else:
        log_fit = None
    ok, why = witness_applies(d)
    if ok:
        wit = jax.tree_util.tree_map(np.asarray, _witness(th0, X, y, class_direction(d.dim, d.antipodal)))
        wit = {k: v.tolist() for k, v in wit.items()}
        certified = bool(np.all(np.asarray(wit["gamma"]) > 0))
    else:
        wit, certified = None, None
    curves = dict(steps=curve_K.tolist(), loss=losses[:, curve_K].tolist(),
                  loss_band=mean_band(losses[:, curve_K], **boot),
                  checkpoints=ck.tolist(), distance=dist.tolist(), distance_band=mean_band(dist, **boot),
                  train_loss_at_checkpoints=losses[:, ck].tolist())
    if test is not None:
        tl = np.asarray(checkpoint_risks(traj.params, test[0], test[1], model, loss))
        curves.update(test_checkpoints=ck.tolist(), test_loss=tl.tolist(),
                      test_loss_band=mean_band(tl, **boot) if np.all(np.isfinite(tl)) else None)
    else:
        curves.update(test_checkpoints=None, test_loss=None, test_loss_band=None)
    entry = dict(
        P=int(sum(np.size(a[0]) for a in jax.tree_util.tree_leaves(th0))),
        loss_slope=loss_fit, loss_slope_log_corrected=loss_fit_log,
        classification=classify_slope(loss_fit["ci"], loss_fit["slope"]),
        holds=upper_bound_holds(loss_fit["ci"], loss_fit["slope"]),
        distance_slope=dist_fit, distance_log_fit=log_fit,
        witness=wit, witness_note=why, separable_certified=certified,
        final_loss=losses[:, -1].tolist(), curves=curves)
    return to_jsonable(dict(entry=entry, diverged=diverged, time_s=time.perf_counter() - t))


def run(cfg: ConvergenceConfig, progress=None, store=None) -> dict:
    """Run the experiment; returns the summary dict (per-H fits, curves, verdict).

    ``store`` (a :class:`mhajax.resume.ProgressStore`) keeps each finished H; on a rerun
    the finished H are loaded (listed in ``resumed_heads``), the rest computed."""
    cfg.validate()
    t0 = time.perf_counter()
    d = cfg.data
    seeds = seed_list(cfg.seeds, cfg.seed0)
    X, y = batched_data(d, seeds)
    if d.has_test_data():
        test = batched_data(d, seeds, stream=2, n=cfg.n_test)
        test_note = (f"test loss on n_test = {cfg.n_test} held-out samples per seed (stream 2), "
                     f"at every checkpoint")
    else:
        test = None
        test_note = "no test curve: --data npz without --test-path has no held-out data"
    every = cfg.checkpoint_every()
    ck = np.asarray(checkpoint_steps(cfg.steps, every))
    lo, hi = cfg.window()
    fit_K = log_grid(lo, hi, cfg.fit_points)
    curve_K = np.union1d([0], log_grid(1, cfg.steps, 200))
    ck_sel = (ck >= lo) & (ck <= hi)
    boot = dict(resamples=cfg.resamples, level=cfg.level, seed=cfg.boot_seed)
    by_heads, timings, diverged, resumed = {}, {}, [], []
    for H in cfg.heads:
        unit = f"heads={H}"
        res = load_or_run(store, unit, lambda: _run_heads(cfg, H, X, y, test, seeds, fit_K, curve_K,
                                                          ck, ck_sel, boot), resumed, H)
        by_heads[H], timings[H] = res["entry"], res["time_s"]
        diverged += res["diverged"]
        if progress:
            progress(H)
    covered, why = rate_applies(d.head_model(), d.loss_fn())
    holds = [v["holds"] for v in by_heads.values()]
    if covered:
        passed = all(h is True for h in holds) and not diverged
    else:  # the rate is not claimed for this pair: nothing to pass, only divergence fails
        passed = False if diverged else None
    return dict(passed=passed, by_heads=by_heads, diverged=diverged, seeds=seeds,
                fit_steps=fit_K.tolist(), window=[lo, hi], tolerance=RATE_TOLERANCE,
                theory_applies=covered, theory_note=why, test_note=test_note,
                resumed_heads=resumed, timings_s=timings, wall_time_s=time.perf_counter() - t0)
