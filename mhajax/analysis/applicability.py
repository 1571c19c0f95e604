"""Which inequalities of the κ chain a (model, loss) pair implies.

:func:`mhajax.analysis.chain.finalize` gives every link of
``κ_emp <= κ_blk <= κ_mid <= κ_Φ <= κ(θ)`` and the three self-bounded checks a verdict,
then (given the model and loss) splits them with :func:`judge` into implied and not
implied. Each elementary link needs something different
(docs/theory.md §7, docs/variants.md):

====================  =====================================================================
link                  holds when
====================  =====================================================================
κ_emp <= κ_blk        ``ℓ'' >= 0`` (``G ⪰ 0``) and heads share no parameters (any HeadModel)
κ_blk <= κ_mid        always (triangle inequality on ``B_h``; exact per-sample norms)
κ_mid <= κ_Φ          ``|ℓ'| <= ℓ`` — self-boundedness, the only link where the loss enters
κ_Φ <= κ(θ)           the model's closed form (loss-free)
weak_convexity        κ_blk <= κ(θ): links 2–4, so ``|ℓ'| <= ℓ`` and a closed-form κ
self_bounded_gradient ``|ℓ'| <= ℓ`` and a closed-form β₂
self_bounded_smooth.  ``|ℓ'| <= ℓ``, ``ℓ'' <= ℓ``, closed-form κ and β₂
====================  =====================================================================

:func:`judge` splits one ``finalize`` record's verdicts: a verdict of an inequality the pair
does not imply is kept, but reported as *not implied* (informational) and left out of the
pass/fail decision. The constants come from :data:`mhajax.losses.SELF_BOUNDS`; an
unregistered loss has none, so only the loss-free links are judged for it.
"""
from __future__ import annotations

from typing import NamedTuple

from mhajax.analysis.kappa import CHAIN, LINK_NAMES
from mhajax.losses import Loss, self_bound
from mhajax.models.base import is_coupled



def requirements(model, loss: Loss) -> dict:
    """``{name: (implied: bool, reason: str)}`` for the elementary links (``"a<=b"``) and
    the three checks. A coupled model (:func:`~mhajax.models.base.is_coupled`) has no head
    blocks, so only what needs none is implied for it."""
    sb = self_bound(loss)
    c1_ok = sb.c1 is not None and sb.c1 <= 1.0
    c2_ok = sb.c2 is not None and sb.c2 <= 1.0
    why_c1 = (f"|ℓ'| <= ℓ holds for {loss.name}" if c1_ok else
              f"needs |ℓ'| <= ℓ, which {loss.name} lacks ({sb.note})")
    decoupled = not is_coupled(model)
    has_k = decoupled and model.kappa is not None
    has_b = decoupled and model.beta2 is not None
    out = {
        "kappa_emp<=kappa_block": (sb.convex and decoupled,
                                   "G ⪰ 0 (ℓ'' >= 0) and block-diagonal data term" if sb.convex and decoupled
                                   else ("heads are coupled: no block bound" if not decoupled
                                         else f"needs ℓ'' >= 0, unknown for {loss.name}")),
        "kappa_block<=kappa_mid": (decoupled, "triangle inequality on B_h" if decoupled
                                   else "heads are coupled: no block bound"),
        "kappa_mid<=kappa_phi": (decoupled and c1_ok,
                                 why_c1 if decoupled else "heads are coupled: no per-head Hessians"),
        "kappa_phi<=kappa_bound": (has_k, "closed-form κ of the model" if has_k
                                   else "the model has no closed-form κ"),
        "weak_convexity": (has_k and c1_ok, why_c1 if has_k else "no closed-form κ"),
        "self_bounded_gradient": (has_b and c1_ok, why_c1 if has_b else "no closed-form β₂"),
        "self_bounded_smoothness": (has_k and has_b and c1_ok and c2_ok,
                                    (f"|ℓ'| <= ℓ and ℓ'' <= ℓ hold for {loss.name}" if c1_ok and c2_ok
                                     else f"needs |ℓ'| <= ℓ and ℓ'' <= ℓ ({sb.note})")
                                    if has_k and has_b else "needs closed-form κ and β₂"),
    }
    return out


def link_implied(link: str, req: dict) -> tuple:
    """``(implied, reason)`` for a link ``"a<=b"`` between *present* chain members, which
    spans every elementary link from a to b (e.g. ``kappa_block<=kappa_bound`` with
    ``links="core"`` is links 2–4)."""
    if link in req and link not in LINK_NAMES:
        return req[link]
    a, b = link.split("<=")
    i, j = CHAIN.index(a), CHAIN.index(b)
    parts = [f"{CHAIN[k]}<={CHAIN[k + 1]}" for k in range(i, j)]
    bad = [(p, req[p][1]) for p in parts if not req[p][0]]
    if bad:
        return False, "; ".join(f"{p}: {r}" for p, r in bad)
    return True, "; ".join(req[p][1] for p in parts)


class Split(NamedTuple):
    """One point's verdicts split by what the (model, loss) pair implies: ``implied`` and
    ``not_implied`` (name -> verdict), ``reasons`` (name -> why), ``failed`` (implied names that
    failed), ``passed`` (None when no implied verdict is defined, e.g. L̂ underflowed; False
    when one failed)."""

    implied: dict
    not_implied: dict
    reasons: dict
    failed: list
    passed: bool | None


def judge(verdicts: dict, model, loss: Loss) -> Split:
    """Split one point's verdicts (name -> True/False/None: the ``links`` and ``checks`` of
    :func:`mhajax.analysis.chain.finalize`) into the inequalities the (model, loss) pair implies
    and those it does not (:class:`Split`)."""
    req = requirements(model, loss)
    implied, not_implied, reasons = {}, {}, {}
    for name, verdict in verdicts.items():
        ok, why = link_implied(name, req)
        reasons[name] = why
        (implied if ok else not_implied)[name] = verdict
    defined = [v for v in implied.values() if v is not None]
    failed = [k for k, v in implied.items() if v is False]
    passed = None if not defined else not failed
    return Split(implied, not_implied, reasons, failed, passed)


__all__ = ["Split", "requirements", "link_implied", "judge"]
