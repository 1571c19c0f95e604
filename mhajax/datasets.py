"""Data models beyond the tokenized mixture, and a registry of all of them.

Every data model has the signature of :func:`mhajax.data.tokenized_mixture`::

    draw(key, n, tokens, dim, **knobs) -> (X [n, T, d], y [n])      labels in {-1, +1}

* ``mixture`` — the tokenized mixture of SPEC §6 (:func:`mhajax.data.tokenized_mixture`);
* ``sparse``  — sparse-token detection (:func:`sparse_tokens`): a positive sequence hides a
  signal vector in ``k`` random positions; a negative one is pure noise;
* ``npz``     — a user-supplied ``.npz`` file holding ``X`` and ``y`` (:func:`from_npz`,
  built on :func:`load_npz`), validated by :func:`mhajax.validate.check_data`.

``mixture`` and ``sparse`` are pure and traceable in ``key`` (``vmap`` over seeds works);
``npz`` reads a file and is not (:data:`TRACEABLE` lists which are).
Registry: :data:`DATASETS`, :func:`get_dataset`.
"""
from __future__ import annotations

import os
import zipfile

import jax
import jax.numpy as jnp
import numpy as np

from .data import tokenized_mixture
from .errors import InputError
from .validate import check_data, positive_float, positive_int


def _balanced_labels(key, n, dtype):
    y = jnp.where(jnp.arange(n) < (n + 1) // 2, 1.0, -1.0).astype(dtype)
    return jax.random.permutation(key, y)


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
    y = _balanced_labels(k_lab, n, dtype)
    ranks = jnp.argsort(jnp.argsort(jax.random.uniform(k_pos, (n, tokens)), axis=1), axis=1)
    hot = (ranks < k) & (y > 0)[:, None]                                   # [n, T]
    e1 = jnp.zeros((dim,), dtype).at[0].set(signal)
    X = hot[..., None] * e1 + sigma * jax.random.normal(k_noise, (n, tokens, dim), dtype)
    return X, y


def load_npz(path, *, tokens: int | None = None, dim: int | None = None, dtype=None):
    """Load ``(X [n, T, d], y [n])`` from a ``.npz`` file with arrays named ``X`` and ``y``.

    Checked, each failure an :class:`InputError` naming the problem: the file exists and is
    a readable ``.npz`` archive (no pickled objects), it holds ``X`` and ``y``, ``X`` is a
    real floating or integer array of shape [n, T, d] without NaN/inf, ``y`` has shape [n]
    and values in {-1, +1} (:func:`mhajax.validate.check_data`), and T, d match ``tokens``,
    ``dim`` when given. Returns jnp arrays of ``dtype`` (default: JAX's float, float64
    when x64 is on)."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise InputError(f"the npz data model needs path=<file.npz>, got {path!r}")
    p = os.fsdecode(os.fspath(path))
    if not os.path.exists(p):
        raise InputError(f"npz data file {p!r} does not exist")
    if os.path.isdir(p):
        raise InputError(f"npz data file {p!r} is a directory")
    try:
        is_zip = zipfile.is_zipfile(p)
        with open(p, "rb") as fh:
            magic = fh.read(6)
    except OSError as e:
        raise InputError(f"npz data file {p!r} cannot be read: {e.strerror or e}") from None
    if not is_zip:
        kind = "a single .npy array" if magic == b"\x93NUMPY" else "not a zip archive"
        raise InputError(f"{p!r} is not an .npz file ({kind}): save one with "
                         "numpy.savez(path, X=X, y=y)")
    try:
        with np.load(p, allow_pickle=False) as f:
            missing = [k for k in ("X", "y") if k not in f.files]
            if missing:
                raise InputError(f"{p!r} lacks array(s) {', '.join(missing)}: an .npz data file must "
                                 f"hold X [n, T, d] and y [n] (found: {', '.join(f.files) or 'nothing'})")
            X, y = f["X"], f["y"]
    except InputError:
        raise
    except ValueError as e:  # object arrays need pickle: refused
        raise InputError(f"{p!r}: cannot read X and y without unpickling (object arrays are "
                         f"refused): {e}") from None
    except (OSError, zipfile.BadZipFile, EOFError, KeyError) as e:
        raise InputError(f"{p!r} is not a readable .npz file: {e}") from None
    for name, a in (("X", X), ("y", y)):
        if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)
                or a.dtype == np.bool_):
            raise InputError(f"{name} in {p!r} must be a real numeric array, got dtype {a.dtype}")
    if X.ndim != 3:
        raise InputError(f"X in {p!r} must have shape [n, T, d], got shape {X.shape}")
    dtype = dtype or jnp.result_type(float)
    Xf = X.astype(np.float64)
    yf = y.astype(np.float64)
    for what, want, got in (("tokens T", tokens, X.shape[1]), ("token dimension d", dim, X.shape[2])):
        if want is not None and got != want:
            raise InputError(f"X in {p!r} has {what} = {got}, but {want} was requested "
                             f"(X shape {X.shape})")
    try:
        check_data(Xf, yf)
    except InputError as e:
        raise InputError(f"{p!r}: {e}") from None
    if np.finfo(np.dtype(dtype)).bits < 64:
        big = np.abs(Xf).max()
        if big > np.finfo(np.dtype(dtype)).max:
            raise InputError(f"{p!r}: X has entries up to {big:.3g}, beyond {np.dtype(dtype)}")
    return jnp.asarray(Xf, dtype), jnp.asarray(yf, dtype)


def from_npz(key, n: int | None, tokens: int, dim: int, *, path, dtype=None):
    """The ``npz`` data model: ``n`` samples drawn without replacement (order by ``key``) from
    the file at ``path`` (:func:`load_npz`; its T and d must equal ``tokens`` and ``dim``).
    ``n = None`` takes every sample, shuffled. Not traceable (reads a file). Two draws with
    different keys may share samples: for a held-out test set, supply a second file."""
    X, y = load_npz(path, tokens=tokens, dim=dim, dtype=dtype)
    N = X.shape[0]
    n = N if n is None else positive_int("n", n)
    if n > N:
        raise InputError(f"n = {n} samples requested but {os.fspath(path)!r} holds only {N}")
    idx = jax.random.permutation(key, N)[:n]
    return X[idx], y[idx]


#: every data model, by name (same call signature).
DATASETS = {"mixture": tokenized_mixture, "sparse": sparse_tokens, "npz": from_npz}
#: the data models that are pure functions of the key (``jit``/``vmap``-able).
TRACEABLE = frozenset({"mixture", "sparse"})


def get_dataset(name: str):
    """The data model ``draw(key, n, tokens, dim, **knobs) -> (X, y)`` called ``name``
    (``mixture``, ``sparse``, ``npz``). Raises :class:`InputError` for an unknown name."""
    key = str(name).strip().lower()
    if key not in DATASETS:
        raise InputError(f"unknown data model {name!r}; choose from {', '.join(DATASETS)}")
    return DATASETS[key]


__all__ = ["sparse_tokens", "load_npz", "from_npz", "DATASETS", "TRACEABLE", "get_dataset",
           "check_sparse_args"]
