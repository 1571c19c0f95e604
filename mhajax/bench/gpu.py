"""``python -m verify.bench_gpu``: the curvature check at accelerator scale, one script.

Full scale (for an H200, float64):

* **big** — H = 256, T = 16, d = 32, n = 1024 (p = T·d + d² = 1536, P = 393 216):
  one full check at one θ (L̂, gradient norm, certified λ_min(B) and λ_max upper
  bound, Lanczos λ_min/λ_max with true residuals, κ closed form;
  ``chain_raw(..., links="core", method="lanczos")``). Compile time is measured
  on its own (``jit(...).lower(...).compile()``); the run time is the median of
  ``--repeat`` calls after a warm-up call. Also timed, each compiled apart: one
  gradient, one HVP (``jax.jvp`` of ``jax.grad``), the structured factors
  (J and B), the certificates (eigenvalues of B and of the n×n Gram matrix) and
  the Lanczos solve alone. Targets: check <= 2 s, residuals <= 1e-6·|λ_max|.
* **large** — H = 1024 (P = 1 572 864): the same check, once, to completion.
* **certified** (in both stages) — the check with the certified secular route
  (``chain_raw(..., links="core", method="auto")``: H ``eigh`` of p × p with vectors, then
  inertia counts, each a batched ``[P, n]ᵀ[P, n]`` product and two small ``eigh``): compile
  apart, run time, counts, the enclosures of λ_min and λ_max and their relative widths,
  and whether the Lanczos Ritz values of the same stage lie inside them. At p = 1536 the H
  eigendecompositions (~10¹³ flops at H = 256) are expected to dominate: this is where to
  look first. A failure (e.g. out of memory) is recorded in the JSON, not raised.

``--scale small`` runs the same code at tiny sizes (CPU, seconds). Nothing builds a
P×P matrix: the Hessian is used only through G + B products (``J [n, P]`` and the
blocks ``B [H, p, p]``); see :func:`memory_estimate` (the memory guard's terms), which
also refuses a stage that cannot fit the device before anything runs (``--force`` overrides).

Writes ``OUT/bench_gpu.json`` after every stage; ``"complete": true`` only at the end.
"""
from __future__ import annotations

import math
import statistics
import sys
import time

from mhajax.cli.common import ArgumentParser, run_main
from mhajax.runtime.format import fmt, table
from mhajax.runtime.jaxsetup import setup_jax
from mhajax.analysis.chain import chain_raw
from mhajax.bench.timing import problem
from mhajax.curvature.operators import head_batch_size, hvp, structured_parts
from mhajax.curvature.krylov import extreme_eigs
from mhajax.losses import risk
from mhajax.models.base import head_size
from mhajax.curvature.spectrum import certificates
from mhajax.errors import InputError
from mhajax.runtime import memory as mem
from mhajax.runtime.io import prepare_out_dir, run_metadata, write_json_atomic

SCALES = {
    # name: (H, T, d, n) per stage
    "full": dict(big=(256, 16, 32, 1024), large=(1024, 16, 32, 1024)),
    "small": dict(big=(4, 3, 4, 16), large=(8, 3, 4, 16)),
}
CHECK_TARGET_S = 2.0
RESIDUAL_TARGET = 1e-6  # relative to |λ_max|


def build_parser():
    """The parser of ``python -m verify.bench_gpu``."""
    p = ArgumentParser(prog="python -m verify.bench_gpu", description=__doc__.splitlines()[0])
    a = p.add_argument
    a("--scale", default="full", help="full (H200: P = 393 216 and 1 572 864) or small (CPU smoke run)")
    a("--stages", default="big,large", help="comma-separated: big, large")
    a("--repeat", type=int, default=3, help="timed calls after the warm-up (big stage)")
    a("--num-steps", type=int, default=64, help="Lanczos basis size per cycle")
    a("--max-cycles", type=int, default=20, help="Lanczos restart budget")
    a("--dtype", default="float64")
    a("--out", default="results/bench_gpu", help="output directory (bench_gpu.json)")
    a("--force", action="store_true", help="run even when a stage's estimated peak memory exceeds what "
                                           "the device has")
    return p


def memory_estimate(H: int, T: int, d: int, n: int, num_steps: int = 64, itemsize: int = 8) -> dict:
    """The memory guard's terms (:func:`mhajax.runtime.memory.analysis`) of one check
    ``chain_raw(links="core", method="lanczos")``: no P×P array exists; ``J [n, P]``,
    ``B [H, p, p]``, B's eigenvectors, ``QᵀK [n, P]`` and the Lanczos basis. Returns ``P``,
    ``p``, ``head_batch`` (:func:`mhajax.curvature.operators.head_batch_size`), ``bytes``
    (term -> bytes), ``total_bytes`` and ``dense_hessian_bytes_avoided`` (P²·b), plus
    ``estimate`` (the :class:`~mhajax.runtime.memory.Estimate`)."""
    p = head_size("softmax", T, d)
    P = H * p
    est = mem.Estimate("bench_gpu", tuple(mem.analysis(n, T, H, p, "lanczos", num_steps)), itemsize)
    return dict(P=P, p=p, head_batch=head_batch_size(H, n, T, p),
                bytes={label: math.prod(shape) * itemsize for label, shape in est.terms}, total_bytes=est.nbytes,
                dense_hessian_bytes_avoided=P * P * itemsize, estimate=est)


def _median_time(fn, args, repeat: int) -> dict:
    import jax
    t = time.perf_counter()
    out = jax.block_until_ready(fn(*args))            # warm-up
    warm = time.perf_counter() - t
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t)
    return dict(out=out, warmup_s=warm, median_s=statistics.median(times) if times else warm,
                min_s=min(times) if times else warm, max_s=max(times) if times else warm,
                times_s=times)


def _compiled(fn, *args):
    """``(compiled, seconds)``: ``jit(fn)`` lowered and compiled for ``args``."""
    import jax
    t = time.perf_counter()
    c = jax.jit(fn).lower(*args).compile()
    return c, time.perf_counter() - t


def _check_fn(num_steps: int, max_cycles: int):

    def check(params, X, y, key):
        return chain_raw(params, X, y, key, method="lanczos", links="core",
                         num_steps=num_steps, max_cycles=max_cycles)
    return check


def _certified_fn():

    def check(params, X, y, key):
        return chain_raw(params, X, y, key, method="auto", links="core")
    return check


def certified_stage(params, X, y, key, *, repeat: int, ritz=None) -> dict:
    """The certified check (``method="auto"``: inertia counts) at one θ: compile apart, the
    median of ``repeat`` runs after a warm-up (one run if ``repeat`` is 0), the enclosures,
    their relative widths, the counts, and whether the Ritz values ``ritz = (λ_min,
    λ_max)`` lie inside. Errors are recorded (``error``), not raised."""
    try:
        check, c_s = _compiled(_certified_fn(), params, X, y, key)
        m = _median_time(check, (params, X, y, key), repeat)
        out = m.pop("out").extremes
    except Exception as e:   # noqa: BLE001  (an accelerator run records what failed and goes on)
        return dict(error=repr(e)[:2000])
    lo, hi, Lo, Hi = (float(v) for v in (out.lambda_min_lo, out.lambda_min_hi, out.lambda_max_lo, out.lambda_max_hi))
    res = dict(compile_s=c_s, **m, lambda_min_enclosure=[lo, hi], lambda_max_enclosure=[Lo, Hi],
               rel_width_min=(hi - lo) / abs(lo) if lo else None, rel_width_max=(Hi - Lo) / abs(Hi) if Hi else None,
               counts=int(out.eig_counts), ties=int(out.eig_ties), width_ok=bool(out.eig_width_ok),
               certified=bool(out.eig_certified))
    if ritz is not None:
        res["ritz_min_inside"] = bool(lo <= ritz[0] <= hi)
        res["ritz_max_inside"] = bool(Lo <= ritz[1] <= Hi)
    return res


def _solver_stats(out) -> dict:
    e = out.extremes
    lmax = float(e.lambda_max)
    rmax = max(float(e.residual_min), float(e.residual_max))
    return dict(loss=float(out.loss), lambda_min=float(e.lambda_min), lambda_max=lmax,
                lambda_min_block=float(e.lambda_min_block),
                lambda_max_upper=float(e.lambda_max_upper),
                residual_min=float(e.residual_min), residual_max=float(e.residual_max),
                residual_rel=rmax / abs(lmax) if lmax != 0 else None,
                eig_converged=bool(e.eig_converged), num_matvecs=int(e.num_matvecs),
                certified_below_ritz=bool(float(e.lambda_min_block) <= float(e.lambda_min)))


def _memory(H, T, d, n, num_steps) -> dict:
    """:func:`memory_estimate` on the backend in use, JSON-ready (without the object)."""
    m = memory_estimate(H, T, d, n, num_steps)
    m.pop("estimate")
    return m


def big_stage(H, T, d, n, *, repeat: int, num_steps: int, max_cycles: int) -> dict:
    """Full check at one θ, timed (compile apart, median after warm-up), with the
    gradient, HVP and component costs measured the same way."""
    import jax

    params, X, y = problem(H, T, d, n)
    key = jax.random.PRNGKey(0)
    P = sum(leaf.size for leaf in jax.tree_util.tree_leaves(params))
    res = dict(heads=H, tokens=T, dim=d, n=n, P=int(P), memory=_memory(H, T, d, n, num_steps))
    timings = {}

    grad, c_s = _compiled(jax.grad(risk), params, X, y)
    g = _median_time(grad, (params, X, y), repeat)
    timings["gradient"] = dict(compile_s=c_s, **{k: v for k, v in g.items() if k != "out"})
    v = g["out"]                                        # a direction shaped like θ
    hv, c_s = _compiled(lambda th, X, y, v: hvp(th, X, y, v), params, X, y, v)
    h = _median_time(hv, (params, X, y, v), repeat)
    timings["hvp"] = dict(compile_s=c_s, **{k: v for k, v in h.items() if k != "out"})

    check, c_s = _compiled(_check_fn(num_steps, max_cycles), params, X, y, key)
    c = _median_time(check, (params, X, y, key), repeat)
    timings["check"] = dict(compile_s=c_s, **{k: v for k, v in c.items() if k != "out"})
    res["solver"] = _solver_stats(c["out"])
    del c

    parts, c_s = _compiled(structured_parts, params, X, y)
    s = _median_time(parts, (params, X, y), max(1, repeat - 1))
    timings["structured_parts"] = dict(compile_s=c_s, **{k: v for k, v in s.items() if k != "out"})
    S = s["out"]
    certs, c_s = _compiled(certificates, S)
    ce = _median_time(certs, (S,), max(1, repeat - 1))
    timings["certificates"] = dict(compile_s=c_s, **{k: v for k, v in ce.items() if k != "out"})
    lan, c_s = _compiled(lambda S, k: extreme_eigs(S.matvec, P, k, num_steps=num_steps,
                                                   max_cycles=max_cycles, dtype=S.J.dtype), S, key)
    la = _median_time(lan, (S, key), max(1, repeat - 1))
    timings["lanczos"] = dict(compile_s=c_s, **{k: v for k, v in la.items() if k != "out"})
    timings["lanczos"]["num_matvecs"] = int(la["out"].num_matvecs)
    del S, s, la

    res["certified"] = certified_stage(params, X, y, key, repeat=repeat,
                                       ritz=(res["solver"]["lambda_min"], res["solver"]["lambda_max"]))

    res["timings"] = timings
    chk, hvp_s, grad_s = timings["check"]["median_s"], timings["hvp"]["median_s"], timings["gradient"]["median_s"]
    res["ratios"] = {"hvp/gradient": hvp_s / grad_s, "check/hvp": chk / hvp_s}
    sv = res["solver"]
    res["targets"] = dict(
        check_s=chk, check_target_s=CHECK_TARGET_S, check_within_target=bool(chk <= CHECK_TARGET_S),
        residual_target_rel=RESIDUAL_TARGET,
        residual_within_target=bool(sv["residual_rel"] is not None and sv["residual_rel"] <= RESIDUAL_TARGET))
    return res


def large_stage(H, T, d, n, *, num_steps: int, max_cycles: int) -> dict:
    """The same check once at a larger H: compile and one run, to completion."""
    import jax
    params, X, y = problem(H, T, d, n)
    key = jax.random.PRNGKey(0)
    P = sum(leaf.size for leaf in jax.tree_util.tree_leaves(params))
    res = dict(heads=H, tokens=T, dim=d, n=n, P=int(P), memory=_memory(H, T, d, n, num_steps))
    check, c_s = _compiled(_check_fn(num_steps, max_cycles), params, X, y, key)
    t = time.perf_counter()
    out = jax.block_until_ready(check(params, X, y, key))
    res["timings"] = dict(check=dict(compile_s=c_s, run_s=time.perf_counter() - t))
    res["solver"] = _solver_stats(out)
    del check, out
    res["certified"] = certified_stage(params, X, y, key, repeat=0,
                                       ritz=(res["solver"]["lambda_min"], res["solver"]["lambda_max"]))
    res["completed"] = True
    return res


def report(res) -> str:
    """The timing tables of one run, as text."""
    rows = []
    for name in ("big", "large"):
        r = res.get(name)
        if not r:
            continue
        t = r["timings"]["check"]
        rows.append([name, r["heads"], r["P"], fmt(t.get("compile_s")), fmt(t.get("median_s", t.get("run_s"))),
                     r["solver"]["num_matvecs"], fmt(r["solver"]["residual_rel"]),
                     fmt(r["solver"]["eig_converged"]), fmt(r["memory"]["total_bytes"] / 2 ** 30)])
    out = [table(["stage", "H", "P", "compile s", "check s", "products", "resid/|λmax|", "converged",
                  "est GiB"], rows)]
    crows = []
    for name in ("big", "large"):
        c = (res.get(name) or {}).get("certified")
        if c and "error" not in c:
            crows.append([name, fmt(c["compile_s"]), fmt(c["median_s"]), c["counts"], fmt(c["rel_width_min"]),
                          fmt(c["rel_width_max"]), fmt(c.get("ritz_min_inside")), fmt(c.get("ritz_max_inside"))])
        elif c:
            crows.append([name, "-", "-", "-", "-", "-", "-", c["error"][:60]])
    if crows:
        out += ["", "certified check (method auto: inertia counts):",
                table(["stage", "compile s", "run s", "counts", "width λmin", "width λmax", "Ritz min in",
                       "Ritz max in"], crows)]
    if "big" in res:
        b = res["big"]
        comp = [[k, fmt(v["compile_s"]), fmt(v["median_s"])] for k, v in b["timings"].items()]
        out += ["", "big stage components (median after warm-up):", table(["part", "compile s", "run s"], comp),
                f"HVP/gradient {b['ratios']['hvp/gradient']:.3g}, check/HVP {b['ratios']['check/hvp']:.3g}; "
                f"check <= {CHECK_TARGET_S} s: {b['targets']['check_within_target']}; "
                f"residual <= {RESIDUAL_TARGET}·|λmax|: {b['targets']['residual_within_target']}"]
    return "\n".join(out)


def main(argv=None) -> int:
    """Run the accelerator benchmark; write ``OUT/bench_gpu.json`` after every stage."""
    args = build_parser().parse_args(argv)
    if args.scale not in SCALES:
        raise InputError(f"--scale must be one of {', '.join(SCALES)}, got {args.scale!r}")
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    bad = [s for s in stages if s not in ("big", "large")]
    if bad or not stages:
        raise InputError(f"--stages must list big and/or large, got {args.stages!r}")
    for name in ("repeat", "num_steps", "max_cycles"):
        if getattr(args, name) < 1:
            raise InputError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    setup_jax(args.dtype)
    for stage in stages:   # before anything is written: a stage that cannot fit is refused (exit 2)
        H, T, d, n = SCALES[args.scale][stage]
        est = memory_estimate(H, T, d, n, args.num_steps, 8 if args.dtype == "float64" else 4)["estimate"]
        mem.guard(lambda _: est, {}, {}, force=args.force)
    out = prepare_out_dir(args.out)
    path = out / "bench_gpu.json"
    res = dict(complete=False, scale=args.scale, sizes=SCALES[args.scale])
    meta = run_metadata(vars(args), [0])
    kw = dict(num_steps=args.num_steps, max_cycles=args.max_cycles)
    for stage in stages:
        print(f"{stage}: H, T, d, n = {SCALES[args.scale][stage]} ...", flush=True)
        if stage == "big":
            res["big"] = big_stage(*SCALES[args.scale]["big"], repeat=args.repeat, **kw)
        else:
            res["large"] = large_stage(*SCALES[args.scale]["large"], **kw)
        write_json_atomic(path, dict(res, meta=meta))
    res["complete"] = True
    write_json_atomic(path, dict(res, meta=meta))
    print(report(res))
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
