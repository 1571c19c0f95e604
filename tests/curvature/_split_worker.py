"""Worker of tests/curvature/test_split.py: ``python _split_worker.py OUT.npz`` (the device count
comes from XLA_FLAGS). The factors of ∇²L̂ in one program, then decompose, both enclosures and a
census of 40 thresholds in another (split over the devices), the largest head norms per sample,
every array saved."""
import sys

from mhajax.runtime.jaxsetup import setup_jax

setup_jax("float64")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from mhajax.bench.timing import problem  # noqa: E402
from mhajax.curvature import census, inertia  # noqa: E402
from mhajax.curvature.headnorms import max_head_norms  # noqa: E402
from mhajax.curvature.operators import hessian_parts  # noqa: E402

params, X, y = problem(16, 6, 8, 32, seed=1)
S = jax.jit(hessian_parts)(params, X, y)


@jax.jit
def run(B, J, w, t):
    st = inertia.decompose(B, J, w)
    return st, inertia.enclose(st, "min"), inertia.enclose(st, "max"), census.counts_of(st, t)


st, emin, emax, c = run(S.B, S.J, S.w, jnp.linspace(-0.02, 0.02, 40))
m, solved = jax.jit(max_head_norms)(params, X)
np.savez(sys.argv[1], devices=jax.device_count(), lam=st.lam, Kt=st.Kt, min_lo=emin.lo, min_hi=emin.hi,
         max_lo=emax.lo, max_hi=emax.hi, iters=np.asarray([emin.iterations, emax.iterations]),
         lo=c.lo_count, hi=c.hi_count, reason=c.reason, err=c.err, delta=c.delta, norms=m, solved=solved)
