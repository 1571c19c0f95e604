"""Property checks for your own multi-head models: ``mhajax.testing``.

* :mod:`mhajax.testing.strategies` — hypothesis strategies: shapes, tokenized-mixture
  data, labels, parameters in adversarial regimes, whole :class:`Problem` s for any
  :class:`~mhajax.model.HeadModel`;
* assertions (below) — each raises an ``AssertionError`` (:class:`BoundViolation`) whose
  message gives the measured value, the bound and the rounding slack of every check;
* :mod:`mhajax.testing.plugin` — pytest fixtures ``x64`` and ``key``.

See docs/testing.md for a complete example test file.
"""
from mhajax.testing._x64 import float64, x64_enabled
from mhajax.testing.assertions import (LOSS_FLOOR, ON_UNDEFINED, BoundViolation, Check, Report,
                                       SkippedLinkWarning, UndefinedCheck, assert_chain, assert_derivatives,
                                       assert_head_block_diagonal, assert_self_bounded_gradient,
                                       assert_self_bounded_smoothness, assert_weak_convexity,
                                       loss_defined)


def __getattr__(name):  # ``mhajax.testing.strategies`` without importing hypothesis eagerly
    if name == "strategies":
        import importlib
        return importlib.import_module(__name__ + ".strategies")
    raise AttributeError(f"module 'mhajax.testing' has no attribute {name!r}")


__all__ = ["assert_derivatives", "assert_weak_convexity", "assert_self_bounded_gradient",
           "assert_self_bounded_smoothness", "assert_head_block_diagonal", "assert_chain",
           "BoundViolation", "UndefinedCheck", "SkippedLinkWarning", "Check", "Report",
           "ON_UNDEFINED", "LOSS_FLOOR", "loss_defined", "float64", "x64_enabled", "strategies"]
