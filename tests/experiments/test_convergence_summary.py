"""The convergence summary is a typed record: the summary.json of a real run decodes
(``Check.load``) to the very Summary ``run`` returned, and renders the same text."""
import json

import pytest

from mhajax.cli.common import run_and_save
from mhajax.experiments.configs import DataConfig, make
from mhajax.experiments.convergence import ConvergenceConfig, Entry, Summary, Witness, run
from mhajax.experiments.registry import CHECKS

pytestmark = pytest.mark.slow   # whole runs of a check: the slow tier

SMALL = dict(n=8, tokens=4, dim=6)
CASES = {   # the witness and a test curve; neither (sparse data, cls heads); a diverged run
    "mixture": dict(data=DataConfig(num_clusters=2, **SMALL)),
    "sparse": dict(data=DataConfig(dataset="sparse", model="cls", **SMALL)),
    "diverged": dict(lr=1000.0, data=DataConfig(num_clusters=2, loss="exponential", **dict(SMALL, tokens=3))),
}


@pytest.mark.parametrize("case", list(CASES))
def test_summary_json_loads_to_the_returned_summary(case, tmp_path):
    cfg = make(ConvergenceConfig, heads=(1, 2), seeds=2, steps=16, fit_points=5, resamples=100, n_test=16,
               **CASES[case])
    summary, path = run_and_save(run, cfg, tmp_path)
    entry = CHECKS["convergence"]
    loaded = entry.load(json.loads(path.read_text()))
    assert type(summary) is Summary and loaded == summary
    assert all(type(e) is Entry for e in loaded.by_heads.values()) and list(loaded.by_heads) == [1, 2]
    for render in (entry.report, entry.headline, entry.section):
        assert render(loaded) == render(summary)
    witnesses = {type(e.witness) for e in loaded.by_heads.values()}
    assert witnesses == ({type(None)} if case == "sparse" else {Witness})
    assert bool(loaded.diverged) is (case == "diverged")
