"""mhajax.runtime.jaxsetup.release_compiled: compiled CPU programs hold memory mappings
until they are freed (a process running every check hit vm.max_map_count = 65530 and
died in LLVM); releasing them gives the mappings back, and a program used again still
gives the same numbers."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mhajax.runtime.jaxsetup import mapped_regions, release_compiled, release_if_crowded

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/maps is Linux-only")


def _maps() -> int:
    with open("/proc/self/maps") as fh:
        return sum(1 for _ in fh)


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


def test_release_if_crowded_acts_only_past_the_fraction():

    count, limit = mapped_regions()
    assert 0 < count < limit
    assert release_if_crowded(1.0) is False            # never more than the limit itself
    f = jax.jit(lambda x: x * 3.0)
    f(jnp.ones(2)).block_until_ready()
    before = mapped_regions()[0]
    assert release_if_crowded(0.0) is True             # any count is past 0 % of the limit
    assert mapped_regions()[0] < before
