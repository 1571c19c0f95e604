"""mhajax.runtime.records: a NamedTuple tree through JSON and back, and refusals of stale files."""
from __future__ import annotations

import json
import math
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mhajax.errors import InputError
from mhajax.runtime.records import decode, encode, is_record, roundtrip


class Fit(NamedTuple):
    slope: float | None
    ci: tuple[float, float]
    window: list[int] = []


class Entry(NamedTuple):
    heads: int
    fit: Fit
    note: str = ""
    holds: bool | None = None
    extra: dict = {}


class Summary(NamedTuple):
    verdict: str
    by_heads: dict[int, Entry]
    seeds: list[int]
    premise: Fit | None = None


def _file(x):
    """What a summary.json gives back."""
    return json.loads(json.dumps(encode(x), allow_nan=False))


finite = st.floats(allow_nan=False, allow_infinity=False)
fits = st.builds(Fit, st.none() | finite, st.tuples(finite, finite), st.lists(st.integers(0, 10 ** 6), max_size=4))
entries = st.builds(Entry, st.integers(1, 4096), fits, st.text(max_size=8), st.none() | st.booleans(),
                    st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=4), max_size=3))
summaries = st.builds(Summary, st.sampled_from(["passed", "failed"]),
                      st.dictionaries(st.integers(1, 4096), entries, max_size=4),
                      st.lists(st.integers(0, 99), max_size=4), st.none() | fits)


@settings(max_examples=60, deadline=None)
@given(summaries)
def test_decode_inverts_encode_through_json(s):
    """decode(T, file(encode(x))) == x for finite records: int keys, nested and optional records,
    fixed tuples, lists and untyped dicts all come back as they were."""
    back = decode(Summary, _file(s))
    assert back == s
    assert all(type(k) is int for k in back.by_heads)
    assert all(type(e.fit.ci) is tuple for e in back.by_heads.values())


def test_encode_keeps_the_field_order_and_turns_numpy_into_json():
    e = Entry(np.int64(4), Fit(np.float64(-1.0), (np.float32(0.5), 1.0), np.arange(2)), holds=np.bool_(True))
    d = encode(e)
    assert list(d) == list(Entry._fields)
    assert d["fit"] == {"slope": -1.0, "ci": [0.5, 1.0], "window": [0, 1]}
    assert type(d["heads"]) is int and d["holds"] is True


def test_nan_becomes_none_and_roundtrip_gives_what_a_file_gives():
    """A NaN slope is stored as null; roundtrip returns the record a resumed run reads, so
    a computed unit and a loaded one are equal."""
    rec = Fit(float("nan"), (1.0, math.inf))
    assert encode(rec) == {"slope": None, "ci": [1.0, None], "window": []}
    assert roundtrip(Fit, rec) == decode(Fit, _file(rec)) == Fit(None, (1.0, None), [])


def test_missing_field_takes_its_default_and_an_undefaulted_one_is_refused():
    assert decode(Fit, {"slope": 1.0, "ci": [0.0, 2.0]}) == Fit(1.0, (0.0, 2.0), [])
    with pytest.raises(InputError, match=r"summary\.by_heads\.4: field 'fit' missing"):
        decode(Summary, {"verdict": "passed", "seeds": [], "by_heads": {"4": {"heads": 4}}}, "summary")


@pytest.mark.parametrize("tp, value, where", [
    (Summary, {"verdict": "passed", "seeds": [0], "by_heads": {"four": None}}, r"by_heads\.four"),
    (Fit, {"slope": "1.0", "ci": [0.0, 1.0]}, r"\.slope: expected float, got str"),
    (Fit, {"slope": 1.0, "ci": [0.0, 1.0, 2.0]}, r"\.ci: expected 2 values, got 3"),
    (Entry, {"heads": True, "fit": {"slope": 1.0, "ci": [0, 1]}}, r"\.heads: expected int, got bool"),
    (Entry, {"heads": 2.5, "fit": {"slope": 1.0, "ci": [0, 1]}}, r"\.heads: expected int, got float"),
    (Entry, {"heads": 1, "fit": [1.0, [0, 1]]}, r"\.fit: expected Fit, got list"),
    (Summary, {"verdict": "passed", "seeds": {"0": 1}, "by_heads": {}}, r"\.seeds: expected list"),
])
def test_a_mistyped_value_is_refused_with_its_path(tp, value, where):
    with pytest.raises(InputError, match=where):
        decode(tp, value, "x")


def test_an_int_is_a_float_but_a_float_is_not_an_int():
    """JSON writes 1.0 as 1.0, but a value computed as an int (e.g. 0) in a float field is kept."""
    assert decode(Fit, {"slope": 0, "ci": [1, 2]}) == Fit(0, (1, 2), [])


def test_is_record():
    assert is_record(Fit) and not is_record(tuple) and not is_record(dict) and not is_record(Fit(1.0, (0, 1)))


class Short(NamedTuple):
    slope: float | None
    note: str = ""


def test_a_union_takes_the_first_option_that_names_every_key():
    """Options are tried in order, each exactly: an object with a key the first option lacks is
    the second option, never the first with that key dropped; outside a union extra keys are ignored."""
    assert decode(Short | Fit, {"slope": 1.0, "ci": [0, 1]}) == Fit(1.0, (0, 1), [])
    assert decode(Short | Fit, {"slope": 1.0}) == Short(1.0)
    assert decode(Fit | Short, {"slope": 1.0, "note": "n"}) == Short(1.0, "n")
    assert decode(Short, {"slope": 1.0, "ci": [0, 1]}) == Short(1.0)
    with pytest.raises(InputError, match=r"x: Fit has no field 'rule'"):
        decode(Short | Fit, {"slope": 1.0, "ci": [0, 1], "rule": "holds"}, "x")


def test_fields_spells_out_the_groups_in_order():
    from mhajax.runtime.records import fields
    Rec = NamedTuple("Rec", fields(("a b", int), ("c", float | None)))
    assert fields(("a b", int), ("c", str)) == [("a", int), ("b", int), ("c", str)]
    assert Rec._fields == ("a", "b", "c") and decode(Rec, {"a": 1, "b": 2, "c": None}) == Rec(1, 2, None)


def test_fields_takes_a_record_class_as_a_group_of_its_own_fields():
    """A record class in ``fields`` contributes its fields and their types in order, so a record
    that extends another (``seed, step, *ChainRecord, diverged``) decodes its fields by type."""
    from mhajax.runtime.records import fields
    Inner = NamedTuple("Inner", fields(("x", float | None), ("tags", list[str])))
    Outer = NamedTuple("Outer", fields(("seed", int), Inner, ("done", bool)))
    assert fields(("seed", int), Inner, ("done", bool)) == [("seed", int), ("x", float | None),
                                                            ("tags", list[str]), ("done", bool)]
    assert decode(Outer, {"seed": 1, "x": None, "tags": ["a"], "done": True}) == Outer(1, None, ["a"], True)
    with pytest.raises(InputError, match="outer.tags: expected list"):
        decode(Outer, {"seed": 1, "x": 0.5, "tags": "a", "done": True}, "outer")
