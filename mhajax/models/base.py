"""Model kinds: per-head models and coupled models, and the per-head flat layout.

A :class:`HeadModel` is ``Φ(θ; X) = H^{-1/2} Σ_h f(θ_h; X)`` for a pure per-head
function ``f(θ_h; X [T, d]) -> scalar``. Parameters are pytrees whose every leaf
carries the head axis first; heads share no parameters, which is what makes the
Hessian of Φ block-diagonal over heads (docs/theory.md §3).

A :class:`CoupledModel` gives ``Φ(θ; X)`` whole: its heads share inputs (e.g. a
second layer reading every first-layer head), so no block structure exists and
only matrix-free curvature applies.

:func:`output` evaluates either kind; :func:`is_coupled` tells them apart.
The flat layout ``θ <-> Z [H, p]`` (:func:`ravel_heads`) keeps head h's ``p``
parameters contiguous, so ``∇²Φ`` is ``blockdiag(p × p)`` in it.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from mhajax.errors import InputError
from mhajax.validate import check_data, check_params, require_x64
from mhajax.runtime.imports import import_object, is_reference, source_digest

class MHAParams(NamedTuple):
    """Parameters of H softmax heads: ``U [H, T, d]`` (readout), ``W [H, d, d]`` (key-query)."""

    U: jax.Array
    W: jax.Array


class HeadModel(NamedTuple):
    """A per-head model ``Φ(θ; X) = H^{-1/2} Σ_h head_fn(θ_h, X)``.

    ``head_fn(θ_h, X [T, d]) -> scalar`` is pure; ``init(key, heads, tokens, dim, **kw)``
    returns stacked per-head parameters (leaves ``[H, ...]``). Optional closed forms, each
    valid for every input whose tokens have norm <= R:

    * ``kappa(params, R, T) -> κ(θ)`` bounds ``max_h ||∇²_{θ_h} f||_op``;
    * ``beta2(params, R, T) -> β₂(θ)`` bounds ``||∇_θ Φ||``;
    * ``weighted_hessian(θ_h, X [n, T, d], c [n]) -> Σ_i c_i ∇²_{θ_h} f(θ_h; X_i)`` [p, p]
      in the flat order of :func:`ravel_heads` (without it, ``jax.hessian`` is used);
    * ``reduced_hessian(θ_h, x [T, d])`` -> a symmetric matrix with the nonzero spectrum
      of ``∇²_{θ_h} f(θ_h; x)`` (exact per-sample norms when smaller than p × p);
    * ``beta3(params, R, T) -> [H]`` the per-head bounds whose maximum is κ;
    * ``note``: one line on where the closed form comes from.
    """

    name: str
    head_fn: Callable[[Any, jax.Array], jax.Array]
    init: Callable[..., Any]
    kappa: Optional[Callable[[Any, jax.Array, int], jax.Array]] = None
    beta2: Optional[Callable[[Any, jax.Array, int], jax.Array]] = None
    weighted_hessian: Optional[Callable[[Any, jax.Array, jax.Array], jax.Array]] = None
    reduced_hessian: Optional[Callable[[Any, jax.Array], jax.Array]] = None
    beta3: Optional[Callable[[Any, jax.Array, int], jax.Array]] = None
    note: str = ""


class CoupledModel(NamedTuple):
    """A multi-head model whose heads are coupled: ``phi(θ, X [T, d]) -> scalar`` is the
    whole model. ``init(key, heads, tokens, dim, **kw)`` returns parameters whose leaves
    carry the head axis first (so H is readable), but ``∇²Φ`` is not block-diagonal over
    heads: no head blocks, no per-head Hessians, no closed-form κ (``note`` says so)."""

    name: str
    phi: Callable[[Any, jax.Array], jax.Array]
    init: Callable[..., Any]
    note: str = ""


def is_coupled(model) -> bool:
    """Whether ``model`` is a :class:`CoupledModel` (no head-block structure)."""
    return isinstance(model, CoupledModel)


# ---------------------------------------------------------------------------
# The registry of built-in models: one way in (:func:`register`).
# ---------------------------------------------------------------------------

_REGISTRY: dict = {}
_BUILTIN: list = []    # filled by mhajax.models (freeze_builtins) once its modules registered theirs


def model_key(name) -> str:
    """Normalized model name: lower case, ``_`` as ``-`` (``two_layer`` -> ``two-layer``)."""
    return str(name).strip().lower().replace("_", "-")


def register(model):
    """Add a built-in model to the registry under ``model.name``; returns it unchanged."""
    _REGISTRY[model_key(model.name)] = model
    return model


def freeze_builtins(*extra) -> None:
    """Record every model registered so far, and ``extra``, as built in (called once, by
    :mod:`mhajax.models` after its own registrations)."""
    _BUILTIN[:] = list(_REGISTRY.values()) + list(extra)


def model_names(*, coupled: bool | None = None) -> tuple:
    """Registered model names in registration order; ``coupled=False`` per-head only,
    ``True`` coupled only, ``None`` all."""
    return tuple(k for k, m in _REGISTRY.items() if coupled is None or is_coupled(m) == coupled)


def get_model(model):
    """The model ``model`` names (a :class:`HeadModel` or :class:`CoupledModel`): a registered
    name, or an import reference ``package.module:NAME`` / ``path/to/file.py:NAME`` of a user's
    model; a model object is returned as it is. Raises :class:`InputError` for an unknown name,
    a reference that does not import, or an object that is not a model."""
    if isinstance(model, (HeadModel, CoupledModel)):
        return model
    if is_reference(model):
        obj = import_object(model, "model")
        if not isinstance(obj, (HeadModel, CoupledModel)):
            raise InputError(f"model {model!r} is a {type(obj).__name__}, not a mhajax.HeadModel or "
                             "mhajax.models.CoupledModel")
        return obj
    key = model_key(model)
    if key not in _REGISTRY:
        raise InputError(f"unknown model {model!r}; choose from {', '.join(_REGISTRY)}, or name your own "
                         "as package.module:NAME")
    return _REGISTRY[key]


def model_name(model) -> str:
    """How a config records ``model``: a registered name normalized (:func:`model_key`), an
    import reference as given."""
    return str(model).strip() if is_reference(model) else model_key(model)


def is_builtin(model) -> bool:
    """Whether ``model`` is one of the models mhajax itself registers (their closed forms are
    checked by the test suite and once per process; a user's model is checked at every use)."""
    return any(model is m or model == m for m in _BUILTIN)


def identity(model) -> dict:
    """What a saved result made with ``model`` depends on: its name, and for a model that is not
    built in, the SHA-256 of every source file defining it (:func:`mhajax.runtime.imports.source_digest`)."""
    model = get_model(model)
    if is_builtin(model):
        return dict(name=model.name, builtin=True)
    return dict(name=model.name, builtin=False, source=source_digest(model))


def num_heads(params) -> int:
    """H, the common leading axis of every leaf."""
    return jax.tree_util.tree_leaves(params)[0].shape[0]


def head_outputs(params, X: jax.Array, model="softmax") -> jax.Array:
    """Per-head outputs ``f(θ_h; X)``: ``[H]`` for X [T, d], ``[n, H]`` for X [n, T, d]."""
    model = get_model(model)
    per_head = jax.vmap(model.head_fn, in_axes=(0, None))
    if X.ndim == 2:
        return per_head(params, X)
    return jax.vmap(per_head, in_axes=(None, 0))(params, X)


def _mha(params, X: jax.Array, model) -> jax.Array:
    return jnp.sum(head_outputs(params, X, model), axis=-1) / jnp.sqrt(num_heads(params))


def mha(params, X: jax.Array, model="softmax") -> jax.Array:
    """``Φ(θ; X) = H^{-1/2} Σ_h f(θ_h; X)``: a scalar for X [T, d], a vector [n] for X [n, T, d].
    ``model``: a :class:`HeadModel` or a registered name (default the paper's softmax head).
    Validated (:func:`check_problem`); inside the package, :func:`output` is the unchecked form."""
    model = get_model(model)
    check_problem("mha", params, X, model=model, sequence=True)
    if is_coupled(model):
        raise InputError(f"mha: model {model.name!r} couples its heads; use mhajax.models.output")
    return _mha(params, X, model)


def output(params, X: jax.Array, model="softmax") -> jax.Array:
    """``Φ(θ; X)`` of either model kind: a scalar for ``X [T, d]``, ``[n]`` for ``X [n, T, d]``.
    Pure and unchecked (the package's own form of :func:`mha`)."""
    model = get_model(model)
    if is_coupled(model):
        return model.phi(params, X) if X.ndim == 2 else jax.vmap(model.phi, in_axes=(None, 0))(params, X)
    return _mha(params, X, model)


def require_heads(what: str, model) -> None:
    """An :class:`InputError` naming ``what`` and ``model`` when the model couples its heads: the
    functions built on the head blocks B (and the closed forms of a head model) need a
    :class:`HeadModel`."""
    if is_coupled(model):
        raise InputError(f"{what}: model {model.name!r} couples its heads (no head blocks); {what} needs a "
                         "head model (a HeadModel)")


def check_problem(what: str, params, X, y=None, *, model="softmax", runs: bool = False, heads: bool = False,
                  sequence: bool = False) -> int:
    """The one validation of every public entry that takes θ, X or y; returns H.

    Refused, each with one :class:`InputError` line naming ``what`` and the value: JAX's float64
    switched off (mhajax's guarantees are float64's: turn ``jax_enable_x64`` on; float32 arrays
    are then computed in float32, as asked); parameters whose leaves do not share a leading head
    axis or are not finite; ``X`` not ``[n, T, d]`` or not finite; ``y`` not ``[n]`` or not in
    {−1, +1}; a model that cannot evaluate one head on one sequence ``X_i [T, d]`` (a token
    dimension that does not match θ), or does not return a scalar; with ``heads``, a model that
    couples its heads (:func:`require_heads`). ``sequence``: ``X`` may also be one sequence
    ``[T, d]`` (without ``y``). ``runs``: every array carries a
    leading run axis first (``X [S, n, T, d]``, ``y [S, n]``, leaves ``[S, H, ...]``). Value checks
    are made on concrete arrays only (under ``jit`` only shapes are checked)."""
    model = get_model(model)
    if heads:
        require_heads(what, model)
    try:
        if not (sequence or runs) and len(getattr(X, "shape", ())) == 2:
            raise InputError(f"X must have shape [n, T, d], got shape {tuple(X.shape)}")
        return _check_problem(what, params, X, y, model, runs)
    except InputError as e:
        msg = str(e)
        raise InputError(msg if msg.startswith(f"{what}:") else f"{what}: {msg}") from None


def _check_problem(what, params, X, y, model, runs) -> int:
    require_x64(what)
    if runs:
        shape = getattr(X, "shape", ())
        if len(shape) != 4:
            raise InputError(f"{what}: a batch of runs needs X [S, n, T, d], got shape {tuple(shape)}")
        leaves = jax.tree_util.tree_leaves(params)
        S = {int(np.shape(leaf)[0]) if np.ndim(leaf) else -1 for leaf in leaves}
        if S != {shape[0]}:
            raise InputError(f"{what}: params' leading run axes {sorted(S)} do not match X's {shape[0]} runs")
        if y is not None and tuple(np.shape(y))[:1] != (shape[0],):
            raise InputError(f"{what}: y has shape {tuple(np.shape(y))} but X has {shape[0]} runs")
        for leaf in leaves:
            check_params(leaf)     # finite, with a head axis after the run axis
        one = jax.tree_util.tree_map(lambda a: a[0], params)
        check_data(np.reshape(X, (-1,) + tuple(shape[2:])) if not _traced(X) else X[0],
                   None if y is None else (np.reshape(y, (-1,)) if not _traced(y) else y[0]))
        return _fits(what, one, X[0], model)
    check_params(params, X if not is_coupled(model) else None)
    check_data(X, y)
    return _fits(what, params, X, model)


def _traced(x) -> bool:
    return isinstance(x, jax.core.Tracer)


def _fits(what, params, X, model) -> int:
    """H, once ``model`` has evaluated one head (or the coupled model) on one sequence abstractly."""
    x = X if X.ndim == 2 else X[0]
    one = params if is_coupled(model) else head_slice(params)
    fn = model.phi if is_coupled(model) else model.head_fn
    try:
        out = jax.eval_shape(fn, one, jax.ShapeDtypeStruct(x.shape, x.dtype))
    except Exception as e:  # noqa: BLE001 — whatever the model raised, reported in one line
        leaves = [tuple(np.shape(leaf)) for leaf in jax.tree_util.tree_leaves(one)]
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise InputError(f"{what}: model {model.name!r} cannot evaluate θ (per-head leaves {leaves}) on one "
                         f"sequence X_i of shape {tuple(x.shape)} (T, d): {type(e).__name__}: {msg}") from None
    if getattr(out, "shape", None) != ():
        raise InputError(f"{what}: model {model.name!r} returns shape {getattr(out, 'shape', None)} for one "
                         "sequence; a head must return a scalar")
    return num_heads(params)


# ---------------------------------------------------------------------------
# Per-head flat layout: θ <-> Z [H, p], with head h's parameters contiguous.
# This ordering makes the Hessian of Φ block-diagonal with H blocks of p x p.
# ---------------------------------------------------------------------------

def head_slice(params, h: int = 0):
    """Parameters of head ``h`` (leaves without the head axis)."""
    return jax.tree_util.tree_map(lambda a: a[h], params)


def ravel_heads(params):
    """Flatten per head: returns ``(Z [H, p], unravel_head)`` where
    ``unravel_head(z [p])`` rebuilds one head's parameters."""
    _, unravel_head = ravel_pytree(head_slice(params))
    Z = jax.vmap(lambda th: ravel_pytree(th)[0])(params)
    return Z, unravel_head


def unravel_heads(Z: jax.Array, unravel_head) -> Any:
    """Inverse of :func:`ravel_heads`: ``Z [H, p]`` -> stacked parameters."""
    return jax.vmap(unravel_head)(Z)


def params_per_head(params) -> int:
    """p, the number of parameters of one head (T·d + d² for softmax heads)."""
    return sum(int(l[0].size) for l in jax.tree_util.tree_leaves(params))


@lru_cache(maxsize=None)
def head_size(model, tokens: int, dim: int) -> int:
    """The parameters per head p of ``model`` (or its name) at T tokens of dimension d: the
    entries of ``model.init(key, 1, T, d)``, from shapes only (``jax.eval_shape``: nothing is drawn)."""
    model = get_model(model)
    shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), 1, tokens, dim))
    return sum(math.prod(leaf.shape[1:]) for leaf in jax.tree_util.tree_leaves(shapes))
