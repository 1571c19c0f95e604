"""Margin losses and the empirical risk (SPEC §2).

A :class:`Loss` gives ``ℓ(z)`` and its first two derivatives in closed form.
The logistic loss ``ℓ(z) = log(1 + e^{-z})`` is computed as ``softplus(-z)``,
so it never overflows; it underflows to 0 only for ``z ≳ 745`` in float64.
Self-boundedness: ``|ℓ'(z)| = σ(-z) <= ℓ(z)`` and ``0 <= ℓ''(z) = σ(z)σ(-z) <= |ℓ'(z)|``.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from .model import SOFTMAX, HeadModel, mha


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
    """``z_i = y_i Φ(θ; X_i)``, shape [n]."""
    return y * mha(params, X, model)


def empirical_risk(params, X, y, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC) -> jax.Array:
    """``L̂(θ) = (1/n) Σ_i ℓ(y_i Φ(θ; X_i))`` for ``X [n, T, d]``, ``y [n]`` in {±1}."""
    return jnp.mean(loss.value(margins(params, X, y, model)))


def loss_derivatives(params, X, y, model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC):
    """Per-sample ``(ℓ_i, ℓ'_i, ℓ''_i)`` at ``z_i = y_i Φ(θ; X_i)``, each [n]."""
    z = margins(params, X, y, model)
    return loss.value(z), loss.d1(z), loss.d2(z)
