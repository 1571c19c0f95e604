"""The resume rule of a sweep's units (`mhajax.runtime.resume.load_or_run`), default tier;
whole killed-and-resumed runs are in test_resume.py (slow)."""
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
