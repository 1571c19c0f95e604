"""Full-batch gradient descent on the empirical risk (docs/theory.md §2).

``θ_{k+1} = θ_k − η ∇L̂(θ_k)`` with ``optax.sgd(η)``, run as ``lax.scan`` segments of
``every`` steps between checkpoints. Two functions:

* :func:`gd` — one run, pure and traceable: ``steps`` steps from ``(θ, optimizer state)``,
  the iterates kept at :func:`checkpoint_steps`;
* :func:`train` — the validated entry (its sizes checked against memory in
  :func:`mhajax.api.train`) over :func:`runs`, the package's own: :func:`gd` ``vmap``-ed over a batch of
  runs (seeds, configurations with the same shapes), ``jit``-ed once per shape (the step
  size is traced: sweeping η does not recompile), the run axis split over every device when
  there are several. Started from the optimizer state a
  previous call returned, it continues that trajectory: chaining the pieces of
  :func:`segment_bounds` keeps exactly the checkpoints of the whole run, which is how a long
  run saves its state every N steps and resumes (:mod:`mhajax.experiments.weak_convexity`).
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from mhajax.errors import InputError
from mhajax.losses import LOGISTIC, Loss, get_loss, risk
from mhajax.models.base import HeadModel, check_problem, get_model
from mhajax.models.softmax import SOFTMAX
from mhajax.runtime.sharding import device_count, over_runs
from mhajax.validate import positive_int


class Trajectory(NamedTuple):
    """GD output. Leading axes: ``[C]`` checkpoints (``[S, C]`` when batched).

    ``steps [C]``: step index of each checkpoint (0, every, 2·every, ..., steps), relative to
    the start; ``params``: θ at each checkpoint, leaves ``[C, ...]``; ``losses [steps + 1]``:
    L̂ at every iterate θ_0 .. θ_K; ``finite [steps + 1]``: whether θ_k and L̂(θ_k) are all
    finite; ``opt_state``: the optimizer state after the last step (to continue from)."""

    steps: jax.Array
    params: object
    losses: jax.Array
    finite: jax.Array
    opt_state: object = None


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


def gd(params0, X, y, lr, *, steps: int, every: int, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC,
       opt_state=None) -> Trajectory:
    """One GD run on ``L̂`` of ``(X [n, T, d], y [n])``: ``steps`` steps of size ``lr`` from
    ``params0`` (and the optimizer state ``opt_state``; ``None``: a fresh ``optax.sgd`` state),
    keeping θ at :func:`checkpoint_steps` ``(steps, every)`` (relative to the start). Any model
    kind (a coupled one too). Pure and traceable; ``steps``/``every`` static.

    A trajectory cut into consecutive segments whose lengths are multiples of ``every``
    (the last one: the rest) keeps exactly the checkpoints of the whole one."""
    opt = optax.sgd(lr)

    value_and_grad = jax.value_and_grad(lambda th: risk(th, X, y, model, loss))

    def step(carry, _):
        th, state = carry
        L, g = value_and_grad(th)
        upd, state = opt.update(g, state, th)
        return (optax.apply_updates(th, upd), state), (L, _all_finite(th) & jnp.isfinite(L))

    def segment(carry, length):
        return jax.lax.scan(step, carry, None, length=length)

    ck = checkpoint_steps(steps, every)
    full, rem = divmod(steps, every)
    carry = (params0, opt.init(params0) if opt_state is None else opt_state)
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
    L_last = risk(th_last, X, y, model, loss)
    losses.append(L_last[None])
    finite.append((_all_finite(th_last) & jnp.isfinite(L_last))[None])
    params = jax.tree_util.tree_map(
        lambda first, *rest: jnp.concatenate([first[None], *rest]), kept[0], *kept[1:])
    return Trajectory(jnp.asarray(ck), params, jnp.concatenate(losses), jnp.concatenate(finite), carry[1])


def train(params0, X, y, lr, *, steps: int, every: int, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC,
          opt_state=None) -> Trajectory:
    """S GD runs side by side: :func:`runs` after the input checks
    (:func:`mhajax.models.base.check_problem`: labels ±1, shapes that fit the model, float64 on; an
    :class:`~mhajax.errors.InputError` naming the value). ``params0`` leaves ``[S, ...]``,
    ``X [S, n, T, d]``, ``y [S, n]``, ``lr`` (shared or ``[S]``); one run (``X [n, T, d]``, ``y [n]``,
    unbatched ``params0``) is a batch of one, returned without the run axis. ``opt_state``: the
    state a previous call returned (``None``: fresh). The public entry :func:`mhajax.api.train`
    first checks the arrays of :func:`mhajax.runtime.memory.gd` against memory."""
    model, loss = get_model(model), get_loss(loss)
    steps = positive_int("steps", steps, minimum=0)
    every = positive_int("every", every)
    single = jnp.ndim(X) == 3
    check_problem("train", params0, X, y, model=model, runs=not single)
    one = partial(jax.tree_util.tree_map, lambda a: a[None])
    if single:
        params0, X, y = one(params0), X[None], jnp.asarray(y)[None]
        opt_state = None if opt_state is None else one(opt_state)
    try:
        a = jnp.asarray(lr)
        real = jnp.issubdtype(a.dtype, jnp.floating) or jnp.issubdtype(a.dtype, jnp.integer)
        shape, positive = a.shape, isinstance(lr, jax.core.Tracer) or (real and bool(jnp.all(jnp.isfinite(a) & (a > 0))))
    except (TypeError, ValueError):   # not a number
        shape, positive = (), False
    if len(shape) > 1 or (len(shape) == 1 and shape[0] != X.shape[0]) or not positive:
        raise InputError(f"train: lr must be a finite number > 0, or one per run [{X.shape[0]}], got {lr!r}")
    out = runs(params0, X, y, lr, steps=steps, every=every, model=model, loss=loss, opt_state=opt_state)
    return jax.tree_util.tree_map(lambda a: a[0], out) if single else out


def runs(params0, X, y, lr, *, steps: int, every: int, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC,
         opt_state=None) -> Trajectory:
    """S GD runs side by side, unchecked (the package's own form of :func:`train`): :func:`gd`
    ``vmap``-ed over the leading axis of ``params0`` (leaves ``[S, ...]``), ``X [S, n, T, d]``,
    ``y [S, n]``, ``lr`` (shared or ``[S]``) and ``opt_state`` (``None``: fresh), jitted once per
    shape and static option. With several devices the run axis is split over all of them
    (:func:`mhajax.runtime.sharding.over_runs`; across processes after
    ``jax.distributed.initialize``): each run is the same pure GD, so the results agree with
    one device's to rounding."""
    if opt_state is None:
        opt_state = jax.vmap(opt_init)(params0)
    lr = jnp.broadcast_to(jnp.asarray(lr, X.dtype), (X.shape[0],))
    if device_count() == 1:
        return _train(params0, opt_state, X, y, lr, steps=steps, every=every, model=model, loss=loss)
    return over_runs(partial(_runs, steps=steps, every=every, model=model, loss=loss),
                     (params0, opt_state, X, y, lr))


def opt_init(params, lr=1.0):
    """The optimizer state a fresh GD run starts from (``optax.sgd``: empty), for one run's
    ``params``; ``jax.vmap`` it for a batch."""
    return optax.sgd(lr).init(params)


def _runs(params0, opt_state, X, y, lr, *, steps, every, model, loss) -> Trajectory:
    """:func:`gd` over the run axis (``vmap``): the body of :func:`train`."""
    return jax.vmap(partial(gd, steps=steps, every=every, model=model, loss=loss))(params0, X, y, lr,
                                                                                    opt_state=opt_state)


_train = jax.jit(_runs, static_argnames=("steps", "every", "model", "loss"))


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
