"""Losses of trained parameters on data sets: per sample, per run, per checkpoint, across runs.

S runs (seeds), C checkpoints, data sets ``X [S, m, T, d]``, ``y [S, m]`` (one per run); params
leaves ``[S, ...]`` (one θ per run) or ``[S, C, ...]`` (a trajectory's checkpoints). The loss of θ
on a sample is ``ℓ(y Φ(θ; X))``. Every function is pure; the array programs are jitted.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from mhajax.losses import LOGISTIC, risk
from mhajax.models.base import output
from mhajax.models.softmax import SOFTMAX


def sample_losses(params, X, y, model=SOFTMAX, loss=LOGISTIC, chunk: int = 2048):
    """Per-sample ``(ℓ(y_j Φ(θ; X_j)), 1[y_j Φ <= 0])`` for ``X [m, T, d]``,
    in chunks of ``chunk`` samples (bounded memory); pure and ``vmap``-able."""
    def one(xy):
        x, t = xy
        z = t * output(params, x, model)
        return loss.value(z), (z <= 0).astype(x.dtype)
    return jax.lax.map(one, (X, y), batch_size=chunk)


def _summary(params, X, y, model, loss):
    l, e = sample_losses(params, X, y, model, loss)
    m = X.shape[0]
    return jnp.mean(l), jnp.std(l, ddof=1) / jnp.sqrt(m), jnp.mean(e)


@partial(jax.jit, static_argnames=("model", "loss"))
def evaluate(params, X, y, model=SOFTMAX, loss=LOGISTIC):
    """``(mean loss [S], standard error [S], 0-1 error [S])`` of a batch of parameters
    (leaves ``[S, ...]``) on data sets ``X [S, m, T, d]``, ``y [S, m]``: the mean of
    ``ℓ(y_j Φ(θ; X_j))`` with the model ``model`` and the loss ``loss``."""
    return jax.vmap(lambda p, a, b: _summary(p, a, b, model, loss))(params, X, y)


def final_params(traj):
    """θ_K of a batched trajectory: the last checkpoint, leaves ``[S, ...]``."""
    return jax.tree_util.tree_map(lambda a: a[:, -1], traj.params)


@partial(jax.jit, static_argnames=("model", "loss"))
def cross_losses(th, X, y, model, loss):
    """``M [S, S]``: ``M[s, s'] = L̂_s(θ_{s'})``, model s' (leaves ``[S, ...]``) on training
    set s of ``X [S, n, T, d]``, ``y [S, n]``."""
    S = y.shape[0]
    return jax.vmap(lambda a, b: evaluate(th, jnp.broadcast_to(a, (S,) + a.shape), jnp.broadcast_to(b, (S,) + b.shape),
                                          model, loss)[0])(X, y)


@jax.jit
def distances(params, params0):
    """``‖θ_c − θ_0‖`` for leaves ``[S, C, ...]`` and ``[S, ...]`` -> ``[S, C]``."""
    sq = [jnp.sum((a - b[:, None]) ** 2, axis=tuple(range(2, a.ndim)))
          for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(params0))]
    return jnp.sqrt(sum(sq))


#: elements of the largest intermediate (``[b, m, H, T, T]`` attention weights) per chunk of
#: :func:`checkpoint_risks`: bounds its memory whatever S, C, m and H are.
_CHUNK_ELEMENTS = 2 ** 24


@partial(jax.jit, static_argnames=("model", "loss", "batch"))
def _checkpoint_risks(params, X, y, *, model, loss, batch):
    leaves = jax.tree_util.tree_leaves(params)
    S, C = leaves[0].shape[:2]
    flat = jax.tree_util.tree_map(lambda a: a.reshape((S * C,) + a.shape[2:]), params)
    seed_of = jnp.repeat(jnp.arange(S), C)
    one = lambda a: risk(a[0], X[a[1]], y[a[1]], model, loss)  # noqa: E731
    return jax.lax.map(one, (flat, seed_of), batch_size=batch).reshape(S, C)


def checkpoint_risks(params, X, y, model=SOFTMAX, loss=LOGISTIC):
    """``L(θ_{s,c}) = (1/m) Σ_j ℓ(y_{s,j} Φ(θ_{s,c}; X_{s,j}))``: params leaves ``[S, C, ...]``,
    ``X [S, m, T, d]``, ``y [S, m]`` -> ``[S, C]``, in chunks of (seed, checkpoint) pairs that bound memory."""
    leaves = jax.tree_util.tree_leaves(params)
    S, C = leaves[0].shape[:2]
    m, T = X.shape[1], X.shape[2]
    H = leaves[0].shape[2] if leaves[0].ndim > 2 else 1
    batch = int(max(1, min(S * C, _CHUNK_ELEMENTS // max(1, m * H * T * T))))
    return _checkpoint_risks(params, X, y, model=model, loss=loss, batch=batch)


__all__ = ["sample_losses", "evaluate", "final_params", "cross_losses", "distances", "checkpoint_risks"]
