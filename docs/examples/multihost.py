"""Two processes, one sweep: :func:`mhajax.runtime.sharding.over_runs` across a multi-process mesh.

Every process runs this same script. Each builds the same batch of runs from the seeds
(data and initialization are functions of the seed), ``over_runs`` gives each process's
device its block of the run axis, and every process gets the full result back.

    # one process (the reference):
    python docs/examples/multihost.py --out one.json
    # two processes on this machine (CPU, gloo collectives), e.g. in two shells:
    python docs/examples/multihost.py --num-processes 2 --process-id 0 --port 12355 --out p0.json
    python docs/examples/multihost.py --num-processes 2 --process-id 1 --port 12355 --out p1.json
    # or both at once, compared with the one-process run:
    python docs/examples/multihost.py --launch

On several machines: the same command on each, with ``--coordinator HOST:PORT`` of
process 0 (it must be reachable from every process).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-processes", type=int, default=1)
    p.add_argument("--process-id", type=int, default=0)
    p.add_argument("--port", type=int, default=0, help="coordinator port on localhost")
    p.add_argument("--coordinator", default=None, help="HOST:PORT of process 0 (default localhost:PORT)")
    p.add_argument("--seeds", type=int, default=5, help="runs in the batch (not a multiple of 2 on purpose)")
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--lr", type=float, default=1.0)
    p.add_argument("--out", default=None, help="write this process's result here (JSON)")
    p.add_argument("--launch", action="store_true",
                   help="run the 1-process reference and 2 processes, and compare them")
    return p.parse_args(argv)


def compute(args) -> dict:
    """The sweep: ``steps`` GD steps of L̂ from each seed's initialization, on each seed's
    data; returns the final losses and parameters of every run (all processes alike)."""
    import jax
    jax.config.update("jax_enable_x64", True)
    if args.num_processes > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address=args.coordinator or f"localhost:{args.port}",
                                   num_processes=args.num_processes, process_id=args.process_id)
    import jax.numpy as jnp

    from mhajax.experiments.configs import DataConfig
    from mhajax.experiments.base import batched_data, batched_init
    from mhajax.data.seeds import seed_list
    from mhajax.losses import empirical_risk
    from mhajax.runtime.sharding import over_runs

    cfg = DataConfig(n=16, tokens=3, dim=4, num_clusters=2)
    seeds = seed_list(args.seeds)
    X, y = batched_data(cfg, seeds)
    th0 = batched_init(cfg, seeds, args.heads)
    lr, steps = args.lr, args.steps

    def train_one(th, Xs, ys):
        def step(t, _):
            g = jax.grad(empirical_risk)(t, Xs, ys)
            return jax.tree_util.tree_map(lambda a, b: a - lr * b, t, g), None
        th, _ = jax.lax.scan(step, th, None, length=steps)
        return th, empirical_risk(th, Xs, ys)

    th, loss = over_runs(jax.vmap(train_one), (th0, X, y))
    return dict(process_id=jax.process_index(), process_count=jax.process_count(),
                devices=[str(d) for d in jax.devices()], seeds=seeds,
                loss=[float(v) for v in loss],
                U=jnp.asarray(th.U).tolist(), W=jnp.asarray(th.W).tolist())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def launch(out_dir: Path, seeds: int = 5, steps: int = 20, timeout: float = 240.0,
           reference: bool = True) -> dict:
    """Run two processes (and, with ``reference``, the 1-process run as a third); return
    their results by name (``one``, ``p0``, ``p1``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu", MHAJAX_CACHE_DIR="off")
    env.pop("XLA_FLAGS", None)  # one CPU device per process
    me = [sys.executable, str(Path(__file__).resolve()), "--seeds", str(seeds), "--steps", str(steps)]
    names = ("p0", "p1")
    if reference:
        names = ("one",) + names
        one = subprocess.run(me + ["--out", str(out_dir / "one.json")], env=env, capture_output=True,
                             text=True, timeout=timeout)
        if one.returncode:
            raise RuntimeError(f"1-process run failed:\n{one.stderr}")
    port = free_port()
    procs = [subprocess.Popen(me + ["--num-processes", "2", "--process-id", str(i), "--port", str(port),
                                    "--out", str(out_dir / f"p{i}.json")],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    errs = []
    for p in procs:
        try:
            _, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise RuntimeError("the two processes did not finish in time (coordinator unreachable?)")
        errs.append(err)
    if any(p.returncode for p in procs):
        raise RuntimeError("2-process run failed:\n" + "\n---\n".join(errs))
    return {k: json.loads((out_dir / f"{k}.json").read_text()) for k in names}


def main(argv=None) -> int:
    args = parse(argv)
    if args.launch:
        import tempfile
        res = launch(Path(tempfile.mkdtemp(prefix="mhajax-multihost-")), args.seeds)
        one, p0, p1 = res["one"], res["p0"], res["p1"]
        diff = max(abs(a - b) for a, b in zip(one["loss"], p0["loss"]))
        same = p0["loss"] == p1["loss"] and p0["U"] == p1["U"] and p0["W"] == p1["W"]
        print(f"1 process: {one['devices']}\n2 processes: {p0['devices']}")
        print(f"final losses (1 process):  {one['loss']}")
        print(f"final losses (2 processes): {p0['loss']}")
        print(f"processes agree with each other exactly: {same}; "
              f"max |loss(2 proc) - loss(1 proc)| = {diff:.3g}")
        return 0 if same and diff <= 1e-12 * max(map(abs, one["loss"])) else 1
    res = compute(args)
    if args.out:
        Path(args.out).write_text(json.dumps(res))
    else:
        print(json.dumps(dict(res, U="...", W="...")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
