"""mhajax.runtime.format: numbers, tables and DIVERGED lines as the reports print them."""
from typing import NamedTuple

from mhajax.experiments.base import DivergedRun
from mhajax.experiments.generalization import DivergedRun as NRun
from mhajax.experiments.heads import DivergedRun as NHRun
from mhajax.runtime.format import diverged_lines, fmt, fmt_ci, md_table, md_value, table


def test_fmt_never_prints_nan_and_switches_to_scientific_at_its_thresholds():
    assert fmt(None, 6) == " undef"
    assert fmt(True, 4) == " yes" and fmt(False, 3) == " NO"
    assert fmt(12345678, 1) == "12345678"
    assert fmt(0.0, 1) == "0"
    assert fmt(0.01, 1) == "0.01" and fmt(0.0099, 1) == "9.90e-03"
    assert fmt(9999.0, 1) == "1e+04" and fmt(10000.0, 1) == "1.00e+04"


def test_table_aligns_columns_under_a_rule():
    assert table(("H", "κ"), [[1, "0.5"], [256, "12"]]).splitlines() == ["  H    κ", "-" * 8, "  1  0.5", "256   12"]


def test_md_table_escapes_pipes_and_marks_a_failure():
    out = md_table(("a|b", "ok"), [["x|y", False], [[1, None], True]]).splitlines()
    assert out == ["| a\\|b | ok |", "|---|---|", "| x\\|y | **no** |", "| [1, undef] | yes |"]
    assert md_value(0.12345) == "0.123"


class Fit(NamedTuple):
    """What fmt_ci reads of a :class:`mhajax.analysis.rates.Slope`."""

    slope: float | None
    ci: tuple | None


def test_fmt_ci_reads_the_slope_and_its_interval():
    assert fmt_ci(None) == "undef" and fmt_ci(Fit(None, None)) == "undef"
    assert fmt_ci(Fit(-1.0, None)) == "-1 [no CI]"
    assert fmt_ci(Fit(-1.08, (-1.1, -1.07))) == "-1.08 [-1.1, -1.07]"


def test_diverged_lines_name_what_each_record_holds():
    class ModelRun(NamedTuple):
        model: str
        heads: int
        seed: int

    assert diverged_lines([DivergedRun(4, 1, 17), NRun(64, 0, 3), NHRun(64, 16, 2, 9), ModelRun("relu", 4, 0)]) == [
        "DIVERGED: H=4 seed=1 became non-finite at step 17",
        "DIVERGED: n=64 seed=0 became non-finite at step 3",
        "DIVERGED: n=64 H=16 seed=2 became non-finite at step 9",
        "DIVERGED: model=relu H=4 seed=0 became non-finite",
    ]
