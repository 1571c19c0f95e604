"""mhajax.experiments.registry: a typed check's ``run`` returns what its summary.json gives back."""
import json
import math
import sys
from typing import NamedTuple

import pytest

import mhajax.experiments  # noqa: F401  (registers every check)
from mhajax.errors import InputError
from mhajax.experiments.registry import CHECKS, check
from mhajax.runtime.records import encode


class _Summary(NamedTuple):
    verdict: str
    ratio: float | None
    heads: list[int]
    by_heads: dict[int, float]


@pytest.fixture
def registered():
    """Register checks under throwaway names; removed afterwards."""
    names = []

    def add(name, run, summary):
        names.append(name)
        return check(name, config=object, report=str, headline=str, section=str, claim="c",
                     summary=summary)(run)
    yield add
    for n in names:
        CHECKS.pop(n, None)


def test_a_typed_run_returns_the_summary_as_the_file_gives_it_back(registered):
    computed = _Summary("PASSED", math.nan, (1, 4), {1: 0.5, 4: math.inf})
    run = registered("_typed", lambda cfg, **kw: computed, _Summary)
    out = run(None)
    assert out == _Summary("PASSED", None, [1, 4], {1: 0.5, 4: None})
    assert CHECKS["_typed"].run is run
    assert CHECKS["_typed"].load(json.loads(json.dumps(encode(computed), allow_nan=False))) == out


def test_a_dict_run_is_registered_as_it_is(registered):
    def run(cfg, **kw):
        return {"verdict": "PASSED", "ratio": math.nan}
    assert registered("_plain", run, None) is run
    assert math.isnan(run(None)["ratio"])


def test_a_typed_run_refuses_a_value_its_type_does_not_hold(registered):
    """The round trip decodes: a summary that does not match its declared type is an error, not a file."""
    run = registered("_wrong", lambda cfg, **kw: {"verdict": "PASSED"}, _Summary)
    with pytest.raises(InputError, match="_Summary: field 'ratio' missing"):
        run(None)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_each_module_run_is_the_registered_run(name):
    """A module that registers its ``run`` also exports the registered one, so that ``module.run``
    called by a library user returns what ``verify <check>`` writes."""
    entry = CHECKS[name]
    assert sys.modules[entry.run.__module__].run is entry.run
    assert entry.summary is not None
