"""The quasi-convexity summary is a typed record: the summary.json of a real run decodes
(``Check.load``) to the very Summary ``run`` returned, and renders the same text, whichever
kinds of per-(H, θ*) entries and margins it holds."""
import json

import pytest

from mhajax.cli.common import run_and_save
from mhajax.experiments.configs import DataConfig, make
from mhajax.experiments.quasi_convexity import (Margins, MarginsNTK, NotApplicable, NoWitness, QCSummary,
                                                QuasiConvexityConfig, Summary, Unchecked, run)
from mhajax.experiments.registry import CHECKS

pytestmark = pytest.mark.slow   # whole runs of a check: the slow tier

SMALL = dict(n=8, tokens=4, dim=6, num_clusters=2)
CASES = {   # every reference; no witness and no NTK margins (cls heads); a diverged run: nothing checked
    "all": (dict(data=DataConfig(**SMALL)), {QCSummary}, MarginsNTK),
    "cls": (dict(references=("final", "witness"), data=DataConfig(model="cls", **SMALL)),
            {QCSummary, NoWitness}, Margins),
    "diverged": (dict(lr=1000.0, data=DataConfig(loss="exponential", **dict(SMALL, tokens=3))), {Unchecked},
                 MarginsNTK),
}


@pytest.mark.parametrize("case", list(CASES))
def test_summary_json_loads_to_the_returned_summary(case, tmp_path):
    flags, kinds, margins = CASES[case]
    cfg = make(QuasiConvexityConfig, heads=(1, 2), seeds=1, steps=6, every=3, grid=4, **flags)
    summary, path = run_and_save(run, cfg, tmp_path)
    entry = CHECKS["quasi-convexity"]
    loaded = entry.load(json.loads(path.read_text()))
    assert type(summary) is Summary and loaded == summary
    assert {type(v) for v in loaded.summary.values()} == kinds
    assert {type(m) for m in loaded.margins.values()} == {margins} and list(loaded.margins) == [1, 2]
    for render in (entry.report, entry.headline, entry.section):
        assert render(loaded) == render(summary)


def test_not_applicable_summary_loads_without_pair_counts(monkeypatch, tmp_path):
    """A head model without κ/β₂: the file has no premise and no pair counts (nothing was checked),
    and loads back to the NotApplicable record ``run`` returned."""
    from mhajax.models import base
    from mhajax.models.base import HeadModel, get_model
    m = get_model("softmax")
    monkeypatch.setitem(base._REGISTRY, "softmax", HeadModel("bare", m.head_fn, m.init))
    summary, path = run_and_save(run, make(QuasiConvexityConfig, heads=(1,), seeds=1, steps=6, every=3, grid=4,
                                           data=DataConfig(**SMALL)), tmp_path)
    data = json.loads(path.read_text())
    assert type(summary) is NotApplicable and not {"premise", "pairs_planned", "kappa_bar_exact"} & set(data)
    entry = CHECKS["quasi-convexity"]
    loaded = entry.load(data)
    assert loaded == summary and not loaded.applicable and loaded.records == []
    for render in (entry.report, entry.headline, entry.section):
        assert render(loaded) == render(summary)
