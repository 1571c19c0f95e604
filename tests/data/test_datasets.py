"""mhajax.datasets: the sparse-token data model, the .npz loader (every bad input is a
clear InputError), and the data-model registry."""
import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mhajax.data.mixture import draw_mixture
from mhajax.data.registry import DATASETS, TRACEABLE, get_dataset
from mhajax.data.npz import from_npz, load_npz
from mhajax.data.sparse import sparse_tokens
from mhajax.errors import InputError

KEY = jax.random.PRNGKey(0)


@settings(max_examples=15)
@given(seed=st.integers(0, 2**31 - 1), k=st.integers(1, 5), signal=st.floats(0.1, 5.0))
def test_sparse_tokens_places_k_signals_in_positives_only(seed, k, signal):
    n, T, d = 7, 5, 3
    X, y = sparse_tokens(jax.random.PRNGKey(seed), n, T, d, k=k, signal=signal, sigma=0.0)
    X, y = np.asarray(X), np.asarray(y)
    assert X.shape == (n, T, d) and y.shape == (n,) and X.dtype == np.float64
    assert sorted(y.tolist()) == [-1.0] * 3 + [1.0] * 4  # balanced: ⌈n/2⌉ positives
    hot = X[..., 0] == signal
    np.testing.assert_array_equal(hot.sum(1), np.where(y > 0, k, 0))
    assert np.all(X[..., 1:] == 0) and np.all(X[~hot] == 0)  # σ = 0: nothing but the signal


def test_sparse_tokens_noise_and_vmap():
    keys = jax.random.split(KEY, 3)
    X, y = jax.jit(jax.vmap(lambda k: sparse_tokens(k, 64, 6, 4, k=2, sigma=0.5)))(keys)
    assert X.shape == (3, 64, 6, 4) and y.shape == (3, 64)
    neg = np.asarray(X)[np.asarray(y) < 0]
    assert abs(neg.std() - 0.5) < 0.05 and abs(neg.mean()) < 0.05  # pure N(0, σ²) noise
    X1, _ = sparse_tokens(keys[1], 64, 6, 4, k=2, sigma=0.5)
    np.testing.assert_array_equal(np.asarray(X[1]), np.asarray(X1))


@pytest.mark.parametrize("kw, match", [
    (dict(k=0), "k \\(signal positions\\) must be an integer >= 1"),
    (dict(k=7), "k \\(signal positions\\) must be <= tokens = 6"),
    (dict(signal=0.0), "signal must be a finite number > 0"),
    (dict(sigma=-1.0), "sigma must be a finite number >= 0"),
    (dict(sigma=float("nan")), "sigma"),
])
def test_sparse_tokens_bad_knobs(kw, match):
    with pytest.raises(InputError, match=match):
        sparse_tokens(KEY, 8, 6, 4, **kw)


# ---------------------------------------------------------------------------
# .npz files
# ---------------------------------------------------------------------------

def _good(n=5, T=3, d=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, T, d)), np.where(np.arange(n) % 2 == 0, 1.0, -1.0)


def test_load_npz_round_trip(tmp_path):
    X, y = _good()
    p = tmp_path / "data.npz"
    np.savez(p, X=X, y=y, extra=np.arange(3))
    X2, y2 = load_npz(p)
    assert X2.dtype == jnp.float64 and y2.dtype == jnp.float64
    np.testing.assert_array_equal(np.asarray(X2), X)
    np.testing.assert_array_equal(np.asarray(y2), y)
    np.savez(tmp_path / "ints.npz", X=np.ones((4, 2, 3), np.int32), y=np.array([1, -1, 1, -1]))
    Xi, yi = load_npz(str(tmp_path / "ints.npz"))
    assert Xi.dtype == jnp.float64 and np.asarray(yi).tolist() == [1.0, -1.0, 1.0, -1.0]


def _nan_at(X, idx, v):
    X = X.copy()
    X[idx] = v
    return X


X0, Y0 = _good()
BAD = {
    "nan": (dict(X=_nan_at(X0, (1, 2, 0), np.nan), y=Y0), r"non-finite value\(s\), first X\[1, 2, 0\] = nan"),
    "inf": (dict(X=_nan_at(X0, (0, 0, 3), -np.inf), y=Y0), r"non-finite value\(s\), first X\[0, 0, 3\] = -inf"),
    "label0": (dict(X=X0, y=np.array([1, 0, 1, -1, 1.0])), r"labels must be -1 or \+1, got y\[1\]"),
    "label01": (dict(X=X0, y=np.array([1, 0, 1, 0, 1])), r"labels must be -1 or \+1"),
    "rank2": (dict(X=X0[0], y=Y0), r"X in .* must have shape \[n, T, d\], got shape \(3, 4\)"),
    "rank4": (dict(X=X0[None], y=Y0), r"must have shape \[n, T, d\], got shape \(1, 5, 3, 4\)"),
    "ylen": (dict(X=X0, y=Y0[:4]), r"y has shape \(4,\) but X has shape \(5, 3, 4\)"),
    "y2d": (dict(X=X0, y=Y0[:, None]), r"y must be a vector of shape \[n\]"),
    "noy": (dict(X=X0), r"lacks array\(s\) y: an .npz data file must hold X \[n, T, d\] and y \[n\] \(found: X\)"),
    "nothing": (dict(x=X0, labels=Y0), r"lacks array\(s\) X, y"),
    "complex": (dict(X=X0 + 1j, y=Y0), r"X in .* must be a real numeric array, got dtype complex128"),
    "strings": (dict(X=X0, y=np.array(["+"] * 5)), r"y in .* must be a real numeric array"),
    "object": (dict(X=np.array([X0, 1], dtype=object), y=Y0), r"without unpickling"),
    "empty": (dict(X=np.zeros((0, 3, 4)), y=np.zeros((0,))), r"X must be non-empty"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_load_npz_bad_contents(tmp_path, case):
    arrays, match = BAD[case]
    p = tmp_path / f"{case}.npz"
    np.savez(p, **arrays)
    with pytest.raises(InputError, match=match) as e:
        load_npz(p)
    assert str(p) in str(e.value)  # the message names the file


def test_load_npz_bad_files(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        load_npz(tmp_path / "missing.npz")
    with pytest.raises(InputError, match="is a directory"):
        load_npz(tmp_path)
    (tmp_path / "text.npz").write_text("X,y\n1,2\n")
    with pytest.raises(InputError, match=r"not an .npz file \(not a zip archive\)"):
        load_npz(tmp_path / "text.npz")
    (tmp_path / "empty.npz").write_bytes(b"")
    with pytest.raises(InputError, match="not a zip archive"):
        load_npz(tmp_path / "empty.npz")
    np.save(tmp_path / "single.npy", X0)
    with pytest.raises(InputError, match=r"a single .npy array.*numpy.savez\(path, X=X, y=y\)"):
        load_npz(tmp_path / "single.npy")
    with pytest.raises(InputError, match="needs path="):
        load_npz(None)


def test_load_npz_shape_expectations(tmp_path):
    p = tmp_path / "d.npz"
    np.savez(p, X=X0, y=Y0)
    with pytest.raises(InputError, match=r"has tokens T = 3, but 4 was requested"):
        load_npz(p, tokens=4)
    with pytest.raises(InputError, match=r"has token dimension d = 4, but 5 was requested"):
        load_npz(p, dim=5)


def test_from_npz_subsamples_by_key(tmp_path):
    X, y = _good(n=20, seed=3)
    p = tmp_path / "d.npz"
    np.savez(p, X=X, y=y)
    Xa, ya = from_npz(KEY, 8, 3, 4, path=p)
    Xb, yb = from_npz(KEY, 8, 3, 4, path=p)
    np.testing.assert_array_equal(np.asarray(Xa), np.asarray(Xb))  # deterministic in the key
    rows = {tuple(np.asarray(r).ravel()) for r in Xa}
    assert len(rows) == 8 and rows <= {tuple(r.ravel()) for r in X}  # without replacement
    Xall, _ = from_npz(KEY, None, 3, 4, path=p)
    assert Xall.shape == (20, 3, 4)
    with pytest.raises(InputError, match="n = 21 samples requested but .* holds only 20"):
        from_npz(KEY, 21, 3, 4, path=p)
    with pytest.raises(InputError, match="tokens T = 3, but 5 was requested"):
        from_npz(KEY, 4, 5, 4, path=p)


# ---------------------------------------------------------------------------
# Registry: one call signature for every data model
# ---------------------------------------------------------------------------

def test_registry_and_signature(tmp_path):
    assert set(DATASETS) == {"mixture", "sparse", "npz", "digits"} and TRACEABLE == {"mixture", "sparse"}
    assert get_dataset("mixture") is draw_mixture and get_dataset(" Sparse ") is sparse_tokens   # unguarded
    with pytest.raises(InputError, match="unknown data model 'mnist'; choose from mixture, sparse, npz, digits"):
        get_dataset("mnist")
    X, y = _good(n=10, T=4, d=6)
    np.savez(tmp_path / "d.npz", X=X, y=y)
    knobs = {"mixture": {}, "sparse": {}, "npz": {"path": tmp_path / "d.npz"}, "digits": {}}
    shape = {"digits": (8, 8)}                      # the digits fix T = d = 8 (tests/data/test_digits.py)
    for name, draw in DATASETS.items():
        if name == "digits" and importlib.util.find_spec("sklearn") is None:
            continue
        T, d = shape.get(name, (4, 6))
        Xd, yd = draw(KEY, 6, T, d, **knobs[name])
        assert Xd.shape == (6, T, d) and yd.shape == (6,)
        assert set(np.asarray(yd).tolist()) <= {-1.0, 1.0}
