"""Curvature of the empirical risk: operators, Krylov solvers, certified spectra.

* :mod:`~mhajax.curvature.operators` — HVPs, chunked dense Hessians, the structure
  ``∇²L̂ = Jᵀ diag(ℓ''/n) J + blockdiag(B_h)`` (docs/theory.md §3), per-sample head-Hessian norms;
* :mod:`~mhajax.curvature.krylov` — thick-restart block Lanczos with true residuals;
* :mod:`~mhajax.curvature.inertia` — inertia counts of ``blockdiag(B) + Jᵀ diag(w) J`` and
  the certified enclosures of its extreme eigenvalues built on them (docs/theory.md §3.4);
* :mod:`~mhajax.curvature.spectrum` — λ_min/λ_max of ``∇²L̂`` as certified enclosures;
* :mod:`~mhajax.curvature.census` — certified counts #{eig(∇²L̂) < t} at many thresholds, the
  histogram and brackets of N₋ and tr(∇²L̂)₋ (docs/theory.md §3.5);
* :mod:`~mhajax.curvature.slq` — stochastic Lanczos quadrature of the spectral density
  (matfree, the optional extra ``census``), an estimate beside the census.
"""
from mhajax.curvature.census import SpectralCounts
from mhajax.curvature.census import SpectralHistogram
from mhajax.curvature.census import spectral_counts
from mhajax.curvature.census import spectral_histogram
from mhajax.curvature.krylov import ExtremeEigs
from mhajax.curvature.krylov import extreme_eigs
from mhajax.curvature.operators import StructuredHessian
from mhajax.curvature.operators import assemble_hessian
from mhajax.curvature.operators import block_lambda_min
from mhajax.curvature.operators import dense_hessian
from mhajax.curvature.operators import flat_risk
from mhajax.curvature.operators import head_blocks
from mhajax.curvature.operators import hvp
from mhajax.curvature.operators import linearized_hvp
from mhajax.curvature.operators import per_sample_head_hessian_norms
from mhajax.curvature.operators import per_sample_jacobian
from mhajax.curvature.operators import structured_parts
from mhajax.curvature.spectrum import ENCLOSURE_RTOL
from mhajax.curvature.spectrum import Extremes
from mhajax.curvature.spectrum import METHODS
from mhajax.curvature.spectrum import certificates
from mhajax.curvature.spectrum import extremes
from mhajax.curvature.spectrum import heads_extremes
from mhajax.curvature.spectrum import hessian_extremes
from mhajax.curvature.spectrum import lambda_min
from mhajax.curvature.spectrum import lambda_min_enclosure
from mhajax.curvature.spectrum import resolve_method
from mhajax.curvature.slq import SLQCounts
from mhajax.curvature.slq import slq_histogram

__all__ = ["ENCLOSURE_RTOL", "ExtremeEigs", "Extremes", "METHODS", "SLQCounts", "SpectralCounts",
           "SpectralHistogram", "StructuredHessian", "assemble_hessian",
           "block_lambda_min", "certificates", "dense_hessian", "extreme_eigs", "extremes",
           "flat_risk", "head_blocks", "heads_extremes", "hessian_extremes", "hvp", "lambda_min", "lambda_min_enclosure",
           "linearized_hvp",
           "per_sample_head_hessian_norms", "per_sample_jacobian", "resolve_method", "slq_histogram",
           "spectral_counts", "spectral_histogram", "structured_parts"]
