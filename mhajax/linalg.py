"""Symmetric eigensolvers that are safe inside batched, jitted XLA programs on CPU.

On CPU, jaxlib 0.10's batched LAPACK kernels fan their batch out into XLA's
intra-op thread pool and wait for it from a pool worker; two such kernels
running at once (e.g. two ``eigvalsh`` of a ``vmap``-ed analysis) can occupy
every worker and wait on each other forever — seen here as a hang with 0% CPU
on a 2-core machine (stack: ``lapack_dsyevd_ffi`` -> ``ParallelBatchMap`` ->
``BlockingCounter::Wait``). On CPU we therefore call NumPy's LAPACK through
``jax.pure_callback`` (it runs outside the XLA pool and handles any batch
shape itself); on accelerators we use ``jnp.linalg`` unchanged.

Both functions take ``A [..., m, m]`` (symmetric; only the lower triangle is
read, as in LAPACK) and return eigenvalues in ascending order.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def _on_cpu() -> bool:
    return jax.default_backend() == "cpu"


def eigvalsh(A: jax.Array) -> jax.Array:
    """Eigenvalues ``[..., m]`` (ascending) of symmetric ``A [..., m, m]``."""
    if not _on_cpu():
        return jnp.linalg.eigvalsh(A)
    out = jax.ShapeDtypeStruct(A.shape[:-1], A.dtype)
    return jax.pure_callback(lambda a: np.linalg.eigvalsh(a).astype(a.dtype), out, A,
                             vmap_method="broadcast_all")


def eigh(A: jax.Array):
    """``(w [..., m], V [..., m, m])`` with ``A V = V diag(w)``, ``w`` ascending."""
    if not _on_cpu():
        return jnp.linalg.eigh(A)
    outs = (jax.ShapeDtypeStruct(A.shape[:-1], A.dtype), jax.ShapeDtypeStruct(A.shape, A.dtype))

    def f(a):
        w, v = np.linalg.eigh(a)
        return w.astype(a.dtype), v.astype(a.dtype)

    return jax.pure_callback(f, outs, A, vmap_method="broadcast_all")
