"""Docstrings follow one lint rule set: ruff's pydocstyle rules as configured in
pyproject.toml ([tool.ruff.lint]), over the package and the entry-point folders."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_docstring_and_pyflakes_rules_pass():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "mhajax", "verify",
                           "figures"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
