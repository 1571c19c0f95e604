"""Seeds and PRNG streams (mhajax.data.seeds): the jitted programs give the eager calls' bits."""
import jax
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mhajax.data.seeds import point_keys, seed_keys, seed_list, stream_keys
from mhajax.errors import InputError

jax.config.update("jax_enable_x64", True)


@settings(max_examples=25, deadline=None)
@given(seeds=st.lists(st.integers(0, 2 ** 32 - 1), min_size=1, max_size=4), stream=st.integers(0, 3))
def test_stream_keys_are_fold_in_of_the_seed_key(seeds, stream):
    got = np.asarray(stream_keys(seeds, stream))
    want = np.stack([np.asarray(jax.random.fold_in(jax.random.PRNGKey(s), stream)) for s in seeds])
    assert got.dtype == np.uint32 and np.array_equal(got, want)


def test_seed_keys_are_the_first_three_streams():
    for got, k in zip(seed_keys(7), range(3)):
        assert np.array_equal(np.asarray(got), np.asarray(jax.random.fold_in(jax.random.PRNGKey(7), k)))


@settings(max_examples=25, deadline=None)
@given(seed=st.one_of(st.integers(0, 4096), st.integers(0, 2 ** 63 - 1)), num=st.integers(1, 9),
       fold=st.one_of(st.none(), st.integers(0, 2 ** 32 - 1)))
def test_point_keys_are_the_eager_split(seed, num, fold):
    key = jax.random.PRNGKey(seed)
    want = jax.random.split(key if fold is None else jax.random.fold_in(key, fold), num)
    assert np.array_equal(np.asarray(point_keys(seed, num, fold=fold)), np.asarray(want))


def test_point_keys_distinguish_seed_and_fold():
    a, b, c = (np.asarray(point_keys(*args)) for args in ((16, 4), (17, 4), (16, 4)))
    assert np.array_equal(a, c) and not np.array_equal(a, b)
    assert not np.array_equal(np.asarray(point_keys(16, 4, fold=0)), a)   # folding 0 is still a fold


@pytest.mark.parametrize("kw, name", [(dict(seed=-1, num=2), "seed"), (dict(seed=1.5, num=2), "seed"),
                                      (dict(seed=True, num=2), "seed"), (dict(seed=2 ** 63, num=2), "seed"),
                                      (dict(seed=1, num=0), "num"), (dict(seed=1, num=2, fold=-1), "fold"),
                                      (dict(seed=1, num=2, fold=2 ** 32), "fold"), (dict(seed=1, num=2, fold=0.5), "fold")])
def test_point_keys_refuse_bad_input_naming_it(kw, name):
    with pytest.raises(InputError, match=name):
        point_keys(**kw)


def test_seed_list_range_and_refusals():
    assert seed_list(3, 5) == [5, 6, 7]
    with pytest.raises(InputError, match="seed0"):
        seed_list(2, 2 ** 32 - 1)
