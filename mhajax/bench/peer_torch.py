"""The torch.func peer of workload W1, written the way a PyTorch user would.

For each H and each seed, one trajectory at a time: GD on the logistic loss,
and at every checkpoint ``torch.func.hessian`` of the loss in the flat
parameters, ``torch.linalg.eigvalsh``, and κ_emp = −√H λ_min/L̂ — λ_min at each
checkpoint and nothing else, which is what ``--links core`` is compared with.
The data are the same tokenized-mixture sets mhajax draws (converted to torch).
Run by ``python -m verify.bench`` when torch is installed (extra ``bench``).
"""
from __future__ import annotations

import argparse
import math
import sys
import time

import jax

from mhajax.experiments.base import batched_data
from mhajax.experiments.configs import DataConfig


def main(argv=None) -> int:
    """Run the torch.func peer of W1 and print its κ_emp maxima and wall time."""
    p = argparse.ArgumentParser(prog="python -m verify.bench_torch")
    a = p.add_argument
    a("--heads", default="1,4,16")
    a("--seeds", type=int, default=2)
    a("--n", type=int, default=64)
    a("--tokens", type=int, default=6)
    a("--dim", type=int, default=8)
    a("--steps", type=int, default=200)
    a("--every", type=int, default=20)
    a("--lr", type=float, default=1.0)
    args = p.parse_args(argv)

    import numpy as np
    import torch
    from torch.func import hessian

    jax.config.update("jax_enable_x64", True)

    torch.set_default_dtype(torch.float64)
    T, d = args.tokens, args.dim
    cfg = DataConfig(n=args.n, tokens=T, dim=d)
    seeds = list(range(args.seeds))
    Xs, ys = (np.asarray(a) for a in batched_data(cfg, seeds))
    t0 = time.perf_counter()
    worst = {}
    for H in [int(h) for h in args.heads.split(",")]:
        p_head = T * d + d * d
        for s in seeds:
            X = torch.tensor(Xs[s])
            y = torch.tensor(ys[s])
            g = torch.Generator().manual_seed(s)
            theta = torch.cat([torch.cat([torch.randn(T * d, generator=g), torch.zeros(d * d)])
                               for _ in range(H)])

            def loss(theta):
                th = theta.view(H, p_head)
                U = th[:, : T * d].reshape(H, T, d)
                W = th[:, T * d:].reshape(H, d, d)
                S = torch.einsum("nta,hab,njb->nhtj", X, W, X)
                A = torch.softmax(S, dim=-1)
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
    print("torch.func W1:", {h: round(v, 4) for h, v in worst.items()},
          f"{time.perf_counter() - t0:.1f} s (after imports)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
