"""mhajax.verdict: the exit code of each verdict, the severity order of ``worst`` (every pair),
and the exit rule of a run of several checks (``all_exit_code``). Truth: the documented table
(docs/architecture.md, README's verdict table), written out here as literals."""
import itertools

import pytest

from mhajax.verdict import (EXIT_BAD_INPUT, EXIT_INTERRUPTED, NON_BLOCKING, Judgement, Verdict, all_exit_code, exit_code,
                            from_exit_code, worst)

CODES = {"passed": 0, "failed": 1, "inconclusive": 3, "premise violated": 4, "informational": 5,
         "not reached": 6}
ORDER = ["failed", "premise violated", "inconclusive", "not reached", "informational", "passed"]  # most severe first


def test_every_verdict_has_its_documented_exit_code_and_label():
    assert {v.value for v in Verdict} == set(CODES)
    for v in Verdict:
        assert v.exit_code == CODES[v.value] == exit_code(v) == exit_code(v.value)
        assert v.label == v.value.upper()
        assert from_exit_code(CODES[v.value]) is v
    assert EXIT_BAD_INPUT == 2 and EXIT_INTERRUPTED == 130
    for code in (2, 7, 130, -1):
        assert from_exit_code(code) is None


@pytest.mark.parametrize("a,b", list(itertools.combinations(ORDER, 2)))
def test_worst_takes_the_more_severe_of_every_pair(a, b):
    assert worst([a, b]) is Verdict(a) and worst([b, a]) is Verdict(a)
    assert worst([b, b, a, b]) is Verdict(a)


def test_worst_of_one_and_of_none():
    for v in Verdict:
        assert worst([v]) is v and worst([v.value]) is v
    assert worst([]) is Verdict.INCONCLUSIVE


def test_only_passed_not_reached_and_informational_do_not_block():
    assert set(NON_BLOCKING) == {Verdict.PASSED, Verdict.NOT_REACHED, Verdict.INFORMATIONAL}


@pytest.mark.parametrize("vs", [list(p) for r in (1, 2, 3) for p in itertools.combinations_with_replacement(ORDER, r)])
def test_all_exit_code_against_its_rule(vs):
    """0 unless a verdict outside {passed, not reached, informational} is there, then the code of
    the most severe such; strict: the most severe verdict other than passed."""
    blocking = [v for v in vs if v not in ("passed", "not reached", "informational")]
    want = CODES[min(blocking, key=ORDER.index)] if blocking else 0
    assert all_exit_code(vs) == want
    others = [v for v in vs if v != "passed"]
    assert all_exit_code(vs, strict=True) == (CODES[min(others, key=ORDER.index)] if others else 0)


def test_all_exit_code_bad_input_wins_then_errors_then_nothing_run():
    assert all_exit_code(["failed"], bad_input=True, errors=True) == 2
    assert all_exit_code(["passed"], bad_input=True) == 2
    assert all_exit_code(["passed"], errors=True) == 1
    assert all_exit_code(["not reached"], errors=True) == 1
    assert all_exit_code([]) == 3 and all_exit_code([], strict=True) == 3
    assert all_exit_code([], bad_input=True) == 2


@pytest.mark.parametrize("v, passed", [(Verdict.PASSED, True), (Verdict.FAILED, False),
                                       (Verdict.INCONCLUSIVE, None), (Verdict.PREMISE_VIOLATED, None),
                                       (Verdict.INFORMATIONAL, None), (Verdict.NOT_REACHED, None)])
def test_a_judgement_records_its_verdict_reason_and_passed(v, passed):
    j = Judgement(v, "why", {"judged": 3})
    assert j.passed is passed
    assert j.fields() == dict(verdict=v.value, verdict_reason="why", passed=passed)
    assert Judgement(v.value, "w").fields()["verdict"] == v.value   # the string value is accepted too
