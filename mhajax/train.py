"""Full-batch gradient descent on the empirical risk (SPEC §2).

``θ_{k+1} = θ_k − η ∇L̂(θ_k)`` with ``optax.sgd(η)``, run as ``lax.scan``
segments of ``every`` steps between checkpoints. :func:`gd_trajectory` is pure;
:func:`train` ``vmap``s it over a batch of runs (seeds, configurations with the
same shapes) and ``jit``s it once per distinct shape — the step size is a
traced argument, so sweeping η does not recompile.

:func:`train_segment` runs one piece of such a trajectory from a given iterate and
optimizer state (any model kind, the coupled two-layer model included); chaining the pieces of
:func:`segment_bounds` keeps exactly the checkpoints of the whole run, which is how a
long run saves its state every N steps and resumes (:mod:`mhajax.experiments.weak_convexity`).
"""
from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from mhajax.losses import LOGISTIC, Loss, empirical_risk
from mhajax.models.base import HeadModel
from mhajax.models.softmax import SOFTMAX
from mhajax.runtime import memory as mem
from mhajax.runtime.sharding import device_count, over_runs


class Trajectory(NamedTuple):
    """GD output. Leading axes: ``[C]`` checkpoints (``[S, C]`` when batched)."""

    steps: jax.Array        # [C] step index of each checkpoint (0, every, 2·every, ..., steps)
    params: object          # parameters at each checkpoint, leaves [C, ...]
    losses: jax.Array       # [steps + 1] L̂ at every iterate θ_0 .. θ_K
    finite: jax.Array       # [steps + 1] whether θ_k and L̂(θ_k) are all finite


def checkpoint_steps(steps: int, every: int) -> list[int]:
    """``[0, every, 2·every, ..., steps]`` (the last one added if not a multiple)."""
    out = list(range(0, steps + 1, every))
    if out[-1] != steps:
        out.append(steps)
    return out


def num_checkpoints(steps: int, every: int) -> int:
    """``len(checkpoint_steps(steps, every))``, without the list: ``⌊steps/every⌋ + 1``, + 1 if
    ``every`` does not divide ``steps``."""
    return steps // every + 1 + (steps % every != 0)


def _all_finite(tree):
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(l)) for l in jax.tree_util.tree_leaves(tree)]))


def gd_segment(risk, params0, lr, *, steps: int, every: int, opt_state0=None):
    """GD on a scalar ``risk(θ)``: ``steps`` steps of size ``lr`` from ``params0`` (and
    the optimizer state ``opt_state0``; ``None``: a fresh ``optax.sgd`` state), keeping θ at
    :func:`checkpoint_steps` ``(steps, every)`` (relative to the start). Returns
    ``(Trajectory, final optimizer state)``. Pure and traceable; ``steps``/``every`` static.

    A trajectory cut into consecutive segments whose lengths are multiples of ``every``
    (the last one: the rest) keeps exactly the checkpoints of the whole one."""
    opt = optax.sgd(lr)
    value_and_grad = jax.value_and_grad(risk)

    def step(carry, _):
        th, state = carry
        L, g = value_and_grad(th)
        upd, state = opt.update(g, state, th)
        return (optax.apply_updates(th, upd), state), (L, _all_finite(th) & jnp.isfinite(L))

    def segment(carry, length):
        return jax.lax.scan(step, carry, None, length=length)

    ck = checkpoint_steps(steps, every)
    full, rem = divmod(steps, every)
    carry = (params0, opt.init(params0) if opt_state0 is None else opt_state0)
    kept, losses, finite = [params0], [], []

    def seg_body(carry, _):
        carry, (L, ok) = segment(carry, every)
        return carry, (carry[0], L, ok)

    if full:
        carry, (ps, L, ok) = jax.lax.scan(seg_body, carry, None, length=full)
        kept.append(ps)
        losses.append(L.reshape(-1))
        finite.append(ok.reshape(-1))
    if rem:
        carry, (L, ok) = segment(carry, rem)
        kept.append(jax.tree_util.tree_map(lambda a: a[None], carry[0]))
        losses.append(L)
        finite.append(ok)
    th_last = carry[0]
    L_last = risk(th_last)
    losses.append(L_last[None])
    finite.append((_all_finite(th_last) & jnp.isfinite(L_last))[None])
    params = jax.tree_util.tree_map(
        lambda first, *rest: jnp.concatenate([first[None], *rest]), kept[0], *kept[1:])
    traj = Trajectory(jnp.asarray(ck), params, jnp.concatenate(losses), jnp.concatenate(finite))
    return traj, carry[1]


def _risk_fn(X, y, model, loss):
    """``θ -> L̂(θ)`` on ``(X, y)`` for any model kind (per-head or coupled)."""
    return lambda th: empirical_risk(th, X, y, model, loss)


def gd_trajectory(params0, X, y, lr, *, steps: int, every: int, model: HeadModel = SOFTMAX,
                  loss: Loss = LOGISTIC) -> Trajectory:
    """Run ``steps`` GD steps of size ``lr`` from ``params0`` and keep θ at
    :func:`checkpoint_steps`. Pure and traceable; ``steps``/``every`` static."""
    return gd_segment(_risk_fn(X, y, model, loss), params0, lr, steps=steps, every=every)[0]


def train(params0, X, y, lr, *, steps: int, every: int, model: HeadModel = SOFTMAX,
          loss: Loss = LOGISTIC, force: bool = False) -> Trajectory:
    """:func:`gd_trajectory` ``vmap``-ed over a leading batch axis of
    ``params0``, ``X [S, n, T, d]`` and ``y [S, n]`` (``lr`` shared or ``[S]``), jitted (one
    compile per shape and static option). Refused (an ``InputError`` naming ``runs``, ``H``,
    ``n``, ``T``, ``d`` or ``steps``) when its arrays (:func:`mhajax.runtime.memory.gd`) exceed the
    memory available, unless ``force``."""
    leaves = jax.tree_util.tree_leaves(params0)
    if X.ndim == 4 and leaves and leaves[0].ndim >= 2:
        p = sum(math.prod(leaf.shape[2:]) for leaf in leaves)
        mem.guard_call("train", lambda runs, H, n, T, d, steps: mem.gd(runs, n, T, d, H, p,
                                                                       num_checkpoints(steps, every), steps),
                       X.dtype.itemsize, force=force, runs=X.shape[0], H=leaves[0].shape[1], n=X.shape[1],
                       T=X.shape[2], d=X.shape[3], steps=steps)
    return _train(params0, X, y, lr, steps=steps, every=every, model=model, loss=loss)


@partial(jax.jit, static_argnames=("steps", "every", "model", "loss"))
def _train(params0, X, y, lr, *, steps: int, every: int, model: HeadModel, loss: Loss) -> Trajectory:
    """:func:`train` without its guard."""
    lr = jnp.broadcast_to(jnp.asarray(lr, X.dtype), (X.shape[0],))
    run = partial(gd_trajectory, steps=steps, every=every, model=model, loss=loss)
    return jax.vmap(run)(params0, X, y, lr)


def opt_init(params, lr=1.0):
    """The optimizer state GD starts from (``optax.sgd``: empty), for :func:`train_segment`."""
    return optax.sgd(lr).init(params)


@partial(jax.jit, static_argnames=("steps", "every", "model", "loss"))
def train_segment(params0, opt_state0, X, y, lr, *, steps: int, every: int,
                  model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC):
    """One resumable segment of :func:`train`: ``steps`` GD steps from ``(params0,
    opt_state0)`` (leading batch axis ``[S]``), ``vmap``-ed like :func:`train`. Returns
    ``(Trajectory, opt_state)``: checkpoints at ``0, every, ..., steps`` *relative to the
    segment start*, and the state to continue from. Any model kind (a coupled model such
    as :data:`~mhajax.models.two_layer.TWO_LAYER` too). One compile per segment length."""
    lr = jnp.broadcast_to(jnp.asarray(lr, X.dtype), (X.shape[0],))

    def one(th, st, X, y, lr):
        return gd_segment(_risk_fn(X, y, model, loss), th, lr, steps=steps, every=every,
                          opt_state0=st)
    return jax.vmap(one)(params0, opt_state0, X, y, lr)


def segment_bounds(steps: int, every: int, save_every: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` covering ``0..steps`` in pieces of ``save_every`` steps
    (a multiple of ``every``; the last piece is the rest); ``save_every = 0`` or
    ``>= steps``: one piece. Every ``start`` is a multiple of ``every``, so the pieces'
    checkpoints are exactly :func:`checkpoint_steps` ``(steps, every)``."""
    if save_every and save_every % every:
        raise ValueError(f"save_every={save_every} is not a multiple of every={every}")
    if not save_every or save_every >= steps:
        return [(0, steps)]
    return [(a, min(a + save_every, steps)) for a in range(0, steps, save_every)]


def train_runs(params0, X, y, lr, *, steps: int, every: int, model: HeadModel = SOFTMAX,
               loss: Loss = LOGISTIC) -> Trajectory:
    """:func:`train`, with the run axis (leading axis of ``params0``, ``X [S, n, T, d]``,
    ``y [S, n]``) split over every device when there are several
    (:func:`mhajax.runtime.sharding.over_runs`: a 1-D mesh, ``jax.shard_map``; across processes
    after ``jax.distributed.initialize``). One device: exactly :func:`train`. Each run is
    the same pure GD either way, so results agree to rounding (XLA may pick other kernels
    for another per-device batch size)."""
    if device_count() == 1:
        return _train(params0, X, y, lr, steps=steps, every=every, model=model, loss=loss)
    lr = jnp.broadcast_to(jnp.asarray(lr, X.dtype), (X.shape[0],))
    run = partial(gd_trajectory, steps=steps, every=every, model=model, loss=loss)
    return over_runs(jax.vmap(run), (params0, X, y, lr))
