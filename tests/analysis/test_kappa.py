"""mhajax.analysis.kappa: the chain's table (order, keys, symbols) and ``link_symbol``.
Truth: the chain κ_emp <= κ_blk <= κ_mid <= κ_Φ <= κ(θ) of docs/theory.md §6–§7, written out."""
from mhajax.analysis.kappa import (CHAIN, CHECKS, DEFINITION, INEQUALITIES, KAPPAS, LINK_NAMES, SYMBOL,
                                   link_symbol)

KEYS = ["kappa_emp", "kappa_block", "kappa_mid", "kappa_phi", "kappa_bound"]
SYMBOLS = ["κ_emp", "κ_blk", "κ_mid", "κ_Φ", "κ(θ)"]


def test_chain_order_symbols_and_links():
    assert list(CHAIN) == KEYS
    assert [k.symbol for k in KAPPAS] == SYMBOLS
    assert SYMBOL == dict(zip(KEYS, SYMBOLS))
    assert set(DEFINITION) == set(KEYS) and all(DEFINITION[k] for k in KEYS)
    assert list(LINK_NAMES) == ["kappa_emp<=kappa_block", "kappa_block<=kappa_mid",
                                "kappa_mid<=kappa_phi", "kappa_phi<=kappa_bound"]
    assert list(CHECKS) == ["weak_convexity", "self_bounded_gradient", "self_bounded_smoothness"]
    assert [i.key for i in INEQUALITIES] == list(CHECKS)


def test_link_symbol_every_elementary_link():
    for a, b, sa, sb in zip(KEYS, KEYS[1:], SYMBOLS, SYMBOLS[1:]):
        assert link_symbol(f"{a}<={b}") == f"{sa}<={sb}"
    assert link_symbol("kappa_mid<=kappa_phi") == "κ_mid<=κ_Φ"


def test_link_symbol_spanning_link_and_checks_unchanged():
    assert link_symbol("kappa_block<=kappa_bound") == "κ_blk<=κ(θ)"
    assert link_symbol("kappa_emp") == "κ_emp"
    for name in ("weak_convexity", "self_bounded_gradient", "self_bounded_smoothness", "other<=name"):
        assert link_symbol(name) == name
    assert link_symbol("kappa_phi<=other") == "κ_Φ<=other"   # known and unknown halves
