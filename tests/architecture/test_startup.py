"""What importing the package and its command line loads (start-up time).

Every ``python -m verify ...`` pays for its imports before any work. SciPy's ``special``
(0.11 s beyond ``scipy.linalg``), ``integrate`` (~0.17 s) and ``linalg`` (0.17–0.28 s: it
pulls ``numpy.f2py`` and ``unittest``) are each needed by one function of the analysis layer,
which imports them on first use; jaxlib loads SciPy's LAPACK for the CPU eigensolvers when the
first one is compiled, not when the package is imported. Plotting and the torch peers are
loaded only by the figure and bench commands. A fresh interpreter is the only honest place to look.
"""
from __future__ import annotations

import subprocess
import sys

NOT_AT_IMPORT = ("scipy", "scipy.special", "scipy.integrate", "scipy.linalg", "matplotlib", "torch")


def _loaded_by(statement: str) -> list:
    code = (f"import sys\n{statement}\n"
            f"print(' '.join(m for m in {NOT_AT_IMPORT!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_importing_the_package_and_its_command_line_loads_no_scipy_plotting_or_torch():
    assert _loaded_by("import mhajax, mhajax.cli.verify") == []


def test_the_probe_sees_a_module_that_is_loaded():
    # the check above can fail: the same probe reports a module the statement does load
    assert _loaded_by("import scipy.special") == ["scipy", "scipy.special"]
