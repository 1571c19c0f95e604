"""The certified census's cost against one certified λmin, in one process (docs/benchmarks.md).

    python tools/census_cost.py --heads 256 --thresholds 200 --repeat 3

Builds the benchmark's problem (T = 6, d = 8, n = 64, seed 0; ``mhajax.bench.timing.problem``;
P = 112·H), calls each of ``mhajax.lambda_min`` (the reference), ``spectral_histogram`` over
``--thresholds`` evenly spaced edges on [−0.0135, 0.0135] (default refinement, and none:
``max_counts=0``) and ``spectral_counts`` at the same points once to compile, then
``--repeat`` rounds of all four, interleaved (a shared machine's load hits them alike).
Prints the best wall time of each and its ratio to λmin's, and what the histogram found.
Not a test: the target (histogram <= 3× λmin at P = 28,672) is measured, not asserted.
"""
from __future__ import annotations

import argparse
import time

from mhajax.runtime.jaxsetup import process_defaults


def main(argv=None) -> int:
    """Run the comparison and print it."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heads", type=int, default=256)
    ap.add_argument("--thresholds", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    process_defaults()
    import jax
    jax.config.update("jax_enable_x64", True)
    import numpy as np

    import mhajax
    from mhajax.bench.timing import problem
    from mhajax.curvature import census

    params, X, y = problem(args.heads, 6, 8, 64, seed=0)
    edges = np.linspace(-0.0135, 0.0135, args.thresholds)
    calls = {"lambda_min": lambda: mhajax.lambda_min(params, X, y),
             "histogram": lambda: census.spectral_histogram(params, X, y, edges),
             "histogram (no refinement)": lambda: census.spectral_histogram(params, X, y, edges, max_counts=0),
             "spectral_counts": lambda: census.spectral_counts(params, X, y, edges)}
    out, times = {}, {k: [] for k in calls}
    for k, f in calls.items():
        t0 = time.perf_counter()
        out[k] = f()
        print(f"{k}: first call (compiles) {time.perf_counter() - t0:.1f} s", flush=True)
    for _ in range(args.repeat):
        for k, f in calls.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    ref = min(times["lambda_min"])
    for k in calls:
        print(f"{k:28s} best {min(times[k]):.3f} s  ratio {min(times[k]) / ref:.2f}  all "
              + " ".join(f"{t:.3f}" for t in times[k]))
    h = out["histogram"]
    P = 112 * args.heads
    print(f"P = {P}: {h.num_counts} thresholds counted ({h.refined} refinement), bins exact "
          f"{int(h.exact.sum())}/{h.exact.size}, N₋ ∈ [{h.neg_lo}, {h.neg_hi}], tr₋ ∈ [{h.trace_lo:.6g}, "
          f"{h.trace_hi:.6g}] (relative width {(h.trace_hi - h.trace_lo) / abs(h.trace_lo):.3f}; without "
          f"refinement {(out['histogram (no refinement)'].trace_hi - out['histogram (no refinement)'].trace_lo) / abs(h.trace_lo):.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
