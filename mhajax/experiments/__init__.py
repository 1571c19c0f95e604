"""The experiments behind the checks, one module per command, and the registry.

Importing this package registers every check (:data:`~mhajax.experiments.registry.CHECKS`),
in the order ``python -m verify all`` runs them.
"""
from mhajax.experiments import weak_convexity as _weak_convexity  # noqa: F401  (registration order)
from mhajax.experiments import convergence as _convergence  # noqa: F401
from mhajax.experiments import generalization as _generalization  # noqa: F401
from mhajax.experiments import heads as _heads  # noqa: F401
from mhajax.experiments import ntk_margin as _ntk_margin  # noqa: F401
from mhajax.experiments import one_step as _one_step  # noqa: F401
from mhajax.experiments import quasi_convexity as _quasi_convexity  # noqa: F401
from mhajax.experiments import variants as _variants  # noqa: F401
from mhajax.experiments import census as _census  # noqa: F401  (not in verify all)
from mhajax.experiments.configs import BootConfig
from mhajax.experiments.configs import DataConfig
from mhajax.experiments.configs import EigenConfig
from mhajax.experiments.configs import GDConfig
from mhajax.experiments.registry import CHECKS
from mhajax.experiments.registry import Check
from mhajax.experiments.registry import get_check

__all__ = ["BootConfig", "CHECKS", "Check", "DataConfig", "EigenConfig", "GDConfig", "get_check"]
