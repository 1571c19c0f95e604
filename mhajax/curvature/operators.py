"""Curvature operators of the empirical risk (docs/theory.md §3).

Everything lives in the per-head flat layout of :func:`mhajax.models.base.ravel_heads`:
a parameter vector ``z [P]``, ``P = H·p``, with head h's ``p`` parameters
contiguous. In that layout

    ∇²L̂ = G + B,   G = Jᵀ diag(ℓ''/n) J  (PSD, rank <= n),
                   B = blockdiag_h(B_h),   B_h = (1/(n√H)) Σ_i y_i ℓ'_i ∇²_{θ_h} f(θ_h; X_i),

with ``J [n, P]`` the per-sample gradients ``∇_θ Φ(θ; X_i)``. Since G ⪰ 0,
``λ_min(∇²L̂) >= λ_min(B) = min_h λ_min(B_h)``: a certified lower bound from
H eigenproblems of size p.

Routes to the Hessian, each an independent check on the others:

* :func:`hvp` — ``jax.jvp`` of ``jax.grad`` (forward-over-reverse);
* :func:`dense_hessian` — ``jax.hessian`` summed over chunks of samples, so the
  peak memory stays O(P²);
* :func:`structured_parts` / :func:`assemble_hessian` — the G + B structure.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mhajax.errors import InputError
from mhajax.linalg import eigvalsh
from mhajax.losses import LOGISTIC, Loss, get_loss, loss_derivatives, risk
from mhajax.models.base import HeadModel, check_problem, get_model, num_heads, output, ravel_heads, unravel_heads
from mhajax.models.softmax import SOFTMAX
from mhajax.validate import positive_int


def flat_risk(params, X, y, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC):
    """``(risk(z), z0)``: the empirical risk as a function of the flat vector
    ``z [P]`` in per-head layout, and the current point ``z0``."""
    Z, unravel_head = ravel_heads(params)
    H, p = Z.shape

    def flat(z):
        return risk(unravel_heads(z.reshape(H, p), unravel_head), X, y, model, loss)

    return flat, Z.reshape(-1)


def hvp(params, X, y, v, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC):
    """``∇²L̂(θ) v`` by forward-over-reverse (``jax.jvp`` of ``jax.grad``);
    ``v`` is a pytree shaped like ``params``; returns the same structure. Validated
    (:func:`mhajax.models.base.check_problem`; ``v`` must have ``params``' structure and shapes, and
    be finite)."""
    model, loss = get_model(model), get_loss(loss)
    check_problem("hvp", params, X, y, model=model)
    if jax.tree_util.tree_structure(v) != jax.tree_util.tree_structure(params) or any(
            np.shape(a) != np.shape(b) for a, b in zip(jax.tree_util.tree_leaves(v), jax.tree_util.tree_leaves(params))):
        raise InputError("hvp: v must be a pytree shaped like params "
                         f"({[np.shape(a) for a in jax.tree_util.tree_leaves(params)]})")
    for a in jax.tree_util.tree_leaves(v):
        if not isinstance(a, jax.core.Tracer) and not np.all(np.isfinite(np.asarray(a))):
            raise InputError(f"hvp: v contains non-finite values (leaf of shape {np.shape(a)})")
    g = jax.grad(lambda th: risk(th, X, y, model, loss))
    return jax.jvp(g, (params,), (v,))[1]


def linearized_hvp(params, X, y, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC):
    """A matvec ``v [P] -> ∇²L̂ v [P]`` on flat vectors: the gradient is
    linearized once (``jax.linearize``) and the linear map reused per product."""
    risk, z0 = flat_risk(params, X, y, model, loss)
    _, lin = jax.linearize(jax.grad(risk), z0)
    return lin


def _chunk(n: int, chunk_size: int | None, H: int, T: int, P: int) -> int:
    if chunk_size is None:  # keep per-chunk intermediates ~ c·H·T²·P <= P²
        chunk_size = max(1, P // max(1, H * T * T))
    return int(max(1, min(n, chunk_size)))


def dense_hessian(params, X, y, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC,
                  chunk_size: int | None = None) -> jax.Array:
    """:func:`chunked_hessian` ``∇²L̂ [P, P]`` after the input checks of
    :func:`mhajax.models.base.check_problem`; the public entry :func:`mhajax.api.dense_hessian`
    first checks ``∇²L̂ [P, P]`` against memory."""
    model, loss = get_model(model), get_loss(loss)
    check_problem("dense_hessian", params, X, y, model=model)
    if chunk_size is not None:
        positive_int("chunk_size", chunk_size)
    return chunked_hessian(params, X, y, model, loss, chunk_size)


def chunked_hessian(params, X, y, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC,
                    chunk_size: int | None = None) -> jax.Array:
    """The full Hessian ``∇²L̂ [P, P]`` by ``jax.hessian``, accumulated over
    chunks of ``chunk_size`` samples with ``lax.scan`` so that the peak memory
    is O(P² + chunk·H·T²·P) rather than O(P·n·H·T²). Pure and traceable."""
    n, T = X.shape[0], X.shape[1]
    Z, unravel_head = ravel_heads(params)
    H, p = Z.shape
    z0, P = Z.reshape(-1), H * p
    c = _chunk(n, chunk_size, H, T, P)
    nchunks = -(-n // c)
    pad = nchunks * c - n
    Xp = jnp.concatenate([X, jnp.zeros((pad,) + X.shape[1:], X.dtype)]) if pad else X
    yp = jnp.concatenate([y, jnp.ones((pad,), y.dtype)]) if pad else y
    w = jnp.concatenate([jnp.ones((n,), z0.dtype), jnp.zeros((pad,), z0.dtype)]) / n
    Xc = Xp.reshape((nchunks, c) + X.shape[1:])
    yc, wc = yp.reshape(nchunks, c), w.reshape(nchunks, c)

    def chunk_risk(z, Xb, yb, wb):
        th = unravel_heads(z.reshape(H, p), unravel_head)
        return jnp.sum(wb * loss.value(yb * output(th, Xb, model)))

    def body(acc, batch):
        return acc + jax.hessian(chunk_risk)(z0, *batch), None

    out, _ = jax.lax.scan(body, jnp.zeros((P, P), z0.dtype), (Xc, yc, wc))
    return 0.5 * (out + out.T)


def per_sample_jacobian(params, X, model: HeadModel = SOFTMAX) -> jax.Array:
    """``J [n, P]``, row i = ``∇_θ Φ(θ; X_i)`` in per-head layout."""
    grads = jax.vmap(jax.grad(lambda th, x: output(th, x, model)), in_axes=(None, 0))(params, X)
    return jax.vmap(lambda g: ravel_heads(g)[0].reshape(-1))(grads)


HEAD_BATCH_ENTRIES = 2 ** 28      # accelerators: ~2 GiB of float64 intermediates per batch
HEAD_BATCH_ENTRIES_CPU = 2 ** 18  # CPU: ~2 MiB, cache-sized (measured: H = 256, T = 6, d = 8,
                                  # n = 64 built B in ~0.1 s in batches of 4 heads, 0.7 s all at once)


def head_batch_size(H: int, n: int, T: int, p: int, budget: int | None = None) -> int:
    """How many heads :func:`weighted_head_hessians` treats at once: each head's
    intermediates are ~``n·T·p + p²`` entries (the closed form's ``[n, T, d, d]``
    arrays), kept under ``budget`` entries per batch (default by backend:
    ``HEAD_BATCH_ENTRIES_CPU`` on CPU, else ``HEAD_BATCH_ENTRIES``); all H when they fit."""
    if budget is None:
        budget = HEAD_BATCH_ENTRIES_CPU if jax.default_backend() == "cpu" else HEAD_BATCH_ENTRIES
    per_head = n * T * p + p * p
    return int(max(1, min(H, budget // max(1, per_head))))


def weighted_head_hessians(params, X, c, model: HeadModel = SOFTMAX,
                           batch_size: int | None = None) -> jax.Array:
    """``Σ_i c_i ∇²_{θ_h} f(θ_h; X_i)`` for every head, ``[H, p, p]``: the
    model's closed form when it has one, else ``jax.hessian``. Heads are
    mapped in batches of ``batch_size`` (default :func:`head_batch_size`), so
    the peak memory is ``H·p²`` plus one batch's intermediates."""
    Z, unravel_head = ravel_heads(params)
    H, p = Z.shape
    bs = head_batch_size(H, X.shape[0], X.shape[1], p) if batch_size is None else int(batch_size)
    if model.weighted_hessian is not None:
        one = lambda zh: model.weighted_hessian(unravel_head(zh), X, c)
    else:
        def g(zh):
            return jnp.sum(c * jax.vmap(model.head_fn, in_axes=(None, 0))(unravel_head(zh), X))

        one = jax.hessian(g)
    if bs >= H:
        return jax.vmap(one)(Z)
    return jax.lax.map(one, Z, batch_size=bs)


def head_blocks(params, X, y, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC) -> jax.Array:
    """``B [H, p, p]``, ``B_h = (1/(n√H)) Σ_i y_i ℓ'_i ∇²_{θ_h} f(θ_h; X_i)``: the
    diagonal blocks of the data term of ``∇²L̂`` (whose off-diagonal blocks vanish). Validated
    (:func:`mhajax.models.base.check_problem`); :func:`block_term` is the unchecked form."""
    model, loss = get_model(model), get_loss(loss)
    check_problem("head_blocks", params, X, y, model=model, heads=True)
    return block_term(params, X, y, model, loss)


def block_term(params, X, y, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC) -> jax.Array:
    """:func:`head_blocks`, pure and unchecked."""
    _, d1, _ = loss_derivatives(params, X, y, model, loss)
    H = num_heads(params)
    c = jax.lax.stop_gradient(y * d1) / (X.shape[0] * jnp.sqrt(H))
    return weighted_head_hessians(params, X, c, model)


class StructuredHessian(NamedTuple):
    """``∇²L̂ = Jᵀ diag(w) J + blockdiag(B)`` with ``w = ℓ''/n``."""

    J: jax.Array   # [n, P]
    w: jax.Array   # [n]
    B: jax.Array   # [H, p, p]

    def matvec(self, v):
        """``(G + B) v`` in O(nP + H p²)."""
        H, p, _ = self.B.shape
        gv = self.J.T @ (self.w * (self.J @ v))
        bv = jnp.einsum("hij,hj->hi", self.B, v.reshape(H, p)).reshape(-1)
        return gv + bv

    def dense(self):
        """The assembled, symmetrized ``[P, P]`` matrix (for small P only)."""
        A = (self.J.T * self.w) @ self.J + _block_diag(self.B)
        return 0.5 * (A + A.T)


def _block_diag(B):
    """``blockdiag(B_1, ..., B_H)`` [H·p, H·p] from ``B [H, p, p]``."""
    H, p, _ = B.shape
    eye = jnp.eye(H, dtype=B.dtype)
    return jnp.einsum("gh,hij->gihj", eye, B).reshape(H * p, H * p)


def structured_parts(params, X, y, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC) -> StructuredHessian:
    """:func:`hessian_parts` (``J [n, P]``, ``w [n]``, ``B [H, p, p]``) after the input checks of
    :func:`mhajax.models.base.check_problem`; the public entry :func:`mhajax.api.structured_parts`
    first checks ``J`` and ``B`` against memory."""
    model, loss = get_model(model), get_loss(loss)
    check_problem("structured_parts", params, X, y, model=model, heads=True)
    return hessian_parts(params, X, y, model, loss)


def hessian_parts(params, X, y, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC) -> StructuredHessian:
    """The G + B factors of ``∇²L̂`` (see module docstring): ``J [n, P]``, ``w [n]``,
    ``B [H, p, p]``. Pure and traceable."""
    _, _, d2 = loss_derivatives(params, X, y, model, loss)
    J = per_sample_jacobian(params, X, model)
    return StructuredHessian(J, d2 / X.shape[0], block_term(params, X, y, model, loss))


def assemble_hessian(params, X, y, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC) -> jax.Array:
    """``∇²L̂ [P, P]`` assembled from its structure (exact; O(nP² + H p²)); validated."""
    model, loss = get_model(model), get_loss(loss)
    check_problem("assemble_hessian", params, X, y, model=model, heads=True)
    return hessian_parts(params, X, y, model, loss).dense()


def block_lambda_min(B: jax.Array) -> jax.Array:
    """Certified lower bound ``λ_min(B) = min_h λ_min(B_h) <= λ_min(∇²L̂)`` from ``B [H, p, p]``."""
    return jnp.min(eigvalsh(B)[:, 0])


def per_sample_head_hessians(params, X, model: HeadModel = SOFTMAX) -> jax.Array:
    """``∇²_{θ_h} f(θ_h; X_i)`` for every sample and head, ``[n, H, p, p]`` (memory n·H·p²)."""
    one = jnp.ones((1,), X.dtype)
    return jax.vmap(lambda x: weighted_head_hessians(params, x[None], one, model))(X)


NORMS_ENTRIES = int(2e7)   # entries of one chunk of per-sample head Hessians


def norms_batch(n: int, H: int, q: int) -> int:
    """Samples per chunk of :func:`per_sample_head_hessian_norms` for n samples of H head
    matrices ``q × q``: ``NORMS_ENTRIES // (H·q²)``, at least 1 and at most n."""
    return max(1, min(n, NORMS_ENTRIES // (H * q * q)))


def per_sample_head_hessian_norms(params, X, model: HeadModel = SOFTMAX,
                                  batch_size: int | None = None) -> jax.Array:
    """:func:`head_hessian_norms` after the input checks of :func:`mhajax.models.base.check_problem`."""
    model = get_model(model)
    check_problem("per_sample_head_hessian_norms", params, X, model=model, heads=True)
    if batch_size is not None:
        positive_int("batch_size", batch_size)
    return head_hessian_norms(params, X, model, batch_size)


def head_hessian_norms(params, X, model: HeadModel = SOFTMAX, batch_size: int | None = None) -> jax.Array:
    """Exact ``||∇²_{θ_h} f(θ_h; X_i)||_op`` for every sample and head, ``[n, H]``.

    Dense ``eigvalsh`` of, per (i, h), the model's ``reduced_hessian`` (same
    nonzero spectrum, 2T² x 2T² for softmax heads) when it is smaller than
    p x p, else of the p x p Hessian itself; a loop over equal chunks of at most
    ``batch_size`` samples (default :func:`norms_batch`), one batched ``eigvalsh`` per chunk.
    Pure and unchecked."""
    Z, unravel_head = ravel_heads(params)
    H, p = Z.shape
    T = X.shape[1]
    one = jnp.ones((1,), X.dtype)
    use_reduced = model.reduced_hessian is not None and 2 * T * T < p
    m = 2 * T * T if use_reduced else p

    def matrices(x):
        if use_reduced:
            return jax.vmap(lambda zh: model.reduced_hessian(unravel_head(zh), x))(Z)
        return weighted_head_hessians(params, x[None], one, model)

    def chunk(xs):                                    # [b, T, d] -> [b, H]
        ev = eigvalsh(jax.vmap(matrices)(xs))         # one batched call on [b, H, m, m]
        return jnp.maximum(-ev[..., 0], ev[..., -1])

    n = X.shape[0]
    if batch_size is None:
        batch_size = norms_batch(n, H, m)
    # c equal chunks, the last padded with copies of the last sample: one loop, no remainder
    # call beside it (an independent second batched eigensolver call; mhajax.linalg)
    c = -(-n // batch_size)
    b = -(-n // c)
    Xp = jnp.concatenate([X, jnp.broadcast_to(X[-1:], (c * b - n,) + X.shape[1:])])
    return jax.lax.map(chunk, Xp.reshape((c, b) + X.shape[1:])).reshape(c * b, H)[:n]
