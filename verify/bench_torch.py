"""``python -m verify.bench_torch --data W1.npz``: :func:`mhajax.bench.peer_torch.main` (the torch.func
peer; ``python -m verify.bench`` writes the ``.npz`` and runs the peer by path, without jax)."""
import sys

from mhajax.bench.peer_torch import main

if __name__ == "__main__":
    sys.exit(main())
