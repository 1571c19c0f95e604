"""The resume rule of a sweep's units (`mhajax.runtime.resume.load_or_run`), default tier;
whole killed-and-resumed runs are in test_resume.py (slow)."""
from typing import NamedTuple

import numpy as np
import pytest

from mhajax.errors import InputError
from mhajax.runtime.resume import ProgressStore, load_or_run


def test_load_or_run_computes_each_unit_once_saves_it_and_loads_it_on_a_rerun(tmp_path):
    calls = []

    def compute(v):
        return lambda: calls.append(v) or {"v": v}

    store = ProgressStore(tmp_path, {"command": "t"})
    resumed, memo = [], {}
    got = [load_or_run(store, f"u={v}", compute(v), resumed, v, memo=memo) for v in (1, 2, 1)]
    assert got == [{"v": 1}, {"v": 2}, {"v": 1}] and calls == [1, 2]   # a unit listed twice: computed once
    assert resumed == [] and store.units() == ["u=1", "u=2"]
    again, resumed, memo = ProgressStore(tmp_path, {"command": "t"}), [], {}
    got = [load_or_run(again, f"u={v}", compute(v), resumed, v, memo=memo) for v in (2, 3, 2)]
    assert got == [{"v": 2}, {"v": 3}, {"v": 2}] and calls == [1, 2, 3]
    assert resumed == [2]                      # loaded once; the repeat comes from the memo, not the store
    assert load_or_run(None, "u=9", compute(9)) == {"v": 9} and calls[-1] == 9   # no store: just compute


class _Unit(NamedTuple):
    heads: int
    loss: float | None
    curve: list[float]


def test_typed_units_come_back_as_the_file_gives_them_computed_or_resumed(tmp_path):
    """With ``kind`` a computed unit is the round-tripped record (NaN -> None, tuple -> list),
    equal to the one a rerun loads; a stale file is refused with the unit named."""
    unit = _Unit(4, float("nan"), (1.0, np.float64(0.5)))
    store = ProgressStore(tmp_path, {"command": "t"})
    first = load_or_run(store, "heads=4", lambda: unit, kind=_Unit)
    assert first == _Unit(4, None, [1.0, 0.5]) and type(first.curve) is list
    resumed = []
    again = load_or_run(ProgressStore(tmp_path, {"command": "t"}), "heads=4", lambda: 1 / 0, resumed, 4, kind=_Unit)
    assert again == first and resumed == [4]
    store.save("heads=8", {"heads": 8, "curve": []})
    with pytest.raises(InputError, match=r"saved progress 'heads=8'.*field 'loss' missing"):
        load_or_run(store, "heads=8", lambda: unit, kind=_Unit)


def test_sweep_runs_each_key_once_in_order_and_reports_resumed_keys(tmp_path):
    from mhajax.experiments.base import sweep
    calls, seen = [], []

    def compute(H):
        calls.append(H)
        return _Unit(H, 1.0 / H, [float(H)])

    store = ProgressStore(tmp_path, {"command": "t"})
    out, resumed = sweep(store, (1, 2, 1), compute, _Unit, progress=seen.append)
    assert list(out) == [1, 2] and calls == [1, 2] and resumed == [] and seen == [1, 2, 1]
    out2, resumed = sweep(ProgressStore(tmp_path, {"command": "t"}), (2, 4), compute, _Unit,
                          unit=lambda H: f"heads={H}")
    assert out2[2] == out[2] and calls == [1, 2, 4] and resumed == [2]
