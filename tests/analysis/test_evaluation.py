"""Losses of trained parameters (mhajax.analysis.evaluation) against independent truths: the
per-run mean loss, its standard error and the 0-1 error against a numpy loop over samples on the
reference model of tests/helpers.py; the cross-run and per-checkpoint risks against loops of
``empirical_risk``, chunked or not; the distances against numpy norms."""
import math

import jax
import numpy as np
import pytest
from helpers import flat, make_refs

import mhajax.analysis.evaluation as ev
from mhajax.analysis.evaluation import checkpoint_risks, cross_losses, distances, evaluate, final_params
from mhajax.experiments.base import batched_data, batched_init
from mhajax.experiments.configs import DataConfig
from mhajax.losses import empirical_risk
from mhajax.train import train

TINY = DataConfig(n=8, tokens=4, dim=6, num_clusters=2)
SEEDS = [0, 1, 2]


@pytest.fixture(scope="module")
def trajectory():
    """GD from three seeds on their own training sets: 6 steps, checkpoints every 2 (C = 4)."""
    X, y = batched_data(TINY, SEEDS)
    return train(batched_init(TINY, SEEDS, 3), X, y, 1.0, steps=6, every=2), X, y


def test_evaluate_against_a_numpy_loop_over_samples(trajectory):
    traj, _, _ = trajectory
    th = final_params(traj)
    Xt, yt = batched_data(TINY, SEEDS, stream=2, n=40)
    mean, se, err = (np.asarray(a) for a in evaluate(th, Xt, yt))
    phi = make_refs(3, TINY.tokens, TINY.dim)["phi"]
    for s in range(len(SEEDS)):
        z = flat(jax.tree_util.tree_map(lambda a: a[s], th))
        m = np.asarray(yt[s]) * np.asarray(phi(z, Xt[s]))
        losses = np.logaddexp(0.0, -m)
        assert mean[s] == pytest.approx(losses.mean(), rel=1e-12, abs=0)
        assert se[s] == pytest.approx(losses.std(ddof=1) / math.sqrt(40), rel=1e-10, abs=0)
        assert np.min(np.abs(m)) > 1e-6                     # no margin whose sign rounding could flip
        assert err[s] == pytest.approx(np.sum(m <= 0) / 40, rel=1e-15, abs=0)   # a count over 40, summed in any order
    assert np.all(se > 0) and np.all(err >= 0) and np.all(err <= 1)


def test_final_params_is_the_last_checkpoint(trajectory):
    traj, _, _ = trajectory
    for a, b in zip(jax.tree_util.tree_leaves(final_params(traj)), jax.tree_util.tree_leaves(traj.params)):
        assert np.array_equal(np.asarray(a), np.asarray(b)[:, 3])


def test_cross_losses_against_a_loop(trajectory):
    traj, X, y = trajectory
    th = final_params(traj)
    M = np.asarray(cross_losses(th, X, y, TINY.head_model(), TINY.loss_fn()))
    risk = jax.jit(empirical_risk)
    for s in range(3):
        for t in range(3):
            p = jax.tree_util.tree_map(lambda a: a[t], th)
            assert M[s, t] == pytest.approx(float(risk(p, X[s], y[s])), rel=1e-13, abs=0)


def test_checkpoint_risks_chunking_is_exact(trajectory, monkeypatch):
    """Chunked evaluation (one (seed, checkpoint) pair per chunk) equals the default chunks and a
    plain double loop, and the training losses GD recorded at the checkpoints."""
    traj, X, y = trajectory
    full = np.asarray(checkpoint_risks(traj.params, X, y))
    monkeypatch.setattr(ev, "_CHUNK_ELEMENTS", 1)
    one = np.asarray(checkpoint_risks(traj.params, X, y))
    risk = jax.jit(empirical_risk)
    loop = np.array([[float(risk(jax.tree_util.tree_map(lambda a: a[s, k], traj.params), X[s], y[s]))
                      for k in range(4)] for s in range(3)])
    assert np.allclose(full, loop, rtol=1e-13, atol=0) and np.allclose(one, loop, rtol=1e-13, atol=0)
    assert np.allclose(full, np.asarray(traj.losses)[:, ::2], rtol=1e-12, atol=0)


def test_distances_against_numpy_norms(trajectory):
    traj, _, _ = trajectory
    th0 = jax.tree_util.tree_map(lambda a: a[:, 0], traj.params)
    got = np.asarray(distances(traj.params, th0))
    want = np.array([[np.linalg.norm(flat(jax.tree_util.tree_map(lambda a: a[s, c], traj.params))
                                     - flat(jax.tree_util.tree_map(lambda a: a[s], th0))) for c in range(4)]
                     for s in range(3)])
    assert got.shape == (3, 4) and np.all(got[:, 0] == 0) and np.all(got[:, 1:] > 0)
    assert np.allclose(got, want, rtol=1e-13, atol=0)
