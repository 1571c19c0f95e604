"""tests/helpers.summary_differences: the comparison the user-path matrix relies on can fail."""
import math

from helpers import summary_differences


def test_it_finds_every_kind_of_difference_and_skips_only_run_descriptions():
    a = {"x": 1.0, "y": [1e-11, 2.0], "s": "passed", "n": None, "nan": math.nan, "meta": {"t": 1},
         "eig_counts": 12, "deep": {"z": [1, {"w": 3.0}]}}
    assert summary_differences(a, dict(a), rtol=1e-10) == []
    b = dict(a, x=1.0 + 2e-10)                                          # relative, beyond 1e-10
    assert summary_differences(a, b, rtol=1e-10) == [(("x",), 1.0, 1.0 + 2e-10)]
    assert summary_differences(a, dict(a, x=1.0 + 5e-11), rtol=1e-10) == []
    assert summary_differences(a, dict(a, y=[1e-11 + 5e-11, 2.0]), rtol=1e-10) == []   # absolute below 1
    assert summary_differences(a, dict(a, y=[1e-11 + 2e-10, 2.0]), rtol=1e-10) != []
    assert summary_differences(a, dict(a, y=[1e-11]), rtol=1e-10) == [(("y",), "len 2", "len 1")]
    assert summary_differences(a, dict(a, s="failed"), rtol=1e-10) == [(("s",), "passed", "failed")]
    assert summary_differences(a, dict(a, n=0.0), rtol=1e-10) != []
    assert summary_differences(a, dict(a, nan=1.0), rtol=1e-10) != []
    assert summary_differences(a, dict(a, meta={"t": 2}, eig_counts=14), rtol=1e-10) == []
    assert summary_differences(a, {k: v for k, v in a.items() if k != "s"}, rtol=1e-10) == [(("s",), "passed", "<missing>")]
    b = {**a, "deep": {"z": [1, {"w": 3.5}]}}
    assert summary_differences(a, b, rtol=1e-10) == [(("deep", "z", 1, "w"), 3.0, 3.5)]
    assert summary_differences(a, dict(a, x=True), rtol=1e-10) != []   # a bool is not the number 1.0
