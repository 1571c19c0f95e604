"""The κ chain of docs/theory.md §7 at one θ, and its verdicts.

With ``L̂`` the empirical risk and ``||·||`` the operator norm::

    κ_emp = −√H λ_min(∇²L̂) / L̂            (a certified interval, see below)
    κ_blk = −√H λ_min(B) / L̂               (certified: B is the block data term)
    κ_mid = (1/n) Σ_i |ℓ'_i| max_h ||∇²f(θ_h; X_i)|| / L̂
    κ_Φ   = max_{i,h} ||∇²f(θ_h; X_i)||
    κ(θ)  = max_h β₃(θ_h)                    (closed form)

    κ_emp <= κ_blk <= κ_mid <= κ_Φ <= κ(θ).

λ_min(∇²L̂) is certified by inertia counts (:mod:`mhajax.curvature.spectrum`):
``lambda_min_lo <= λ_min <= lambda_min_hi``, so κ_emp lies in the interval

    [kappa_emp_lo, kappa_emp_hi] = [−√H·lambda_min_hi/L̂, −√H·lambda_min_lo/L̂]

(relative width <= 1e-10 where |λ_min| is above rounding), and ``kappa_emp`` is the point
``−√H·lambda_min/L̂`` with ``lambda_min`` inside the enclosure (the solver's value, or the
midpoint). The link κ_emp <= κ_blk is judged on the certified upper end ``kappa_emp_hi``:
it holds only if it holds for every value the enclosure allows. The coupled model has no
certificate (one-sided Ritz value): there ``kappa_emp_lo = kappa_emp`` (a Ritz value
over-estimates λ_min, so it can only under-estimate κ_emp) and ``kappa_emp_hi`` is None.

:func:`chain` is the checked entry point at one θ; :func:`chain_raw` is pure and traceable
(returns a :class:`ChainPoint` of arrays, a pytree); :func:`finalize` turns one point's raw values
into a :data:`ChainRecord` of Python numbers with the ratios
(``None``, i.e. undefined, where ``L̂`` has underflowed) and each inequality's verdict.
"""
from __future__ import annotations

import math
from typing import Any, Literal, NamedTuple, get_args

import jax
import jax.numpy as jnp
import numpy as np

from mhajax.analysis.applicability import judge
from mhajax.analysis.kappa import CHAIN
from mhajax.curvature.headnorms import max_head_norms
from mhajax.curvature.premises import checked
from mhajax.curvature.spectrum import Extremes, extremes, resolve_method
from mhajax.errors import InputError
from mhajax.data.common import token_radius
from mhajax.linalg import norm
from mhajax.losses import LOGISTIC, Loss, risk, loss_derivatives
from mhajax.models.base import HeadModel, is_coupled, num_heads
from mhajax.models.softmax import SOFTMAX
from mhajax.runtime.jaxsetup import OLD_EMITTERS, cpu_jit
from mhajax.runtime.records import fields
from mhajax.validate import checked_key

#: which links of the chain to measure: ``all``, or ``core`` (skip κ_mid and κ_Φ)
Links = Literal["core", "all"]
LINKS = get_args(Links)
CHECK_RTOL = 1e-9  # slack for rounding, relative to the curvature scale (see finalize)


class ChainPoint(NamedTuple):
    """The raw quantities of the κ chain at one θ, from :func:`chain_raw`.

    Every field is a scalar array (``[B]`` for B points under ``vmap``/``lax.map``); NaN
    where the model or ``links`` leaves a quantity unmeasured.

    Attributes:
      extremes: λ_min/λ_max of ∇²L̂ and their certificates (:class:`~mhajax.curvature.spectrum.Extremes`).
      loss: ``L̂(θ)``.
      grad_norm: ``||∇L̂(θ)||``.
      kappa_bound: the closed form ``κ(θ) = max_h β₃(θ_h)`` (NaN: the model has none).
      beta2: the closed form ``β₂(θ)`` of the self-bounded gradient (NaN: the model has none).
      mid_sum: ``κ_mid·L̂ = (1/n) Σ_i |ℓ'_i| max_h ||∇²f(θ_h; X_i)||`` (NaN: ``links="core"``).
      kappa_phi: ``κ_Φ = max_{i,h} ||∇²f(θ_h; X_i)||`` (NaN: ``links="core"``).

    """

    extremes: Extremes
    loss: Any
    grad_norm: Any
    kappa_bound: Any
    beta2: Any
    mid_sum: Any
    kappa_phi: Any


_NUM, _FLAG = float | None, bool | None
#: one θ's judged record (:func:`finalize`): λ's and their enclosures, the κ ratios (``None``:
#: undefined or unmeasured), each inequality's verdict in ``links``/``checks``, those the
#: (model, loss) pair does not imply with their ``reasons``, the implied ones that ``failed``
ChainRecord = NamedTuple("ChainRecord", fields(
    ("heads", int),
    ("loss lambda_min lambda_max lambda_min_lo lambda_min_hi lambda_max_lo lambda_max_hi lambda_min_residual "
     "lambda_max_residual", _NUM),
    ("eig_converged", bool), ("num_matvecs", int), ("eig_certified eig_width_ok eig_missed", _FLAG),
    ("eig_counts eig_ties", int | None),
    ("lambda_min_block lambda_max_upper kappa_emp kappa_emp_lo kappa_emp_hi kappa_block kappa_mid kappa_phi "
     "kappa_bound grad_norm beta2 grad_ratio smooth_ratio", _NUM),
    ("check_scale check_floor", float), ("links checks not_implied", dict[str, _FLAG]),
    ("reasons", dict[str, str]), ("failed", list[str]), ("loss_defined", bool), ("chain_holds all_hold", _FLAG)))


def chain_raw(params, X, y, key, *, method: str = "auto", links: Links = "all", R=None,
              model: HeadModel = SOFTMAX, loss: Loss = LOGISTIC, **eig_kw) -> ChainPoint:
    """Every raw quantity the chain needs at one θ (a :class:`ChainPoint` of scalar arrays;
    ``**eig_kw`` go to :func:`~mhajax.curvature.spectrum.extremes`).

    ``R`` defaults to the largest token norm of ``X``. ``links="core"`` skips
    the n·H per-sample Hessian norms (κ_mid, κ_Φ). A coupled model has no head blocks,
    per-sample head Hessians or closed forms: only L̂, ``||∇L̂||`` and the matrix-free
    λ_min/λ_max are measured, the rest is NaN (so :func:`finalize` reports κ_emp alone)."""
    R = token_radius(X) if R is None else R
    T = X.shape[1]
    L, grad = jax.value_and_grad(risk)(params, X, y, model, loss)
    eig = extremes(params, X, y, key, method=method, model=model, loss=loss, **eig_kw)
    # (an underflow-safe norm: the gradient is ~L̂ and jnp.linalg.norm flushes to 0 below ~1e-154)
    grad_norm = norm(jnp.concatenate([jnp.ravel(g) for g in jax.tree_util.tree_leaves(grad)]))
    nan = jnp.asarray(jnp.nan, L.dtype)
    kappa = None if is_coupled(model) else model.kappa
    beta2 = None if is_coupled(model) else model.beta2
    kappa_bound = kappa(params, R, T) if kappa is not None else nan
    beta2_value = beta2(params, R, T) if beta2 is not None else nan
    if links == "all" and not is_coupled(model):
        per_sample, _ = max_head_norms(params, X, model)  # [n]: max_h ||∇²f_ih|| (exact to 2^-35)
        _, d1, _ = loss_derivatives(params, X, y, model, loss)
        mid_sum = jnp.mean(jnp.abs(d1) * per_sample)  # (1/n) Σ |ℓ'_i| max_h ||∇²f_ih||
        kappa_phi = jnp.max(per_sample)
    else:
        mid_sum = nan
        kappa_phi = nan
    return ChainPoint(extremes=eig, loss=L, grad_norm=grad_norm, kappa_bound=kappa_bound, beta2=beta2_value,
                      mid_sum=mid_sum, kappa_phi=kappa_phi)


@cpu_jit(options=OLD_EMITTERS, static_argnames=("method", "links", "model", "loss"))
def _chain_jit(params, X, y, key, method, links, model, loss):
    return chain_raw(params, X, y, key, method=method, links=links, model=model, loss=loss)


def chain(params, X, y, *, model=SOFTMAX, loss=LOGISTIC, method: str = "auto", links: Links = "all",
          key=None) -> ChainRecord:
    """The κ chain at one θ, judged: :func:`finalize` of :func:`chain_raw`, after the door checks
    (the inputs, and the model's and loss's closed forms against autodiff at this θ:
    :func:`mhajax.curvature.premises.checked`). ``model``/``loss``: objects, registered names or
    import references. Returns the checkpoint's record, a :data:`ChainRecord` (the κ ratios,
    each link's and inequality's verdict, ``all_hold``)."""
    if links not in LINKS:
        raise InputError(f"links must be one of {', '.join(LINKS)}, got {links!r}")
    resolve_method(method)
    model, loss = checked("chain", params, X, y, model=model, loss=loss)
    key = checked_key("chain", key)
    raw = _chain_jit(params, X, y, key, method, links, model, loss)
    return finalize(raw, num_heads(params), model=model, loss=loss)


def _num(x):
    """Python float, or None for NaN/inf (JSON has neither)."""
    x = float(x)
    return x if math.isfinite(x) else None


def finalize(raw: ChainPoint, heads: int, *, model=SOFTMAX,
             loss: Loss = LOGISTIC) -> ChainRecord:
    """One checkpoint's record (:data:`ChainRecord`): κ ratios, verdicts and their slack.

    Every link and check present gets a verdict in ``links``/``checks``; only those the
    ``(model, loss)`` pair implies (:func:`mhajax.analysis.applicability.judge`; a coupled
    model implies none) count towards ``chain_holds``/``all_hold`` and ``failed``. The others are
    listed in ``not_implied`` (name -> verdict, informational) with ``reasons``. A model
    without a closed-form κ has no ``κ(θ)``, so its chain ends at ``κ_Φ``.

    Ratios over ``L̂`` are ``None`` when ``L̂ < tiny/eps`` (``tiny`` the smallest
    normal float): XLA flushes subnormal intermediates to zero, so quantities
    of size ~L̂ (the weights ``ℓ'_i``, ``ℓ''_i`` and the block term B) carry an
    absolute error ~``tiny`` and no relative precision is left (float64: below
    ~1e-292, i.e. margins above ~672); their checks are then ``None`` too
    (undefined), and never counted as passes or failures. A link that needs no ``L̂``
    (``κ_Φ <= κ(θ)``) is still judged there: if it fails, it is in ``failed`` and
    ``chain_holds``/``all_hold`` are False; if it holds, they stay None (the point is not judged).
    Each inequality ``a <= b`` is judged with a rounding slack of
    ``CHECK_RTOL · max(|a|, |b|, scale) + 4·√H·tiny/L̂``, where ``scale = √H·max|λ|/L̂`` (the
    second term: λ is resolved to the smallest normal float ``tiny`` at best); the link
    ``kappa_emp<=kappa_block`` uses the certified end ``kappa_emp_hi`` when there is one
    (module docstring). The record carries the enclosures ``lambda_min_lo/hi``,
    ``lambda_max_lo/hi``, ``kappa_emp_lo/hi`` and the solver's ``eig_certified``,
    ``eig_counts``, ``eig_ties``, ``eig_width_ok``, ``eig_missed`` (None when those fields of
    ``raw.extremes`` are None).
    """
    # one flat dict of Python numbers: the fields of raw.extremes and raw's own (a None field is absent)
    fields = dict(raw.extremes._asdict(), **raw._replace(extremes=None)._asdict())
    r = {k: np.asarray(v).item() for k, v in fields.items() if v is not None}
    L = float(r["loss"])
    fi = np.finfo(np.asarray(raw.loss).dtype)
    defined = math.isfinite(L) and L >= fi.tiny / fi.eps
    sH = math.sqrt(heads)

    def ratio(num):
        if not defined or num is None or not math.isfinite(num):
            return None
        return num / L

    lmin, lmax = _num(r["lambda_min"]), _num(r["lambda_max"])
    lblk, lup = _num(r["lambda_min_block"]), _num(r["lambda_max_upper"])
    ends = {k: _num(r.get(k, math.nan)) for k in ("lambda_min_lo", "lambda_min_hi", "lambda_max_lo",
                                                  "lambda_max_hi")}
    rec = dict(
        heads=heads, loss=_num(L), lambda_min=lmin, lambda_max=lmax, **ends,
        lambda_min_residual=_num(r["residual_min"]), lambda_max_residual=_num(r["residual_max"]),
        eig_converged=bool(r["eig_converged"]), num_matvecs=int(r["num_matvecs"]),
        **{k: (bool(r[k]) if k in r else None) for k in ("eig_certified", "eig_width_ok", "eig_missed")},
        **{k: (int(r[k]) if k in r else None) for k in ("eig_counts", "eig_ties")},
        lambda_min_block=lblk, lambda_max_upper=lup,
        kappa_emp=ratio(-sH * lmin) if lmin is not None else None,
        # the certified interval of κ_emp (ends reversed: κ_emp decreases in λ_min)
        kappa_emp_lo=ratio(-sH * ends["lambda_min_hi"]) if lmin is not None and ends["lambda_min_hi"] is not None
        else None,
        kappa_emp_hi=ratio(-sH * ends["lambda_min_lo"]) if lmin is not None and ends["lambda_min_lo"] is not None
        else None,
        kappa_block=ratio(-sH * lblk) if lblk is not None else None,
        kappa_mid=ratio(r["mid_sum"]) if _num(r["mid_sum"]) is not None else None,
        kappa_phi=_num(r["kappa_phi"]),
        kappa_bound=_num(r["kappa_bound"]),
        grad_norm=_num(r["grad_norm"]), beta2=_num(r["beta2"]),
    )
    rec["grad_ratio"] = ratio(rec["grad_norm"]) if rec["grad_norm"] is not None else None
    rec["smooth_ratio"] = ratio(lup) if lup is not None else None
    lams = [abs(v) for v in (lmin, lmax, lblk, lup) if v is not None]
    scale = (ratio(sH * max(lams)) if lams else None) or 0.0
    rec["check_scale"] = scale

    # an absolute floor: λ is resolved to the smallest normal float at best (XLA flushes
    # subnormals, and a certified end may step outward by that much), i.e. κ to √H·tiny/L̂
    floor = 4 * sH * float(fi.tiny) / L if defined else 0.0
    rec["check_floor"] = floor

    def leq(a, b):
        if a is None or b is None:
            return None
        return bool(a <= b + CHECK_RTOL * max(abs(a), abs(b), scale) + floor)

    present = [k for k in CHAIN if rec[k] is not None]
    # κ_emp's link is judged on its certified upper end when there is one
    judged = dict(rec, kappa_emp=rec["kappa_emp_hi"] if rec["kappa_emp_hi"] is not None else rec["kappa_emp"])
    links = {f"{a}<={b}": leq(judged[a], judged[b]) for a, b in zip(present, present[1:])}
    sm_coef = None
    if rec["beta2"] is not None and rec["kappa_bound"] is not None:
        sm_coef = rec["beta2"] ** 2 + rec["kappa_bound"] / sH
    checks = dict(
        # certified: λ_min >= λ_min(B) >= -(κ/√H) L̂
        weak_convexity=leq(rec["kappa_block"], rec["kappa_bound"]),
        self_bounded_gradient=leq(rec["grad_ratio"], rec["beta2"]),
        # certified: λ_max <= λ_max(G) + λ_max(B) <= (β₂² + κ/√H) L̂
        self_bounded_smoothness=leq(rec["smooth_ratio"], sm_coef),
    )
    rec["links"] = links
    rec["checks"] = checks
    j = judge({**links, **checks}, model, loss)
    imp = j.implied
    rec["not_implied"] = j.not_implied
    rec["reasons"] = {k: j.reasons[k] for k in j.not_implied}
    # at an undefined L̂ only the links that need no L̂ (κ_Φ <= κ(θ)) are judged: their failure
    # is still a failure (reported, and the point counts as failed), their success alone does
    # not make the point judged
    rec["failed"] = j.failed
    rec["loss_defined"] = bool(defined)
    verdicts = [v for v in imp.values() if v is not None]
    link_v = [v for k, v in imp.items() if k in links and v is not None]
    if defined:
        rec["chain_holds"] = all(link_v) if links else None  # None: no link present
        rec["all_hold"] = all(verdicts) if verdicts else None  # None: nothing judged
    else:
        rec["chain_holds"] = False if not all(link_v) else None
        rec["all_hold"] = False if not all(verdicts) else None
    return ChainRecord(**rec)
