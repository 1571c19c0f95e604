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

Training and testing use ``cfg.data.head_model()`` and ``cfg.data.loss_fn()``. Where the
rate analysis does not cover the pair (:func:`mhajax.rates.rate_applies`) the slopes are
informational and ``passed`` is None (False if a run diverged). ``--data npz`` needs
``--test-path``: without held-out data the check refuses to run (:class:`InputError`).
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
from .io import to_jsonable
from .losses import LOGISTIC
from .model import SOFTMAX, mha
from .rates import (bootstrap_slope, classify_slope, mean_band, rate_applies, upper_bound_holds,
                    RATE_TOLERANCE)
from .resume import load_or_run
from .train import train_runs
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
        require_test_data(self.data, "generalization")
        return self

    def to_dict(self):
        return asdict(self)


def require_test_data(d: DataConfig, check: str) -> None:
    """Raise :class:`InputError` when ``d`` has no held-out data (``--data npz`` without
    ``--test-path``): ``check`` measures a test loss and cannot run without one."""
    if not d.has_test_data():
        raise InputError(f"{check} measures a held-out test loss: --data npz needs --test-path "
                         f"FILE.npz (a second file; test draws from --data-path would overlap training)")


def sample_losses(params, X, y, model=SOFTMAX, loss=LOGISTIC, chunk: int = 2048):
    """Per-sample ``(ℓ(y_j Φ(θ; X_j)), 1[y_j Φ <= 0])`` for ``X [m, T, d]``,
    in chunks of ``chunk`` samples (bounded memory); pure and ``vmap``-able."""
    def one(xy):
        x, t = xy
        z = t * mha(params, x, model)
        return loss.value(z), (z <= 0).astype(x.dtype)
    return jax.lax.map(one, (X, y), batch_size=chunk)


def _summary(params, X, y, model, loss):
    l, e = sample_losses(params, X, y, model, loss)
    m = X.shape[0]
    return jnp.mean(l), jnp.std(l, ddof=1) / jnp.sqrt(m), jnp.mean(e)


@partial(jax.jit, static_argnames=("model", "loss"))
def evaluate(params, X, y, model=SOFTMAX, loss=LOGISTIC):
    """``(mean loss [S], standard error [S], 0-1 error [S])`` of a batch of
    parameters (leaves ``[S, ...]``) on data sets ``X [S, m, T, d]``, ``y [S, m]``:
    mean of ``ℓ(y_j Φ(θ; X_j))`` with the head model ``model`` and the loss ``loss``."""
    return jax.vmap(lambda p, a, b: _summary(p, a, b, model, loss))(params, X, y)


def final_params(traj):
    """θ_K of a batched trajectory: the last checkpoint, leaves ``[S, ...]``."""
    return jax.tree_util.tree_map(lambda a: a[:, -1], traj.params)


def _floats(v) -> np.ndarray:
    """A saved list back to float64, ``None`` (a NaN/inf in JSON) as NaN."""
    return np.array([np.nan if x is None else x for x in v], dtype=np.float64)


def _run_n(cfg, n, th0, test, seeds, model, loss) -> dict:
    """One unit (one n): train every seed for K ≈ n steps, test. JSON-able."""
    t = time.perf_counter()
    K = steps_for(n, cfg.steps_per_n)
    X, y = batched_data(cfg.data, seeds, stream=0, n=n)
    traj = train_runs(th0, X, y, cfg.lr, steps=K, every=K, model=model, loss=loss)
    th = final_params(traj)
    test_l, se, err = (np.asarray(a) for a in evaluate(th, test[0], test[1], model, loss))
    _, _, train_err = (np.asarray(a) for a in evaluate(th, X, y, model, loss))
    finite = np.asarray(traj.finite)
    diverged = [dict(n=n, seed=seed, step=int(np.argmin(finite[s])))
                for s, seed in enumerate(seeds) if not finite[s].all()]
    train_loss = np.asarray(traj.losses[:, -1])
    row = dict(n=n, steps=K, train=train_loss, test=test_l, test_se=se, gap=test_l - train_loss,
               test_error=err, train_error=train_err)
    return to_jsonable(dict(row=row, diverged=diverged, time_s=time.perf_counter() - t))


def run(cfg: GeneralizationConfig, progress=None, store=None) -> dict:
    """Run the experiment; returns the summary dict (per-n numbers, fits, verdict).

    ``store`` (a :class:`mhajax.resume.ProgressStore`) keeps each finished n; a rerun
    loads them (``resumed_ns``) and computes the rest."""
    cfg.validate()
    t0 = time.perf_counter()
    d = cfg.data
    model, loss = d.head_model(), d.loss_fn()
    seeds = seed_list(cfg.seeds, cfg.seed0)
    S = len(seeds)
    test = batched_data(d, seeds, stream=2, n=cfg.n_test)
    th0 = batched_init(d, seeds, cfg.heads)
    rows, timings, diverged, resumed = [], {}, [], []
    for n in cfg.ns:
        unit = f"n={n}"
        res = load_or_run(store, unit, lambda: _run_n(cfg, n, th0, test, seeds, model, loss), resumed, n)
        r = res["row"]
        rows.append(dict(r, **{k: _floats(r[k]) for k in
                               ("train", "test", "test_se", "gap", "test_error", "train_error")}))
        timings[n] = res["time_s"]
        diverged += res["diverged"]
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
    covered, why = rate_applies(model, loss)
    if covered:
        passed = (verdicts["test"]["holds"] is True and verdicts["gap"]["holds"] is True
                  and not diverged)
    else:  # the Õ(1/n) rate is not claimed for this pair: informational
        passed = False if diverged else None
    curves = {k: v.tolist() for k, v in per.items()}
    bands = {k: mean_band(per[k], **boot) for k in ("train", "test", "gap")}
    return dict(passed=passed, ns=list(cfg.ns), steps=[r["steps"] for r in rows], seeds=seeds,
                per_seed=curves, bands=bands, se_test=se_test.tolist(), se_gap=se_gap.tolist(),
                resolved=resolved.tolist(), resolved_rule=f"seed-mean gap > {RESOLVED_SE:g} x std_s(gap)/sqrt(S)",
                fits=fits, verdicts=verdicts, diverged=diverged, tolerance=RATE_TOLERANCE,
                theory_applies=covered, theory_note=why, resumed_ns=resumed, timings_s=timings, wall_time_s=time.perf_counter() - t0)
