"""Standalone reproduction of a deadlock of two batched LAPACK eigensolvers on XLA's CPU pool
(docs/reliability.md). Imports only JAX, NumPy and the standard library.

    python _lapack_hang.py [CALLS] [BATCH] [N]

Runs CALLS times (default 20) one jitted float64 program: two independent batched
``jnp.linalg.eigh`` of [BATCH, N, N] matrices (default 128, 96) and a ``jnp.sort``. Prints
'OK k calls' and exits 0 when every call finished. A watchdog prints 'HANG after k calls' and
exits 3 when no call has finished for 15 s while the process used under 10 % of a CPU (stuck
in futex waits, not merely slow). Thread settings come from the environment (PJRT_NPROC,
OPENBLAS_NUM_THREADS, XLA_FLAGS)."""
import os
import sys
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np

STALL_S = 15.0
IDLE_CPU = 0.10


def program(*mats):
    vectors = [jnp.linalg.eigh(m)[1] for m in mats]
    return vectors, jnp.sort(sum(m[:, 0, :] for m in mats), axis=-1)


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
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 96
    k = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((k, batch, n, n))
    mats = [jnp.asarray(m + np.swapaxes(m, -1, -2)) for m in x]
    f = jax.jit(program)
    f.lower(*mats).compile()   # compile before the watchdog starts counting
    done = [0]
    threading.Thread(target=watchdog, args=(done,), daemon=True).start()
    t0 = time.monotonic()
    for _ in range(calls):
        jax.block_until_ready(f(*mats))
        done[0] += 1
    print(f"OK {done[0]} calls in {time.monotonic() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
