"""The generalization experiment (SPEC §5.2): with K ≈ n steps, test − train = Õ(1/n).

For each n on a grid, ``seeds`` GD runs (one ``vmap``-ed, ``jit``-ed
:func:`mhajax.train.train`, one compile per n) train H heads for
``K = max(1, round(steps_per_n · n))`` steps on n samples of stream 0 of
each seed. Every run of a seed starts from the same θ_0 (stream 1) and is
tested on the same ``n_test`` fresh samples (stream 2), so the n-dependence
is not blurred by changing test sets. Per seed and n:

    train  L̂(θ_K)        (exact, on the training set)
    test   L(θ_K) ≈ (1/n_test) Σ_j ℓ(y_j Φ(θ_K; X_j)),   se = std_j(ℓ_j)/√n_test
    gap    L(θ_K) − L̂(θ_K)

The gap can be smaller than its noise: the test-sampling error
``se_test = √(Σ_s se_s²)/S`` of the seed-mean test loss, and — at large n the
larger part — the seed-to-seed spread of the gap itself (L̂ is an average of
n losses of one training set; its fluctuation around L is of either sign).
A grid point is *resolved* when the seed-mean gap exceeds ``2 · se_gap`` with
``se_gap = std_s(gap_s)/√S`` (ddof = 1; it includes the test-sampling noise of
each seed). The gap slope is fitted on resolved points only (at least 3,
else undefined), and the unresolved points are listed: selecting points by
their gap biases the slope, so the fit is only as good as the resolved set.
Slopes (log-log, bootstrap CI over seeds; :mod:`mhajax.rates`) of the test
loss and of the gap are compared with −1.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .errors import InputError
from .experiment import DataConfig, batched_data, batched_init, seed_list
from .losses import LOGISTIC
from .model import SOFTMAX, mha
from .rates import (bootstrap_slope, classify_slope, mean_band, upper_bound_holds,
                    RATE_TOLERANCE)
from .train import train
from .validate import positive_float, positive_int

RESOLVED_SE = 2.0  # a gap is resolved when seed-mean gap > RESOLVED_SE · se_gap


def int_grid(name: str, values, minimum: int = 1, min_len: int = 1) -> tuple:
    """Validate a strictly increasing list of integers >= ``minimum``."""
    vals = list(values)
    if len(vals) < min_len:
        raise InputError(f"{name} needs at least {min_len} values, got {vals!r}")
    vals = [positive_int(name, v, minimum=minimum) for v in vals]
    if any(b <= a for a, b in zip(vals, vals[1:])):
        raise InputError(f"{name} must be strictly increasing, got {vals!r}")
    return tuple(vals)


def steps_for(n: int, steps_per_n: float) -> int:
    """``K = max(1, round(steps_per_n · n))``."""
    return max(1, int(round(steps_per_n * n)))


@dataclass(frozen=True)
class GeneralizationConfig:
    ns: tuple = (32, 64, 128, 256, 512)
    heads: int = 4
    seeds: int = 8
    seed0: int = 0
    steps_per_n: float = 1.0
    lr: float = 1.0
    n_test: int = 32768
    log_power: float = 2.0
    resamples: int = 2000
    level: float = 0.95
    boot_seed: int = 0
    data: DataConfig = field(default_factory=DataConfig)  # data.n is unused: ns sets n

    def validate(self):
        object.__setattr__(self, "ns", int_grid("n (grid)", self.ns, minimum=2, min_len=3))
        positive_int("heads", self.heads)
        seed_list(self.seeds, self.seed0)
        positive_int("seeds", self.seeds, minimum=2)
        positive_float("steps_per_n", self.steps_per_n)
        positive_float("lr", self.lr)
        positive_int("n_test", self.n_test, minimum=2)
        positive_float("log_power", self.log_power, allow_zero=True)
        positive_int("resamples", self.resamples, minimum=100)
        if not 0 < positive_float("level", self.level) < 1:
            raise InputError(f"level must lie in (0, 1), got {self.level!r}")
        positive_int("boot_seed", self.boot_seed, minimum=0)
        self.data.validate()
        return self

    def to_dict(self):
        return asdict(self)


def sample_losses(params, X, y, model=SOFTMAX, loss=LOGISTIC, chunk: int = 2048):
    """Per-sample ``(ℓ(y_j Φ(θ; X_j)), 1[y_j Φ <= 0])`` for ``X [m, T, d]``,
    in chunks of ``chunk`` samples (bounded memory); pure and ``vmap``-able."""
    def one(xy):
        x, t = xy
        z = t * mha(params, x, model)
        return loss.value(z), (z <= 0).astype(x.dtype)
    return jax.lax.map(one, (X, y), batch_size=chunk)


def _summary(params, X, y, model):
    l, e = sample_losses(params, X, y, model)
    m = X.shape[0]
    return jnp.mean(l), jnp.std(l, ddof=1) / jnp.sqrt(m), jnp.mean(e)


@partial(jax.jit, static_argnames=("model",))
def evaluate(params, X, y, model=SOFTMAX):
    """``(mean loss [S], standard error [S], 0-1 error [S])`` of a batch of
    parameters (leaves ``[S, ...]``) on data sets ``X [S, m, T, d]``, ``y [S, m]``."""
    return jax.vmap(lambda p, a, b: _summary(p, a, b, model))(params, X, y)


def final_params(traj):
    """θ_K of a batched trajectory: the last checkpoint, leaves ``[S, ...]``."""
    return jax.tree_util.tree_map(lambda a: a[:, -1], traj.params)


def run(cfg: GeneralizationConfig, progress=None) -> dict:
    """Run the experiment; returns the summary dict (per-n numbers, fits, verdict)."""
    cfg.validate()
    t0 = time.perf_counter()
    d = cfg.data
    seeds = seed_list(cfg.seeds, cfg.seed0)
    S = len(seeds)
    Xt, yt = batched_data(d, seeds, stream=2, n=cfg.n_test)
    th0 = batched_init(d, seeds, cfg.heads)
    rows, timings, diverged = [], {}, []
    for n in cfg.ns:
        t = time.perf_counter()
        K = steps_for(n, cfg.steps_per_n)
        X, y = batched_data(d, seeds, stream=0, n=n)
        traj = train(th0, X, y, cfg.lr, steps=K, every=K)
        th = final_params(traj)
        test, se, err = (np.asarray(a) for a in evaluate(th, Xt, yt))
        _, _, train_err = (np.asarray(a) for a in evaluate(th, X, y))
        finite = np.asarray(traj.finite)
        for s, seed in enumerate(seeds):
            if not finite[s].all():
                diverged.append(dict(n=n, seed=seed, step=int(np.argmin(finite[s]))))
        train_loss = np.asarray(traj.losses[:, -1])
        rows.append(dict(n=n, steps=K, train=train_loss, test=test, test_se=se, gap=test - train_loss,
                         test_error=err, train_error=train_err))
        timings[n] = time.perf_counter() - t
        if progress:
            progress(n)
    ns = np.asarray(cfg.ns, dtype=np.float64)
    per = {k: np.stack([r[k] for r in rows], axis=1) for k in
           ("train", "test", "test_se", "gap", "test_error", "train_error")}  # [S, m]
    gap_mean = per["gap"].mean(axis=0)
    se_test = np.sqrt((per["test_se"] ** 2).sum(axis=0)) / S
    se_gap = per["gap"].std(axis=0, ddof=1) / np.sqrt(S)
    resolved = gap_mean > RESOLVED_SE * se_gap
    boot = dict(resamples=cfg.resamples, level=cfg.level, seed=cfg.boot_seed)
    fits = {}
    for name in ("test", "train"):
        fits[name] = bootstrap_slope(ns, per[name], **boot)
        fits[name + "_log_corrected"] = bootstrap_slope(ns, per[name], log_power=cfg.log_power, **boot)
    if resolved.sum() >= 3:
        fits["gap"] = bootstrap_slope(ns[resolved], per["gap"][:, resolved], **boot)
        fits["gap_log_corrected"] = bootstrap_slope(ns[resolved], per["gap"][:, resolved],
                                                    log_power=cfg.log_power, **boot)
    else:
        fits["gap"] = fits["gap_log_corrected"] = None
    verdicts = {}
    for name in ("test", "gap", "train"):
        f = fits[name]
        verdicts[name] = (dict(classification="undefined", holds=None) if f is None else
                          dict(classification=classify_slope(f["ci"], f["slope"]),
                               holds=upper_bound_holds(f["ci"], f["slope"])))
    passed = (verdicts["test"]["holds"] is True and verdicts["gap"]["holds"] is True
              and not diverged)
    curves = {k: v.tolist() for k, v in per.items()}
    bands = {k: mean_band(per[k], **boot) for k in ("train", "test", "gap")}
    return dict(passed=passed, ns=list(cfg.ns), steps=[r["steps"] for r in rows], seeds=seeds,
                per_seed=curves, bands=bands, se_test=se_test.tolist(), se_gap=se_gap.tolist(),
                resolved=resolved.tolist(), resolved_rule=f"seed-mean gap > {RESOLVED_SE:g} x std_s(gap)/sqrt(S)",
                fits=fits, verdicts=verdicts, diverged=diverged, tolerance=RATE_TOLERANCE,
                timings_s=timings, wall_time_s=time.perf_counter() - t0)
