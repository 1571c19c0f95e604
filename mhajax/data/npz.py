"""A user-supplied ``.npz`` data file as a data model.

:func:`load_npz` reads and validates ``X [n, T, d]`` and ``y [n]`` in {-1, +1};
:func:`from_npz` draws ``n`` of its samples without replacement (the data-model
signature ``draw(key, n, tokens, dim, *, path) -> (X, y)``). Reading a file is not
traceable: this data model cannot be ``jit``-ed or ``vmap``-ed over keys.
"""
from __future__ import annotations

import os
import zipfile

import jax
import jax.numpy as jnp
import numpy as np

from mhajax.errors import InputError
from mhajax.validate import check_data, positive_int


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


def npz_shape(path) -> tuple:
    """``(n, T, d)`` of the ``X`` held by an ``.npz`` data file (the whole file is checked, as
    :func:`load_npz` does; :class:`InputError` when it is not a valid data file)."""
    X, _ = load_npz(path, dtype=np.float64 if jax.config.jax_enable_x64 else np.float32)
    return tuple(int(s) for s in X.shape)


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
