"""Pieces every data model shares: balanced labels, random positions, the token radius."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from mhajax.errors import InputError
from mhajax.validate import check_data


def balanced_labels(key, n: int, dtype) -> jax.Array:
    """``y [n]``: ⌈n/2⌉ labels +1 and ⌊n/2⌋ labels −1, in random order."""
    y = jnp.where(jnp.arange(n) < (n + 1) // 2, 1.0, -1.0).astype(dtype)
    return jax.random.permutation(key, y)


def random_positions(key, n: int, tokens: int, k: int) -> jax.Array:
    """``mask [n, T]``: ``k`` positions per sequence, uniform without replacement (the
    ``k`` smallest of ``T`` iid uniforms)."""
    ranks = jnp.argsort(jnp.argsort(jax.random.uniform(key, (n, tokens)), axis=1), axis=1)
    return ranks < k


def token_radius(X) -> jax.Array:
    """``R = max_{i,t} ||x_{i,t}||₂`` over a data set ``X [n, T, d]`` (or one sequence ``[T, d]``),
    checked (:func:`mhajax.validate.check_data`: a concrete X non-empty, floating, finite)."""
    try:
        check_data(X)
    except InputError as e:
        raise InputError(f"token_radius: {e}") from None
    return jnp.max(jnp.linalg.norm(X, axis=-1))
