"""Models: the head-model protocol, the paper's softmax head, variants, a coupled model.

Importing this package registers every built-in model, in table order: ``softmax``
(the paper's), ``linear``, ``relu``, ``qk``, ``value``, ``causal``, ``cls`` (per-head,
each with a closed-form κ) and ``two-layer`` (coupled heads). :func:`get_model` looks
one up by name; :data:`MODELS` lists the per-head ones, :data:`ALL_MODELS` all.
"""
from mhajax.models import softmax as _softmax  # noqa: F401  (registration order: softmax first)
from mhajax.models import variants as _variants  # noqa: F401
from mhajax.models import two_layer as _two_layer  # noqa: F401
from mhajax.models.base import CoupledModel
from mhajax.models.base import HeadModel
from mhajax.models.base import MHAParams
from mhajax.models.base import freeze_builtins
from mhajax.models.base import get_model
from mhajax.models.base import identity
from mhajax.models.base import is_builtin
from mhajax.models.base import model_name
from mhajax.models.base import head_outputs
from mhajax.models.base import is_coupled
from mhajax.models.base import mha
from mhajax.models.base import model_names
from mhajax.models.base import num_heads
from mhajax.models.base import output
from mhajax.models.base import params_per_head
from mhajax.models.base import ravel_heads
from mhajax.models.base import register
from mhajax.models.base import unravel_heads
from mhajax.models.masked import MASKED
from mhajax.models.masked import masked
from mhajax.models.softmax import SOFTMAX
from mhajax.models.softmax import init_params
from mhajax.models.two_layer import TWO_LAYER

freeze_builtins(MASKED)

#: names of the built-in per-head models, in table order.
MODELS = model_names(coupled=False)
#: every built-in model name, the coupled two-layer model last.
ALL_MODELS = model_names()

__all__ = ["CoupledModel", "HeadModel", "MHAParams", "MODELS", "ALL_MODELS", "MASKED", "SOFTMAX",
           "TWO_LAYER", "get_model", "identity", "is_builtin", "model_name", "head_outputs", "init_params", "is_coupled", "masked", "mha",
           "model_names", "num_heads", "output", "params_per_head", "ravel_heads", "register",
           "unravel_heads"]
