"""``python -m verify.bench_torch``: :func:`mhajax.bench.peer_torch.main` (the torch.func peer)."""
import sys

from mhajax.bench.peer_torch import main

if __name__ == "__main__":
    sys.exit(main())
