"""Full-batch gradient descent on the empirical risk (SPEC §2).

``θ_{k+1} = θ_k − η ∇L̂(θ_k)`` with ``optax.sgd(η)``, run as ``lax.scan``
segments of ``every`` steps between checkpoints. :func:`gd_trajectory` is pure;
:func:`train` ``vmap``s it over a batch of runs (seeds, configurations with the
same shapes) and ``jit``s it once per distinct shape — the step size is a
traced argument, so sweeping η does not recompile.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from .losses import LOGISTIC, Loss, empirical_risk
from .model import SOFTMAX, HeadModel


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


def _all_finite(tree):
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(l)) for l in jax.tree_util.tree_leaves(tree)]))


def gd_trajectory(params0, X, y, lr, *, steps: int, every: int, model: HeadModel = SOFTMAX,
                  loss: Loss = LOGISTIC) -> Trajectory:
    """Run ``steps`` GD steps of size ``lr`` from ``params0`` and keep θ at
    :func:`checkpoint_steps`. Pure and traceable; ``steps``/``every`` static."""
    opt = optax.sgd(lr)
    value_and_grad = jax.value_and_grad(lambda th: empirical_risk(th, X, y, model, loss))

    def step(carry, _):
        th, state = carry
        L, g = value_and_grad(th)
        upd, state = opt.update(g, state, th)
        return (optax.apply_updates(th, upd), state), (L, _all_finite(th) & jnp.isfinite(L))

    def segment(carry, length):
        return jax.lax.scan(step, carry, None, length=length)

    ck = checkpoint_steps(steps, every)
    full, rem = divmod(steps, every)
    carry = (params0, opt.init(params0))
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
    L_last = empirical_risk(th_last, X, y, model, loss)
    losses.append(L_last[None])
    finite.append((_all_finite(th_last) & jnp.isfinite(L_last))[None])
    params = jax.tree_util.tree_map(
        lambda first, *rest: jnp.concatenate([first[None], *rest]), kept[0], *kept[1:])
    return Trajectory(jnp.asarray(ck), params, jnp.concatenate(losses), jnp.concatenate(finite))


@partial(jax.jit, static_argnames=("steps", "every", "model", "loss"))
def train(params0, X, y, lr, *, steps: int, every: int, model: HeadModel = SOFTMAX,
          loss: Loss = LOGISTIC) -> Trajectory:
    """:func:`gd_trajectory` ``vmap``-ed over a leading batch axis of
    ``params0``, ``X [S, n, T, d]`` and ``y [S, n]`` (``lr`` shared or ``[S]``)."""
    lr = jnp.broadcast_to(jnp.asarray(lr, X.dtype), (X.shape[0],))
    run = partial(gd_trajectory, steps=steps, every=every, model=model, loss=loss)
    return jax.vmap(run)(params0, X, y, lr)
