"""mhajax.experiments.census: the judge on hand-made typed records (no GD, no census).

Truths: the rule of the module docstring (docs/theory.md §3.6) applied by hand — a checkpoint is
judged when its structure is valid with ℓ'' >= 0 at every sample; FAILED when a judged certified
count exceeds H·d² (neg_lo > bound, strictly), INCONCLUSIVE when a bracket straddles it
(neg_hi > bound, strictly) or a checkpoint is not judged; the largest neg_hi/bound in the reason."""
from mhajax.experiments import census
from mhajax.experiments.census import Checkpoint, Diverged, Point
from mhajax.verdict import Verdict
from helpers import verdict_reason as _vr

PA, FA, IC, IN = Verdict.PASSED, Verdict.FAILED, Verdict.INCONCLUSIVE, Verdict.INFORMATIONAL




def _cr(neg_lo, neg_hi, bound=64, heads_=1, seed=0, step=0, valid=True, n_neg=0):
    return Checkpoint(heads_, seed, step, False, valid, n_neg, neg_lo, neg_hi, bound)


def _dv(step=5):
    return Checkpoint(1, 0, step, diverged=True)


def test_census_each_rule_alone():
    v = census.judge
    ok = [_cr(10, 16), _cr(32, 32, bound=256, heads_=4), _cr(64, 64, step=10)]   # N₋ = H·d² holds
    assert _vr(v(ok, "softmax")) == (PA, "N₋ <= H·d² at all 3 checkpoints (largest certified N₋/(H·d²) = 1)")
    assert _vr(v([_cr(1, 24), _cr(0, 3, bound=8)], "softmax")) == (
        PA, "N₋ <= H·d² at all 2 checkpoints (largest certified N₋/(H·d²) = 0.375)")
    assert _vr(v(ok + [_dv(), _dv(7)], "softmax")) == (FA, "2 trajectory point(s) became non-finite")
    assert _vr(v(ok, "linear")) == (
        IN, "N₋ <= H·d² is derived for softmax heads (linear in U), not --model linear: counts reported only")
    assert _vr(v([_cr(1, 2, valid=False), _cr(1, 2, n_neg=1)], "softmax")) == (
        IC, "no checkpoint had a valid structure with ℓ'' >= 0")
    assert _vr(v([], "softmax")) == (IC, "no checkpoint had a valid structure with ℓ'' >= 0")
    over = [_cr(10, 16), _cr(300, 310, bound=256, heads_=4, seed=1, step=10), _cr(65, 70, seed=2, step=20)]
    assert _vr(v(over, "softmax")) == (FA, "N₋ >= 300 > H·d² = 256 at H=4 seed=1 step=10 (2 checkpoint(s))")
    assert _vr(v([_cr(10, 16), _cr(64, 65)], "softmax")) == (
        IC, "1 bracket(s) straddle H·d², 0 checkpoint(s) not judged")
    assert _vr(v([_cr(10, 16), _cr(1, 2, valid=False), _cr(1, 2, n_neg=2)], "softmax")) == (
        IC, "0 bracket(s) straddle H·d², 2 checkpoint(s) not judged")


def test_census_every_pair_of_rules_in_order():
    v = census.judge
    over, straddle, unjudged = _cr(70, 80), _cr(60, 70), _cr(100, 100, valid=False)
    # diverged > not derived > nothing judged > certified over > straddling or not judged > passed
    assert _vr(v([over, _dv()], "linear")) == (FA, "1 trajectory point(s) became non-finite")
    assert _vr(v([over, unjudged], "linear"))[0] == IN
    assert _vr(v([unjudged], "linear"))[0] == IN
    assert _vr(v([unjudged, over, straddle], "softmax")) == (
        FA, "N₋ >= 70 > H·d² = 64 at H=1 seed=0 step=0 (1 checkpoint(s))")
    assert _vr(v([straddle, unjudged], "softmax")) == (IC, "1 bracket(s) straddle H·d², 1 checkpoint(s) not judged")
    # a count over the bound where the structure is not valid is not judged: not a failure
    assert _vr(v([_cr(10, 16), unjudged], "softmax")) == (IC, "0 bracket(s) straddle H·d², 1 checkpoint(s) not judged")
    assert _vr(v([_cr(10, 16), _cr(100, 100, n_neg=1)], "softmax"))[0] == IC


def test_the_bound_is_strict_at_both_ends_of_the_bracket():
    v = census.judge
    # neg_lo = neg_hi = H·d²: at the bound, held
    assert _vr(v([_cr(64, 64)], "softmax")) == (PA, "N₋ <= H·d² at all 1 checkpoints (largest certified N₋/(H·d²) = 1)")
    assert _vr(v([_cr(65, 65)], "softmax")) == (FA, "N₋ >= 65 > H·d² = 64 at H=1 seed=0 step=0 (1 checkpoint(s))")
    assert _vr(v([_cr(64, 65)], "softmax")) == (IC, "1 bracket(s) straddle H·d², 0 checkpoint(s) not judged")
    assert _vr(v([_cr(63, 64), _cr(64, 65), _cr(0, 100)], "softmax")) == (
        IC, "2 bracket(s) straddle H·d², 0 checkpoint(s) not judged")


def test_the_largest_upper_end_is_named_and_the_first_failure():
    v = census.judge
    # neg_hi/bound = 0.25, 0.5, 0.125: the largest upper end (not a lower end, not the last)
    pts = [_cr(0, 16), _cr(1, 128, bound=256, heads_=4), _cr(8, 8)]
    assert _vr(v(pts, "softmax")) == (PA, "N₋ <= H·d² at all 3 checkpoints (largest certified N₋/(H·d²) = 0.5)")
    assert _vr(v([_cr(3, 3, bound=9), _cr(1, 7, bound=9)], "softmax"))[1].endswith("N₋/(H·d²) = 0.778)")
    fails = [_cr(70, 70, seed=3, step=4), _cr(99, 99, seed=1, step=2)]
    assert _vr(v(fails, "softmax")) == (FA, "N₋ >= 70 > H·d² = 64 at H=1 seed=3 step=4 (2 checkpoint(s))")


def test_only_softmax_heads_are_judged():
    assert census.BOUND_MODELS == ("softmax",)
    for model in ("linear", "relu", "two-layer", "pkg.mod:NAME"):
        assert _vr(census.judge([_cr(1, 1)], model))[0] == IN


def test_a_record_becomes_its_checkpoint():
    rec = Point(**dict.fromkeys(Point._fields, 0) | dict(heads=4, seed=1, step=20, diverged=False, valid=True,
                                                         n_neg_weights=2, neg_lo=5, neg_hi=7, bound=256, loss=0.5))
    assert census.checkpoint(rec) == Checkpoint(4, 1, 20, False, True, 2, 5, 7, 256)
    assert census.checkpoint(Diverged(heads=4, seed=1, step=20, diverged=True, diverged_at_step=3)) == Checkpoint(
        4, 1, 20, diverged=True)
