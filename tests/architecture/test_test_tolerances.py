"""The suite's own comparisons: a relative tolerance is never silently widened by an absolute one.

``pytest.approx(x, rel=r)`` also accepts anything within pytest's default ``abs=1e-12``, so a
comparison of tiny numbers (an exp(-700), a margin of 1e-15, a gap of 1e-13) would pass
against 0. Every ``approx`` call that gives ``rel=`` must therefore give ``abs=`` too (``abs=0``
unless an absolute floor is meant, and then it is written out)."""
import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def approx_calls_without_abs(source: str):
    """Line numbers of ``approx(...)``/``pytest.approx(...)`` calls with ``rel=`` and no ``abs=``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
        kws = {k.arg for k in node.keywords}
        if name == "approx" and "rel" in kws and "abs" not in kws:
            out.append(node.lineno)
    return out


def test_the_detector_flags_what_it_should():
    src = ("import pytest\n"
           "a = pytest.approx(1.0, rel=1e-9)\n"
           "b = pytest.approx(1.0, rel=1e-9, abs=0)\n"
           "c = pytest.approx(1.0)\n"
           "from pytest import approx\n"
           "d = approx(2.0,\n  rel=1e-3)\n")
    assert approx_calls_without_abs(src) == [2, 6]


def test_every_relative_approx_in_the_suite_states_its_absolute_floor():
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        for line in approx_calls_without_abs(path.read_text()):
            offenders.append(f"{path.relative_to(TESTS.parent)}:{line}")
    assert not offenders, "pytest.approx with rel= but no abs= (add abs=0): " + ", ".join(offenders)
