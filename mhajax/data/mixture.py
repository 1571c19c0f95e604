"""The tokenized-mixture data model (docs/theory.md §9).

Each of ``n`` sequences has ``T`` tokens in ``R^d`` and a label ``y ∈ {±1}``
(balanced: ⌈n/2⌉ positives, ⌊n/2⌋ negatives, in random order). In every
sequence ``m = max(1, round(ζ T))`` positions, chosen at random, are
*relevant*: ``x_t = μ_y + σ z_t``; the others are *irrelevant*:
``x_t = ν_k + σ z_t`` with ``k`` uniform over K clusters; ``z_t ~ N(0, I_d)``.
Means: ``μ_+ = s e_1``, ``μ_- = s e_2`` (or ``-μ_+`` when ``antipodal``),
``ν_k = e_{2+k}``; so ``d >= K + 2`` is required.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from mhajax.data.common import balanced_labels, random_positions
from mhajax.errors import InputError
from mhajax.validate import checked_key, positive_float, positive_int


def relevant_count(tokens: int, zeta: float) -> int:
    """``m = max(1, round(ζ T))`` relevant positions per sequence."""
    return max(1, int(round(zeta * tokens)))


def check_mixture_args(n, tokens, dim, zeta, num_clusters, signal, sigma):
    """Validate the knobs of :func:`tokenized_mixture`; raise :class:`InputError`."""
    positive_int("n", n)
    positive_int("tokens", tokens)
    positive_int("dim", dim)
    positive_int("num_clusters", num_clusters)
    z = positive_float("zeta", zeta)
    if z > 1:
        raise InputError(f"zeta must lie in (0, 1], got {zeta!r}")
    positive_float("signal", signal)
    positive_float("sigma", sigma, allow_zero=True)
    if dim < num_clusters + 2:
        raise InputError(
            f"dim={dim} is too small for the tokenized mixture with num_clusters={num_clusters}: "
            f"need dim >= num_clusters + 2 = {num_clusters + 2}")


def tokenized_mixture(key, n: int, tokens: int, dim: int, *, zeta: float = 0.25,
                      num_clusters: int = 4, signal: float = 1.0, sigma: float = 0.1,
                      antipodal: bool = False, dtype=None):
    """:func:`draw_mixture` (same arguments); the public entry :func:`mhajax.api.tokenized_mixture`
    first checks ``X [n, T, d]`` against memory."""
    key = checked_key("tokenized_mixture", key)
    return draw_mixture(key, n, tokens, dim, zeta=zeta, num_clusters=num_clusters, signal=signal, sigma=sigma,
                        antipodal=antipodal, dtype=dtype)


def draw_mixture(key, n: int, tokens: int, dim: int, *, zeta: float = 0.25, num_clusters: int = 4,
                 signal: float = 1.0, sigma: float = 0.1, antipodal: bool = False, dtype=None):
    """Draw ``(X [n, T, d], y [n])`` from the tokenized mixture of docs/theory.md §9.

    ``zeta`` is the relevant fraction ζ, ``num_clusters`` the number K of
    irrelevant clusters, ``signal`` the strength s of ``μ_±``, ``sigma`` the
    token noise σ. ``key`` may be traced (the function is ``vmap``-able over
    keys); the sizes must be concrete. The data model ``mixture``
    (:data:`mhajax.data.registry.DATASETS`); :func:`mhajax.api.tokenized_mixture` is the public
    entry, sizes checked against memory.
    """
    check_mixture_args(n, tokens, dim, zeta, num_clusters, signal, sigma)
    dtype = dtype or jnp.result_type(float)
    m = relevant_count(tokens, zeta)
    k_lab, k_pos, k_clu, k_noise = jax.random.split(key, 4)

    y = balanced_labels(k_lab, n, dtype)

    eye = jnp.eye(dim, dtype=dtype)
    mu_pos = signal * eye[0]
    mu_neg = -mu_pos if antipodal else signal * eye[1]
    nus = eye[2:2 + num_clusters]  # [K, d]

    relevant = random_positions(k_pos, n, tokens, m)  # [n, T]
    clusters = jax.random.randint(k_clu, (n, tokens), 0, num_clusters)
    mu = jnp.where((y > 0)[:, None], mu_pos[None, :], mu_neg[None, :])  # [n, d]
    means = jnp.where(relevant[..., None], mu[:, None, :], nus[clusters])
    X = means + sigma * jax.random.normal(k_noise, (n, tokens, dim), dtype)
    return X, y
