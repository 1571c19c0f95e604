"""mhajax.data: the tokenized-mixture data model (docs/theory.md §9)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mhajax.data.mixture import relevant_count, tokenized_mixture
from mhajax.data.seeds import seed_keys
from mhajax.data.common import token_radius
from mhajax.errors import InputError
from mhajax.experiments.configs import DataConfig
from mhajax.experiments.base import batched_data


def _classify(X, y, signal, K, antipodal):
    """For σ = 0: per token, 'rel' if it equals μ_y, else the cluster index k with x = ν_k."""
    n, T, d = X.shape
    eye = np.eye(d)
    mu_pos = signal * eye[0]
    mu_neg = -mu_pos if antipodal else signal * eye[1]
    rel = np.zeros((n, T), bool)
    clusters = np.full((n, T), -1)
    for i in range(n):
        mu = mu_pos if y[i] > 0 else mu_neg
        for t in range(T):
            if np.array_equal(X[i, t], mu):
                rel[i, t] = True
            else:
                hits = [k for k in range(K) if np.array_equal(X[i, t], eye[2 + k])]
                assert len(hits) == 1, (i, t, X[i, t])
                clusters[i, t] = hits[0]
    return rel, clusters


# One shape (n, T, d) for every example: the op-by-op primitives compile once.
NS, TS, DS = 7, 5, 6


@settings(max_examples=15)
@given(K=st.sampled_from([1, 4]), zeta=st.sampled_from([0.01, 0.2, 0.3, 0.5, 0.7, 1.0]),
       signal=st.floats(0.5, 3.0), antipodal=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_structure_with_zero_noise(K, zeta, signal, antipodal, seed):
    n, T, d = NS, TS, DS
    X, y = tokenized_mixture(jax.random.PRNGKey(seed), n, T, d, zeta=zeta, num_clusters=K,
                             signal=signal, sigma=0.0, antipodal=antipodal)
    X, y = np.asarray(X), np.asarray(y)
    assert X.shape == (n, T, d) and y.shape == (n,)
    assert X.dtype == np.float64 and y.dtype == np.float64
    # balanced labels: ⌈n/2⌉ positives, ⌊n/2⌋ negatives
    assert set(np.unique(y)) <= {-1.0, 1.0}
    assert np.sum(y > 0) == (n + 1) // 2 and np.sum(y < 0) == n // 2
    # relevant tokens sit exactly at μ_y, the others exactly at some ν_k, k < K
    rel, clusters = _classify(X, y, signal, K, antipodal)
    m = max(1, int(round(zeta * T)))
    assert relevant_count(T, zeta) == m
    np.testing.assert_array_equal(rel.sum(1), m)       # exactly m relevant positions per sequence
    assert np.all((clusters >= 0) == ~rel)


def test_antipodal_means():
    X, y = tokenized_mixture(jax.random.PRNGKey(4), NS, TS, DS, zeta=0.5, num_clusters=4,
                             signal=2.0, sigma=0.0, antipodal=True)
    X, y = np.asarray(X), np.asarray(y)
    neg = X[y < 0]
    assert any(np.array_equal(tok, [-2.0, 0, 0, 0, 0, 0]) for seq in neg for tok in seq)
    assert not any(np.array_equal(tok, [0, 2.0, 0, 0, 0, 0]) for seq in neg for tok in seq)


def test_relevant_count_rule():
    assert relevant_count(6, 0.25) == 2           # round(1.5) = 2
    assert relevant_count(4, 0.1) == 1            # round(0.4) = 0 -> at least one
    assert relevant_count(10, 1.0) == 10
    assert relevant_count(3, 0.01) == 1
    # Python's round() is round-half-to-even: ζT = 2.5 gives 2 relevant tokens, not 3.
    assert relevant_count(10, 0.25) == 2


def test_positions_and_clusters_are_random():
    X, y = tokenized_mixture(jax.random.PRNGKey(7), 64, TS, DS, zeta=0.4, num_clusters=4, sigma=0.0)
    rel, clusters = _classify(np.asarray(X), np.asarray(y), 1.0, 4, False)
    # 64 sequences with 2 of 5 positions relevant: all positions get used, not always the first
    assert np.all(rel.any(0))
    assert len({tuple(r) for r in rel}) > 5
    # every irrelevant cluster is used
    assert set(np.unique(clusters[clusters >= 0])) == {0, 1, 2, 3}
    # both classes carry their own relevant mean
    assert np.all(np.asarray(X)[np.asarray(y) > 0][rel[np.asarray(y) > 0]][:, 0] == 1.0)


def test_noise_is_additive_standard_gaussian():
    key = jax.random.PRNGKey(11)
    X0, y0 = tokenized_mixture(key, 64, TS, DS, zeta=0.4, num_clusters=4, sigma=0.0)
    X1, y1 = tokenized_mixture(key, 64, TS, DS, zeta=0.4, num_clusters=4, sigma=0.5)
    X2, _ = tokenized_mixture(key, 64, TS, DS, zeta=0.4, num_clusters=4, sigma=2.0)
    np.testing.assert_array_equal(np.asarray(y0), np.asarray(y1))   # labels/positions don't move
    Z1 = (np.asarray(X1) - np.asarray(X0)) / 0.5
    Z2 = (np.asarray(X2) - np.asarray(X0)) / 2.0
    np.testing.assert_allclose(Z1, Z2, rtol=1e-12, atol=1e-12)      # exactly σ·z
    z = Z1.ravel()  # 1920 draws: mean and std within ~6 standard errors of N(0, 1)
    assert abs(z.mean()) < 6 / np.sqrt(z.size)
    assert abs(z.std() - 1.0) < 6 / np.sqrt(2 * z.size)


def test_determinism_independent_streams_and_vmap():
    k_data, k_init, k_test = seed_keys(3)
    keys = [np.asarray(k) for k in (k_data, k_init, k_test)]
    assert len({k.tobytes() for k in keys}) == 3
    A = tokenized_mixture(k_data, NS, TS, DS, num_clusters=4)
    B = tokenized_mixture(k_data, NS, TS, DS, num_clusters=4)
    C = tokenized_mixture(k_test, NS, TS, DS, num_clusters=4)
    np.testing.assert_array_equal(np.asarray(A[0]), np.asarray(B[0]))
    assert not np.allclose(np.asarray(A[0]), np.asarray(C[0]))
    # batched_data (jit of vmap over keys): stream 0 (train) of seed s equals
    # tokenized_mixture(seed_keys(s)[0]) up to rounding of the fused program; stream 2
    # (test) is the independent test set; different seeds give different data
    cfg = DataConfig(n=NS, tokens=TS, dim=DS, num_clusters=4)
    Xtr, ytr = batched_data(cfg, [3, 4])
    Xte, _ = batched_data(cfg, [3, 4], stream=2)
    assert Xtr.shape == (2, NS, TS, DS) and ytr.shape == (2, NS)
    np.testing.assert_allclose(np.asarray(Xtr[0]), np.asarray(A[0]), rtol=4e-16, atol=4e-16)
    np.testing.assert_array_equal(np.asarray(ytr[0]), np.asarray(A[1]))
    np.testing.assert_allclose(np.asarray(Xte[0]), np.asarray(C[0]), rtol=4e-16, atol=4e-16)
    assert not np.allclose(np.asarray(Xtr[0]), np.asarray(Xtr[1]))


def test_token_radius():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5, 3, 4))
    assert float(token_radius(jnp.asarray(X))) == pytest.approx(np.linalg.norm(X, axis=-1).max(), rel=1e-15, abs=0)


@pytest.mark.parametrize("kw, needle", [
    (dict(dim=5, num_clusters=4), "dim=5"),          # needs d >= K + 2 = 6
    (dict(dim=3, num_clusters=2), "dim=3"),
    (dict(n=0), "n"), (dict(tokens=0), "tokens"), (dict(zeta=0.0), "zeta"),
    (dict(zeta=1.5), "1.5"), (dict(sigma=-0.1), "sigma"), (dict(signal=0.0), "signal"),
    (dict(num_clusters=0), "num_clusters"), (dict(zeta=float("nan")), "zeta")])
def test_bad_arguments_raise_input_error(kw, needle):
    args = dict(n=NS, tokens=TS, dim=DS, num_clusters=2) | kw
    with pytest.raises(InputError, match=needle):
        tokenized_mixture(jax.random.PRNGKey(0), args.pop("n"), args.pop("tokens"), args.pop("dim"), **args)


def test_dim_error_names_the_requirement():
    with pytest.raises(InputError) as e:
        tokenized_mixture(jax.random.PRNGKey(0), NS, TS, 5, num_clusters=4)
    assert "dim=5" in str(e.value) and "num_clusters=4" in str(e.value) and ">= " in str(e.value)
    # the boundary case d = K + 2 is allowed
    X, _ = tokenized_mixture(jax.random.PRNGKey(0), NS, TS, 6, num_clusters=4)
    assert X.shape == (NS, TS, 6)


def test_the_memory_guard_gets_the_sizes_and_force_before_drawing(monkeypatch):
    """The public entry makes one guard call with n, T, d, the bytes per entry and ``force``,
    after validation's knobs and before the draw; its term is the bytes of the X returned; the
    draw is :func:`draw_mixture`'s (the registry's ``mixture``), bit for bit."""
    import math
    from mhajax import api
    from mhajax.data import mixture
    from mhajax.runtime import memory as mem
    calls = []

    def spy(what, terms, itemsize, *, force=False, **sizes):
        calls.append((what, itemsize, force, sizes, terms(**sizes)))
    monkeypatch.setattr(mem, "guard_call", spy)
    key = jax.random.PRNGKey(3)
    X, y = api.tokenized_mixture(key, 5, 3, 6, num_clusters=2, force=True)
    X32, _ = api.tokenized_mixture(key, 7, 4, 6, dtype=jnp.float32)
    assert calls[0] == ("tokenized_mixture", 8, True, dict(n=5, T=3, d=6), [("X [n, T, d]", (5, 3, 6))])
    assert calls[1][:4] == ("tokenized_mixture", 4, False, dict(n=7, T=4, d=6))
    assert math.prod(calls[0][4][0][1]) * 8 == X.nbytes and math.prod(calls[1][4][0][1]) * 4 == X32.nbytes
    Xd, yd = mixture.draw_mixture(key, 5, 3, 6, num_clusters=2)
    assert np.array_equal(np.asarray(Xd), np.asarray(X)) and np.array_equal(np.asarray(yd), np.asarray(y))
    with pytest.raises(InputError, match="dim=3"):
        api.tokenized_mixture(key, 5, 3, 3, num_clusters=2)    # validation first: the guard never sees it
    assert len(calls) == 2
    Xp, yp = tokenized_mixture(key, 5, 3, 6, num_clusters=2)     # the plain function: no guard, the same draw
    assert len(calls) == 2 and np.array_equal(np.asarray(Xp), np.asarray(X)) and np.array_equal(np.asarray(yp),
                                                                                                np.asarray(y))
