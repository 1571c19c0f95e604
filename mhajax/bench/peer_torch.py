"""The torch.func peer of a weak-convexity run, written the way a PyTorch user would.

For each H and each seed, one trajectory at a time: GD on the logistic loss, and at every
checkpoint ``torch.func.hessian`` of the loss in the flat parameters,
``torch.linalg.eigvalsh``, and κ_emp = −√H λ_min/L̂ — λ_min at each checkpoint and nothing
else, which is what ``verify weak-convexity --links core`` is compared with.

It imports neither jax nor mhajax, so its whole-process time is its own: the
data sets and the initial points come from an ``.npz`` that ``python -m verify.bench``
writes with mhajax's own draws (``X [S, n, T, d]``, ``y [S, n]``, and per H ``U0_H<H>
[S, H, T, d]``, ``W0_H<H> [S, H, d, d]``), so both sides do the same work from the same
numbers, and the benchmark runs this file by path::

    python mhajax/bench/peer_torch.py --data w1.npz --heads 16 --steps 100 --every 20

Prints one JSON line: the largest κ_emp per H (to compare with mhajax's) and the wall time
after imports.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time


def main(argv=None) -> int:
    """Run the torch.func peer on the ``--data`` problem; print its JSON line."""
    p = argparse.ArgumentParser(prog="peer_torch.py")
    a = p.add_argument
    a("--data", required=True, help=".npz with X [S,n,T,d], y [S,n], U0_H<H>, W0_H<H> (from verify.bench)")
    a("--heads", default="16")
    a("--steps", type=int, default=100)
    a("--every", type=int, default=20)
    a("--lr", type=float, default=1.0)
    args = p.parse_args(argv)

    import numpy as np
    import torch
    from torch.func import hessian

    torch.set_default_dtype(torch.float64)
    z = np.load(args.data)
    Xs, ys = z["X"], z["y"]
    S, n, T, d = Xs.shape
    t0 = time.perf_counter()
    worst = {}
    for H in [int(h) for h in args.heads.split(",")]:
        p_head = T * d + d * d
        U0, W0 = z[f"U0_H{H}"], z[f"W0_H{H}"]
        for s in range(S):
            X = torch.tensor(Xs[s])
            y = torch.tensor(ys[s])
            theta = torch.tensor(np.concatenate([np.concatenate([U0[s, h].ravel(), W0[s, h].ravel()])
                                                 for h in range(H)]))

            def loss(theta):
                th = theta.view(H, p_head)
                U = th[:, : T * d].reshape(H, T, d)
                W = th[:, T * d:].reshape(H, d, d)
                Sc = torch.einsum("nta,hab,njb->nhtj", X, W, X)
                A = torch.softmax(Sc, dim=-1)
                f = torch.einsum("htd,nhtj,njd->nh", U, A, X)
                phi = f.sum(-1) / math.sqrt(H)
                return torch.nn.functional.softplus(-y * phi).mean()

            for k in range(args.steps + 1):
                if k % args.every == 0 or k == args.steps:
                    Hm = hessian(loss)(theta)
                    lam = torch.linalg.eigvalsh(Hm)[0].item()
                    L = loss(theta).item()
                    if L > 0:
                        worst[H] = max(worst.get(H, -math.inf), -math.sqrt(H) * lam / L)
                if k == args.steps:
                    break
                theta = theta.detach().requires_grad_(True)
                gr, = torch.autograd.grad(loss(theta), theta)
                theta = (theta - args.lr * gr).detach()
    print(json.dumps(dict(max_kappa_emp={str(h): v for h, v in worst.items()},
                          seconds_after_imports=time.perf_counter() - t0, torch=torch.__version__,
                          threads=torch.get_num_threads())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
