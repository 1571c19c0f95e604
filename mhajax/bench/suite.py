"""``python -m verify.bench``: how fast the checks are, as ratios measured in one run.

Sections:

* **W1** — the default weak-convexity run (``--heads 1,4,16 --seeds 2 --n 64
  --tokens 6 --dim 8 --steps 200 --every 20``) as whole processes:
  ``--links core --method auto`` against ``--method dense`` (and against the
  torch.func peer when torch is installed), plus the ``--links all`` cost.
* **points** — at one θ per size (T, d, n fixed, H growing): one gradient,
  one HVP (jvp of grad, linearized), one structured G+B product, and one full
  check (L̂, certified λ_min(B), Lanczos λ_min/λ_max with residuals, κ chain);
  the dense check where P is small enough; at ``--points`` random θ per size.
  Ratios: HVP/gradient, check/HVP, dense/check, and the growth of the check time
  (and of the time per operator product) per 4x in H.
* **devices** — the same GD sweep (``verify convergence``, ``--devices-args``) as whole
  processes on 1 device and on ``--devices`` CPU devices
  (``XLA_FLAGS=--xla_force_host_platform_device_count``): the speed-up of splitting the
  run axis (mhajax.train.train_runs), and whether the numbers agree. On CPU the
  devices share the host's cores, so the speed-up is bounded by the core count.

Writes ``OUT/bench.json`` with the provenance of every number.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import tempfile

from mhajax.cli.common import ArgumentParser, run_main
from mhajax.runtime.format import fmt, table
from mhajax.runtime.jaxsetup import setup_jax
from mhajax.bench.timing import python_cmd, time_process
from mhajax.bench.timing import point_costs, problem
from mhajax.validate import heads_list
from mhajax.errors import InputError
from mhajax.runtime.io import prepare_out_dir, run_metadata, write_json_atomic

W1 = ["--heads", "1,4,16", "--seeds", "2", "--n", "64", "--tokens", "6", "--dim", "8",
      "--steps", "200", "--every", "20", "--lr", "1.0", "--quiet"]


DEVICES_ARGS = ["--heads", "4", "--seeds", "8", "--steps", "4000", "--n", "64", "--n-test", "256",
                "--resamples", "200", "--quiet"]


def build_parser():
    """The parser of ``python -m verify.bench``."""
    p = ArgumentParser(prog="python -m verify.bench", description=__doc__.splitlines()[0])
    a = p.add_argument
    a("--sections", default="w1,points", help="comma-separated: w1, points, devices")
    a("--heads", default="16,64,256", help="H values for the per-point costs (T, d, n below)")
    a("--tokens", type=int, default=6)
    a("--dim", type=int, default=8)
    a("--n", type=int, default=64)
    a("--dense-max", type=int, default=2048, help="largest P for the dense per-point check")
    a("--repeat", type=int, default=3, help="timed repetitions per per-point measurement")
    a("--points", type=int, default=3,
      help="random points θ (seeds 0..points-1) per H; rows report medians and spread over them")
    a("--devices", type=int, default=4, help="CPU devices for the devices section")
    a("--devices-args", default=" ".join(DEVICES_ARGS),
      help="flags of the convergence sweep timed by the devices section")
    a("--torch", default="auto", help="run the torch.func W1 peer: auto (if installed), yes, no")
    a("--dtype", default="float64")
    a("--out", default="results/bench", help="output directory (bench.json)")
    return p


def w1_section(torch_mode: str) -> dict:
    """Whole-process times of W1: core vs dense vs all links, and the torch.func peer."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        runs = {
            "auto_core": ["--links", "core", "--method", "auto"],
            "dense_core": ["--links", "core", "--method", "dense"],
            "auto_all": ["--links", "all", "--method", "auto"],
        }
        for name, extra in runs.items():
            cmd = python_cmd("-m", "verify", "weak-convexity", *W1, *extra, "--out", f"{tmp}/{name}")
            res[name] = dict(time_process(cmd, env=env), command=" ".join(["python", *cmd[1:]]))
            print(f"  W1 {name}: {res[name]['seconds']:.1f} s (exit {res[name]['returncode']})", flush=True)
        have_torch = importlib.util.find_spec("torch") is not None
        if torch_mode == "yes" or (torch_mode == "auto" and have_torch):
            cmd = python_cmd("-m", "verify.bench_torch", *W1[:-1])
            res["torch_func"] = dict(time_process(cmd, env=env), command=" ".join(["python", *cmd[1:]]))
            print(f"  W1 torch_func: {res['torch_func']['seconds']:.1f} s", flush=True)
        else:
            res["torch_func"] = dict(skipped="--torch no" if torch_mode == "no" else
                                     "torch is not installed (pip install -e '.[bench]')")
    base = res["auto_core"]["seconds"]
    res["ratios"] = {f"{k}/auto_core": v["seconds"] / base for k, v in res.items()
                     if isinstance(v, dict) and "seconds" in v and k != "auto_core"}
    return res


def devices_section(args) -> dict:
    """Whole-process wall time of one convergence sweep on 1 and on ``--devices`` devices
    (compile included; the XLA cache off so neither run reuses the other's programs), the
    sweep's own timing (``timings_s``: GD, witness, test losses), and the largest relative
    difference between the two summaries' losses."""
    import json

    res = {}
    extra = args.devices_args.split()
    with tempfile.TemporaryDirectory() as tmp:
        for nd in (1, args.devices):
            env = dict(os.environ, PYTHONUNBUFFERED="1", MHAJAX_CACHE_DIR="off",
                       XLA_FLAGS=f"--xla_force_host_platform_device_count={nd}")
            cmd = python_cmd("-m", "verify", "convergence", *extra, "--out", f"{tmp}/d{nd}")
            r = dict(time_process(cmd, env=env), command=f"XLA_FLAGS=--xla_force_host_platform_device_count={nd} "
                     + " ".join(["python", *cmd[1:]]))
            try:
                with open(f"{tmp}/d{nd}/summary.json") as fh:
                    s = json.load(fh)
                r["sweep_s"] = sum(s["timings_s"].values())
                r["final_loss"] = [x for v in s["by_heads"].values() for x in v["final_loss"]]
                r["devices"] = len(s["meta"]["devices"])
            except (OSError, KeyError, ValueError) as e:
                r["error"] = repr(e)
            res[f"devices_{nd}"] = r
            print(f"  devices={nd}: {r['seconds']:.1f} s process, sweep {r.get('sweep_s', float('nan')):.1f} s",
                  flush=True)
    a, b = res["devices_1"], res[f"devices_{args.devices}"]
    if "final_loss" in a and "final_loss" in b:
        res["speedup_process"] = a["seconds"] / b["seconds"]
        res["speedup_sweep"] = a["sweep_s"] / b["sweep_s"]
        res["max_rel_diff"] = max(abs(x - y) / max(abs(x), abs(y), 1e-300)
                                  for x, y in zip(a["final_loss"], b["final_loss"]))
    res["host_cores"] = os.cpu_count()
    return res


def points_section(args) -> dict:
    """Per H: ``--points`` random θ, each timed ``--repeat`` times (median). The row
    holds the medians over θ, the spread (min, max) of the check time, and the check
    time per operator product — the number of products (Lanczos restarts) depends on
    the spectrum at θ, the cost of each product on the size."""
    import statistics

    import jax
    med = statistics.median
    rows = []
    for H in heads_list(args.heads):
        per_point = []
        for seed in range(args.points):
            params, X, y = problem(H, args.tokens, args.dim, args.n, seed=seed)
            r = point_costs(params, X, y, method="lanczos", repeat=args.repeat)
            r["check_per_product_s"] = r["check_s"] / max(1, r["num_matvecs"])
            if r["P"] <= args.dense_max:
                d = point_costs(params, X, y, method="dense", repeat=1)
                r["dense_check_s"] = d["check_s"]
                r["dense_lambda_min"] = d["lambda_min"]
                r["lambda_min_rel_err"] = abs(r["lambda_min"] - d["lambda_min"]) / abs(d["lambda_min"])
            per_point.append(r)
        row = dict(heads=H, tokens=args.tokens, dim=args.dim, n=args.n, P=per_point[0]["P"],
                   points=per_point)
        for k in ("gradient_s", "hvp_s", "structured_matvec_s", "check_s", "check_per_product_s",
                  "num_matvecs", "residual_min", "dense_check_s", "lambda_min_rel_err"):
            vals = [p[k] for p in per_point if k in p]
            if vals:
                row[k] = med(vals)
        row["check_spread_s"] = [min(p["check_s"] for p in per_point), max(p["check_s"] for p in per_point)]
        row["products"] = [p["num_matvecs"] for p in per_point]
        row["eig_converged"] = all(p["eig_converged"] for p in per_point)
        row["hvp/gradient"] = row["hvp_s"] / row["gradient_s"]
        row["check/hvp"] = row["check_s"] / row["hvp_s"]
        if "dense_check_s" in row:
            row["dense/check"] = row["dense_check_s"] / row["check_s"]
        rows.append(row)
        print(f"  point H={H} P={row['P']}: check {row['check_s']:.3f} s (median of {args.points} θ; "
              f"{row['check_spread_s'][0]:.3f}–{row['check_spread_s'][1]:.3f}), products {row['products']}",
              flush=True)
        jax.clear_caches()
    for a, b in zip(rows, rows[1:]):
        b["check_growth_vs_prev"] = b["check_s"] / a["check_s"]
        b["per_product_growth_vs_prev"] = b["check_per_product_s"] / a["check_per_product_s"]
        b["heads_growth_vs_prev"] = b["heads"] / a["heads"]
    return dict(rows=rows)


def report(res) -> str:
    """The benchmark tables of one run, as text."""
    out = []
    if "w1" in res:
        w = res["w1"]
        rows = [[k, fmt(v["seconds"]), v["returncode"], fmt(w["ratios"].get(f"{k}/auto_core", 1.0))]
                for k, v in w.items() if isinstance(v, dict) and "seconds" in v]
        out += ["W1 (whole process, 2 seeds x H in 1,4,16, 11 checkpoints each):",
                table(["run", "seconds", "exit", "ratio to auto_core"], rows)]
        if "skipped" in w.get("torch_func", {}):
            out.append(f"torch.func peer skipped: {w['torch_func']['skipped']}")
    if "points" in res:
        rows = [[r["heads"], r["P"], fmt(r["gradient_s"]), fmt(r["hvp_s"]), fmt(r["structured_matvec_s"]),
                 fmt(r["check_s"]), f"{fmt(r['check_spread_s'][0]).strip()}-{fmt(r['check_spread_s'][1]).strip()}",
                 "/".join(str(k) for k in r["products"]), fmt(r["check_per_product_s"]),
                 fmt(r["residual_min"]), fmt(r.get("dense_check_s")),
                 fmt(r["hvp/gradient"]), fmt(r["check/hvp"]), fmt(r.get("dense/check")),
                 fmt(r.get("check_growth_vs_prev")), fmt(r.get("per_product_growth_vs_prev"))]
                for r in res["points"]["rows"]]
        out += ["", "Per point (seconds; medians over the random θ, each the median of --repeat calls):",
                table(["H", "P", "grad", "hvp", "G+B mv", "check", "check range", "products", "check/product",
                       "resid", "dense", "hvp/grad", "check/hvp", "dense/check", "growth", "growth/product"],
                      rows),
                "growth: median check time relative to the previous H (a 4x step in H is linear at 4x);"
                " growth/product: the same per operator product."]
    if "devices" in res:
        d = res["devices"]
        rows = [[k, fmt(v["seconds"]), fmt(v.get("sweep_s")), v.get("devices", "?")]
                for k, v in d.items() if isinstance(v, dict)]
        out += ["", f"Devices (one convergence sweep, {d['host_cores']} host cores):",
                table(["run", "process s", "sweep s", "devices"], rows),
                f"speed-up (1 device / N devices): process {fmt(d.get('speedup_process'))}, sweep "
                f"{fmt(d.get('speedup_sweep'))}; largest relative difference of final losses "
                f"{fmt(d.get('max_rel_diff'))}"]
    return "\n".join(out)


def main(argv=None) -> int:
    """Run the chosen sections; write ``OUT/bench.json`` with provenance."""
    args = build_parser().parse_args(argv)
    if args.points < 1 or args.repeat < 1:
        raise InputError(f"--points and --repeat must be >= 1, got {args.points}, {args.repeat}")
    if args.devices < 2:
        raise InputError(f"--devices must be >= 2, got {args.devices}")
    bad = [s for s in args.sections.split(",") if s.strip() and s.strip() not in ("w1", "points", "devices")]
    if bad:
        raise InputError(f"--sections: unknown section(s) {', '.join(map(repr, bad))}; choose from w1, points, devices")
    setup_jax(args.dtype)
    out = prepare_out_dir(args.out)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    res = {}
    if "w1" in sections:
        print("W1 whole-process runs ...", flush=True)
        res["w1"] = w1_section(args.torch)
    if "points" in sections:
        print("per-point costs ...", flush=True)
        res["points"] = points_section(args)
    if "devices" in sections:
        print(f"devices: 1 vs {args.devices} ...", flush=True)
        res["devices"] = devices_section(args)
    res["meta"] = run_metadata(vars(args), [0])
    path = write_json_atomic(out / "bench.json", res)
    print(report(res))
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
