"""``python -m verify.bench``: how fast the checks are, as ratios measured in one run.

The default run (``--sections growth,start,arpack``) prints:

* **growth** — the certified check ``mhajax.lambda_min(method="auto")`` (an enclosure
  ``[lo, hi]`` of λ_min, both ends certified by inertia counts) at T = 6, d = 8, n = 64
  and ``--heads`` (16, 64, 256), ``--points`` random θ per H, each the best of
  ``--repeat`` calls after a warm-up: the median and the worst θ per H, their growth per
  4x in H (targets: <= 5x from 64 to 256, <= 1 s at 256), wall and CPU seconds, counts,
  the enclosure's width, and (P <= 2048) whether it holds numpy's dense λ_min;
* **start** — the whole process ``python -m verify weak-convexity --heads 16 --seeds 1
  --steps 100 --every 20 --links core`` on a fresh compilation cache (cold) and on the
  same cache again (warm), against the torch.func peer (:mod:`mhajax.bench.peer_torch`)
  doing the same work from the same data and initial point, handed over in an ``.npz``
  (the peer imports no jax); ratios cold and warm (targets >= 8x, >= 10x). Every process
  caches Python bytecode as a default Python does (``PYTHONDONTWRITEBYTECODE`` removed from its
  environment);
* **arpack** — the certified check against the matrix-free peer
  (:mod:`mhajax.bench.peer_arpack`: torch double-backward HVPs into SciPy's ``eigsh``,
  ``which="SA"``, tol 1e-8) at ``--arpack-heads`` (64, 256: P = 7,168 and 28,672): time to
  an answer of equal accuracy (the peer's ``eigsh`` alone, its imports and graph build
  excluded), the ratio (target >= 10x) and the agreement (relative 1e-8, and whether the
  peer's value lies inside the certified enclosure).

Other sections:

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
* **census** — the certified spectral census (:mod:`mhajax.curvature.census`) on the
  benchmark's problem (T = 6, d = 8, n = 64, seed 0) at ``--census-heads`` (256: P = 28,672):
  ``spectral_histogram`` over ``--thresholds`` (200) evenly spaced edges on
  [−0.0135, 0.0135] (default refinement, and none), against one certified
  ``mhajax.lambda_min`` at the same θ, and against SLQ (:mod:`mhajax.curvature.slq`) at its
  default budget (10 probes × 100 Lanczos steps) over the same edges: the best of
  ``--repeat`` interleaved rounds after a compiling call each, the ratios to λmin, and SLQ's
  error in N₋ against the certified count (in counts and in SLQ's standard errors).
* **width** — cost at width (``--width-heads``, 256, 1024, 4096: P up to 458,752) on the
  benchmark's problem: one certified ``mhajax.lambda_min``, ``spectral_counts`` at 200 thresholds
  (evenly on [λmin, −λmin]) and a 40-bin ``spectral_histogram`` on the same interval (default
  refinement), each compiled by a first call (timed apart, cold) and then the best of ``--repeat``:
  the ratios to λmin (target: the histogram <= 3x at the largest H) and the growth of each per 4x
  in H (target <= 4.5x); the process's peak RSS.
* **split** — the census check (``verify census --heads --split-heads --seeds 1 --steps 1 --every 1
  --probes 0``: θ₀ and one step, λmin's enclosure, the histogram) as whole processes on 1 and
  ``--devices`` CPU devices: whether every count, bracket and enclosure at θ₀ is the same (bit
  for bit: the head blocks and the counts' partial sums are split, nothing else changes), how far
  the records after the GD step differ (GD splits the run axis: equal to rounding), and the speed-up.
* **premises** — what checking a model's closed forms against autodiff costs
  (:mod:`mhajax.curvature.premises`, docs/theory.md §3.7), at ``--census-heads`` (256: P = 28,672):
  the softmax head with all its closed forms handed in as a user's model (so checked at every
  call), the door check ``check_premises`` and the whole ``lambda_min`` (door check plus the
  per-θ check inside the certified route), each against one certified ``lambda_min`` of the
  built-in head (checked once per process, before the timed calls): best of ``--repeat``
  interleaved rounds after a compiling call each (target: the check <= 10 % of λ_min).
* **devices** — the same GD sweep (``verify convergence``, ``--devices-args``) as whole
  processes on 1 device and on ``--devices`` CPU devices
  (``XLA_FLAGS=--xla_force_host_platform_device_count``): the speed-up of splitting the
  run axis (:func:`mhajax.train.train`), and whether the numbers agree. On CPU the
  devices share the host's cores, so the speed-up is bounded by the core count.

Writes ``OUT/bench.json`` with the provenance of every number.
"""
from __future__ import annotations

import importlib.util
import json
import os
import statistics
import sys
import tempfile

import numpy as np

from mhajax.cli.common import ArgumentParser, run_main
from mhajax.runtime.format import fmt, table
from mhajax.runtime.jaxsetup import setup_jax
from mhajax.bench.timing import python_cmd, time_lambda_min, time_process, time_rounds
from mhajax.bench.timing import point_costs, problem
from mhajax.curvature import census
from mhajax.curvature.operators import structured_parts
from mhajax.curvature.premises import check_premises
from mhajax.curvature.slq import NUM_PROBES, NUM_STEPS, slq_histogram
from mhajax.curvature.spectrum import lambda_min, lambda_min_enclosure
from mhajax.experiments.base import batched_data, batched_init
from mhajax.experiments.configs import DataConfig
from mhajax.models.base import head_size
from mhajax.models.softmax import SOFTMAX
from mhajax.validate import heads_list
from mhajax.errors import InputError
from mhajax.runtime import memory as mem
from mhajax.runtime.io import prepare_out_dir, run_metadata, write_json_atomic

W1 = ["--heads", "1,4,16", "--seeds", "2", "--n", "64", "--tokens", "6", "--dim", "8",
      "--steps", "200", "--every", "20", "--lr", "1.0", "--quiet"]


#: the whole-process command of the start-up targets
START = ["weak-convexity", "--heads", "16", "--seeds", "1", "--steps", "100", "--every", "20", "--links", "core",
         "--quiet"]
SECTIONS = ("growth", "start", "arpack", "w1", "points", "census", "width", "split", "devices", "premises")
PREMISE_TARGET = 0.10        # the premise check, as a fraction of one certified λ_min at H = 256
WIDTH_RATIO_TARGET = 3.0      # the histogram against one certified λmin, at the largest H
WIDTH_GROWTH_TARGET = 4.5     # per 4x H, from 256 to 4096
GROWTH_TARGET = 5.0          # per 4x H, from 64 to 256
CHECK_TARGET_S = 1.0         # a certified check at H = 256
START_TARGETS = dict(cold=8.0, warm=10.0)
ARPACK_TARGET = 10.0

DEVICES_ARGS = ["--heads", "4", "--seeds", "8", "--steps", "4000", "--n", "64", "--n-test", "256",
                "--resamples", "200", "--quiet"]


def build_parser():
    """The parser of ``python -m verify.bench``."""
    p = ArgumentParser(prog="python -m verify.bench", description=__doc__.splitlines()[0])
    a = p.add_argument
    a("--sections", default="growth,start,arpack",
      help="comma-separated: growth, start, arpack (the default), w1, points, census, width, split, devices, premises")
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
    a("--torch", default="auto", help="run the torch peers (torch.func, ARPACK): auto (if installed), yes, no")
    a("--arpack-heads", default="64,256", help="H values of the ARPACK comparison (T, d, n as above)")
    a("--arpack-tol", type=float, default=1e-8, help="ARPACK's relative tolerance (eigsh tol)")
    a("--census-heads", default="256", help="H values of the census section (T, d, n as above)")
    a("--thresholds", type=int, default=200, help="histogram edges of the census section")
    a("--width-heads", default="256,1024,4096", help="H values of the width section (T, d, n as above)")
    a("--split-heads", type=int, default=1024, help="H of the split section's census run")
    a("--warm-runs", type=int, default=2, help="warm whole-process runs of the start command")
    a("--dtype", default="float64")
    a("--out", default="results/bench", help="output directory (bench.json)")
    a("--force", action="store_true", help="run even when a point's estimated peak memory exceeds what "
                                           "the device has")
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
        if _torch_wanted(torch_mode):
            # the peer imports no jax: W1's data and initial points go to it in an .npz
            npz = _peer_npz(os.path.join(tmp, "w1.npz"), DataConfig(), seeds=[0, 1], heads=(1, 4, 16))
            cmd = python_cmd(_peer("torch"), "--data", npz, "--heads", "1,4,16", "--steps", "200", "--every", "20",
                             "--lr", "1.0")
            res["torch_func"] = dict(time_process(cmd, env=env), command="python mhajax/bench/peer_torch.py --data "
                                     "w1.npz --heads 1,4,16 --steps 200 --every 20 --lr 1.0")
            print(f"  W1 torch_func: {res['torch_func']['seconds']:.1f} s", flush=True)
        else:
            res["torch_func"] = dict(skipped="--torch no" if torch_mode == "no" else
                                     "torch is not installed (pip install -e '.[bench]')")
    base = res["auto_core"]["seconds"]
    res["ratios"] = {f"{k}/auto_core": v["seconds"] / base for k, v in res.items()
                     if isinstance(v, dict) and "seconds" in v and k != "auto_core"}
    return res


def _peer_npz(path: str, cfg: DataConfig, seeds, heads) -> str:
    """Write the torch.func peer's ``.npz`` (:mod:`mhajax.bench.peer_torch`): mhajax's own
    draws ``X [S, n, T, d]``, ``y [S, n]`` and per H the initial ``U0_H<H>``, ``W0_H<H>``."""
    import numpy as np

    X, y = batched_data(cfg, list(seeds))
    arrays = dict(X=np.asarray(X), y=np.asarray(y))
    for H in heads:
        th = batched_init(cfg, list(seeds), H)
        arrays[f"U0_H{H}"], arrays[f"W0_H{H}"] = np.asarray(th.U), np.asarray(th.W)
    np.savez(path, **arrays)
    return path


def _torch_wanted(mode: str) -> bool:
    have = importlib.util.find_spec("torch") is not None
    return mode == "yes" or (mode == "auto" and have)


def _peer(name: str) -> str:
    """The path of a peer script, run by path so that it imports neither jax nor mhajax."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), f"peer_{name}.py")


def _last_json(text: str):
    for line in reversed(text.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


def growth_section(args) -> dict:
    """Per H (``--heads``): ``--points`` random θ, the certified check
    (:func:`mhajax.bench.timing.time_lambda_min`) best of ``--repeat``; the row holds the
    median and the worst θ and their growth from the previous H."""
    import jax
    import numpy as np

    rows = []
    for H in heads_list(args.heads):
        pts = []
        for seed in range(args.points):
            params, X, y = problem(H, args.tokens, args.dim, args.n, seed=seed)
            t = time_lambda_min(params, X, y, repeat=args.repeat)
            rec = t.pop("record")
            lo, hi = rec.lambda_min_lo, rec.lambda_min_hi
            pt = dict(seed=seed, **t, lambda_min_lo=lo, lambda_min_hi=hi,
                      lambda_max_lo=rec.lambda_max_lo, lambda_max_hi=rec.lambda_max_hi,
                      rel_width=(hi - lo) / abs(lo) if lo else None, counts=rec.eig_counts,
                      ties=rec.eig_ties, width_ok=rec.eig_width_ok, certified=rec.eig_certified)
            P = rec.P
            if P <= args.dense_max:   # the truth by numpy on the assembled Hessian
                S = jax.jit(structured_parts)(params, X, y)
                ev = np.linalg.eigvalsh(np.asarray(S.dense()))
                tol = 16 * np.sqrt(P) * np.finfo(float).eps * np.abs(ev).max()
                pt["dense_lambda_min"] = float(ev[0])
                pt["contains_dense"] = bool(lo - tol <= ev[0] <= hi + tol)
            pts.append(pt)
        best = [p["best_s"] for p in pts]
        row = dict(heads=H, P=P, points=pts,
                   median_s=statistics.median(best), worst_s=max(best),
                   cpu_median_s=statistics.median(p["cpu_best_s"] for p in pts),
                   cpu_worst_s=max(p["cpu_best_s"] for p in pts),
                   max_rel_width=max(p["rel_width"] for p in pts if p["rel_width"] is not None),
                   counts=[p["counts"] for p in pts], all_certified=all(p["certified"] for p in pts))
        rows.append(row)
        print(f"  growth H={H} P={P}: median {row['median_s']:.3f} s, worst {row['worst_s']:.3f} s, "
              f"counts {row['counts']}", flush=True)
        jax.clear_caches()
    for a, b in zip(rows, rows[1:]):
        f = b["heads"] / a["heads"]
        for k in ("median_s", "worst_s", "cpu_median_s", "cpu_worst_s"):
            b[f"growth_{k}"] = b[k] / a[k]
        b["heads_factor"] = f
    last = rows[-1]
    judged = [r for r in rows[1:] if r["heads"] == 256 and r["heads_factor"] == 4]
    return dict(rows=rows, targets=dict(
        growth_per_4x=GROWTH_TARGET, check_s=CHECK_TARGET_S,
        growth_met=all(r["growth_median_s"] <= GROWTH_TARGET and r["growth_worst_s"] <= GROWTH_TARGET
                       for r in judged) if judged else None,
        # the same in CPU seconds (informational)
        growth_cpu=[(r["growth_cpu_median_s"], r["growth_cpu_worst_s"]) for r in judged],
        largest_H=last["heads"], largest_worst_s=last["worst_s"],
        check_met=last["worst_s"] <= CHECK_TARGET_S if last["heads"] == 256 else None))


def start_section(args) -> dict:
    """The start command (:data:`START`) as whole processes: cold (a fresh
    ``MHAJAX_CACHE_DIR``), ``--warm-runs`` warm (the same cache), then the torch.func peer
    on the same data and initial points (an ``.npz``), then one more warm run; ratios of
    the peer's time to the cold and to the best warm run."""
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        # the user's default: the compilation cache on, and Python's bytecode cache on
        env = dict(_python_default_env(), PYTHONUNBUFFERED="1", MHAJAX_CACHE_DIR=os.path.join(tmp, "cache"))

        def jax_run(name):
            cmd = python_cmd("-m", "verify", *START, "--out", os.path.join(tmp, name))
            r = dict(time_process(cmd, env=env), command=" ".join(["python", *cmd[1:]]))
            print(f"  start {name}: {r['seconds']:.2f} s (exit {r['returncode']})", flush=True)
            return r

        res["cold"] = jax_run("cold")
        res["warm"] = [jax_run(f"warm{i}") for i in range(args.warm_runs)]
        try:
            with open(os.path.join(tmp, "warm0" if args.warm_runs else "cold", "summary.json")) as fh:
                res["jax_max_kappa_emp"] = json.load(fh)["by_heads"]["16"]["max_kappa_emp"]
        except (OSError, KeyError, ValueError) as e:
            res["jax_max_kappa_emp"] = None
            res["summary_error"] = repr(e)
        if _torch_wanted(args.torch):
            npz = _peer_npz(os.path.join(tmp, "start.npz"), DataConfig(), seeds=[0], heads=(16,))
            cmd = python_cmd(_peer("torch"), "--data", npz, "--heads", "16", "--steps", "100", "--every", "20",
                             "--lr", "1.0")
            r = dict(time_process(cmd, env=dict(_python_default_env(), PYTHONUNBUFFERED="1")),
                     command="python mhajax/bench/peer_torch.py --data start.npz --heads 16 --steps 100 --every 20 "
                             "--lr 1.0")
            r["result"] = _last_json(r["stdout_tail"])
            res["torch_func"] = r
            print(f"  start torch.func peer: {r['seconds']:.1f} s (exit {r['returncode']})", flush=True)
            res["warm"].append(jax_run("warm_after_peer"))
        else:
            res["torch_func"] = dict(skipped="--torch no" if args.torch == "no" else
                                     "torch is not installed (pip install -e '.[bench]')")
    warm = min(r["seconds"] for r in res["warm"]) if res["warm"] else None
    res["warm_best_s"] = warm
    peer = res["torch_func"]
    if "seconds" in peer and peer["returncode"] == 0:
        res["ratio_cold"] = peer["seconds"] / res["cold"]["seconds"]
        res["ratio_warm"] = peer["seconds"] / warm if warm else None
        # the same in CPU seconds (informational)
        res["ratio_cold_cpu"] = peer["cpu_s"] / res["cold"]["cpu_s"] if res["cold"]["cpu_s"] else None
        warm_cpu = min(r["cpu_s"] for r in res["warm"])
        res["ratio_warm_cpu"] = peer["cpu_s"] / warm_cpu if warm_cpu else None
        k_t = ((peer.get("result") or {}).get("max_kappa_emp") or {}).get("16")
        k_j = res.get("jax_max_kappa_emp")
        res["kappa_agreement"] = abs(k_t - k_j) / abs(k_j) if k_t is not None and k_j else None
    res["targets"] = dict(START_TARGETS)
    return res


def _python_default_env() -> dict:
    """``os.environ`` without ``PYTHONDONTWRITEBYTECODE``: the processes write and reuse
    ``__pycache__`` as a default Python does."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def arpack_section(args) -> dict:
    """Per H (``--arpack-heads``, seed 0): the certified check best of ``--repeat`` after a
    warm-up, then the ARPACK peer on the same θ (an ``.npz``), its ``eigsh`` time, the
    ratio and the agreement."""
    rows = []
    import numpy as np

    for H in heads_list(args.arpack_heads):
        params, X, y = problem(H, args.tokens, args.dim, args.n, seed=0)
        t = time_lambda_min(params, X, y, repeat=args.repeat)
        rec = t.pop("record")
        row = dict(heads=H, P=rec.P, check_best_s=t["best_s"], check_median_s=t["median_s"],
                   check_cpu_best_s=t["cpu_best_s"], lambda_min=t["value"],
                   enclosure=[rec.lambda_min_lo, rec.lambda_min_hi], counts=rec.eig_counts)
        with tempfile.TemporaryDirectory() as tmp:
            npz = os.path.join(tmp, f"arpack_H{H}.npz")
            np.savez(npz, X=np.asarray(X), y=np.asarray(y), U=np.asarray(params.U), W=np.asarray(params.W))
            cmd = python_cmd(_peer("arpack"), npz, "--tol", repr(args.arpack_tol), "--which", "SA")
            r = time_process(cmd, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        row["peer_process_s"], row["peer_returncode"] = r["seconds"], r["returncode"]
        peer = _last_json(r["stdout_tail"]) if r["returncode"] == 0 else None
        row["peer"] = peer if peer else dict(error=r["stderr_tail"][-1000:])
        if peer and "SA" in peer:
            lam = peer["SA"]["eigenvalue"]
            lo, hi = row["enclosure"]
            mid = 0.5 * (lo + hi)
            row.update(peer_seconds=peer["SA"]["seconds"], peer_hvps=peer["SA"]["hvps"],
                       ratio=peer["SA"]["seconds"] / t["best_s"], agreement=abs(lam - mid) / abs(mid),
                       peer_inside_enclosure=bool(lo <= lam <= hi))
        rows.append(row)
        print(f"  arpack H={H} P={row['P']}: check {row['check_best_s']:.3f} s, peer eigsh "
              f"{row.get('peer_seconds', float('nan')):.2f} s, ratio {row.get('ratio', float('nan')):.1f}x",
              flush=True)
    return dict(rows=rows, tol=args.arpack_tol, target=ARPACK_TARGET)


def _on_devices(args, check: str, extra: list, read) -> dict:
    """``python -m verify CHECK EXTRA`` as whole processes on 1 and ``--devices`` CPU devices
    (the XLA cache off, so neither run reuses the other's programs): per count ``devices_N``, the
    process's time and command, and ``read(summary)``'s fields (``error`` when the file is not read)."""
    import json

    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for nd in (1, args.devices):
            env = dict(os.environ, PYTHONUNBUFFERED="1", MHAJAX_CACHE_DIR="off",
                       XLA_FLAGS=f"--xla_force_host_platform_device_count={nd}")
            cmd = python_cmd("-m", "verify", check, *extra, "--out", f"{tmp}/d{nd}")
            r = dict(time_process(cmd, env=env), command=f"XLA_FLAGS=--xla_force_host_platform_device_count={nd} "
                     + " ".join(["python", *cmd[1:]]))
            try:
                with open(f"{tmp}/d{nd}/summary.json") as fh:
                    s = json.load(fh)
                r.update(read(s), devices=len(s["meta"]["devices"]))
            except (OSError, KeyError, ValueError) as e:
                r["error"] = repr(e)
            res[f"devices_{nd}"] = r
    return res


def devices_section(args) -> dict:
    """Whole-process wall time of one convergence sweep on 1 and on ``--devices`` devices
    (compile included; :func:`_on_devices`), the sweep's own timing (``timings_s``: GD, witness,
    test losses), and the largest relative difference between the two summaries' losses."""
    res = _on_devices(args, "convergence", args.devices_args.split(), lambda s: dict(
        sweep_s=sum(s["timings_s"].values()),
        final_loss=[x for v in s["by_heads"].values() for x in v["final_loss"]]))
    for nd in (1, args.devices):
        r = res[f"devices_{nd}"]
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


def census_section(args) -> dict:
    """Per H (``--census-heads``): the certified histogram over ``--thresholds`` edges (with
    and without refinement) against one certified λmin and against SLQ at its default budget,
    best of ``--repeat`` interleaved rounds after a compiling call; SLQ's N₋ error."""
    import jax

    rows = []
    for H in heads_list(args.census_heads):
        params, X, y = problem(H, args.tokens, args.dim, args.n, seed=0)
        edges = np.linspace(-0.0135, 0.0135, args.thresholds)
        calls = {"lambda_min": lambda: lambda_min(params, X, y),
                 "histogram": lambda: census.spectral_histogram(params, X, y, edges),
                 "histogram_no_refinement": lambda: census.spectral_histogram(params, X, y, edges, max_counts=0)}
        slq_note = None
        if importlib.util.find_spec("matfree") is not None:
            calls["slq"] = lambda: jax.block_until_ready(slq_histogram(params, X, y, edges))
        else:
            slq_note = "skipped: SLQ needs matfree (pip install 'mhajax[census]')"
        out, first, best = time_rounds(calls, args.repeat)
        h, P = out["histogram"], H * (args.tokens * args.dim + args.dim ** 2)
        row = dict(heads=H, P=P, thresholds=args.thresholds, best_s=best, first_call_s=first,
                   ratio_to_lambda_min={k: best[k] / best["lambda_min"] for k in best},
                   num_counts=h.num_counts, refined=h.refined, bins_exact=int(h.exact.sum()), bins=int(h.exact.size),
                   neg_lo=h.neg_lo, neg_hi=h.neg_hi, trace_lo=h.trace_lo, trace_hi=h.trace_hi)
        if "slq" in out:
            s = out["slq"]
            err = float(s.negative) - h.neg_lo if h.neg_lo == h.neg_hi else None
            row["slq"] = dict(num_probes=NUM_PROBES, num_steps=NUM_STEPS, negative=float(s.negative),
                              negative_sem=float(s.negative_sem), negative_error=err,
                              negative_error_in_sem=abs(err) / float(s.negative_sem)
                              if err is not None and float(s.negative_sem) > 0 else None,
                              ratio_to_histogram=best["slq"] / best["histogram"])
        else:
            row["slq"] = dict(skipped=slq_note)
        rows.append(row)
        print(f"  census H={H} P={P}: histogram {best['histogram']:.3f} s, λmin {best['lambda_min']:.3f} s"
              + (f", SLQ {best['slq']:.3f} s" if "slq" in best else ""), flush=True)
        jax.clear_caches()
    return dict(rows=rows)


def width_section(args) -> dict:
    """Per H (``--width-heads``): one certified λmin, 200 certified counts and a 40-bin histogram
    on [λmin, −λmin], each compiled by a first call (its time kept as ``first_s``, cold) and
    then the best of ``--repeat``; ratios to λmin; growth per 4x H; peak RSS of this process."""
    import resource

    import jax

    rows = []
    for H in heads_list(args.width_heads):
        params, X, y = problem(H, args.tokens, args.dim, args.n, seed=0)
        lo, hi = lambda_min_enclosure(params, X, y)
        t200 = np.linspace(lo, -lo, 200)
        e41 = np.linspace(lo * (1 + 1e-6), -lo, 41)
        calls = {"lambda_min": lambda: lambda_min(params, X, y),
                 "counts_200": lambda: census.spectral_counts(params, X, y, t200),
                 "histogram_40": lambda: census.spectral_histogram(params, X, y, e41)}
        out, first, best = time_rounds(calls, args.repeat)
        c, h = out["counts_200"], out["histogram_40"]
        rows.append(dict(heads=H, P=H * (args.tokens * args.dim + args.dim ** 2), best_s=best, first_s=first,
                         ratio_to_lambda_min={k: best[k] / best["lambda_min"] for k in best},
                         lambda_min_enclosure=[lo, hi], counts_exact=int(np.sum(c.exact)), counts=int(c.exact.size),
                         histogram_counts=h.num_counts, neg=[h.neg_lo, h.neg_hi], trace=[h.trace_lo, h.trace_hi],
                         peak_rss_gib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20))
        print(f"  width H={H} P={rows[-1]['P']}: λmin {best['lambda_min']:.2f} s, 200 counts {best['counts_200']:.2f} s "
              f"({rows[-1]['counts_exact']}/200 exact), histogram {best['histogram_40']:.2f} s", flush=True)
        jax.clear_caches()
    for a, b in zip(rows, rows[1:]):
        if b["heads"] == 4 * a["heads"]:
            b["growth"] = {k: b["best_s"][k] / a["best_s"][k] for k in b["best_s"]}
    last = rows[-1]
    growth = [g for r in rows for g in (r.get("growth") or {}).values()]
    targets = dict(ratio=WIDTH_RATIO_TARGET, growth=WIDTH_GROWTH_TARGET,
                   ratio_met=last["ratio_to_lambda_min"]["histogram_40"] <= WIDTH_RATIO_TARGET,
                   growth_met=(max(growth) <= WIDTH_GROWTH_TARGET) if growth else None)
    return dict(rows=rows, targets=targets)


def _leaves(x, path=""):
    """``[(path, number)]`` of the numbers of a JSON value (bool and None kept as they are)."""
    if isinstance(x, dict):
        return [q for k in sorted(x) for q in _leaves(x[k], f"{path}.{k}")]
    if isinstance(x, list):
        return [q for i, v in enumerate(x) for q in _leaves(v, f"{path}[{i}]")]
    return [(path, x)]


def compare_split(one: list, many: list) -> dict:
    """1-device census records against N-device ones: at θ₀ (step 0, the same θ on both) the
    analysis split over devices must give every count, bracket and enclosure bit for bit
    (``identical_at_theta0``); after GD (the run axis split over devices, each run the same pure
    GD: equal to rounding) the integers must be equal (``counts_equal_after_gd``) and the floats'
    largest relative difference is reported (``max_rel_diff_after_gd``)."""
    at0 = [r for r in one if r.get("step") == 0], [r for r in many if r.get("step") == 0]
    later = [r for r in one if r.get("step") != 0], [r for r in many if r.get("step") != 0]
    out = dict(identical_at_theta0=bool(at0[0]) and at0[0] == at0[1])
    la, lb = _leaves(later[0]), _leaves(later[1])
    if [p for p, _ in la] != [p for p, _ in lb]:
        return dict(out, counts_equal_after_gd=False, max_rel_diff_after_gd=None)
    ints = [(x, y) for (_, x), (_, y) in zip(la, lb) if not isinstance(x, float) or not isinstance(y, float)]
    rel = [abs(x - y) / max(abs(x), abs(y)) for (_, x), (_, y) in zip(la, lb)
           if isinstance(x, float) and isinstance(y, float) and x != y]
    return dict(out, counts_equal_after_gd=all(x == y for x, y in ints), max_rel_diff_after_gd=max(rel, default=0.0))


def split_section(args) -> dict:
    """The census check at ``--split-heads`` as whole processes on 1 and ``--devices`` CPU devices
    (:func:`_on_devices`): wall times, the census part's time (``timings.census_s``), and
    whether the records (counts, brackets, enclosures, histograms) are equal, field for field."""
    extra = ["--heads", str(args.split_heads), "--seeds", "1", "--steps", "1", "--every", "1", "--probes", "0",
             "--quiet"]
    res = _on_devices(args, "census", extra, lambda s: dict(
        census_s=sum(t["census_s"] for t in s["timings"].values()), records=s["records"]))
    for nd in (1, args.devices):
        r = res[f"devices_{nd}"]
        print(f"  split devices={nd}: {r['seconds']:.1f} s process, census {r.get('census_s', float('nan')):.1f} s",
              flush=True)
    a, b = res["devices_1"], res[f"devices_{args.devices}"]
    if "records" in a and "records" in b:
        res.update(compare_split(a.pop("records"), b.pop("records")))
        res["speedup_process"] = a["seconds"] / b["seconds"]
        res["speedup_census"] = a["census_s"] / b["census_s"]
    res["host_cores"] = os.cpu_count()
    return res


def premises_section(args) -> dict:
    """Per H (``--census-heads``): the premise check of a user's model (the softmax head's closed
    forms under another name) and that model's certified λ_min, against the built-in head's
    certified λ_min at the same θ; best of ``--repeat`` interleaved rounds after a compiling call."""
    import jax

    user = SOFTMAX._replace(name="softmax-as-a-user-model")     # the same code, not the built-in object
    rows = []
    for H in heads_list(args.census_heads):
        params, X, y = problem(H, args.tokens, args.dim, args.n, seed=0)
        calls = {"lambda_min": lambda: lambda_min(params, X, y),
                 "premise_check": lambda: check_premises(params, X, y, model=user),
                 "lambda_min_user_model": lambda: lambda_min(params, X, y, model=user)}
        _, first, best = time_rounds(calls, args.repeat)
        P = H * (args.tokens * args.dim + args.dim ** 2)
        ratio = {k: best[k] / best["lambda_min"] for k in best}
        rows.append(dict(heads=H, P=P, best_s=best, first_call_s=first, ratio_to_lambda_min=ratio,
                         target=PREMISE_TARGET, met=bool(ratio["premise_check"] <= PREMISE_TARGET)))
        print(f"  premises H={H} P={P}: λmin {best['lambda_min']:.3f} s, check {best['premise_check']:.3f} s "
              f"({ratio['premise_check']:.3f}x), a user's λmin {best['lambda_min_user_model']:.3f} s "
              f"({ratio['lambda_min_user_model']:.3f}x)", flush=True)
        jax.clear_caches()
    return dict(rows=rows)


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


def _x(v):
    return "-" if v is None else f"{v:.3g}x"


def _verdict(met):
    return {True: "met", False: "NOT met", None: "not measured (needs H = 64 and 256)"}[met]


def report_targets(res) -> list:
    """The tables of the growth, start and arpack sections, as lines of text."""
    out = []
    if "growth" in res:
        g = res["growth"]
        rows = [[r["heads"], r["P"], " / ".join(f"{p['best_s']:.3f}" for p in r["points"]), fmt(r["median_s"]),
                 fmt(r["worst_s"]), _x(r.get("growth_median_s")), _x(r.get("growth_worst_s")),
                 fmt(r["cpu_median_s"]), fmt(r["cpu_worst_s"]), "/".join(str(c) for c in r["counts"]),
                 fmt(r["max_rel_width"]),
                 {True: "yes", False: "NO"}.get(all(p.get("contains_dense", True) for p in r["points"])
                                               if any("contains_dense" in p for p in r["points"]) else None, "-")]
                for r in g["rows"]]
        t = g["targets"]
        out += ["Certified check mhajax.lambda_min(method='auto') (λ_min enclosed from both sides by inertia "
                "counts), seconds, best of --repeat per θ:",
                table(["H", "P", "per θ", "median", "worst", "growth med", "growth worst", "CPU med", "CPU worst",
                       "counts", "rel width", "holds dense"], rows),
                f"targets: growth <= {t['growth_per_4x']:g}x per 4x H from 64 to 256 (median and worst θ): "
                f"{_verdict(t['growth_met'])}; check <= {t['check_s']:g} s at H = 256: {_verdict(t['check_met'])} "
                f"(worst θ at H = {t['largest_H']}: {t['largest_worst_s']:.3f} s); wall time judged"
                + "".join(f"; in CPU seconds the growth is {_x(m)} median, {_x(w)} worst"
                          for m, w in t.get("growth_cpu", [])), ""]
    if "start" in res:
        s = res["start"]
        rows = [["cold (fresh cache)", fmt(s["cold"]["seconds"]), fmt(s["cold"]["cpu_s"]), s["cold"]["returncode"]]]
        rows += [[f"warm {i + 1}", fmt(r["seconds"]), fmt(r["cpu_s"]), r["returncode"]]
                 for i, r in enumerate(s["warm"])]
        p = s["torch_func"]
        if "seconds" in p:
            rows.append(["torch.func peer", fmt(p["seconds"]), fmt(p["cpu_s"]), p["returncode"]])
        out += ["Whole process: python -m verify " + " ".join(START) + " (seconds):",
                table(["run", "wall s", "CPU s", "exit"], rows)]
        if "ratio_cold" in s:
            out.append(f"torch.func peer / mhajax: cold {_x(s['ratio_cold'])} (target >= "
                       f"{s['targets']['cold']:g}x), warm {_x(s['ratio_warm'])} (best warm run; target >= "
                       f"{s['targets']['warm']:g}x); in CPU seconds cold {_x(s.get('ratio_cold_cpu'))}, warm "
                       f"{_x(s.get('ratio_warm_cpu'))}; largest κ_emp agrees to {fmt(s.get('kappa_agreement'))} "
                       "relative")
        elif "skipped" in p:
            out.append(f"torch.func peer skipped: {p['skipped']}")
        out.append("")
    if "arpack" in res:
        a = res["arpack"]
        rows = [[r["heads"], r["P"], fmt(r["check_best_s"]), fmt(r.get("peer_seconds")), r.get("peer_hvps", "-"),
                 _x(r.get("ratio")), fmt(r.get("agreement")), {True: "yes", False: "NO"}.get(
                     r.get("peer_inside_enclosure"), "-")]
                for r in a["rows"]]
        out += [f"Certified check vs torch double-backward HVP + scipy eigsh(which='SA', tol={a['tol']:g}) "
                "(seconds; the peer's eigsh alone):",
                table(["H", "P", "check", "ARPACK", "HVPs", "ratio", "rel. diff", "peer in enclosure"], rows),
                f"target: ratio >= {a['target']:g}x and agreement <= 1e-8", ""]
    return out


def report(res) -> str:
    """The benchmark tables of one run, as text."""
    out = report_targets(res)
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
    if "census" in res:
        rows = []
        for r in res["census"]["rows"]:
            b, q, s = r["best_s"], r["ratio_to_lambda_min"], r["slq"]
            rows.append([r["heads"], r["P"], r["thresholds"], fmt(b["lambda_min"]), fmt(b["histogram"]),
                         fmt(q["histogram"]), fmt(b["histogram_no_refinement"]), fmt(q["histogram_no_refinement"]),
                         fmt(b.get("slq")), fmt(q.get("slq")), f"[{r['neg_lo']}, {r['neg_hi']}]",
                         fmt(s.get("negative")), fmt(s.get("negative_error")), fmt(s.get("negative_error_in_sem"))])
        probes = next((r["slq"] for r in res["census"]["rows"] if "num_probes" in r["slq"]), None)
        out += ["", "Census (best seconds; ratios to one certified λmin at the same θ):",
                table(["H", "P", "edges", "λmin", "histogram", "ratio", "no refine", "ratio", "SLQ", "ratio",
                       "N₋ (certified)", "SLQ N₋", "SLQ ΔN₋", "|ΔN₋|/se"], rows),
                (f"SLQ: {probes['num_probes']} probes × {probes['num_steps']} Lanczos steps (matfree)." if probes
                 else "SLQ skipped: matfree is not installed.")]
    if "width" in res:
        w = res["width"]
        rows = [[r["heads"], r["P"], fmt(r["best_s"]["lambda_min"]), fmt(r["best_s"]["counts_200"]),
                 fmt(r["ratio_to_lambda_min"]["counts_200"]), fmt(r["best_s"]["histogram_40"]),
                 fmt(r["ratio_to_lambda_min"]["histogram_40"]),
                 " / ".join(_x(r.get("growth", {}).get(k)) for k in ("lambda_min", "counts_200", "histogram_40")),
                 " / ".join(fmt(r["first_s"][k]).strip() for k in ("lambda_min", "counts_200", "histogram_40")),
                 f"{r['counts_exact']}/{r['counts']}", fmt(r["peak_rss_gib"])] for r in w["rows"]]
        t = w["targets"]
        out += ["", "Cost at width (best seconds after a compiling call; ratios to one certified λmin):",
                table(["H", "P", "λmin", "200 counts", "ratio", "40-bin histogram", "ratio",
                       "growth per 4x H (λmin / counts / hist)", "first call s", "exact", "peak RSS GiB"], rows),
                f"targets: histogram <= {t['ratio']:g}x λmin at the largest H: {_verdict(t['ratio_met'])}; growth <= "
                f"{t['growth']:g}x per 4x H: {_verdict(t['growth_met'])}"]
    if "split" in res:
        d = res["split"]
        rows = [[k, fmt(v["seconds"]), fmt(v.get("census_s")), v.get("devices", "?")]
                for k, v in d.items() if isinstance(v, dict)]
        out += ["", f"Split over devices (the census check, {d['host_cores']} host cores):",
                table(["run", "process s", "census s", "devices"], rows),
                f"records at θ₀ bit for bit: {d.get('identical_at_theta0')}; after GD: counts equal "
                f"{d.get('counts_equal_after_gd')}, largest relative difference {fmt(d.get('max_rel_diff_after_gd'))}",
                f"speed-up (1 device / N devices): process "
                f"{fmt(d.get('speedup_process'))}, census {fmt(d.get('speedup_census'))}"]
    if "devices" in res:
        d = res["devices"]
        rows = [[k, fmt(v["seconds"]), fmt(v.get("sweep_s")), v.get("devices", "?")]
                for k, v in d.items() if isinstance(v, dict)]
        out += ["", f"Devices (one convergence sweep, {d['host_cores']} host cores):",
                table(["run", "process s", "sweep s", "devices"], rows),
                f"speed-up (1 device / N devices): process {fmt(d.get('speedup_process'))}, sweep "
                f"{fmt(d.get('speedup_sweep'))}; largest relative difference of final losses "
                f"{fmt(d.get('max_rel_diff'))}"]
    if "premises" in res:
        rows = [[r["heads"], r["P"], fmt(r["best_s"]["lambda_min"]), fmt(r["best_s"]["premise_check"]),
                 fmt(r["ratio_to_lambda_min"]["premise_check"]), fmt(r["best_s"]["lambda_min_user_model"]),
                 fmt(r["ratio_to_lambda_min"]["lambda_min_user_model"]), "yes" if r["met"] else "no"]
                for r in res["premises"]["rows"]]
        out += ["", "Premises (best seconds; ratios to one certified λmin of the built-in head at the same θ):",
                table(["H", "P", "λmin", "check", "ratio", "a user's λmin", "ratio", f"<= {PREMISE_TARGET:g}"], rows)]
    return "\n".join(out)


def _guard(args, what: str, H: int, method: str):
    """The memory guard (:func:`mhajax.runtime.memory.analysis`) of the Hessian at one θ of H
    heads; ``--heads``, ``--n``, ``--tokens`` and ``--dim`` blamed against 1."""
    def estimate(s):
        p = head_size("softmax", s["--tokens"], s["--dim"])
        return mem.Estimate(what, tuple(mem.analysis(s["--n"], s["--tokens"], s["--heads"], p, method)),
                            np.dtype(args.dtype).itemsize)
    sizes = {"--heads": H, "--n": args.n, "--tokens": args.tokens, "--dim": args.dim}
    mem.guard(estimate, sizes, dict.fromkeys(sizes, 1), force=args.force)


def main(argv=None) -> int:
    """Run the chosen sections; write ``OUT/bench.json`` with provenance."""
    args = build_parser().parse_args(argv)
    if args.points < 1 or args.repeat < 1:
        raise InputError(f"--points and --repeat must be >= 1, got {args.points}, {args.repeat}")
    if args.devices < 2:
        raise InputError(f"--devices must be >= 2, got {args.devices}")
    bad = [s for s in args.sections.split(",") if s.strip() and s.strip() not in SECTIONS]
    if bad:
        raise InputError(f"--sections: unknown section(s) {', '.join(map(repr, bad))}; choose from "
                         f"{', '.join(SECTIONS)}")
    if args.warm_runs < 1:
        raise InputError(f"--warm-runs must be >= 1, got {args.warm_runs}")
    setup_jax(args.dtype)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    if "points" in sections:   # before anything is written: a point that cannot fit is refused (exit 2)
        for H in heads_list(args.heads):
            P = H * (args.tokens * args.dim + args.dim ** 2)
            for method in ("lanczos",) + (("dense",) if P <= args.dense_max else ()):
                _guard(args, "mhajax bench points", H, method)
    if args.thresholds < 2:
        raise InputError(f"--thresholds must be >= 2, got {args.thresholds}")
    for sec, hs in (("growth", args.heads), ("arpack", args.arpack_heads), ("census", args.census_heads),
                    ("width", args.width_heads), ("split", str(args.split_heads))):
        if sec in sections:   # the certified check's memory, before anything is written
            for H in heads_list(hs):
                _guard(args, "mhajax bench " + sec, H, "inertia")
    out = prepare_out_dir(args.out)
    res = {}
    if "growth" in sections:
        print("certified check, growth in H ...", flush=True)
        res["growth"] = growth_section(args)
    if "start" in sections:
        print("start-up: whole processes, cold and warm, and the torch.func peer ...", flush=True)
        res["start"] = start_section(args)
    if "arpack" in sections:
        print("certified check vs the ARPACK peer ...", flush=True)
        res["arpack"] = arpack_section(args)
    if "w1" in sections:
        print("W1 whole-process runs ...", flush=True)
        res["w1"] = w1_section(args.torch)
    if "points" in sections:
        print("per-point costs ...", flush=True)
        res["points"] = points_section(args)
    if "census" in sections:
        print("census: histogram vs one certified λmin vs SLQ ...", flush=True)
        res["census"] = census_section(args)
    if "width" in sections:
        print("width: λmin, 200 counts and a histogram at P up to 458,752 ...", flush=True)
        res["width"] = width_section(args)
    if "split" in sections:
        print(f"split: the census check on 1 vs {args.devices} devices ...", flush=True)
        res["split"] = split_section(args)
    if "devices" in sections:
        print(f"devices: 1 vs {args.devices} ...", flush=True)
        res["devices"] = devices_section(args)
    if "premises" in sections:
        print("premises ...", flush=True)
        res["premises"] = premises_section(args)
    res["meta"] = run_metadata(vars(args), [0])
    path = write_json_atomic(out / "bench.json", res)
    print(report(res))
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
