"""The public entry points: each checks its sizes against memory (:mod:`mhajax.runtime.memory`)
before calling the layer below.

Each function has the name, the arguments and the result of the plain function it calls,
plus ``force: bool = False``. Before that call, the dominant arrays of the call (an
:class:`~mhajax.runtime.memory.Estimate`, ``b`` bytes per entry: the data's or ``dtype``'s)
are compared with :func:`~mhajax.runtime.memory.available`; sizes that do not fit are refused
in one line (:class:`~mhajax.runtime.memory.MemoryGuardError`, an
:class:`~mhajax.errors.InputError`) naming the arguments to change, each blamed against 1
(:func:`~mhajax.runtime.memory.guard_call`, :func:`~mhajax.runtime.memory.guard_args`).
``force=True`` or ``MHAJAX_FORCE=1`` skips the check. The argument checks that come before it
(sizes, ``method`` and the solver options, ``steps``, thresholds, bins) are the plain function's
own. Symbols as in
:mod:`mhajax.runtime.memory` (P = H·p). The arrays checked:

* :func:`init_params` — ``U [H, T, d]``, ``W [H, d, d]``;
* :func:`tokenized_mixture` — ``X [n, T, d]``;
* :func:`train` — those of :func:`~mhajax.runtime.memory.gd` (checkpoints, losses, a GD step);
* :func:`dense_hessian` — ``∇²L̂ [P, P]``;
* :func:`structured_parts` — ``J [n, P]``, ``B [H, p, p]`` (:func:`~mhajax.runtime.memory.analysis`, ``block``);
* :func:`hessian_extremes`, :func:`lambda_min`, :func:`lambda_min_enclosure` —
  :func:`~mhajax.runtime.memory.analysis` of the method resolved at P;
* :func:`spectral_counts`, :func:`spectral_histogram` — :func:`~mhajax.runtime.memory.analysis`
  (``inertia``) and one batch of thresholds' row weights ``[4, k, P]``;
* :func:`ntk_features` — ``G [n, P]``; :func:`ntk_margin` — ``G`` and its host copy.
"""
from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp

from mhajax.analysis import ntk
from mhajax.analysis.margin import MarginResult
from mhajax.curvature import census, operators, spectrum
from mhajax.curvature.census import SpectralCounts, SpectralHistogram
from mhajax.curvature.operators import StructuredHessian
from mhajax.curvature.spectrum import Extremes, Method, resolve_method
from mhajax.data import mixture
from mhajax.losses import LOGISTIC, Loss, get_loss
from mhajax.models.base import HeadModel, MHAParams, get_model, is_coupled
from mhajax.models.softmax import SOFTMAX
from mhajax.models.softmax import head
from mhajax.runtime import memory as mem
from mhajax.train import Trajectory, num_checkpoints
from mhajax.train import train as gd_train
from mhajax.validate import positive_int

__all__ = ["dense_hessian", "hessian_extremes", "init_params", "lambda_min", "lambda_min_enclosure", "ntk_features",
           "ntk_margin", "spectral_counts", "spectral_histogram", "structured_parts", "tokenized_mixture", "train"]


def _itemsize(dtype) -> int:
    """Bytes per entry of ``dtype`` (default: JAX's float, float64 when x64 is on)."""
    return jax.dtypes.canonicalize_dtype(dtype or float).itemsize


# -- data and parameters --------------------------------------------------------------------------

def init_params(key, heads: int, tokens: int, dim: int, *, u_scale: float = 1.0,
                w_scale: float = 0.0, dtype=None, force: bool = False) -> MHAParams:
    """:func:`mhajax.models.softmax.softmax_init` (same arguments) after the memory check: sizes whose
    ``U [H, T, d]`` and ``W [H, d, d]`` exceed the memory available are refused with an
    :class:`~mhajax.errors.InputError` naming them (``force=True`` skips the check)."""
    H, T, d, _, _ = head.check_init_args(heads, tokens, dim, u_scale, w_scale)
    mem.guard_call("init_params", lambda H, T, d: [("U [H, T, d]", (H, T, d)), ("W [H, d, d]", (H, d, d))],
                   _itemsize(dtype), force=force, H=H, T=T, d=d)
    return head.init_params(key, heads, tokens, dim, u_scale=u_scale, w_scale=w_scale, dtype=dtype)


def tokenized_mixture(key, n: int, tokens: int, dim: int, *, zeta: float = 0.25,
                      num_clusters: int = 4, signal: float = 1.0, sigma: float = 0.1,
                      antipodal: bool = False, dtype=None, force: bool = False):
    """:func:`mhajax.data.mixture.draw_mixture` (same arguments: ``(X [n, T, d], y [n])``) after the
    memory check: sizes whose ``X [n, T, d]`` exceeds the memory available are refused with an
    :class:`~mhajax.errors.InputError` naming them (``force=True`` skips the check)."""
    mixture.check_mixture_args(n, tokens, dim, zeta, num_clusters, signal, sigma)
    mem.guard_call("tokenized_mixture", lambda n, T, d: [("X [n, T, d]", (n, T, d))],
                   _itemsize(dtype), force=force, n=n, T=tokens, d=dim)
    return mixture.tokenized_mixture(key, n, tokens, dim, zeta=zeta, num_clusters=num_clusters, signal=signal,
                                     sigma=sigma, antipodal=antipodal, dtype=dtype)


# -- training -------------------------------------------------------------------------------------

def train(params0, X, y, lr, *, steps: int, every: int, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC,
          opt_state=None, force: bool = False) -> Trajectory:
    """:func:`mhajax.train.train` (S GD runs side by side; same arguments and result) after the
    memory check: refused, naming ``runs``, ``H``, ``n``, ``T``, ``d`` or ``steps``, when the
    arrays of :func:`mhajax.runtime.memory.gd` exceed the memory available, unless ``force``.
    ``params0`` leaves ``[S, ...]``, ``X [S, n, T, d]`` (or one run: ``X [n, T, d]``,
    unbatched ``params0``); inputs of another form are left to the plain function's checks."""
    model, loss = get_model(model), get_loss(loss)
    steps = positive_int("steps", steps, minimum=0)
    every = positive_int("every", every)
    single = jnp.ndim(X) == 3
    leaves = jax.tree_util.tree_leaves(params0)
    try:   # the sizes, where X and θ have the form above; else the plain function's checks report it
        S, n, T, d = (1,) * single + tuple(jnp.shape(X))
        lead = 1 - single
        H, p = jnp.shape(leaves[0])[lead], sum(math.prod(jnp.shape(leaf)[lead + 1:]) for leaf in leaves)
    except (IndexError, ValueError):
        pass
    else:
        mem.guard_call("train", lambda runs, H, n, T, d, steps: mem.gd(runs, n, T, d, H, p,
                                                                       num_checkpoints(steps, every), steps),
                       jnp.dtype(X.dtype).itemsize, force=force, runs=S, H=H, n=n, T=T, d=d, steps=steps)
    return gd_train(params0, X, y, lr, steps=steps, every=every, model=model, loss=loss, opt_state=opt_state)


# -- curvature ------------------------------------------------------------------------------------

def dense_hessian(params, X, y, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC,
                  chunk_size: int | None = None, force: bool = False) -> jax.Array:
    """:func:`mhajax.curvature.operators.dense_hessian` ``∇²L̂ [P, P]`` after the memory check
    (refused, an ``InputError`` naming ``H``, when ``∇²L̂ [P, P]`` exceeds the memory available,
    unless ``force``)."""
    model, loss = get_model(model), get_loss(loss)
    mem.guard_args("dense_hessian", lambda H, p, **_: [("∇²L̂ [P, P]", (H * p, H * p))], params, X, force=force)
    return operators.dense_hessian(params, X, y, model, loss, chunk_size)


def structured_parts(params, X, y, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC,
                     force: bool = False) -> StructuredHessian:
    """:func:`mhajax.curvature.operators.structured_parts` (``J [n, P]``, ``w [n]``, ``B [H, p, p]``)
    after the memory check (refused, an ``InputError`` naming ``H`` or ``n``, when ``J`` and
    ``B`` exceed the memory available, unless ``force``)."""
    model, loss = get_model(model), get_loss(loss)
    mem.guard_args("structured_parts", lambda H, p, n, **_: mem.analysis(n, 0, H, p, "block"), params, X,
                   force=force)
    return operators.structured_parts(params, X, y, model, loss)


def _check_spectrum(what: str, params, X, method: Method, model, kw: dict, force: bool):
    """The memory check of the spectrum's entries: the arrays of
    :func:`mhajax.runtime.memory.analysis` for ``method`` resolved (an unknown method or solver
    option ``kw`` is refused first, as in the plain function), refused under the name ``what``."""
    coupled = is_coupled(get_model(model))
    concrete = resolve_method(method)   # a coupled model's arrays are its Lanczos route's whatever the method
    spectrum.check_solver_options(what, kw)
    num_steps = kw.get("num_steps", 64)
    mem.guard_args(what, lambda H, p, n, T, **_: mem.analysis(n, T, H, p, concrete, num_steps, coupled), params, X,
                   force=force)


def hessian_extremes(params, X, y, method: Method = "auto", key=None, *, force: bool = False, **kw) -> Extremes:
    """:func:`mhajax.curvature.spectrum.hessian_extremes` (the certified λ_min and λ_max of
    ``∇²L̂`` as one :class:`~mhajax.curvature.spectrum.Extremes`; same arguments) after the
    memory check: sizes whose arrays (:func:`mhajax.runtime.memory.analysis`) exceed the memory
    available are refused (an :class:`~mhajax.errors.InputError` naming the argument) unless
    ``force``."""
    _check_spectrum("hessian_extremes", params, X, method, kw.get("model", SOFTMAX), kw, force)
    return spectrum.hessian_extremes(params, X, y, method, key, **kw)


def lambda_min(params, X, y, method: Method = "auto", model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC, *,
               force: bool = False, **kw) -> float:
    """:func:`mhajax.curvature.spectrum.lambda_min` (``λ_min(∇²L̂(θ))`` by ``method``, a Python
    float; same arguments) after the memory check of :func:`hessian_extremes` (``force=True``
    skips it)."""
    _check_spectrum("lambda_min", params, X, method, model, kw, force)
    return spectrum.lambda_min(params, X, y, method, model, loss, **kw)


def lambda_min_enclosure(params, X, y, method: Method = "auto", model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC, *,
                         force: bool = False, **kw) -> tuple[float | None, float | None]:
    """:func:`mhajax.curvature.spectrum.lambda_min_enclosure` (``(lo, hi)``,
    ``lo <= λ_min(∇²L̂(θ)) <= hi`` certified; same arguments) after the memory check of
    :func:`hessian_extremes` (``force=True`` skips it)."""
    _check_spectrum("lambda_min_enclosure", params, X, method, model, kw, force)
    return spectrum.lambda_min_enclosure(params, X, y, method, model, loss, **kw)


def _census_terms(H, p, n, **_) -> list:
    """The structure (:func:`mhajax.runtime.memory.analysis`, ``inertia``) and one batch of
    thresholds' row weights ``[4, k, P]``, k = :func:`mhajax.curvature.census.batch_size`."""
    return mem.analysis(n, 0, H, p, "inertia") + [("a batch of thresholds' row weights [4, k, P]",
                                                   (4, census.batch_size(H * p), H * p))]


def spectral_counts(params, X, y, thresholds, *, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC,
                    num_near: int = 8, force: bool = False) -> SpectralCounts:
    """:func:`mhajax.curvature.census.spectral_counts` (certified ``#{eig(∇²L̂(θ)) < t}`` per
    threshold; same arguments) after the memory check (refused, naming ``H`` or ``n``, when
    the arrays exceed the memory available, unless ``force``)."""
    census.checked_points(thresholds, "thresholds")
    mem.guard_args("spectral_counts", _census_terms, params, X, force=force)
    return census.spectral_counts(params, X, y, thresholds, model=model, loss=loss, num_near=num_near)


def spectral_histogram(params, X, y, bins, *, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC,
                       rtol: float = 0.05, max_counts: int | None = None, refine_batch: int = 64,
                       num_near: int = 8, force: bool = False) -> SpectralHistogram:
    """:func:`mhajax.curvature.census.spectral_histogram` (the certified histogram of the spectrum
    of ∇²L̂(θ) over ``bins [m+1]``; same arguments) after the memory check of
    :func:`spectral_counts` (``force=True`` skips it)."""
    census.checked_points(bins, "bins", increasing=True)
    census.check_refine(rtol, refine_batch, max_counts)
    mem.guard_args("spectral_histogram", _census_terms, params, X, force=force)
    return census.spectral_histogram(params, X, y, bins, model=model, loss=loss, rtol=rtol, max_counts=max_counts,
                                     refine_batch=refine_batch, num_near=num_near)


# -- NTK ------------------------------------------------------------------------------------------

def _features_terms(H, p, n, host=False, **_) -> list:
    """``G [n, P]`` (and, with ``host``, its signed copy on the host for the margin solver)."""
    return [("NTK features G [n, P]", (n, H * p))] + ([("y·G on the host [n, P]", (n, H * p))] if host else [])


def ntk_features(params, X, model: HeadModel = SOFTMAX, force: bool = False) -> jax.Array:
    """:func:`mhajax.analysis.ntk.ntk_features` (``G [n, P]``, row i = ``∇_θ Φ(θ; X_i)``) after the
    memory check (refused, an ``InputError`` naming ``H`` or ``n``, when G exceeds the memory
    available, unless ``force``)."""
    mem.guard_args("ntk_features", _features_terms, params, X, force=force)
    return ntk.ntk_features(params, X, model)


def ntk_margin(params, X, y, model: HeadModel = SOFTMAX, *, force: bool = False, **solver_kw) -> MarginResult:
    """:func:`mhajax.analysis.ntk.ntk_margin` (the NTK margin at θ; same arguments) after the
    memory check of the features ``[n, P]`` and their host copy (``force=True`` skips it)."""
    mem.guard_args("ntk_margin", partial(_features_terms, host=True), params, X, force=force)
    return ntk.ntk_margin(params, X, y, model, **solver_kw)
