"""Stochastic Lanczos quadrature (SLQ) of the spectral density of ∇²L̂, beside the census.

SLQ (Lin, Saad & Yang 2016; for Hessians Ghorbani et al. 2019 and PyHessian) estimates the
spectral measure Σ_i δ_{λ_i} of A [P, P] by Gauss quadrature: for a probe v (Rademacher,
‖v‖² = P), m Lanczos steps from v/‖v‖ give T_m = Y diag(θ) Yᵀ [m, m]; the nodes θ_k with
weights τ_k = (e₁ᵀy_k)² give vᵀ f(A) v ≈ ‖v‖² Σ_k τ_k f(θ_k), so the estimated count in a bin
[a, b) is ‖v‖² Σ_k τ_k 1[a <= θ_k < b], averaged over the probes (with its standard error
across them). It is an *estimate*: a step function is integrated by an m-node rule, so
each node carries ~P/m eigenvalues' weight and nothing is certified — compare
:mod:`~mhajax.curvature.census`, whose counts are exact or bracketed.

Lanczos (full reorthogonalisation), the Monte Carlo estimator and its Rademacher sampler are
matfree's (``decomp.tridiag_sym``, ``stochtrace.estimator_monte_carlo_mean_and_sem``,
``stochtrace.sampler_signs``); only the read-out of the Gauss rule into bins is here.
matfree is the optional extra ``census`` (``pip install "mhajax[census]"``; it needs
Python >= 3.11, mhajax 3.10): the census itself does not import it.

Defaults: ``num_probes=10``, ``num_steps=100`` — PyHessian's density uses 100 Lanczos steps
(its ``iter``) with 1 probe (``n_v``), spectral-density codes ~10 probes × 80–100 steps; 100
steps keep PyHessian's resolution and 10 probes cut the probe variance tenfold.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mhajax.curvature.census import checked_points
from mhajax.curvature.operators import hessian_parts, linearized_hvp
from mhajax.curvature.premises import checked
from mhajax.errors import InputError
from mhajax.losses import LOGISTIC, Loss
from mhajax.models.base import HeadModel
from mhajax.models.softmax import SOFTMAX
from mhajax.validate import checked_key, positive_int

NUM_PROBES = 10
NUM_STEPS = 100


def _matfree():
    """The matfree modules used here, or an ImportError naming the extra."""
    try:
        from matfree import decomp, stochtrace
    except ImportError as e:   # pragma: no cover - exercised where matfree is absent
        raise ImportError('SLQ needs matfree: pip install "mhajax[census]" (matfree>=0.6)') from e
    return decomp, stochtrace


class SLQCounts(NamedTuple):
    """SLQ's estimated counts over ``edges [m+1]`` (estimates, not certified).

    counts [m]: estimated #{eig ∈ [edges_i, edges_{i+1})} (the density × P integrated over
    the bin); sem [m]: their standard errors across the probes; under, over: estimated
    #{eig < edges_0}, #{eig >= edges_m}; negative, negative_sem: estimated N₋ = #{eig < 0}
    and its standard error; num_probes, num_steps: the settings used."""

    edges: jax.Array
    counts: jax.Array
    sem: jax.Array
    under: jax.Array
    over: jax.Array
    negative: jax.Array
    negative_sem: jax.Array
    num_probes: int
    num_steps: int


def slq_counts(matvec: Callable, P: int, edges, key, *, num_probes: int = NUM_PROBES,
               num_steps: int = NUM_STEPS, dtype=jnp.float64) -> SLQCounts:
    """SLQ estimate of the counts of eig(A) over ``edges [m+1]`` for a symmetric ``matvec``
    ``v [P] -> A v [P]`` (module docstring). ``num_steps`` is clipped to P. Pure;
    ``jit``-friendly with ``P``, ``num_probes``, ``num_steps`` static."""
    decomp, stochtrace = _matfree()
    steps = int(min(num_steps, P))
    edges = jnp.asarray(edges, dtype)
    m = edges.shape[0] - 1
    tridiag = decomp.tridiag_sym(steps, materialize=True, reortho="full")

    def integrand(mv, v):
        length2 = jnp.dot(v, v)
        T = tridiag(mv, v / jnp.sqrt(length2)).J_small
        theta, Y = jnp.linalg.eigh(T)                              # Gauss nodes and weights
        w = length2 * Y[0] ** 2
        idx = jnp.searchsorted(edges, theta, side="right")       # 0: below edges_0, m+1: >= edges_m
        binned = jnp.zeros((m + 2,), dtype).at[idx].add(w)
        return jnp.concatenate([binned, jnp.sum(jnp.where(theta < 0, w, 0.0))[None]])

    like = jnp.zeros((P,), dtype)
    sample = stochtrace.sampler_signs(like, num=int(num_probes))
    mean, sem = stochtrace.estimator_monte_carlo_mean_and_sem(integrand, sampler=sample)(matvec, key)
    return SLQCounts(edges=edges, counts=mean[1:m + 1], sem=sem[1:m + 1], under=mean[0], over=mean[m + 1],
                     negative=mean[m + 2], negative_sem=sem[m + 2],
                     num_probes=int(num_probes), num_steps=steps)


def slq_histogram(params, X, y, bins, *, key=None, num_probes: int = NUM_PROBES, num_steps: int = NUM_STEPS,
                  model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC, operator: str = "structured") -> SLQCounts:
    """SLQ's estimated histogram of eig(∇²L̂(θ)) over the edges ``bins``, on the structured
    matvec (``operator="structured"``: Jᵀdiag(w)J + blockdiag(B), the census's operator) or
    the linearized HVP (``"hvp"``). ``key`` defaults to PRNGKey(0)."""
    edges = checked_points(bins, "bins", increasing=True)
    if operator not in ("structured", "hvp"):
        raise InputError(f"operator must be 'structured' or 'hvp', got {operator!r}")
    num_probes, num_steps = positive_int("num_probes", num_probes), positive_int("num_steps", num_steps)
    model, loss = checked("slq_histogram", params, X, y, model=model, loss=loss, heads=True)
    _matfree()
    key = checked_key("slq_histogram", key)
    return _slq_jit(params, X, y, jnp.asarray(edges), key, model, loss, operator, num_probes, num_steps)


def _slq_raw(params, X, y, edges, key, model, loss, operator, num_probes, num_steps):
    if operator == "structured":
        S = hessian_parts(params, X, y, model, loss)
        mv, P = S.matvec, S.J.shape[1]
    else:
        mv = linearized_hvp(params, X, y, model, loss)
        P = sum(int(np.prod(np.shape(a))) for a in jax.tree_util.tree_leaves(params))
    return slq_counts(mv, P, edges, key, num_probes=num_probes, num_steps=num_steps, dtype=edges.dtype)


_slq_jit = jax.jit(_slq_raw, static_argnames=("model", "loss", "operator", "num_probes", "num_steps"))


__all__ = ["NUM_PROBES", "NUM_STEPS", "SLQCounts", "slq_counts", "slq_histogram"]
