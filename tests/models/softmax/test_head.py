"""mhajax.models.softmax.head: the paper's head f(θ_h; X) and init_params (docs/theory.md §1),
and the public init_params of mhajax.api (the same draw after the memory check).

Truths: f written out with NumPy loops over tokens (s_t[j] = x_tᵀ W x_j, a_t = softmax(s_t),
f = Σ_t Σ_j a_t[j] x_jᵀ u_t), its closed-form limits (uniform attention at W = 0, hard
attention for a saturated W), and the distribution of init_params' draws.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mhajax import api
from mhajax.errors import InputError
from mhajax.models.base import MHAParams
from mhajax.models.softmax import head as head_mod
from mhajax.models.softmax.head import init_params, softmax_head
from mhajax.runtime import memory as mem


def np_head(U, W, X):
    """f(θ_h; X) token by token, in float64 NumPy."""
    T = X.shape[0]
    f = 0.0
    for t in range(T):
        s = np.array([X[t] @ W @ X[j] for j in range(T)])
        a = np.exp(s - s.max())
        a /= a.sum()
        f += sum(a[j] * (X[j] @ U[t]) for j in range(T))
    return f


@pytest.mark.parametrize("T,d,seed,w", [(3, 4, 0, 1.0), (5, 2, 1, 3.0), (1, 3, 2, 1.0), (4, 4, 3, 0.1)])
def test_softmax_head_matches_token_loop(T, d, seed, w):
    rng = np.random.default_rng(seed)
    U, W, X = rng.standard_normal((T, d)), w * rng.standard_normal((d, d)), rng.standard_normal((T, d))
    got = float(softmax_head(MHAParams(jnp.asarray(U), jnp.asarray(W)), jnp.asarray(X)))
    assert got == pytest.approx(np_head(U, W, X), rel=1e-12, abs=1e-13)


def test_softmax_head_is_not_symmetric_in_the_attention():
    """Row t of the attention is softmax over j of x_tᵀ W x_j (rows, not columns): with a
    non-symmetric W, using Wᵀ (or the columns) gives another value."""
    rng = np.random.default_rng(4)
    U, W, X = rng.standard_normal((3, 2)), 2 * rng.standard_normal((2, 2)), rng.standard_normal((3, 2))
    f = float(softmax_head(MHAParams(jnp.asarray(U), jnp.asarray(W)), jnp.asarray(X)))
    assert f == pytest.approx(np_head(U, W, X), rel=1e-12, abs=0)
    assert abs(np_head(U, W.T, X) - f) > 1e-3


def test_uniform_and_hard_attention_limits():
    """W = 0: f = Σ_t u_tᵀ mean_j x_j. W = c·I with c large and tokens of distinct norms:
    token t attends to argmax_j x_tᵀ x_j only, and f is finite (no overflow) for c = 1e4."""
    rng = np.random.default_rng(5)
    T, d = 4, 3
    U, X = rng.standard_normal((T, d)), rng.standard_normal((T, d))
    f0 = float(softmax_head(MHAParams(jnp.asarray(U), jnp.zeros((d, d))), jnp.asarray(X)))
    assert f0 == pytest.approx(float(np.sum(U @ X.mean(0))), rel=1e-13, abs=0)
    G = X @ X.T
    hard = sum(U[t] @ X[int(np.argmax(G[t]))] for t in range(T))
    f = float(softmax_head(MHAParams(jnp.asarray(U), 1e4 * jnp.eye(d)), jnp.asarray(X)))
    assert math.isfinite(f) and f == pytest.approx(hard, rel=1e-9, abs=0)


def test_init_params_distribution(key):
    """U ~ N(0, u_scale²) entrywise and W ~ N(0, w_scale²/d), from independent keys."""
    H, T, d = 64, 8, 16
    th = init_params(key, H, T, d, u_scale=2.0, w_scale=3.0)
    U, W = np.asarray(th.U), np.asarray(th.W)
    assert U.shape == (H, T, d) and W.shape == (H, d, d)
    # sample moments of 8192 / 16384 Gaussian draws: 6 standard errors
    assert abs(U.mean()) < 6 * 2.0 / math.sqrt(U.size)
    assert U.std() == pytest.approx(2.0, rel=6 * math.sqrt(0.5 / U.size), abs=0)
    assert W.std() == pytest.approx(3.0 / math.sqrt(d), rel=6 * math.sqrt(0.5 / W.size), abs=0)
    assert abs(np.corrcoef(U[:, :, :4].ravel()[:1024], W.ravel()[:1024])[0, 1]) < 0.15


def test_init_params_dtype_and_defaults(key):
    th = init_params(key, 2, 3, 4, dtype=jnp.float32)
    assert th.U.dtype == jnp.float32 and th.W.dtype == jnp.float32
    th = init_params(key, 2, 3, 4)
    assert th.U.dtype == jnp.float64 and not np.any(np.asarray(th.W))   # w_scale = 0
    assert float(np.asarray(th.U).std()) == pytest.approx(1.0, rel=0.5, abs=0)  # u_scale = 1
    # integral floats are sizes, zero scales are allowed
    th = init_params(key, 2.0, 3, 4, u_scale=0.0)
    assert th.U.shape == (2, 3, 4) and not np.any(np.asarray(th.U))


@pytest.mark.parametrize("kw, name", [
    (dict(heads=0), "heads"), (dict(heads=-1), "heads"), (dict(tokens=0), "tokens"),
    (dict(dim=0), "dim"), (dict(heads=1.5), "heads"), (dict(u_scale=-1.0), "u_scale"),
    (dict(w_scale=float("nan")), "w_scale"), (dict(u_scale=float("inf")), "u_scale")])
def test_init_params_rejects_bad_sizes(key, kw, name):
    args = dict(heads=2, tokens=3, dim=4) | kw
    with pytest.raises(InputError, match=name) as e:
        init_params(key, args.pop("heads"), args.pop("tokens"), args.pop("dim"), **args)
    assert repr(kw[name]) in str(e.value)


def test_init_params_memory_guard_gets_the_sizes_and_force(key, monkeypatch):
    """The public entry makes one guard call with H, T, d, the bytes per entry and ``force``; its
    terms are the bytes of the U and W it returns; the parameters are :func:`softmax_init`'s,
    the model's init."""
    calls = []

    def spy(what, terms, itemsize, *, force=False, **sizes):
        calls.append((what, itemsize, force, sizes, terms(**sizes)))

    monkeypatch.setattr(mem, "guard_call", spy)
    th = api.init_params(key, 2, 3, 4, force=True)
    th32 = api.init_params(key, 5, 6, 7, dtype=jnp.float32)
    assert calls[0] == ("init_params", 8, True, dict(H=2, T=3, d=4), [("U [H, T, d]", (2, 3, 4)), ("W [H, d, d]", (2, 4, 4))])
    assert calls[1][:4] == ("init_params", 4, False, dict(H=5, T=6, d=7))
    for (*_, terms), b, out in zip(calls, (8, 4), (th, th32)):
        assert sum(math.prod(shape) for _, shape in terms) * b == out.U.nbytes + out.W.nbytes
    same = head_mod.softmax_init(key, 2, 3, 4)
    assert np.array_equal(np.asarray(same.U), np.asarray(th.U)) and np.array_equal(np.asarray(same.W), np.asarray(th.W))


def test_init_params_refuses_absurd_sizes_before_drawing(key, monkeypatch):
    def no_draw(*a, **k):
        raise AssertionError("drew parameters")

    monkeypatch.setattr(head_mod.jax.random, "normal", no_draw)
    with pytest.raises(mem.MemoryGuardError, match=r"^init_params: H=1073741824\b.*, or pass force=True$"):
        api.init_params(key, 2 ** 30, 64, 64)


def test_head_is_differentiable_in_both_blocks(key):
    """∂f/∂U = A X (exact, f is linear in U) — a check that U enters only as <U, A X>."""
    rng = np.random.default_rng(6)
    T, d = 3, 2
    U, W, X = rng.standard_normal((T, d)), rng.standard_normal((d, d)), rng.standard_normal((T, d))
    g = jax.grad(lambda u: softmax_head(MHAParams(u, jnp.asarray(W)), jnp.asarray(X)))(jnp.asarray(U))
    S = X @ W @ X.T
    A = np.exp(S - S.max(1, keepdims=True))
    A /= A.sum(1, keepdims=True)
    np.testing.assert_allclose(np.asarray(g), A @ X, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("init", [api.init_params, init_params, head_mod.softmax_init],
                         ids=["api.init_params", "init_params", "softmax_init"])
def test_init_messages_name_the_argument(key, init):
    """Every entry point (the public one, the package's name and the model's own ``init``, which a
    user's code calls directly) names the bad argument in the exact message, before the memory
    check."""
    for kw, msg in [(dict(heads=0), "heads must be an integer >= 1, got 0"),
                    (dict(tokens=-2), "tokens must be an integer >= 1, got -2"),
                    (dict(dim=1.5), "dim must be an integer >= 1, got 1.5"),
                    (dict(u_scale=-1.0), "u_scale must be a finite number >= 0, got -1.0"),
                    (dict(w_scale=float("inf")), "w_scale must be a finite number >= 0, got inf")]:
        args = dict(heads=2, tokens=3, dim=4) | kw
        with pytest.raises(InputError) as e:
            init(key, args.pop("heads"), args.pop("tokens"), args.pop("dim"), **args)
        assert str(e.value) == msg
