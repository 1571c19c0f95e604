"""mhajax: numerical checks of the theory of multi-head attention in JAX.

The model (SPEC §1) is ``Φ(θ; X) = H^{-1/2} Σ_h <U_h, softmax(X W_h Xᵀ) X>``,
trained by gradient descent on the logistic loss. Modules, one concept each:

``model``            parameters, heads, Φ, the per-head flat layout
``losses``           ℓ and its derivatives, the empirical risk
``data``             the tokenized-mixture data model
``bounds``           closed-form output/gradient/Hessian bounds, κ(θ), β₂
``softmax_hessian``  closed-form per-head Hessian of a softmax head
``curvature``        HVPs, dense and structured Hessians, head blocks B_h
``krylov``           thick-restart Lanczos with true residuals
``spectrum``         λ_min/λ_max of ∇²L̂ with certified bounds
``chain``            the κ chain of SPEC §4 at one θ, with verdicts
``train``            jitted, vmapped GD trajectories
``experiment``       seeds -> batched data and initializations
``linalg``           CPU-safe batched eigensolvers, an overflow-safe norm
``weak_convexity``   the weak-convexity sweep behind ``python -m verify``
``margin``           hard-margin (min-norm point) solver with duality gap
``ntk``              NTK features, margins, witness θ*, linear baselines
``realizability``    the ``ntk-margin`` experiment
``one_step_margin``  the ``one-step`` experiment
``rates``            log-log slopes and bootstrap confidence intervals
``convergence``, ``generalization``, ``heads``, ``quasi_convexity``: the rate sweeps
``masked``           head-masked padding (one compile serves every H)
``variants``, ``two_layer``, ``datasets``: attention variants and other data models
``testing``          hypothesis strategies, assertions and a pytest plugin
``resume``           resumable sweeps (progress kept per finished unit)
``sharding``         splitting a sweep's run axis over devices
``benchmark``        timing helpers for ``python -m verify.bench``
``io``               provenance and atomic result files
Run checks in float64: ``jax.config.update("jax_enable_x64", True)``.
"""
from .bounds import beta2, beta3, kappa_bound, output_bound
from .chain import chain_raw, finalize
from .curvature import (assemble_hessian, dense_hessian, head_blocks, hvp, lambda_min,
                        per_sample_head_hessian_norms, structured_parts)
from .data import token_radius, tokenized_mixture
from .errors import InputError
from .krylov import extreme_eigs
from .losses import LOGISTIC, Loss, empirical_risk
from .model import SOFTMAX, HeadModel, MHAParams, init_params, mha
from .spectrum import hessian_extremes
from .train import gd_trajectory, train

__version__ = "0.1.0"

__all__ = [
    "MHAParams", "HeadModel", "SOFTMAX", "init_params", "mha", "empirical_risk", "Loss",
    "LOGISTIC", "tokenized_mixture", "token_radius", "output_bound", "beta2", "beta3",
    "kappa_bound", "hvp", "dense_hessian", "assemble_hessian", "structured_parts", "head_blocks",
    "per_sample_head_hessian_norms", "lambda_min", "hessian_extremes", "extreme_eigs",
    "chain_raw", "finalize", "gd_trajectory", "train", "InputError",
]
