"""Symmetric eigensolvers and a Euclidean norm that stay defined on non-finite input.

``eigvalsh``/``eigh`` are ``jnp.linalg``'s (LAPACK ``syevd`` on CPU, the vendor's solver on
accelerators) with one guard: a matrix with a NaN or inf entry is never handed to LAPACK and
gets NaN results, on every backend. On CPU, a process that runs two batched eigensolvers at
once can deadlock inside jaxlib unless XLA's pool has one thread; the commands set that up
where the process starts (:func:`mhajax.runtime.jaxsetup.process_defaults`,
docs/reliability.md).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


def _finite_guard(A):
    """``(finite [...], A0)``: which matrices of ``A [..., m, m]`` are finite, and A with the
    others replaced by 0 (LAPACK is never handed a NaN)."""
    finite = jnp.all(jnp.isfinite(A), axis=(-2, -1))
    return finite, jnp.where(finite[..., None, None], A, jnp.zeros((), A.dtype))


def eigvalsh(A: jax.Array) -> jax.Array:
    """Eigenvalues ``[..., m]`` (ascending) of symmetric ``A [..., m, m]`` (the lower
    triangle is read, as in LAPACK); NaN for a matrix with a NaN or inf entry."""
    finite, A0 = _finite_guard(A)
    return jnp.where(finite[..., None], jnp.linalg.eigvalsh(A0), jnp.nan)


def eigh(A: jax.Array):
    """``(w [..., m], V [..., m, m])`` with ``A V = V diag(w)``, ``w`` ascending;
    NaN for a matrix with a NaN or inf entry."""
    finite, A0 = _finite_guard(A)
    w, V = jnp.linalg.eigh(A0)
    return jnp.where(finite[..., None], w, jnp.nan), jnp.where(finite[..., None, None], V, jnp.nan)


def each(fn, A):
    """``fn`` (an eigensolver: ``eigh``, ``eigvalsh``) of every matrix of ``A [..., m, m]``, one
    call per matrix (``lax.map``), the outputs stacked back to ``[..., ...]``. A batched LAPACK
    call splits its batch over XLA:CPU's pool and waits for the chunks; several of them at
    once — one per device when a program runs on several CPU devices — can wait on each
    other for ever (docs/reliability.md). One matrix per call has nothing to wait for; the
    values are those of the batched call, bit for bit, at the same cost."""
    lead, m = A.shape[:-2], A.shape[-1]
    if not lead:
        return fn(A)
    out = jax.lax.map(fn, A.reshape((-1, m, m)))
    return jax.tree_util.tree_map(lambda a: a.reshape(lead + a.shape[1:]), out)


def norm(x: jax.Array, axis=None) -> jax.Array:
    """Euclidean norm that neither overflows nor underflows: ``s·||x/s||`` with
    ``s = max|x|`` (plain ``sqrt(Σx²)`` squares tiny residuals to zero and
    huge ones to inf). ``axis=None`` flattens; returns 0 for a zero vector, NaN for a
    vector with a NaN entry and inf for one with an inf entry (never 0: a residual of a
    NaN vector must not read as converged)."""
    s = jnp.max(jnp.abs(x), axis=axis, keepdims=True)   # NaN if any entry is NaN
    scaled = (s > 0) & jnp.isfinite(s)
    safe = jnp.where(scaled, s, 1.0)
    out = jnp.where(scaled, safe * jnp.sqrt(jnp.sum((x / safe) ** 2, axis=axis, keepdims=True)),
                    jnp.where(s == 0, jnp.zeros((), s.dtype), s))
    return jnp.squeeze(out, axis=axis) if axis is not None else out.reshape(())


__all__ = ["each", "eigh", "eigvalsh", "norm"]
