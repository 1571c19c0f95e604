"""Analysis of measured quantities: the κ chain and its verdicts, NTK margins, rates.

* :mod:`~mhajax.analysis.kappa` — the one table of the chain and the three inequalities;
* :mod:`~mhajax.analysis.applicability` — which inequalities a (model, loss) pair implies;
* :mod:`~mhajax.analysis.chain` — the chain at one θ (raw values, then a judged record);
* :mod:`~mhajax.analysis.margin` — the hard-margin solver (min-norm point, duality gap);
* :mod:`~mhajax.analysis.ntk` — NTK features, margins, the witness θ*, the one-step map;
* :mod:`~mhajax.analysis.witness` — an explicit separating direction for the mixture;
* :mod:`~mhajax.analysis.rates` — log-log slopes with bootstrap CIs over seeds.
"""
from mhajax.analysis.applicability import judge
from mhajax.analysis.applicability import requirements
from mhajax.analysis.chain import ChainPoint
from mhajax.analysis.chain import chain_raw
from mhajax.analysis.chain import finalize
from mhajax.analysis.kappa import CHAIN
from mhajax.analysis.kappa import CHECKS
from mhajax.analysis.kappa import KAPPAS
from mhajax.analysis.margin import MarginResult
from mhajax.analysis.margin import hard_margin
from mhajax.analysis.margin import linear_margin
from mhajax.analysis.ntk import ntk_features
from mhajax.analysis.ntk import ntk_margin
from mhajax.analysis.rates import bootstrap_slope
from mhajax.analysis.rates import loglog_fit

__all__ = ["CHAIN", "CHECKS", "ChainPoint", "KAPPAS", "MarginResult", "bootstrap_slope", "chain_raw", "finalize",
           "hard_margin", "judge", "linear_margin", "loglog_fit", "ntk_features", "ntk_margin",
           "requirements"]
