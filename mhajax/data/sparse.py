"""Sparse-token detection, a data model beyond the paper's mixture.

A positive sequence hides a signal vector ``s e_1`` in ``k`` random positions; a negative
one is pure noise ``σ z_t``. Mean pooling dilutes the signal by ``k/T``; attention can
find it. Same call signature as every data model:
``sparse_tokens(key, n, tokens, dim, *, k, signal, sigma) -> (X [n, T, d], y [n])``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from mhajax.data.common import balanced_labels, random_positions
from mhajax.errors import InputError
from mhajax.validate import positive_float, positive_int


def check_sparse_args(n, tokens, dim, k, signal, sigma):
    """Validate the knobs of :func:`sparse_tokens`; raise :class:`InputError`."""
    positive_int("n", n)
    positive_int("tokens", tokens)
    positive_int("dim", dim)
    k = positive_int("k (signal positions)", k)
    if k > tokens:
        raise InputError(f"k (signal positions) must be <= tokens = {tokens}, got {k}")
    positive_float("signal", signal)
    positive_float("sigma", sigma, allow_zero=True)


def sparse_tokens(key, n: int, tokens: int, dim: int, *, k: int = 1, signal: float = 1.0,
                  sigma: float = 0.3, dtype=None):
    """Sparse-token detection: ``(X [n, T, d], y [n])``.

    Balanced labels (⌈n/2⌉ positives in random order). Every token is noise
    ``σ z_t``, ``z_t ~ N(0, I_d)``; in a positive sequence ``k`` positions, chosen
    uniformly at random, also carry the signal: ``x_t = s e_1 + σ z_t``. Negatives are
    pure noise. Detecting the signal needs attention to find the few positions — mean
    pooling dilutes it by ``k/T``. ``key`` may be traced; sizes must be concrete.
    """
    check_sparse_args(n, tokens, dim, k, signal, sigma)
    dtype = dtype or jnp.result_type(float)
    k_lab, k_pos, k_noise = jax.random.split(key, 3)
    y = balanced_labels(k_lab, n, dtype)
    hot = random_positions(k_pos, n, tokens, k) & (y > 0)[:, None]          # [n, T]
    e1 = jnp.zeros((dim,), dtype).at[0].set(signal)
    X = hot[..., None] * e1 + sigma * jax.random.normal(k_noise, (n, tokens, dim), dtype)
    return X, y
