"""The paper's softmax head, with its closed-form bounds and head Hessian.

* :mod:`~mhajax.models.softmax.head` — ``f(θ_h; X) = <U_h, softmax(X W_h Xᵀ) X>``, ``softmax_init`` (and ``init_params``, its package name);
* :mod:`~mhajax.models.softmax.bounds` — output bound, β₂, β₃, κ(θ) (docs/theory.md §6);
* :mod:`~mhajax.models.softmax.hessian` — ``Σ_i c_i ∇²_{θ_h} f(θ_h; X_i)`` in closed form.

:data:`SOFTMAX` assembles them into a registered :class:`~mhajax.models.base.HeadModel`.
"""
from mhajax.models.base import HeadModel, MHAParams, register
from mhajax.models.softmax.bounds import beta2
from mhajax.models.softmax.bounds import beta3
from mhajax.models.softmax.bounds import kappa_bound
from mhajax.models.softmax.bounds import l21_norms
from mhajax.models.softmax.bounds import output_bound
from mhajax.models.softmax.bounds import smoothness_coefficient
from mhajax.models.softmax.head import init_params
from mhajax.models.softmax.head import softmax_init
from mhajax.models.softmax.head import softmax_head
from mhajax.models.softmax.hessian import head_hessian
from mhajax.models.softmax.hessian import reduced_head_hessian
from mhajax.models.softmax.hessian import weighted_head_hessian

#: the paper's head: ``κ = max_h R³√T + 2R⁵||U_h||_{2,1}`` (docs/theory.md (6.4)–(6.5)), W-free.
SOFTMAX = register(HeadModel(
    "softmax", softmax_head, softmax_init, kappa=kappa_bound, beta2=beta2,
    weighted_hessian=weighted_head_hessian, reduced_hessian=reduced_head_hessian, beta3=beta3,
    note="κ = max_h R³√T + 2R⁵||U_h||_{2,1} (docs/theory.md §6.4); W-free"))

__all__ = ["SOFTMAX", "MHAParams", "softmax_head", "init_params", "softmax_init", "output_bound", "beta2",
           "beta3", "kappa_bound", "l21_norms", "smoothness_coefficient", "head_hessian",
           "weighted_head_hessian", "reduced_head_hessian"]
