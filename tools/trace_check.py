"""Where the certified check's time goes, from XLA's own trace (docs/benchmarks.md).

    python tools/trace_check.py --heads 256 --calls 5

Builds the benchmark's problem (T = 6, d = 8, n = 64, seed 0; ``mhajax.bench.timing.problem``),
compiles ``lambda_min``'s program (``auto``, the λ_min end), runs it twice to warm up, then
``--calls`` times under ``jax.profiler.trace(..., create_perfetto_trace=True)``. Prints the
program's time per call and the per-op durations of the trace per call, grouped:

* ``eigh``: the one eigensolver call on the H head blocks [H, p, p];
* ``head-Hessian loop``: ops run once per batch of heads of the closed-form B (their count per
  call equals the loop's trip count, printed);
* ``per-count ops``: ops run 2 to trip-count − 1 times per call (the inertia counts' loop);
* ``one-off ops``: ops run once per call (array passes: copies, products, reductions), the
  largest listed by name.

Ops on the two cores can overlap, so the groups may add up to more than the program. Not a
benchmark (``python -m verify.bench`` is); a profile, to read beside one.
"""
from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import tempfile

import jax

from mhajax.bench.timing import problem
from mhajax.curvature.operators import head_batch_size
from mhajax.curvature.spectrum import _extremes_jit
from mhajax.losses import LOGISTIC
from mhajax.models import SOFTMAX
from mhajax.runtime.jaxsetup import process_defaults

WAIT = "ThunkExecutor::Execute (wait for completion)"


def main(argv=None) -> None:
    """Parse the flags, trace ``--calls`` calls of the check, print the grouped per-call times."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heads", type=int, default=256)
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--top", type=int, default=8, help="one-off ops listed by name")
    args = ap.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    process_defaults()

    params, X, y = problem(args.heads, 6, 8, 64, seed=0)
    key = jax.random.PRNGKey(0)
    kw = (("ends", "min"), ("loss", LOGISTIC), ("model", SOFTMAX))

    def call():
        return jax.block_until_ready(_extremes_jit(params, X, y, key, "auto", kw))

    call(), call()
    with tempfile.TemporaryDirectory() as tmp:
        with jax.profiler.trace(tmp, create_perfetto_trace=True):
            for _ in range(args.calls):
                call()
        trace = sorted(glob.glob(f"{tmp}/**/*.trace.json.gz", recursive=True))[-1]
        with gzip.open(trace) as fh:
            events = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    total, count = collections.Counter(), collections.Counter()
    for e in events:
        total[e["name"]] += e["dur"]
        count[e["name"]] += 1
    R = args.calls
    p = params.U.shape[1] * params.U.shape[2] + params.W.shape[1] * params.W.shape[2]
    trips = -(-args.heads // head_batch_size(args.heads, X.shape[0], X.shape[1], p))
    groups, one_off = collections.Counter(), []
    for name, us in total.items():
        if name.startswith(("ThunkExecutor", "$")) or "while" in name:
            continue
        per, ms = count[name] / R, us / R / 1e3
        if name.startswith("eigh") and per == 1:
            groups["eigh (head blocks)"] += ms
        elif per == trips and trips > 1:
            groups[f"head-Hessian loop (x{trips})"] += ms
        elif per > 1:
            groups["per-count ops"] += ms
        else:
            groups["one-off ops"] += ms
            one_off.append((ms, name))
    print(f"H = {args.heads}, P = {args.heads * p}: program {total[WAIT] / R / 1e3:.0f} ms per call "
          f"({R} calls)")
    for g, ms in groups.most_common():
        print(f"  {g:28s} {ms:7.1f} ms")
    print("  largest one-off ops: " + ", ".join(f"{n} {ms:.1f} ms" for ms, n in sorted(one_off)[::-1][:args.top]))


if __name__ == "__main__":
    main()
