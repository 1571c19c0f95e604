"""The README's Python example runs as written, and what it prints holds."""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import numpy as np

from mhajax import dense_hessian

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_the_readme_python_example_runs_and_its_bound_holds():
    blocks = python_blocks(README.read_text())
    assert len(blocks) == 1
    out, ns = io.StringIO(), {"__name__": "readme"}
    with contextlib.redirect_stdout(out):
        exec(compile(blocks[0], str(README), "exec"), ns)
    m = re.fullmatch(r"L = (\S+)\s+lambda_min in \[(\S+), (\S+)\]\s+bound (\S+)\s+holds: (True|False)\n",
                     out.getvalue())
    assert m, out.getvalue()
    L, lo, hi, bound = map(float, m.groups()[:4])
    assert 0 < L < 0.6931471805599453          # GD lowered L̂ below its value at Φ = 0
    assert lo <= hi and m.group(5) == "True" and lo >= bound
    # the enclosure against dense eigvalsh of the assembled Hessian (an independent route)
    lo_x, hi_x = ns["lo"], ns["hi"]
    lam = np.linalg.eigvalsh(np.asarray(dense_hessian(ns["theta"], ns["X"], ns["y"])))[0]
    assert lo_x <= lam + 1e-12 * abs(lam) and lam - 1e-12 * abs(lam) <= hi_x
    assert hi_x - lo_x <= 1e-10 * abs(lam)
