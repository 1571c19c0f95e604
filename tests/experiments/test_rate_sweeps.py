"""The four rate experiments on tiny configurations: structure, consistency, padding."""
import math

import jax
import numpy as np
import pytest

from mhajax.experiments.configs import make
from mhajax.experiments.convergence import ConvergenceConfig, run as run_convergence
from mhajax.errors import InputError
from mhajax.experiments.configs import DataConfig
from mhajax.experiments.base import batched_data, batched_init
from mhajax.analysis.evaluation import evaluate, final_params
from mhajax.experiments.generalization import GeneralizationConfig, run as run_generalization
from mhajax.losses import empirical_risk
from mhajax.experiments.heads import HeadsConfig, log6, run as run_heads, threshold
from mhajax.experiments.quasi_convexity import QuasiConvexityConfig, run as run_quasi
from mhajax.train import train

pytestmark = pytest.mark.slow   # whole runs of a check: the slow tier

TINY = DataConfig(n=8, tokens=4, dim=6, num_clusters=2)


def test_convergence_tiny():
    cfg = make(ConvergenceConfig, heads=(1, 2), seeds=2, steps=24, fit_points=6, resamples=200, data=TINY)
    s = run_convergence(cfg)
    assert set(s.by_heads) == {1, 2}
    for H, v in s.by_heads.items():
        c = v.curves
        assert np.asarray(c.loss).shape == (2, len(c.steps))
        assert np.asarray(c.distance).shape == (2, len(c.checkpoints))
        assert c.distance[0][0] == 0.0
        assert v.loss_slope.slope < 0 and len(v.witness.gamma) == 2
        assert v.classification in ("matches", "steeper", "shallower", "undefined")
    assert s.window == [2, 24] and isinstance(s.passed, bool)
    assert s.theory_applies is True and s.resumed_heads == []


def test_convergence_test_curve_against_independent_risks():
    """curves.test_loss / train_loss_at_checkpoints equal mhajax.losses.empirical_risk of the
    checkpoint parameters (re-trained here) on the held-out (stream 2) / training sets."""
    cfg = make(ConvergenceConfig, heads=(2,), seeds=2, steps=24, every=8, fit_points=6, resamples=200,
                            n_test=40, data=TINY)
    s = run_convergence(cfg)
    c = s.by_heads[2].curves
    assert c.test_checkpoints == c.checkpoints == [0, 8, 16, 24]
    S, C = 2, 4
    assert np.asarray(c.test_loss).shape == (S, C)
    assert np.asarray(c.train_loss_at_checkpoints).shape == (S, C)
    band = c.test_loss_band
    assert band._fields == c.loss_band._fields and len(band.mean) == C
    assert np.allclose(band.mean, np.mean(c.test_loss, axis=0), rtol=1e-13)
    seeds = s.seeds
    X, y = batched_data(TINY, seeds)
    Xt, yt = batched_data(TINY, seeds, stream=2, n=40)
    traj = train(batched_init(TINY, seeds, 2), X, y, 1.0, steps=24, every=8)
    risk = jax.jit(empirical_risk)
    for si in range(S):
        for ci in range(C):
            th = jax.tree_util.tree_map(lambda a: a[si, ci], traj.params)
            test = float(risk(th, Xt[si], yt[si]))
            train_ = float(risk(th, X[si], y[si]))
            assert abs(c.test_loss[si][ci] - test) <= 1e-12 * test
            assert abs(c.train_loss_at_checkpoints[si][ci] - train_) <= 1e-12 * train_
    # the held-out set is not the training set: the two curves differ
    assert np.max(np.abs(np.subtract(c.test_loss, c.train_loss_at_checkpoints))) > 1e-3


def test_generalization_tiny():
    cfg = make(GeneralizationConfig, ns=(8, 16, 32), heads=1, seeds=2, n_test=64, resamples=200, data=TINY)
    s = run_generalization(cfg)
    assert s.steps == [8, 16, 32]
    for k in ("train", "test", "gap", "test_se"):
        assert np.asarray(getattr(s.per_seed, k)).shape == (2, 3)
    gap = np.asarray(s.per_seed.test) - np.asarray(s.per_seed.train)
    assert np.allclose(gap, s.per_seed.gap)
    assert len(s.resolved) == 3 and s.fits.test.slope is not None
    assert s.verdicts.gap.holds in (True, False, None)


def test_heads_tiny_matches_unpadded_runs():
    """The padded (H, seed) batch gives the same test loss as separate unpadded runs."""
    cfg = make(HeadsConfig, ns=(8, 16), heads=(1, 3), seeds=2, n_test=64, data=TINY)
    s = run_heads(cfg)
    seeds = s.seeds
    Xt, yt = batched_data(TINY, seeds, stream=2, n=64)
    for n in (8, 16):
        v = s.by_n[n]
        assert v.threshold == threshold(n, 1.0) and v.log6 == math.log(n) ** 6
        X, y = batched_data(TINY, seeds, stream=0, n=n)
        for H in (1, 3):
            traj = train(batched_init(TINY, seeds, H), X, y, 1.0, steps=n, every=n)
            test = np.asarray(evaluate(final_params(traj), Xt, yt)[0])
            assert np.max(np.abs(test - np.asarray(v.by_heads[H].test))) < 1e-12
            assert np.max(np.abs(np.asarray(traj.losses[:, -1]) - v.by_heads[H].train)) < 1e-12
        reached = [H for H in (1, 3) if v.by_heads[H].mean_test <= v.threshold]
        assert v.reached == reached
        assert v.smallest_heads == (reached[0] if reached else None)
    assert log6(math.e) == 1.0


def test_quasi_tiny():
    cfg = make(QuasiConvexityConfig, heads=(1, 2), seeds=1, steps=10, every=5, grid=8, data=TINY)
    s = run_quasi(cfg)
    assert s.summary["1/final"].pairs == 2 and s.summary["1/witness"].pairs == 3
    assert s.passed and all(r.holds for r in s.records)


@pytest.mark.parametrize("make", [
    lambda: make(ConvergenceConfig, steps=4, data=TINY),
    lambda: make(ConvergenceConfig, seeds=1, data=TINY),
    lambda: make(ConvergenceConfig, lr=float("nan"), data=TINY),
    lambda: make(ConvergenceConfig, fit_start=2000, data=TINY),
    lambda: make(GeneralizationConfig, ns=(8, 16), data=TINY),
    lambda: make(GeneralizationConfig, ns=(16, 8, 32), data=TINY),
    lambda: make(GeneralizationConfig, ns=(1, 8, 32), data=TINY),
    lambda: make(GeneralizationConfig, level=1.0, data=TINY),
    lambda: make(HeadsConfig, heads=(2, 1), data=TINY),
    lambda: make(HeadsConfig, regime_c=0.0, data=TINY),
    lambda: make(QuasiConvexityConfig, references=("final", "bogus"), data=TINY),
    lambda: make(QuasiConvexityConfig, grid=1, data=TINY),
    lambda: make(QuasiConvexityConfig, data=DataConfig(dim=3)),
])
def test_config_validation(make):
    with pytest.raises(InputError):
        make().validate()
