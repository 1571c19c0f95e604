"""The one table of the κ chain and the three self-bounded inequalities (docs/theory.md §6–§7).

Every κ is a ratio to L̂ scaled by √H, so that weak convexity reads κ_emp <= κ(θ)::

    κ_emp <= κ_blk <= κ_mid <= κ_Φ <= κ(θ)

and the inequalities judged beside the chain are weak convexity (certified through
κ_blk), the self-bounded gradient and the self-bounded smoothness. The chain, the
applicability rules, the reports and :mod:`mhajax.testing` all read their names,
symbols and definitions from here.
"""
from __future__ import annotations

from typing import NamedTuple


class Kappa(NamedTuple):
    """One member of the chain: record ``key``, printed ``symbol``, ``definition``."""

    key: str
    symbol: str
    definition: str


class Inequality(NamedTuple):
    """One inequality judged beside the chain: record ``key`` and its ``statement``."""

    key: str
    statement: str


KAPPAS = (
    Kappa("kappa_emp", "κ_emp", "−√H·λ_min(∇²L̂)/L̂"),
    Kappa("kappa_block", "κ_blk", "−√H·λ_min(B)/L̂"),
    Kappa("kappa_mid", "κ_mid", "√H·(1/n)Σ_i|ℓ'_i|·||∇²Φ_i||/L̂"),
    Kappa("kappa_phi", "κ_Φ", "max_{i,h}||∇²f(θ_h;X_i)||"),
    Kappa("kappa_bound", "κ(θ)", "max_h β₃(θ_h)"),
)
INEQUALITIES = (
    Inequality("weak_convexity", "λ_min(∇²L̂) >= −(κ(θ)/√H)·L̂"),
    Inequality("self_bounded_gradient", "||∇L̂|| <= β₂(θ)·L̂"),
    Inequality("self_bounded_smoothness", "λ_max(∇²L̂) <= (β₂(θ)² + κ(θ)/√H)·L̂"),
)
#: the chain's record keys, in order.
CHAIN = tuple(k.key for k in KAPPAS)
#: the three inequalities' record keys.
CHECKS = tuple(i.key for i in INEQUALITIES)
#: record key -> printed symbol.
SYMBOL = {k.key: k.symbol for k in KAPPAS}
#: record key -> definition.
DEFINITION = {k.key: k.definition for k in KAPPAS}
#: the four elementary links ``a<=b`` of the chain.
LINK_NAMES = tuple(f"{a}<={b}" for a, b in zip(CHAIN, CHAIN[1:]))


def link_symbol(name: str) -> str:
    """``kappa_mid<=kappa_phi`` -> ``κ_mid<=κ_Φ``; other names (the checks) unchanged."""
    return "<=".join(SYMBOL.get(k, k) for k in name.split("<="))


__all__ = ["Kappa", "Inequality", "KAPPAS", "INEQUALITIES", "CHAIN", "CHECKS", "SYMBOL",
           "DEFINITION", "LINK_NAMES", "link_symbol"]
