"""Shared experiment helpers (mhajax.experiments.base): the host-side point index, and the verdict
code every check shares — the verdict fields, the judged fraction (at least half, at least one) and
why checkpoints were not judged. Truths: the rules as documented, on hand-made numbers, with the
expected lines written out."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mhajax.experiments.base import (MIN_JUDGED_FRACTION, NOT_JUDGED, judged_enough, not_judged, point_index,
                                     verdict_fields)
from mhajax.verdict import Verdict


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("S, C", [(1, 1), (1, 6), (3, 4), (5, 1)])
def test_point_index_is_the_device_repeat_with_its_dtype(S, C, x64):
    """Point b = s·C + c belongs to seed s; same values and dtype as jnp.repeat(jnp.arange(S), C),
    so a program lowered with either has the same signature (and cache key)."""
    before = bool(jax.config.read("jax_enable_x64"))
    jax.config.update("jax_enable_x64", x64)
    try:
        want = jnp.repeat(jnp.arange(S), C)
        got = point_index(S, C)
    finally:
        jax.config.update("jax_enable_x64", before)
    assert want.dtype == (np.int64 if x64 else np.int32)
    assert isinstance(got, np.ndarray) and got.dtype == want.dtype and np.array_equal(got, np.asarray(want))
    assert [int(got[s * C + c]) for s in range(S) for c in range(C)] == [s for s in range(S) for _ in range(C)]


# -- verdict fields and the judged fraction ----------------------------------------------------

def test_verdict_fields_passed_only_for_passed_and_failed():
    want = {Verdict.PASSED: True, Verdict.FAILED: False}
    for v in Verdict:
        assert verdict_fields(v, "why") == dict(verdict=v.value, verdict_reason="why", passed=want.get(v))
        assert verdict_fields(v.value, "r")["verdict"] == v.value


@pytest.mark.parametrize("judged,total,enough", [
    (1, 2, True), (0, 2, False), (2, 4, True), (1, 4, False), (1, 3, False), (2, 3, True), (1, 1, True),
    (0, 1, False), (0, 0, False), (5, 10, True), (4, 10, False), (11, 11, True)])
def test_judged_enough_at_least_half_and_at_least_one(judged, total, enough):
    assert MIN_JUDGED_FRACTION == 0.5
    assert judged_enough(judged, total, {})[0] is enough


def test_judged_enough_text():
    assert judged_enough(2, 2, {}, "(θ_k, θ*) pairs")[1] == "2 of 2 (θ_k, θ*) pairs judged (at least 50% needed)"
    assert judged_enough(1, 11, {"with L̂ underflowed to 0": 10, "diverged": 0})[1] == (
        "1 of 11 checkpoints judged (at least 50% needed); not judged: 10 with L̂ underflowed to 0")
    assert judged_enough(1, 6, {"a": 2, "b": 0, "c": 3})[1] == (
        "1 of 6 checkpoints judged (at least 50% needed); not judged: 2 a, 3 c")
    assert judged_enough(3, 3, {"a": 0})[1] == "3 of 3 checkpoints judged (at least 50% needed)"


# -- why checkpoints were not judged (weak-convexity's and variants' judges) ------------------------------

OK, FAIL = (True, False, True), (True, False, True)                 # judged: (judged, diverged, L̂ defined)
DIV, UNDER, NONE = (False, True, True), (False, False, False), (False, False, True)


def test_not_judged_counts_every_reason_in_order():
    assert NOT_JUDGED == ("diverged", "with L̂ underflowed to 0 (ratios undefined)",
                          "with no implied inequality defined")
    assert not_judged([OK, FAIL, DIV, UNDER, UNDER, NONE]) == dict(zip(NOT_JUDGED, (1, 2, 1)))
    assert not_judged([DIV, DIV, NONE, NONE, NONE, UNDER]) == dict(zip(NOT_JUDGED, (2, 1, 3)))
    assert list(not_judged([])) == list(NOT_JUDGED) and set(not_judged([]).values()) == {0}
    assert list(not_judged(iter([NONE, UNDER, DIV])).values()) == [1, 1, 1]      # any iterable, read once


def test_not_judged_judged_first_then_diverged_then_loss():
    # judged: counted nowhere whatever its flags, and the points after it still count
    assert list(not_judged([(True, True, False), (True, True, True), UNDER]).values()) == [0, 1, 0]
    assert list(not_judged([(False, True, False)]).values()) == [1, 0, 0]       # diverged wins over L̂
    assert judged_enough(1, 3, not_judged([OK, UNDER, NONE]))[1] == (
        "1 of 3 checkpoints judged (at least 50% needed); not judged: 1 with L̂ underflowed to 0 "
        "(ratios undefined), 1 with no implied inequality defined")
