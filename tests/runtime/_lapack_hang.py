"""The program where users met a deadlock of batched LAPACK eigensolvers on XLA's CPU pool
(docs/reliability.md; it no longer makes batched LAPACK calls): the κ-chain analysis of
``python -m verify weak-convexity --model cls --heads 1,4 --seeds 1 --steps 20 --every 10`` at
H = 4 (three points under ``lax.map``, links ``all``, the certified route).

    python _lapack_hang.py [CALLS]

Compiles the program, then runs it CALLS times (default 2). Prints 'OK k calls' and exits 0
when every call finished. A watchdog prints 'HANG after k calls' and exits 3 when no call has
finished for 15 s while the process used under 10 % of a CPU (stuck in futex waits, not
merely slow). Thread settings come from the environment (PJRT_NPROC, OPENBLAS_NUM_THREADS).
A smaller program, two batched [128, 96, 96] ``eigh`` and a sort, was not seen to deadlock on
2 cores (11 runs without the cure: 7 finished, 4 were stopped while still computing), so the
reproduction is this program."""
import os
import sys
import threading
import time

import jax
import numpy as np

STALL_S = 15.0
IDLE_CPU = 0.10


def watchdog(done):
    """Exit 3 once no call has finished for STALL_S while CPU use stayed under IDLE_CPU."""
    last_count, last_wall, last_cpu = done[0], time.monotonic(), time.process_time()
    while True:
        time.sleep(1.0)
        now, cpu = time.monotonic(), time.process_time()
        if done[0] != last_count:
            last_count, last_wall, last_cpu = done[0], now, cpu
        elif now - last_wall >= STALL_S:
            if (cpu - last_cpu) / (now - last_wall) < IDLE_CPU:
                print(f"HANG after {done[0]} calls", flush=True)
                os._exit(3)
            last_wall, last_cpu = now, cpu   # slow but busy: look again over the next window


def main():
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    jax.config.update("jax_enable_x64", True)
    from mhajax.experiments.base import analyse_batch, batched_data, batched_init
    from mhajax.experiments.configs import DataConfig
    from mhajax.models import get_model
    cfg, H, B = DataConfig(model="cls"), 4, 3
    X, y = batched_data(cfg, [0])
    th = jax.tree_util.tree_map(lambda a: np.repeat(np.asarray(a), B, axis=0), batched_init(cfg, [0], H))
    keys, index = jax.random.split(jax.random.PRNGKey(0), B), np.zeros(B, dtype=np.int32)
    f = analyse_batch.lower(th, index, keys, X, y, method="auto", links="all", lanczos_steps=64,
                            max_cycles=20, model=get_model("cls"), loss=cfg.loss_fn()).compile()
    done = [0]
    threading.Thread(target=watchdog, args=(done,), daemon=True).start()
    t0 = time.monotonic()
    for _ in range(calls):
        jax.block_until_ready(f(th, index, keys, X, y))
        done[0] += 1
    print(f"OK {done[0]} calls in {time.monotonic() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
