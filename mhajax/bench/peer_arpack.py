"""The matrix-free PyTorch peer at large P, written as a PyTorch user would.

λ_min (and optionally λ_max) of the Hessian of the empirical logistic risk of the
multi-head attention model, by a Hessian-vector product through double backward
(``torch.autograd.grad(..., create_graph=True)``) fed to SciPy's ARPACK
(``scipy.sparse.linalg.eigsh(which="SA")``) through a ``LinearOperator``.

It imports neither jax nor mhajax, so its time is its own: the model, the data and the
point θ come from an ``.npz`` that ``python -m verify.bench`` writes (``X [n, T, d]``,
``y [n]``, ``U [H, T, d]``, ``W [H, d, d]``), and the benchmark runs this file by path::

    Φ(θ; X) = (1/√H) Σ_h ⟨U_h, softmax(X W_h Xᵀ) X⟩,   L̂(θ) = mean_i softplus(−y_i Φ(θ; X_i)).

Usage: ``python mhajax/bench/peer_arpack.py problem.npz [--tol 1e-8] [--which SA,LA]``.
Prints one JSON line: per requested end the eigenvalue, ARPACK's wall time (the HVP graph
built once beforehand and timed apart, imports timed apart), the number of HVPs, the time
per HVP and the true residual ``||A v − λ v||``.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np


def main(argv=None) -> int:
    """Run the peer on one ``.npz`` problem and print its JSON line."""
    ap = argparse.ArgumentParser(prog="peer_arpack.py")
    ap.add_argument("npz")
    ap.add_argument("--tol", type=float, default=1e-8, help="ARPACK relative accuracy (eigsh tol)")
    ap.add_argument("--which", default="SA", help="comma-separated ARPACK ends: SA (λ_min), LA (λ_max)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args(argv)

    t_import = time.perf_counter()
    import torch
    from scipy.sparse.linalg import LinearOperator, eigsh
    t_import = time.perf_counter() - t_import
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.set_default_dtype(torch.float64)

    z = np.load(args.npz)
    X = torch.tensor(z["X"])
    y = torch.tensor(z["y"])
    U0, W0 = z["U"], z["W"]
    H, T, d = U0.shape
    p = T * d + d * d
    theta0 = np.concatenate([np.concatenate([U0[h].ravel(), W0[h].ravel()]) for h in range(H)])
    P = theta0.size

    def loss(theta):
        th = theta.view(H, p)
        U = th[:, : T * d].reshape(H, T, d)
        W = th[:, T * d:].reshape(H, d, d)
        S = torch.einsum("nta,hab,njb->nhtj", X, W, X)
        A = torch.softmax(S, dim=-1)
        f = torch.einsum("htd,nhtj,njd->nh", U, A, X)
        phi = f.sum(-1) / math.sqrt(H)
        return torch.nn.functional.softplus(-y * phi).mean()

    t = time.perf_counter()
    theta = torch.tensor(theta0, requires_grad=True)
    g, = torch.autograd.grad(loss(theta), theta, create_graph=True)
    t_graph = time.perf_counter() - t
    count = [0]

    def hvp(v):
        count[0] += 1
        out, = torch.autograd.grad(g, theta, grad_outputs=torch.from_numpy(np.ascontiguousarray(v).ravel()),
                                   retain_graph=True)
        return out.detach().numpy()

    op = LinearOperator((P, P), matvec=hvp, dtype=np.float64)
    res = dict(P=int(P), H=int(H), import_s=t_import, graph_s=t_graph, tol=args.tol,
               threads=torch.get_num_threads(), torch=torch.__version__)
    for which in [w.strip().upper() for w in args.which.split(",") if w.strip()]:
        count[0] = 0
        t = time.perf_counter()
        vals, vecs = eigsh(op, k=1, which=which, tol=args.tol)
        dt = time.perf_counter() - t
        hvps = count[0]
        v = vecs[:, 0]
        r = float(np.linalg.norm(hvp(v) - vals[0] * v))
        res[which] = dict(eigenvalue=float(vals[0]), seconds=dt, hvps=hvps, seconds_per_hvp=dt / max(1, hvps),
                          residual=r)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
