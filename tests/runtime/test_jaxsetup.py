"""mhajax.runtime.jaxsetup: release_compiled (compiled CPU programs hold memory mappings
until they are freed: a process running every check hit vm.max_map_count = 65530 and
died in LLVM; releasing them gives the mappings back, and a program used again still
gives the same numbers) and where JAX's persistent compilation cache writes."""
import itertools
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mhajax.runtime.jaxsetup import (compilation_cache_state, mapped_regions, release_compiled,
                                     release_if_crowded, setup_jax, use_compilation_cache)

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/maps is Linux-only")


def _maps() -> int:
    with open("/proc/self/maps") as fh:
        return sum(1 for _ in fh)


@pytest.mark.slow
@linux_only
def test_release_compiled_gives_the_mappings_back():
    release_compiled()
    base = _maps()
    fns = [jax.jit(lambda x, i=i: jnp.sin(x) * i + jnp.cos(x) ** 2) for i in range(60)]
    first = [np.asarray(f(jnp.ones(5 + i))) for i, f in enumerate(fns)]
    grown = _maps()
    assert grown - base >= 60          # at least one mapping per live program (3–4 measured)
    release_compiled()
    assert _maps() - base <= 0.25 * (grown - base)
    again = [np.asarray(f(jnp.ones(5 + i))) for i, f in enumerate(fns)]   # recompiled
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
@linux_only
def test_release_if_crowded_acts_only_past_the_fraction():

    count, limit = mapped_regions()
    assert 0 < count < limit
    assert release_if_crowded(1.0) is False            # never more than the limit itself
    f = jax.jit(lambda x: x * 3.0)
    f(jnp.ones(2)).block_until_ready()
    before = mapped_regions()[0]
    assert release_if_crowded(0.0) is True             # any count is past 0 % of the limit
    assert mapped_regions()[0] < before


# -- the persistent compilation cache ---------------------------------------------------------

_SIZES = itertools.count(1001)      # a new shape per call: a program this process never compiled


def _compile_new_program():
    jax.jit(lambda x: jnp.sin(x) * 3.0 + 1.0)(jnp.ones(next(_SIZES))).block_until_ready()


def _entries(d) -> set:
    return set(d.iterdir()) if d.exists() else set()


def test_the_compilation_cache_writes_where_it_is_told_and_off_means_off(tmp_path, monkeypatch):
    # jaxlib 0.10.2 keeps the first directory it opened for the whole process: before the
    # fix, "off" and "b" below both went on writing into "a"
    a, b = tmp_path / "a", tmp_path / "b"
    monkeypatch.setenv("MHAJAX_CACHE_DIR", str(a))
    setup_jax()
    assert compilation_cache_state() == (True, str(a))
    _compile_new_program()
    in_a = _entries(a)
    assert any(p.name.startswith("jit_") for p in in_a)

    monkeypatch.setenv("MHAJAX_CACHE_DIR", "off")
    setup_jax()
    assert compilation_cache_state()[0] is False
    _compile_new_program()
    assert _entries(a) == in_a

    monkeypatch.setenv("MHAJAX_CACHE_DIR", str(b))
    setup_jax()
    _compile_new_program()
    assert _entries(a) == in_a
    assert any(p.name.startswith("jit_") for p in _entries(b))

    monkeypatch.setenv("MHAJAX_CACHE_DIR", str(a))   # and back
    setup_jax()
    _compile_new_program()
    assert _entries(a) > in_a


def test_a_directory_that_cannot_be_made_turns_the_cache_off(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert use_compilation_cache(str(blocker / "xla")) is None
    assert compilation_cache_state()[0] is False
    assert not (blocker / "xla").exists()


def test_sized_jit_compiles_small_points_at_o0_and_large_ones_optimized(monkeypatch):
    """``sized_jit`` picks its ``small`` options below the threshold and its ``large`` ones from
    it on (what each call is compiled with, recorded), for calls and for ``.lower``; both give
    the function's value."""
    import mhajax.runtime.jaxsetup as J
    made = []

    def record(fn, *, options, **kw):
        made.append(options)
        jitted = jax.jit(fn, **kw)

        def call(*a, **k):
            called.append(options)
            return jitted(*a, **k)
        call.lower = lambda *a, **k: (called.append(options), jitted.lower(*a, **k))[1]
        return call
    called = []
    monkeypatch.setattr(J, "cpu_jit", record)
    f = J.sized_jit(lambda x: 2.0 * x, size=lambda x: x.size, threshold=4, small={"s": 1}, large={"l": 1})
    assert made == [{"s": 1}, {"l": 1}]
    assert float(f(jnp.ones(3)).sum()) == 6.0 and called == [{"s": 1}]
    assert float(f(jnp.ones(4)).sum()) == 8.0 and called[-1] == {"l": 1}
    f.lower(jnp.ones(5))
    assert called[-1] == {"l": 1}
    assert J.sized_jit(size=len).keywords["threshold"] == J.LARGE_P == 2 ** 12
