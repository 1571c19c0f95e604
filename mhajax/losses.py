"""Margin losses and the empirical risk (docs/theory.md §2).

A :class:`Loss` gives ``ℓ(z)`` and its first two derivatives in closed form.
The logistic loss ``ℓ(z) = log(1 + e^{-z})`` is computed as ``softplus(-z)``,
so it never overflows; it underflows to 0 only for ``z ≳ 745`` in float64.
Self-boundedness: ``|ℓ'(z)| = σ(-z) <= ℓ(z)`` and ``0 <= ℓ''(z) = σ(z)σ(-z) <= |ℓ'(z)|``.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from mhajax.errors import InputError
from mhajax.models.base import HeadModel, check_problem, get_model, output
from mhajax.models.softmax import SOFTMAX
from mhajax.runtime.imports import import_object, is_reference, source_digest


class Loss(NamedTuple):
    """A margin loss: ``value(z)``, ``d1(z) = ℓ'(z)``, ``d2(z) = ℓ''(z)``, elementwise."""

    name: str
    value: Callable[[jax.Array], jax.Array]
    d1: Callable[[jax.Array], jax.Array]
    d2: Callable[[jax.Array], jax.Array]


def _logistic(z):
    return jax.nn.softplus(-z)


def _logistic_d1(z):
    return -jax.nn.sigmoid(-z)


def _logistic_d2(z):
    return jax.nn.sigmoid(z) * jax.nn.sigmoid(-z)


LOGISTIC = Loss("logistic", _logistic, _logistic_d1, _logistic_d2)


def margins(params, X, y, model: HeadModel = SOFTMAX) -> jax.Array:
    """``z_i = y_i Φ(θ; X_i)``, shape [n] (any model kind, :func:`mhajax.models.base.output`)."""
    return y * output(params, X, model)


def risk(params, X, y, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC) -> jax.Array:
    """``L̂(θ) = (1/n) Σ_i ℓ(y_i Φ(θ; X_i))``: pure and unchecked (the package's own form of
    :func:`empirical_risk`)."""
    return jnp.mean(loss.value(margins(params, X, y, model)))


def empirical_risk(params, X, y, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC) -> jax.Array:
    """``L̂(θ) = (1/n) Σ_i ℓ(y_i Φ(θ; X_i))`` for ``X [n, T, d]``, ``y [n]`` in {±1}; validated
    (:func:`mhajax.models.base.check_problem`: an :class:`~mhajax.errors.InputError` naming the value)."""
    model = get_model(model)
    check_problem("empirical_risk", params, X, y, model=model)
    return risk(params, X, y, model, get_loss(loss))


def loss_derivatives(params, X, y, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC):
    """Per-sample ``(ℓ_i, ℓ'_i, ℓ''_i)`` at ``z_i = y_i Φ(θ; X_i)``, each [n]."""
    z = margins(params, X, y, model)
    return loss.value(z), loss.d1(z), loss.d2(z)


# ---------------------------------------------------------------------------
# More margin losses and the registry; the logistic loss stays the default everywhere.
# ---------------------------------------------------------------------------

def _exponential(z):
    return jnp.exp(-z)


def _exponential_d1(z):
    return -jnp.exp(-z)


def _exponential_d2(z):
    return jnp.exp(-z)


#: ``ℓ(z) = e^{-z}``: ``ℓ' = −ℓ``, ``ℓ'' = ℓ``. Self-bounded with constants 1 and 1
#: (``|ℓ'| = ℓ``, ``ℓ'' = ℓ``: equality). Convex. Overflows to ``inf`` for ``z < −709.78``
#: (float64) — unlike the logistic loss, a badly wrong start can make ``L̂`` infinite, and
#: every ratio over ``L̂`` is then undefined; underflows to 0 (XLA flushes subnormals) for
#: ``z > 708.40``, as the logistic loss does.
EXPONENTIAL = Loss("exponential", _exponential, _exponential_d1, _exponential_d2)


def _sq_hinge(z):
    return jnp.square(jnp.maximum(1.0 - z, 0.0))


def _sq_hinge_d1(z):
    return -2.0 * jnp.maximum(1.0 - z, 0.0)


def _sq_hinge_d2(z):
    return jnp.where(z < 1.0, 2.0, 0.0).astype(jnp.result_type(z, float))


#: ``ℓ(z) = max(0, 1 − z)²``: ``ℓ' = −2 max(0, 1 − z)``, ``ℓ'' = 2·1[z < 1]`` (``ℓ''`` jumps
#: from 2 to 0 at ``z = 1``, where it does not exist; ``d2(1) = 0`` here, the right limit —
#: ``jax.grad`` of ``d1`` gives 1 there, since JAX splits the derivative of ``max`` at a tie).
#: Convex. Its self-bounded constants are ``|ℓ'| = 2√ℓ`` and ``ℓ'' <= 2`` only: there is no
#: ``c`` with ``|ℓ'| <= c·ℓ`` (``|ℓ'|/ℓ = 2/(1 − z) → ∞`` as ``z → 1⁻``) or ``ℓ'' <= c·ℓ``, so
#: the loss is **not** self-bounded in the paper's sense and the links of the κ chain that
#: use ``|ℓ'| <= ℓ`` (κ_mid <= κ_Φ, hence κ_blk <= κ(θ), and the self-bounded gradient and
#: smoothness) are not implied for it (see :data:`SELF_BOUNDS`). ``L̂`` reaches exactly 0 once
#: every margin is >= 1: from then on GD stops and every ratio over ``L̂`` is undefined.
SQUARED_HINGE = Loss("squared_hinge", _sq_hinge, _sq_hinge_d1, _sq_hinge_d2)


class SelfBound(NamedTuple):
    """What is known of a loss, uniformly in ``z``: ``|ℓ'(z)| <= c1·ℓ(z)`` and
    ``ℓ''(z) <= c2·ℓ(z)`` (``None``: no such constant exists), and whether ``ℓ'' >= 0``."""

    c1: float | None
    c2: float | None
    convex: bool
    note: str


#: The constants of every registered loss (each proved in docs/variants.md and tested in
#: tests/test_losses_extra.py). The κ chain's links κ_mid <= κ_Φ, κ_blk <= κ(θ) and the
#: self-bounded gradient use ``c1 <= 1``; the self-bounded smoothness uses ``c1, c2 <= 1``;
#: κ_emp <= κ_blk uses convexity (``G ⪰ 0``).
SELF_BOUNDS = {
    "logistic": SelfBound(1.0, 1.0, True, "|ℓ'| = σ(−z) <= ℓ, ℓ'' = σ(z)σ(−z) <= |ℓ'| <= ℓ"),
    "exponential": SelfBound(1.0, 1.0, True, "|ℓ'| = ℓ and ℓ'' = ℓ (equality)"),
    "squared_hinge": SelfBound(
        None, None, True,
        "|ℓ'| = 2√ℓ and ℓ'' <= 2 only: |ℓ'|/ℓ and ℓ''/ℓ are unbounded as z → 1⁻; ℓ'' jumps at z = 1"),
}

LOSSES = {"logistic": LOGISTIC, "exponential": EXPONENTIAL, "squared_hinge": SQUARED_HINGE}


def _loss_key(name) -> str:
    return str(name).strip().lower().replace("-", "_")


def get_loss(name) -> Loss:
    """The :class:`Loss` ``name`` names: a registered one (``logistic``, ``exponential``,
    ``squared_hinge``; ``-`` and ``_`` are interchangeable), or a user's as an import reference
    ``package.module:NAME``; a :class:`Loss` is returned as it is. Raises
    :class:`~mhajax.errors.InputError` for an unknown name or an object that is not a Loss."""
    if isinstance(name, Loss):
        return name
    if is_reference(name):
        obj = import_object(name, "loss")
        if not isinstance(obj, Loss):
            raise InputError(f"loss {name!r} is a {type(obj).__name__}, not a mhajax.Loss")
        return obj
    key = _loss_key(name)
    if key not in LOSSES:
        raise InputError(f"unknown loss {name!r}; choose from {', '.join(LOSSES)}, or name your own as "
                         "package.module:NAME")
    return LOSSES[key]


def is_builtin_loss(loss: Loss) -> bool:
    """Whether ``loss`` is one of the registered losses (checked by the suite and once per process)."""
    return any(loss is v or loss == v for v in LOSSES.values())


def loss_identity(loss) -> dict:
    """What a saved result made with ``loss`` depends on: its name, and for a user's loss the
    SHA-256 of its source files."""
    loss = get_loss(loss)
    if is_builtin_loss(loss):
        return dict(name=loss.name, builtin=True)
    return dict(name=loss.name, builtin=False, source=source_digest(loss))


def self_bound(loss: Loss) -> SelfBound:
    """The :class:`SelfBound` constants of a registered loss (matched by ``loss.name``);
    for an unregistered loss nothing is known: ``SelfBound(None, None, False, ...)``."""
    sb = SELF_BOUNDS.get(_loss_key(loss.name))
    if sb is None or LOSSES.get(_loss_key(loss.name)) is not loss:
        return SelfBound(None, None, False, f"loss {loss.name!r} is not registered: no constants known")
    return sb
