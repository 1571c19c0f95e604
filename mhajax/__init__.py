"""mhajax: numerical checks of the theory of multi-head attention in JAX.

The model (docs/theory.md §1) is ``Φ(θ; X) = H^{-1/2} Σ_h <U_h, softmax(X W_h Xᵀ) X>``, trained by
gradient descent on the logistic loss. The package is layered; each layer imports only
the layers below it:

1. ``errors``, ``validate``, ``verdict``, ``linalg``, ``runtime/`` (result files, resume,
   sharding, process setup, progress, formatting);
2. ``data/`` (seeds and streams, the tokenized mixture, sparse tokens, ``.npz`` files);
3. ``models/`` (the head-model protocol and registry, the softmax head with its bounds and
   closed-form Hessian, variants, the coupled two-layer model, head masking);
4. ``losses``;
5. ``curvature/`` (operators, Krylov, certified spectra) and ``train`` (GD);
6. ``analysis/`` (the κ chain and its table, applicability, NTK margins, witness, rates);
7. ``api`` (the public entry points: each checks its sizes against memory, then calls the
   function of the same name below);
8. ``experiments/`` (one module per check, the check registry; they call the plain functions,
   the command having checked its sizes) and ``testing/``;
9. ``cli/``, ``bench/``, ``figures/``; and ``__main__`` (the ``mhajax`` command).

This front re-exports the names a user needs, the memory-checked ones from ``api``. Run checks
in float64:
``jax.config.update("jax_enable_x64", True)``.
"""
from mhajax._version import __version__
from mhajax.analysis.chain import ChainPoint
from mhajax.analysis.chain import chain
from mhajax.api import dense_hessian
from mhajax.api import hessian_extremes
from mhajax.api import init_params
from mhajax.api import lambda_min
from mhajax.api import lambda_min_enclosure
from mhajax.api import ntk_features
from mhajax.api import ntk_margin
from mhajax.api import spectral_counts
from mhajax.api import spectral_histogram
from mhajax.api import structured_parts
from mhajax.api import tokenized_mixture
from mhajax.api import train
from mhajax.curvature.krylov import extreme_eigs
from mhajax.curvature.operators import assemble_hessian
from mhajax.curvature.operators import head_blocks
from mhajax.curvature.operators import hvp
from mhajax.curvature.operators import per_sample_head_hessian_norms
from mhajax.curvature.spectrum import Extremes
from mhajax.data.common import token_radius
from mhajax.errors import InputError
from mhajax.losses import LOGISTIC
from mhajax.losses import Loss
from mhajax.losses import empirical_risk
from mhajax.losses import get_loss
from mhajax.models import CoupledModel
from mhajax.models import HeadModel
from mhajax.models import MHAParams
from mhajax.models import SOFTMAX
from mhajax.models import TWO_LAYER
from mhajax.models import get_model
from mhajax.models import mha
from mhajax.models.softmax import kappa_bound
from mhajax.models.softmax import output_bound
from mhajax.verdict import Verdict

__all__ = [
    "ChainPoint", "CoupledModel", "Extremes", "HeadModel", "InputError", "LOGISTIC", "Loss", "MHAParams",
    "SOFTMAX", "TWO_LAYER", "Verdict", "__version__", "assemble_hessian", "chain",
    "dense_hessian", "empirical_risk", "extreme_eigs", "get_loss",
    "get_model", "head_blocks", "hessian_extremes", "hvp", "init_params", "kappa_bound",
    "lambda_min", "lambda_min_enclosure", "mha", "ntk_features", "ntk_margin", "output_bound",
    "per_sample_head_hessian_norms", "spectral_counts", "spectral_histogram", "structured_parts",
    "token_radius", "tokenized_mixture", "train",
]
