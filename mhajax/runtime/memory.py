"""One model of peak memory for every command and public entry point.

Every estimate is computed from sizes alone (the config, or array shapes), before
anything is allocated, and compared with what the device in use has (:func:`available`)
by :func:`check_fits`, which raises :class:`MemoryGuardError` (an ``InputError``: the CLI
exits 2 with one line) naming the flag(s) to blame. ``--force`` (CLI) / ``force=True``
(API) / ``MHAJAX_FORCE=1`` (environment) skip the check; inside :func:`checked` (a
command whose own estimate already covered its nested calls) the API guards are skipped.

Symbols (all sizes are Python ints; ``b`` = bytes per float: 8 for float64, 4 for float32)::

    S  seeds (trajectories / data sets run side by side under vmap)
    n  training samples            T tokens           d token dimension
    H  heads                       p parameters per head (softmax: T·d + d²)
    P  = H·p parameters            C checkpoints kept (len(checkpoint_steps(steps, every)))
    m  Lanczos basis size (--lanczos-steps, at most P)
    G  H-grid size of heads
    M  held-out samples (--n-test)               K  --grid of quasi-convexity

The model is a list of **stages**; a stage is the set of arrays alive at once, each
a :class:`Term` ``(label, bytes, flags, formula, where)``. The peak is the largest stage
(``where``: ``"device"`` = XLA buffers, ``"host"`` = NumPy/LAPACK copies; on CPU both are
the same RAM and are added). The building blocks, with the measured constants (XLA's
own buffer assignment, ``compiled.memory_analysis()``, and peak RSS; predicted against
measured peaks in ``docs/reliability.md``):

=========================  ==========================================================  ==================
term                       bytes                                                       flags
=========================  ==========================================================  ==================
data X, y                  S·n·(T·d + 1)·b; while drawn 4·S·n·T·d·b                    seeds n tokens dim
parameters θ               S·P·b (init: 2·H·p·b while drawn)                           seeds heads tokens dim
GD activations             3·S·n·H·(T² + T·d)·b          (vmap over seeds, per step)   seeds n heads tokens dim
trajectory (checkpoints)   3·S·C·P·b   (device output, host copy, flat copy)           seeds steps every heads
loss history               2·S·(steps+1)·(b+1)                                         seeds steps
per-sample Jacobian J      n·P·b + build temporaries n·H·(p + 4T²)·b                   n heads tokens dim
head blocks B              H·p²·b (+H·p²·b lax.map stacking, +2·H·p²·b host eigvalsh)  heads tokens dim
B batch intermediates      bs·(4·n·T·d² + 2p²)·b  (closed form)                        n heads tokens dim
                           bs·3·p·n·(T² + T·d)·b  (jax.hessian: qk, value, cls, causal)
Gram matrix                3·n²·b                                                      n
Lanczos basis              (2·m + 3·(2k+1) + 6)·P·b,  k = max(1, min(8, (m−2)//4))      lanczos_steps heads
dense Hessian (auto)       3·P²·b device + 4·P²·b host (eigh on CPU)                   heads tokens dim method
dense Hessian (jax.hess.)  2·P²·b + 3·P·c·H·(T² + T·d)·b, c = max(1, P // (H·T²))      heads tokens dim method
per-sample Hessian norms   4·B'·H·q²·b, q = 2T² if 2T² < p else p, B' = min(n, max(1, 2e7 // (H·q²)))  links
forward evaluation         R·min(M, 2048)·H·(3T² + 2T·d)·b  (R runs vmapped)           n_test heads seeds
NTK features               R·n·P·b out + R·n·H·(p + 4T²)·b temporaries                 n heads seeds
margin solver (host)       n·P·(b + 1) per seed (signed copy y·G, finiteness mask)     n heads
test loss at checkpoints   B·M·H·(3T²+2T·d)·b, B = max(1, min(S·C, 2^24 // (M·H·T²)))   n_test heads
segment check (QC)         (K+1)·3·n·H·(3T² + 2T·d)·b                                  grid n heads
two-layer linearize        25·n·H·(T² + T·d)·b + Lanczos                               n heads tokens
=========================  ==========================================================  ==================

``bs`` is :func:`mhajax.curvature.operators.head_batch_size` (2^18 entries per batch on
CPU, 2^28 on accelerators). Each command's estimator lists its stages (its keyword
arguments are the command's flags, its defaults the config's defaults: a flag is blamed by
resetting it to its default); the public entry points have estimators of their own
(``api_*``). Nothing here needs JAX: the guard runs before the first array exists.

Stated factor: over the cases measured on CPU (``docs/reliability.md``), predicted /
measured peak lies in [0.75, 1.65]; the tests hold it to :data:`FACTOR` = [0.5, 3].
"""
from __future__ import annotations

import contextlib
import contextvars
import inspect
import os
import resource
from dataclasses import dataclass, field
from typing import Callable, Optional

from mhajax.errors import InputError

GiB = 2 ** 30
#: the stated factor: measured peak / predicted peak is expected within this range
FACTOR = (0.5, 3.0)

#: constants of the model (see the module docstring; measured, not derived)
DRAW_FACTOR = 4          # X and the generator temporaries (means, gathered cluster means, noise) while drawing
INIT_FACTOR = 2          # parameters and their random bits while drawing
GD_ACT = 3               # GD step activations per (sample, head): GD_ACT·(T² + T·d)
TRAJ_COPIES = 3          # checkpointed parameters: device output, host copy, flat analysis copy
JAC_TEMP_T2 = 4          # per-sample Jacobian build temporaries: n·H·(p + 4T²)
B_CLOSED = 4             # closed-form head Hessian: 4 arrays [n, T, d, d] per head in a batch
B_AUTODIFF = 3           # jax.hessian per head: 3·p·n·(T² + T·d)
HOST_EIGH = 4            # eigh on CPU (NumPy): input copy, eigenvectors, LAPACK workspace (syevd 2N²)
FWD_T2, FWD_TD = 3, 2     # forward-only activations per (sample, head): 3T² + 2T·d (unfused scores, softmax, A·X)
TWO_LAYER_LIN = 25       # jax.linearize residuals of the two-layer gradient per (sample, head): 25·(T² + T·d)
EVAL_CHUNK = 2048        # mhajax.experiments.base.sample_losses chunk
RISK_CHUNK_ELEMENTS = 2 ** 24   # mhajax.experiments.convergence._CHUNK_ELEMENTS
NORMS_ENTRIES = int(2e7)        # mhajax.curvature.operators.per_sample_head_hessian_norms batch budget
NORMS_COPIES = 4         # the batch of matrices: blocks + concatenation, assembled copy, host copy for eigvalsh
HEAD_BATCH_ENTRIES = 2 ** 28
HEAD_BATCH_ENTRIES_CPU = 2 ** 18
CLOSED_FORM_MODELS = ("softmax", "linear", "relu")   # weighted_hessian in closed form
REDUCED_MODELS = ("softmax", "linear", "relu")       # reduced_hessian (2T² x 2T²)


# ---------------------------------------------------------------------------
# Terms, stages, estimates
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Term:
    """One array (or group of arrays) alive at a stage: ``nbytes`` from ``formula``,
    driven by ``flags`` (CLI flag names without ``--``, e.g. ``("n", "heads")``)."""

    label: str
    nbytes: int
    flags: tuple
    formula: str
    where: str = "device"      # "device": XLA buffers; "host": NumPy / LAPACK on the host


@dataclass(frozen=True)
class Stage:
    """The arrays alive at once during one phase of a run."""

    name: str
    terms: tuple

    def nbytes(self, where: Optional[str] = None) -> int:
        """Σ of the terms' bytes (only those at ``where`` when given)."""
        return sum(t.nbytes for t in self.terms if where is None or t.where == where)


@dataclass(frozen=True)
class Estimate:
    """Peak memory of one command or call: the largest of its stages.

    ``fn``/``args`` rebuild it (used to blame flags: each flag is reset to ``fn``'s
    default and the peak recomputed). ``resident``: bytes the caller already holds (the
    arrays passed to an API function) — already counted as used by :func:`available`."""

    what: str
    stages: tuple
    args: dict = field(default_factory=dict)
    fn: Optional[Callable] = None
    resident: int = 0
    split: bool = False     # accelerator: device and host budgets are checked apart

    def _where(self, where):
        return where if self.split else None

    def stage_bytes(self, stage: Stage, where: Optional[str] = None) -> int:
        """Bytes of ``stage`` counted against the budget ``where`` (all of them unless split)."""
        return stage.nbytes(self._where(where))

    def peak_stage(self, where: Optional[str] = None) -> Stage:
        """The largest stage."""
        return max(self.stages, key=lambda s: self.stage_bytes(s, where))

    def peak(self, where: Optional[str] = None) -> int:
        """The estimate: bytes of the largest stage (max over stages of Σ terms)."""
        return self.stage_bytes(self.peak_stage(where), where) if self.stages else 0

    def dominant(self, where: Optional[str] = None) -> Term:
        """The largest term of the largest stage."""
        st = self.peak_stage(where)
        w = self._where(where)
        return max((t for t in st.terms if w is None or t.where == w), key=lambda t: t.nbytes)

    def recompute(self, **changes) -> "Estimate":
        """The same estimator with some sizes changed."""
        return self.fn(**dict(self.args, **changes))

    def table(self) -> str:
        """A readable breakdown of the peak stage (largest terms first)."""
        st = self.peak_stage()
        lines = [f"{self.what}: peak ~{fmt_bytes(self.peak())} at stage '{st.name}'"]
        for t in sorted(st.terms, key=lambda t: -t.nbytes):
            lines.append(f"  {fmt_bytes(t.nbytes):>10}  {t.label}  [{t.formula}]  "
                         f"({', '.join('--' + f.replace('_', '-') for f in t.flags)}; {t.where})")
        return "\n".join(lines)


def fmt_bytes(x: float) -> str:
    """``1.5 GiB``, ``436 GiB``, ``2.1e+04 EiB`` (binary units, 3 significant digits)."""
    units = (("EiB", 2 ** 60), ("PiB", 2 ** 50), ("TiB", 2 ** 40), ("GiB", 2 ** 30), ("MiB", 2 ** 20),
             ("KiB", 2 ** 10))
    for unit, k in units:
        if abs(x) >= k:
            v = x / k
            return f"{v:.0f} {unit}" if 100 <= v < 10000 else f"{v:.3g} {unit}"
    return f"{int(x)} B"


def dtype_bytes(dtype) -> int:
    """8 for float64, 4 for float32 (also accepts a NumPy/JAX dtype or its name)."""
    name = str(getattr(dtype, "name", dtype))
    if name in ("float64", "f8", "double"):
        return 8
    if name in ("float32", "f4", "single"):
        return 4
    if name in ("float16", "bfloat16"):
        return 2
    raise ValueError(f"unknown dtype {dtype!r}")


def per_head_params(model: str, T: int, d: int) -> int:
    """Parameters per head ``p`` of a head model (``two-layer`` is per head too: U, W1, W2)."""
    key = str(model).strip().lower().replace("_", "-")
    if key in ("softmax", "linear", "relu", "causal"):
        return T * d + d * d
    if key in ("qk", "two-layer", "twolayer"):
        return T * d + 2 * d * d
    if key == "value":
        return d + 2 * d * d
    if key == "cls":
        return d + d * d
    if key.endswith("-masked"):
        return per_head_params(key[: -len("-masked")], T, d) + 1
    return T * d + 2 * d * d          # a model registered by a user: the largest known layout


def checkpoints(steps: int, every: int) -> int:
    """``len(checkpoint_steps(steps, every))`` without building the list."""
    every = max(1, int(every))
    c = steps // every + 1
    return c + (1 if steps % every else 0)


def _max(v) -> int:
    return max(v) if isinstance(v, (tuple, list)) else int(v)


def _seq(v) -> tuple:
    if isinstance(v, str):
        return tuple(int(x) for x in v.split(",") if x.strip())
    return tuple(v) if isinstance(v, (tuple, list)) else (int(v),)


# ---------------------------------------------------------------------------
# Building blocks (each returns Terms; every argument is a size)
# ---------------------------------------------------------------------------

def data(S, n, T, d, b, *, label="training data X [S, n, T, d], y", flags=("seeds", "n", "tokens", "dim"),
         drawing=False) -> Term:
    """Data ``X [S, n, T, d]`` and ``y [S, n]``: S·n·(T·d + 1)·b; while drawn 4·S·n·T·d·b (the generator's temporaries)."""
    f = DRAW_FACTOR if drawing else 1
    return Term(label + (" (while drawn)" if drawing else ""), f * S * n * T * d * b + S * n * b, flags,
                f"{'4·' if drawing else ''}S·n·T·d·b")


def params(S, H, p, b, *, drawing=False, flags=("seeds", "heads", "tokens", "dim")) -> Term:
    """Parameters θ ``[S, H, p]``: S·H·p·b; while drawn 2·S·H·p·b (the random bits too)."""
    f = INIT_FACTOR if drawing else 1
    return Term("parameters θ [S, H, p]" + (" (while drawn)" if drawing else ""), f * S * H * p * b, flags,
                f"{'2·' if drawing else ''}S·H·p·b")


def gd_activations(S, n, H, T, d, b, *, flags=("seeds", "n", "heads", "tokens")) -> Term:
    """One GD step of S runs vmapped: 3·S·n·H·(T² + T·d)·b (scores, softmax, A·X and their cotangents)."""
    return Term("GD step activations (vmapped over runs)", GD_ACT * S * n * H * (T * T + T * d) * b,
                flags, "3·S·n·H·(T²+T·d)·b")


def trajectory(S, C, P, b, *, copies=TRAJ_COPIES, flags=("seeds", "steps", "every", "heads")) -> Term:
    """The checkpoints ``[S, C, P]`` kept by GD: ``copies``·S·C·P·b (device output, host copy, flat copy)."""
    return Term("checkpointed parameters [S, C, P]", copies * S * C * P * b, flags,
                f"{copies}·S·C·P·b (C={C})")


def loss_history(S, steps, b, *, flags=("seeds", "steps")) -> Term:
    """L̂ and the finite flag at every step ``[S, steps + 1]``: 2·S·(steps+1)·(b+1)."""
    return Term("loss history [S, steps+1]", 2 * S * (steps + 1) * (b + 1), flags, "2·S·(steps+1)·(b+1)")


def jacobian(R, n, H, T, p, b, *, flags=("n", "heads", "tokens", "dim"), label="per-sample Jacobian J [n, P]",
             build=True) -> list:
    """The per-sample Jacobian ``J [R, n, P]`` (R·n·P·b) and, with ``build``, its build temporaries R·n·H·(p + 4T²)·b."""
    out = [Term(label, R * n * H * p * b, flags, ("R·" if R > 1 else "") + "n·P·b")]
    if build:
        out.append(Term("Jacobian build temporaries", R * n * H * (p + JAC_TEMP_T2 * T * T) * b, flags,
                        ("R·" if R > 1 else "") + "n·H·(p+4T²)·b"))
    return out


def head_batch_size(H, n, T, p, backend="cpu") -> int:
    """:func:`mhajax.curvature.head_batch_size` (heads per batch of the B construction)."""
    budget = HEAD_BATCH_ENTRIES_CPU if backend == "cpu" else HEAD_BATCH_ENTRIES
    return int(max(1, min(H, budget // max(1, n * T * p + p * p))))


def head_blocks(H, n, T, d, p, b, *, backend="cpu", model="softmax",
                flags=("heads", "tokens", "dim")) -> list:
    """The head blocks ``B [H, p, p]`` (H·p²·b, twice when stacked from batches) and one batch's intermediates."""
    bs = head_batch_size(H, n, T, p, backend)
    out = [Term("head blocks B [H, p, p]", H * p * p * b, flags, "H·p²·b")]
    if bs < H:
        out.append(Term("B stacked from head batches (lax.map output copy)", H * p * p * b, flags, "H·p²·b"))
    if model in CLOSED_FORM_MODELS:
        out.append(Term(f"B batch intermediates ({bs} head(s) at once)",
                        bs * (B_CLOSED * n * T * d * d + 2 * p * p) * b, ("n",) + flags,
                        "bs·(4·n·T·d² + 2p²)·b"))
    else:
        out.append(Term(f"B batch jax.hessian intermediates ({bs} head(s))",
                        bs * B_AUTODIFF * p * n * (T * T + T * d) * b, ("n",) + flags,
                        "bs·3·p·n·(T²+T·d)·b"))
    return out


def block_eig_host(H, p, b, backend="cpu", flags=("heads", "tokens", "dim")) -> list:
    """The eigvalsh of B on the host (CPU only): a copy and LAPACK's workspace, 2·H·p²·b."""
    if backend != "cpu":
        return []
    return [Term("eigvalsh(B) on the host (copy + LAPACK)", 2 * H * p * p * b, flags, "2·H·p²·b", "host")]


def gram(n, b, flags=("n",)) -> Term:
    """The Gram matrix ``D^½ J Jᵀ D^½ [n, n]`` and its eigenproblem: 3·n²·b."""
    return Term("Gram matrix [n, n] and its eigenproblem", 3 * n * n * b, flags, "3·n²·b")


def lanczos(P, m, b, flags=("lanczos_steps", "heads", "tokens", "dim")) -> Term:
    """Block Lanczos: the basis ``Q [m, P]`` twice and the restart blocks, (2m + 3(2k+1) + 6)·P·b."""
    m = int(min(m, P))
    keep = max(1, min(8, (m - 2) // 4))
    blk = min(m, 2 * keep + 1)
    k = 2 * m + 3 * blk + 6
    return Term(f"Lanczos basis Q [m, P] and restart blocks (m={m})", k * P * b, flags,
                "(2m + 3(2k+1) + 6)·P·b")


def inertia_solve(H, p, n, b, flags=("heads", "tokens", "dim", "n")) -> Term:
    """The secular route's decomposition (:func:`mhajax.curvature.inertia.decompose`): the
    eigenvectors Q [H, p, p] and one [H, p, p] product of the residual check, K and K̃ = QᵀK
    [P, n]: (2·H·p² + 2·n·P)·b."""
    P = H * p
    return Term("secular route: eigenvectors Q [H, p, p], residual check, K and QᵀK [P, n]",
                (2 * H * p * p + 2 * n * P) * b, flags, "(2·H·p² + 2·n·P)·b")


def dense_eigh(P, b, backend="cpu", flags=("heads", "tokens", "dim", "method")) -> list:
    """The eigh of a ``[P, P]`` matrix: 4·P²·b on the host (CPU), 2·P²·b workspace on an accelerator."""
    if backend == "cpu":
        return [Term("eigh [P, P] on the host (copy, vectors, workspace)", HOST_EIGH * P * P * b, flags,
                     "4·P²·b", "host")]
    return [Term("eigh [P, P] workspace", 2 * P * P * b, flags, "2·P²·b")]


def dense_autodiff(n, H, T, d, P, b, backend="cpu", flags=("heads", "tokens", "dim", "method")) -> list:
    """Dense ∇²L̂ by chunked ``jax.hessian``: 2·P²·b plus one chunk's activations 3·P·c·H·(T² + T·d)·b, and its eigh."""
    c = int(max(1, min(n, P // max(1, H * T * T))))
    out = [Term("dense Hessian [P, P]: accumulator + one chunk (jax.hessian)", 2 * P * P * b, flags, "2·P²·b"),
           Term(f"jax.hessian chunk activations ({c} samples)", 3 * P * c * H * (T * T + T * d) * b,
                flags, "3·P·c·H·(T²+T·d)·b, c = max(1, P // (H·T²))")]
    return out + dense_eigh(P, b, backend, flags)


def norms_batch(n: int, H: int, q: int) -> int:
    """Samples per chunk of ``per_sample_head_hessian_norms`` by default, for n samples of H
    head matrices ``q × q``: ``NORMS_ENTRIES // (H·q²)``, at least 1 and at most n."""
    return max(1, min(n, NORMS_ENTRIES // (H * q * q)))


def hessian_norms(n, H, T, p, b, model="softmax", backend="cpu", flags=("links", "heads", "tokens", "n")) -> Term:
    """A batch of B' per-sample head Hessians ``[B', H, q, q]`` and their eigvalsh: 4·B'·H·q²·b."""
    q = 2 * T * T if (model in REDUCED_MODELS and 2 * T * T < p) else p
    batch = norms_batch(n, H, q)
    k = NORMS_COPIES if backend == "cpu" else NORMS_COPIES - 1
    return Term(f"per-sample head Hessians ({batch} sample(s) x H x {q}²) and their eigvalsh",
                k * batch * H * q * q * b, flags, f"{k}·B'·H·q²·b, q={q}, B'={batch}")


def forward_eval(R, M, H, T, d, b, *, chunk=EVAL_CHUNK, flags=("n_test", "heads", "seeds"),
                 label="held-out evaluation (one chunk per run)") -> Term:
    """A forward pass of R runs vmapped over ``min(M, chunk)`` samples: R·min(M, chunk)·H·(3T² + 2T·d)·b."""
    c = min(M, chunk)
    return Term(label, R * c * H * (FWD_T2 * T * T + FWD_TD * T * d) * b, flags, f"R·min(M,{chunk})·H·(3T²+2T·d)·b")


def checkpoint_risks(S, C, M, H, T, d, b, flags=("n_test", "heads", "seeds", "steps")) -> Term:
    """The test loss at the checkpoints, ``batch`` (seed, checkpoint) pairs at once over all M samples."""
    batch = int(max(1, min(S * C, RISK_CHUNK_ELEMENTS // max(1, M * H * T * T))))
    return Term(f"test loss at checkpoints ({batch} (seed, checkpoint) pair(s) at once)",
                batch * M * H * (FWD_T2 * T * T + FWD_TD * T * d) * b, flags, "batch·M·H·(3T²+2T·d)·b")


def margin_host(n, P, b, flags=("n", "heads", "tokens", "dim")) -> Term:
    """The margin solver on the host: the signed features y·G ``[n, P]`` and its n×n work, n·P·(b+1) + 3n²·8."""
    return Term("margin solver: signed features y·G on the host", n * P * (b + 1) + 3 * n * n * 8, flags,
                "n·P·(b+1) + 3n²·8", "host")


# ---------------------------------------------------------------------------
# The κ-chain analysis at one θ (weak-convexity, variants, lambda_min, chain_raw)
# ---------------------------------------------------------------------------

def resolve_method(method: str, P: int, coupled: bool = False) -> str:
    """What ``auto`` stands for: ``inertia`` (the certified secular route) for a model with
    head blocks at every P, ``lanczos`` for a coupled model. The one rule;
    :func:`mhajax.curvature.spectrum.resolve_method` validates the name and applies it."""
    if method == "auto":
        return "lanczos" if coupled else "inertia"
    return method


def analysis_stages(n, T, d, H, p, b, *, method="auto", links="all", m=64, model="softmax",
                    backend="cpu", points=1, prefix="", carry=()) -> list:
    """Stages of :func:`mhajax.analysis.chain.chain_raw` (or :func:`mhajax.curvature.spectrum.extremes` with
    ``links=None``) at ``points`` θ at once (accelerators vmap a batch of points);
    ``carry``: terms alive throughout (data, trajectory)."""
    P = H * p
    carry = tuple(carry)
    mult = lambda ts: [Term(t.label + (f" x{points} points" if points > 1 else ""), t.nbytes * points,
                            t.flags, (f"{points}·" if points > 1 else "") + t.formula, t.where) for t in ts]
    if model in ("two-layer", "twolayer"):
        lin = Term("jax.linearize residuals of the two-layer gradient", TWO_LAYER_LIN * n * H * (T * T + T * d) * b,
                   ("n", "heads", "tokens"), "25·n·H·(T²+T·d)·b")
        return [Stage(prefix + "two-layer Lanczos", carry + tuple(mult([lin, lanczos(P, m, b)])))]
    conc = resolve_method(method, P)
    grad = Term("gradient activations at θ", GD_ACT * n * H * (T * T + T * d) * b,
                ("n", "heads", "tokens"), "3·n·H·(T²+T·d)·b")
    J = jacobian(1, n, H, T, p, b)
    B = head_blocks(H, n, T, d, p, b, backend=backend, model=model)
    # chain_raw (links given) computes L̂ and ∇L̂ in the same XLA program as J: measured and in
    # XLA's plan, the gradient's residuals overlap the Jacobian's build
    stages = [Stage(prefix + "gradient", carry + tuple(mult([grad]))),
              Stage(prefix + "build J", carry + tuple(mult(J + ([grad] if links is not None else [])))),
              Stage(prefix + "build B", carry + tuple(mult([J[0]] + B)))]
    solve = [J[0], B[0], gram(n, b)] + block_eig_host(H, p, b, backend)
    if conc != "block":   # every route but the bound alone certifies through the secular decomposition
        solve.append(inertia_solve(H, p, n, b))
    if conc == "lanczos":
        solve.append(lanczos(P, m, b))
    elif conc == "dense":
        solve += dense_autodiff(n, H, T, d, P, b, backend)
    stages.append(Stage(prefix + f"solve ({conc})", carry + tuple(mult(solve))))
    if links == "all":
        # one XLA program: J and B may stay alive while the norms are computed
        stages.append(Stage(prefix + "per-sample Hessian norms (links all)",
                            carry + tuple(mult([J[0], B[0], hessian_norms(n, H, T, p, b, model, backend)]))))
    return stages


def analysis_batch(n, H, p, T, *, method, links, lanczos_steps, backend, budget_bytes=1.5e9,
                   itemsize=8) -> Optional[int]:
    """Points θ the κ-chain analysis takes at once under ``vmap`` (weak-convexity, variants):
    ``None`` (one at a time) on CPU; on an accelerator as many as keep one point's arrays
    under ``budget_bytes``: J ``n·P`` and its build temporaries ``n·H·(p + 4T²)``, B ``H·p²``,
    the secular decomposition ``2·H·p² + 2·n·P`` (every route but ``block``), the dense
    Hessian ``3P²`` or the Lanczos basis ``2·min(m, P)·P``, and with ``links="all"``
    a batch of per-sample head Hessians. ``method`` is the concrete one (dense/lanczos/block)."""
    if backend == "cpu":
        return None
    P = H * p
    per = n * P + n * H * (p + JAC_TEMP_T2 * T * T) + H * p * p
    conc = resolve_method(method, P)
    if conc != "block":
        per += 2 * H * p * p + 2 * n * P
    if conc == "dense":
        per += 3 * P * P
    if conc == "lanczos":
        per += 2 * min(lanczos_steps, P) * P
    if links == "all":
        per += norms_batch(n, H, p) * H * p * p
    return max(1, int(budget_bytes // (itemsize * per)))


def analysis_points(n, H, p, method, links, m, backend, T, d) -> int:
    """Points analysed at once: :func:`analysis_batch` (1 on CPU)."""
    return analysis_batch(n, H, p, T, method=method, links=links, lanczos_steps=m, backend=backend) or 1


# ---------------------------------------------------------------------------
# Commands (keyword defaults = the CLI defaults; names = the flags' dest names)
# ---------------------------------------------------------------------------

def _finish(what, stages, fn, args, backend, resident=0) -> Estimate:
    return Estimate(what, tuple(stages), dict(args), fn, resident, split=backend != "cpu")


def _gd_stage(name, S, n, T, d, H, p, b, C, steps, extra=(), runs=None, flags_gd=None) -> Stage:
    R = S if runs is None else runs
    P = H * p
    return Stage(name, (data(S, n, T, d, b), params(R, H, p, b),
                        gd_activations(R, n, H, T, d, b, **({"flags": flags_gd} if flags_gd else {})),
                        trajectory(R, C, P, b, copies=1), loss_history(R, steps, b)) + tuple(extra))


def weak_convexity(*, heads=(1, 4, 16), seeds=2, n=64, tokens=6, dim=8, steps=200, every=20,
                   method="auto", links="all", lanczos_steps=64, model="softmax", dtype="float64",
                   backend="cpu") -> Estimate:
    """``verify weak-convexity``: per H (one after another): draw data and θ₀, GD of all
    seeds at once (checkpoints kept), then the κ chain at every (seed, checkpoint)."""
    args = {k: v for k, v in locals().items()}
    b, S, T, d = dtype_bytes(dtype), seeds, tokens, dim
    C = checkpoints(steps, every)
    stages = [Stage("draw data", (data(S, n, T, d, b, drawing=True),))]
    for H in _seq(heads):
        p = per_head_params(model, T, d)
        P = H * p
        stages.append(Stage(f"H={H}: init", (data(S, n, T, d, b), params(S, H, p, b, drawing=True))))
        stages.append(_gd_stage(f"H={H}: GD", S, n, T, d, H, p, b, C, steps))
        pts = analysis_points(n, H, p, method, links, lanczos_steps, backend, T, d)
        carry = (data(S, n, T, d, b), trajectory(S, C, P, b))
        stages += analysis_stages(n, T, d, H, p, b, method=method, links=links, m=lanczos_steps, model=model,
                                  backend=backend, points=pts, prefix=f"H={H}: ", carry=carry)
    return _finish("verify weak-convexity", stages, weak_convexity, args, backend)


def variants(*, models=("softmax", "linear", "relu", "qk", "value", "causal", "cls", "two-layer"),
             heads=(1, 2, 4, 8, 16, 32, 64), seeds=1, n=32, tokens=4, dim=6, steps=100, every=50,
             method="auto", links="all", lanczos_steps=64, dtype="float64", backend="cpu") -> Estimate:
    """``verify variants``: :func:`weak_convexity` for each model (CPU: one point at a time)."""
    args = {k: v for k, v in locals().items()}
    stages = []
    for mname in (models.split(",") if isinstance(models, str) else models):
        e = weak_convexity(heads=heads, seeds=seeds, n=n, tokens=tokens, dim=dim, steps=steps, every=every,
                           method=method, links=links, lanczos_steps=lanczos_steps, model=mname.strip(),
                           dtype=dtype, backend=backend)
        stages += [Stage(f"{mname}: {s.name}", s.terms) for s in e.stages]
    return _finish("verify variants", stages, variants, args, backend)


def convergence(*, heads=(1, 4, 16), seeds=4, n=64, tokens=6, dim=8, steps=2000, every=0, n_test=1024,
                model="softmax", dtype="float64", backend="cpu") -> Estimate:
    """``verify convergence``: per H, GD of all seeds (checkpoints every steps/100), the
    test loss at every checkpoint (``checkpoint_risks``) and the witness."""
    args = {k: v for k, v in locals().items()}
    b, S, T, d = dtype_bytes(dtype), seeds, tokens, dim
    C = checkpoints(steps, every or max(1, steps // 100))
    test = data(S, n_test, T, d, b, label="test data [S, n_test, T, d]", flags=("seeds", "n_test", "tokens", "dim"))
    stages = [Stage("draw data", (data(S, n, T, d, b, drawing=True),)),
              Stage("draw test data", (data(S, n, T, d, b), data(S, n_test, T, d, b, drawing=True,
                    label="test data [S, n_test, T, d]", flags=("seeds", "n_test", "tokens", "dim"))))]
    for H in _seq(heads):
        p = per_head_params(model, T, d)
        P = H * p
        stages.append(_gd_stage(f"H={H}: GD", S, n, T, d, H, p, b, C, steps, extra=(test,)))
        stages.append(Stage(f"H={H}: test loss at checkpoints",
                            (data(S, n, T, d, b), test, trajectory(S, C, P, b, copies=1),
                             loss_history(S, steps, b), checkpoint_risks(S, C, n_test, H, T, d, b))))
        stages.append(Stage(f"H={H}: witness", (data(S, n, T, d, b), test, trajectory(S, C, P, b, copies=1),
                                                forward_eval(2 * S, n, H, T, d, b, chunk=n, flags=("seeds", "n", "heads"),
                                                             label="witness jvp (forward, vmapped over seeds)"))))
    return _finish("verify convergence", stages, convergence, args, backend)


def generalization(*, ns=(32, 64, 128, 256, 512), heads=4, seeds=8, steps_per_n=1.0, n_test=32768,
                   tokens=6, dim=8, model="softmax", dtype="float64", backend="cpu") -> Estimate:
    """``verify generalization``: test data (resident), then per n: data, GD (2
    checkpoints), evaluation on the test set and on the training set."""
    args = {k: v for k, v in locals().items()}
    b, S, T, d, H = dtype_bytes(dtype), seeds, tokens, dim, int(heads)
    p = per_head_params(model, T, d)
    steps = max(1, round(steps_per_n * _max(_seq(ns))))
    test = data(S, n_test, T, d, b, label="test data [S, n_test, T, d]", flags=("seeds", "n_test", "tokens", "dim"))
    stages = [Stage("draw test data", (data(S, n_test, T, d, b, drawing=True, label="test data [S, n_test, T, d]",
                                            flags=("seeds", "n_test", "tokens", "dim")),))]
    for n in _seq(ns):
        K = max(1, round(steps_per_n * n))
        fl = ("seeds", "ns", "heads", "tokens")
        stages.append(Stage(f"n={n}: GD", (test, data(S, n, T, d, b, drawing=True, flags=("seeds", "ns", "tokens", "dim")),
                                           params(S, H, p, b), gd_activations(S, n, H, T, d, b, flags=fl),
                                           trajectory(S, 2, H * p, b, copies=1), loss_history(S, K, b, flags=("ns", "steps_per_n", "seeds")))))
        stages.append(Stage(f"n={n}: evaluate", (test, data(S, n, T, d, b, flags=("seeds", "ns", "tokens", "dim")),
                                                 forward_eval(S, n_test, H, T, d, b))))
    return _finish("verify generalization", stages, generalization, args, backend)


def heads_check(*, ns=(64, 128, 256, 512), heads=(1, 2, 4, 8), seeds=3, steps_per_n=1.0, n_test=16384,
                tokens=6, dim=8, model="softmax", dtype="float64", backend="cpu") -> Estimate:
    """``verify heads``: every (H, seed) run padded to H_max and trained in one vmap of
    R = G·S runs (G = len(heads)); evaluation of all runs on the test set."""
    args = {k: v for k, v in locals().items()}
    b, S, T, d = dtype_bytes(dtype), seeds, tokens, dim
    hs = _seq(heads)
    G, Hm = len(hs), max(hs)
    R = G * S
    p = per_head_params(model, T, d) + 1
    test = data(S, n_test, T, d, b, label="test data [S, n_test, T, d]", flags=("seeds", "n_test", "tokens", "dim"))
    stages = [Stage("draw test data", (data(S, n_test, T, d, b, drawing=True, label="test data [S, n_test, T, d]",
                                            flags=("seeds", "n_test", "tokens", "dim")),))]
    for n in _seq(ns):
        K = max(1, round(steps_per_n * n))
        fl = ("heads", "seeds", "ns", "tokens")
        Xr = Term("training data tiled over the H grid [G·S, n, T, d]", R * n * T * d * b, ("heads", "seeds", "ns", "tokens", "dim"),
                  "G·S·n·T·d·b")
        stages.append(Stage(f"n={n}: GD (G·S={R} runs of H_max={Hm})",
                            (test, Xr, params(R, Hm, p, b, flags=("heads", "seeds")),
                             gd_activations(R, n, Hm, T, d, b, flags=fl),
                             trajectory(R, 2, Hm * p, b, copies=1), loss_history(R, K, b, flags=("ns", "steps_per_n", "heads", "seeds")))))
        stages.append(Stage(f"n={n}: evaluate", (test, Xr, params(R, Hm, p, b, flags=("heads", "seeds")),
                                                 forward_eval(R, n_test, Hm, T, d, b, flags=("n_test", "heads", "seeds")))))
    return _finish("verify heads", stages, heads_check, args, backend)


def ntk_margin(*, heads=(1, 4, 16), seeds=4, n=64, tokens=6, dim=8, one_step_lr=0.0, model="softmax",
               dtype="float64", backend="cpu") -> Estimate:
    """``verify ntk-margin``: per H, NTK features of all seeds at once ``G [S, n, P]``
    (one GD step first when ``--one-step-lr`` > 0), then a margin problem per seed on the host."""
    args = {k: v for k, v in locals().items()}
    b, S, T, d = dtype_bytes(dtype), seeds, tokens, dim
    p = per_head_params(model, T, d)
    stages = [Stage("draw data", (data(S, n, T, d, b, drawing=True),))]
    for H in _seq(heads):
        P = H * p
        fl = ("seeds", "n", "heads", "tokens", "dim")
        feats = jacobian(S, n, H, T, p, b, flags=fl, label="NTK features G [S, n, P]")
        extra = [gd_activations(S, n, H, T, d, b)] if one_step_lr > 0 else []
        stages.append(Stage(f"H={H}: features", (data(S, n, T, d, b), params(S, H, p, b)) + tuple(feats + extra)))
        host = Term("features on the host [S, n, P]", S * n * P * b, fl, "S·n·P·b", "host")
        stages.append(Stage(f"H={H}: margins", (data(S, n, T, d, b), feats[0], host, margin_host(n, P, b))))
        wit = forward_eval(2 * S, n, H, T, d, b, chunk=n, flags=("seeds", "n", "heads", "tokens"),
                           label="witness θ* = θ₀ + step·w*: jvp of Φ over all n samples, vmapped over seeds")
        stages.append(Stage(f"H={H}: witness", (data(S, n, T, d, b), host, wit)))
    return _finish("verify ntk-margin", stages, ntk_margin, args, backend)


def one_step(*, ns=(64, 128, 256, 512), heads=4, seeds=4, tokens=6, dim=8, model="softmax",
             dtype="float64", backend="cpu") -> Estimate:
    """``verify one-step``: per n, the noisy and the noiseless draw, then per start (one at a
    time) one GD step per seed and three feature sets ``[S, n, P]`` (θ₀ on both draws, θ₀ of the
    noiseless draw) with their build temporaries; then the margins per seed on the host
    (the linear margins on ``[n, T·d]`` are smaller)."""
    args = {k: v for k, v in locals().items()}
    b, S, T, d = dtype_bytes(dtype), seeds, tokens, dim
    p = per_head_params(model, T, d)
    stages = []
    for H in _seq(heads):
        P = H * p
        for n in _seq(ns):
            fl = ("seeds", "ns", "heads", "tokens", "dim")
            two = Term("noisy and noiseless draws X, Xc [S, n, T, d]", 2 * S * n * (T * d + 1) * b,
                       ("seeds", "ns", "tokens", "dim"), "2·S·n·(T·d+1)·b")
            stages.append(Stage(f"n={n}: draw", (data(S, n, T, d, b, drawing=True, flags=("seeds", "ns", "tokens", "dim")),
                                                 two)))
            feats = jacobian(3 * S, n, H, T, p, b, flags=fl, label="NTK features G, Gx, Gc [3, S, n, P]", build=False)
            feats.append(Term("Jacobian build temporaries (θ₋₁, θ₀ on both draws)", 3 * S * n * H * (p + JAC_TEMP_T2 * T * T) * b,
                              ("seeds", "ns", "heads", "tokens"), "3·S·n·H·(p+4T²)·b"))
            gd = gd_activations(2 * S, n, H, T, d, b, flags=("seeds", "ns", "heads", "tokens"))
            stages.append(Stage(f"n={n}: one step + features", (two,) + tuple(feats) + (gd,)))
            host = Term("features on the host [3, S, n, P]", 3 * S * n * P * b, fl, "3·S·n·P·b", "host")
            stages.append(Stage(f"n={n}: margins", (two, feats[0], host, margin_host(n, P, b, flags=("ns", "heads",
                                                                                                      "tokens", "dim")))))
    return _finish("verify one-step", stages, one_step, args, backend)


def quasi_convexity(*, heads=(1, 4, 16), seeds=2, n=64, tokens=6, dim=8, steps=200, every=20, grid=128,
                    references=("final", "witness", "ntk"), model="softmax", dtype="float64",
                    backend="cpu") -> Estimate:
    """``verify quasi-convexity``: per H, GD (checkpoints kept), the (θ_k, θ*) pairs stacked
    ``[pairs, P]`` twice, and per pair the segment check vmapped over ``grid + 1`` points
    (second directional derivatives by forward mode); ``ntk`` adds a Jacobian per seed."""
    args = {k: v for k, v in locals().items()}
    b, S, T, d = dtype_bytes(dtype), seeds, tokens, dim
    C = checkpoints(steps, every)
    refs = references.split(",") if isinstance(references, str) else list(references)
    p = per_head_params(model, T, d)
    stages = [Stage("draw data", (data(S, n, T, d, b, drawing=True),))]
    for H in _seq(heads):
        P = H * p
        stages.append(_gd_stage(f"H={H}: GD", S, n, T, d, H, p, b, C, steps))
        traj = trajectory(S, C, P, b, copies=1)
        if "ntk" in refs:
            stages.append(Stage(f"H={H}: NTK witness", (data(S, n, T, d, b), traj) + tuple(jacobian(1, n, H, T, p, b))
                                + (margin_host(n, P, b),)))
        pairs = Term("stacked pairs (θ_k, θ*) [S·C, P] x2", 2 * S * C * P * b, ("seeds", "steps", "every", "heads"),
                     "2·S·C·P·b")
        seg = Term(f"segment check: {grid + 1} grid points vmapped (2nd-order forward mode)",
                   (grid + 1) * 3 * n * H * (FWD_T2 * T * T + FWD_TD * T * d) * b, ("grid", "n", "heads", "tokens"),
                   "(K+1)·3·n·H·(3T²+2T·d)·b")
        stages.append(Stage(f"H={H}: segment checks", (data(S, n, T, d, b), traj, pairs, seg)))
    return _finish("verify quasi-convexity", stages, quasi_convexity, args, backend)


COMMANDS = {
    "weak-convexity": weak_convexity, "convergence": convergence, "generalization": generalization,
    "heads": heads_check, "ntk-margin": ntk_margin, "one-step": one_step,
    "quasi-convexity": quasi_convexity, "variants": variants,
}


# ---------------------------------------------------------------------------
# Public entry points (sizes from the arrays; names for the message in API_NAMES)
# ---------------------------------------------------------------------------

#: how an API estimator's size arguments are named in a refusal message
API_NAMES = {"heads": "H", "n": "n", "tokens": "T", "dim": "d", "seeds": "runs",
             "lanczos_steps": "num_steps", "method": "method", "links": "links", "steps": "steps",
             "every": "every"}


def api_init_params(*, heads=16, tokens=6, dim=8, dtype="float64", backend="cpu", model="softmax") -> Estimate:
    """``init_params(key, H, T, d)``: the parameters and their random bits, 2·H·p·b."""
    args = {k: v for k, v in locals().items()}
    b = dtype_bytes(dtype)
    p = per_head_params(model, tokens, dim)
    return _finish("init_params", [Stage("draw", (params(1, heads, p, b, drawing=True, flags=("heads", "tokens", "dim")),))],
                   api_init_params, args, backend)


def api_tokenized_mixture(*, n=64, tokens=6, dim=8, dtype="float64", backend="cpu") -> Estimate:
    """``tokenized_mixture(key, n, T, d)``: X and the generator's temporaries, 4·n·T·d·b."""
    args = {k: v for k, v in locals().items()}
    b = dtype_bytes(dtype)
    return _finish("tokenized_mixture", [Stage("draw", (data(1, n, tokens, dim, b, drawing=True, flags=("n", "tokens", "dim")),))],
                   api_tokenized_mixture, args, backend)


def _inputs(n, H, T, d, p, b):
    return (Term("inputs θ and X (already allocated)", (H * p + n * T * d + n) * b, ("heads", "n", "tokens", "dim"),
                 "(P + n·T·d + n)·b"),)


def api_hessian_extremes(*, heads=16, tokens=6, dim=8, n=64, method="auto", lanczos_steps=64, links=None,
                         model="softmax", dtype="float64", backend="cpu", what="hessian_extremes") -> Estimate:
    """``lambda_min`` / ``hessian_extremes`` (``links=None``) and ``chain_raw`` (``links``)."""
    args = {k: v for k, v in locals().items()}
    b = dtype_bytes(dtype)
    p = per_head_params(model, tokens, dim)
    inp = _inputs(n, heads, tokens, dim, p, b)
    st = analysis_stages(n, tokens, dim, heads, p, b, method=method, links=links, m=lanczos_steps, model=model,
                         backend=backend, carry=inp)
    return _finish(what, st, api_hessian_extremes, args, backend, resident=inp[0].nbytes)


def api_dense_hessian(*, heads=16, tokens=6, dim=8, n=64, model="softmax", dtype="float64", backend="cpu") -> Estimate:
    """``dense_hessian``: the [P, P] accumulator and one chunk of ``jax.hessian`` activations."""
    args = {k: v for k, v in locals().items()}
    b = dtype_bytes(dtype)
    p = per_head_params(model, tokens, dim)
    inp = _inputs(n, heads, tokens, dim, p, b)
    terms = dense_autodiff(n, heads, tokens, dim, heads * p, b, backend)[:2]
    return _finish("dense_hessian", [Stage("jax.hessian chunks", inp + tuple(terms))], api_dense_hessian, args,
                   backend, resident=inp[0].nbytes)


def api_structured_parts(*, heads=16, tokens=6, dim=8, n=64, model="softmax", dtype="float64",
                         backend="cpu") -> Estimate:
    """``structured_parts``: the Jacobian J [n, P] (and its build), then the head blocks B [H, p, p]."""
    args = {k: v for k, v in locals().items()}
    b = dtype_bytes(dtype)
    p = per_head_params(model, tokens, dim)
    inp = _inputs(n, heads, tokens, dim, p, b)
    J = jacobian(1, n, heads, tokens, p, b)
    B = head_blocks(heads, n, tokens, dim, p, b, backend=backend, model=model)
    return _finish("structured_parts", [Stage("build J", inp + tuple(J)), Stage("build B", inp + (J[0],) + tuple(B))],
                   api_structured_parts, args, backend, resident=inp[0].nbytes)


def api_ntk_features(*, heads=16, tokens=6, dim=8, n=64, margin=False, model="softmax", dtype="float64",
                     backend="cpu") -> Estimate:
    """``ntk_features`` / ``ntk_gram`` / ``ntk_margin`` (``margin=True``: the host solver too)."""
    args = {k: v for k, v in locals().items()}
    b = dtype_bytes(dtype)
    p = per_head_params(model, tokens, dim)
    inp = _inputs(n, heads, tokens, dim, p, b)
    J = jacobian(1, n, heads, tokens, p, b, label="NTK features G [n, P]")
    st = [Stage("features", inp + tuple(J))]
    if margin:
        st.append(Stage("margin", inp + (J[0], margin_host(n, heads * p, b))))
    return _finish("ntk_margin" if margin else "ntk_features", st, api_ntk_features, args, backend,
                   resident=inp[0].nbytes)


def api_hessian_norms(*, heads=16, tokens=6, dim=8, n=64, model="softmax", dtype="float64", backend="cpu") -> Estimate:
    """``per_sample_head_hessian_norms``: a batch of per-sample head Hessians and their eigvalsh."""
    args = {k: v for k, v in locals().items()}
    b = dtype_bytes(dtype)
    p = per_head_params(model, tokens, dim)
    inp = _inputs(n, heads, tokens, dim, p, b)
    return _finish("per_sample_head_hessian_norms",
                   [Stage("norms", inp + (hessian_norms(n, heads, tokens, p, b, model, backend),))],
                   api_hessian_norms, args, backend, resident=inp[0].nbytes)


def api_train(*, seeds=1, heads=16, tokens=6, dim=8, n=64, steps=200, every=20, model="softmax",
              dtype="float64", backend="cpu") -> Estimate:
    """``train`` / ``gd_trajectory`` (``seeds``: the leading batch axis)."""
    args = {k: v for k, v in locals().items()}
    b = dtype_bytes(dtype)
    p = per_head_params(model, tokens, dim)
    C = checkpoints(steps, every)
    st = _gd_stage("GD", seeds, n, tokens, dim, heads, p, b, C, steps)
    return _finish("train", [st], api_train, args, backend,
                   resident=(seeds * heads * p + seeds * n * (tokens * dim + 1)) * b)


# ---------------------------------------------------------------------------
# What is available at run time
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Available:
    """Bytes a new allocation may take now, and where that number comes from."""

    nbytes: int
    source: str
    where: str = "host"


def _read(path):
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


def _meminfo() -> dict:
    out = {}
    for line in (_read("/proc/meminfo") or "").splitlines():
        k, _, v = line.partition(":")
        parts = v.split()
        if parts and parts[0].isdigit():
            out[k] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
    return out


def _status(key: str) -> Optional[int]:
    for line in (_read("/proc/self/status") or "").splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return None


UNLIMITED = 2 ** 60


def _int_or_none(text) -> Optional[int]:
    if text is None:
        return None
    text = text.strip()
    if text in ("", "max"):
        return None
    try:
        v = int(text)
    except ValueError:
        return None
    return None if v >= UNLIMITED else v


def _stat_value(text, key) -> int:
    for line in (text or "").splitlines():
        k, _, v = line.partition(" ")
        if k == key and v.strip().isdigit():
            return int(v)
    return 0


def cgroup_limits(root="/sys/fs/cgroup", proc_cgroup="/proc/self/cgroup") -> list:
    """``[(bytes available, description)]`` for every cgroup memory limit on this process's
    path (v2: ``memory.max − (memory.current − inactive_file)`` of the group and each
    ancestor; v1: ``memory.limit_in_bytes − (usage − total_inactive_file)``). Inside a
    container the own group is usually mounted at the root, so the root files count too."""
    out = []
    lines = (_read(proc_cgroup) or "").splitlines()
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":                      # cgroup v2
            base, files = root, ("memory.max", "memory.current", "memory.stat", "inactive_file")
            if os.path.isdir(os.path.join(root, "unified")) and not os.path.exists(os.path.join(root, "memory.max")):
                base = os.path.join(root, "unified")
        elif "memory" in controllers.split(","):   # cgroup v1
            base, files = os.path.join(root, "memory"), ("memory.limit_in_bytes", "memory.usage_in_bytes",
                                                          "memory.stat", "total_inactive_file")
        else:
            continue
        seen = set()
        rel = path.strip("/")
        cands = []
        while True:
            cands.append(os.path.join(base, rel) if rel else base)
            if not rel:
                break
            rel = os.path.dirname(rel)
        for d in cands:
            if d in seen or not os.path.isdir(d):
                continue
            seen.add(d)
            lim = _int_or_none(_read(os.path.join(d, files[0])))
            if lim is None:
                continue
            used = _int_or_none(_read(os.path.join(d, files[1]))) or 0
            used -= _stat_value(_read(os.path.join(d, files[2])), files[3])
            out.append((max(0, lim - max(0, used)), f"cgroup {files[0]} of {d}"))
    return out


def available_host() -> Available:
    """Host RAM a new allocation may take: the smallest of ``MemAvailable`` (/proc/meminfo),
    every cgroup limit minus its usage, and ``RLIMIT_AS``/``RLIMIT_DATA`` (``ulimit -v``)
    minus this process's ``VmSize``/``VmData``."""
    cands = []
    mi = _meminfo()
    if "MemAvailable" in mi:
        cands.append((mi["MemAvailable"], "host RAM, MemAvailable"))
    elif "MemFree" in mi:
        cands.append((mi["MemFree"] + mi.get("Cached", 0), "host RAM, MemFree + Cached"))
    cands += cgroup_limits()
    for lim, key, name in ((resource.RLIMIT_AS, "VmSize", "ulimit -v (RLIMIT_AS)"),
                           (resource.RLIMIT_DATA, "VmData", "ulimit -d (RLIMIT_DATA)")):
        soft, _ = resource.getrlimit(lim)
        if soft != resource.RLIM_INFINITY and soft > 0:
            cands.append((max(0, soft - (_status(key) or 0)), name))
    if not cands:
        return Available(UNLIMITED, "unknown (no /proc/meminfo)")
    nbytes, src = min(cands)
    return Available(int(nbytes), src, "host")


def available_device(device=None) -> Optional[Available]:
    """Device memory free for new buffers on an accelerator (``bytes_limit − bytes_in_use``
    of ``device.memory_stats()``; ``None`` on CPU or where the backend reports nothing)."""
    import jax
    dev = device or jax.devices()[0]
    if dev.platform == "cpu":
        return None
    try:
        st = dev.memory_stats() or {}
    except Exception:                               # a backend without the call
        return None
    lim = st.get("bytes_limit") or st.get("bytes_reservable_limit")
    if not lim:
        return None
    return Available(int(lim - st.get("bytes_in_use", 0)), f"{dev.platform}:{dev.id} memory, bytes_limit "
                     f"{fmt_bytes(lim)} − in use", "device")


def backend_name() -> str:
    """``"cpu"``, ``"gpu"``, ``"tpu"`` — from JAX if it is loaded, else ``JAX_PLATFORMS``."""
    import sys
    if "jax" in sys.modules:
        return sys.modules["jax"].default_backend()
    env = os.environ.get("JAX_PLATFORMS", "").split(",")[0].strip()
    return env or "cpu"


# ---------------------------------------------------------------------------
# The guard
# ---------------------------------------------------------------------------

class MemoryGuardError(InputError):
    """The estimated peak memory exceeds what is available (an InputError: exit 2)."""

    def __init__(self, message, estimate=None, available=None, blamed=()):
        super().__init__(message)
        self.estimate, self.available, self.blamed = estimate, available, tuple(blamed)


BLAME_RATIO = 4.0   # a flag is to blame if resetting it to its default divides the peak by >= this


def _reset_ratios(est: Estimate, args: dict, where, skip=()) -> list:
    """``[(flag, ratio, lower)]``: how much resetting each non-default size flag of ``args``
    to ``est.fn``'s default divides the peak (only flags that lower it)."""
    sig = inspect.signature(est.fn).parameters
    peak = est.fn(**args).peak(where)
    out = []
    for k, v in args.items():
        if k in skip or k not in sig or k in ("dtype", "backend", "model", "models", "what", "references"):
            continue
        dflt = sig[k].default
        if dflt is inspect.Parameter.empty or v == dflt:
            continue
        if isinstance(v, str) and k not in ("method", "links"):   # a list flag not parsed yet: "1,4,16"
            try:
                if _seq(v) == _seq(dflt):
                    continue
            except (TypeError, ValueError):
                continue
        try:
            alt = est.fn(**dict(args, **{k: dflt})).peak(where)
        except Exception:
            continue
        if 0 < alt < peak:
            lower = not (isinstance(v, (int, float)) and isinstance(dflt, (int, float)) and v < dflt)
            out.append((k, peak / alt, lower))
    return sorted(out, key=lambda t: -t[1])


def blame(est: Estimate, where: Optional[str] = None, budget: Optional[int] = None) -> list:
    """``[(flag, ratio, lower)]``, the flags to blame, most to blame first (``ratio``: how
    much resetting that flag alone to its default divides the peak; ``lower``: which way
    to move it).

    Two rules, united: every flag whose reset alone divides the peak by ``>= BLAME_RATIO``;
    and, greedily, the flag whose reset lowers the peak most, then the next one in the
    config with that flag reset, ... until the estimate fits ``budget`` (so two jointly
    absurd flags, e.g. ``--tokens`` and ``--dim``, are both named). Without an estimator
    (``est.fn``) or if no flag lowers the peak: the dominant term's flags."""
    if est.fn is None:
        return [(f, None, True) for f in est.dominant(where).flags]
    first = _reset_ratios(est, est.args, where)
    chosen = {k: (k, r, low) for k, r, low in first if r >= BLAME_RATIO}
    if budget is not None:
        args, skip = dict(est.args), set()
        sig = inspect.signature(est.fn).parameters
        while est.fn(**args).peak(where) - est.resident > budget:
            cand = _reset_ratios(est, args, where, skip)
            if not cand:
                break
            k = cand[0][0]
            skip.add(k)
            args[k] = sig[k].default
            if k not in chosen:
                ratio = next((r for kk, r, _ in first if kk == k), cand[0][1])
                chosen[k] = (k, ratio, cand[0][2])
    order = list(est.args)
    out = sorted(chosen.values(), key=lambda t: order.index(t[0]) if t[0] in order else len(order))
    if out:
        return out
    if first:
        return first[:1]
    return [(f, None, True) for f in est.dominant(where).flags]


def _render(flag, value, api: bool) -> str:
    if api:
        return f"{API_NAMES.get(flag, flag)}={_val(value)}"
    return f"--{flag.replace('_', '-')} {_val(value)}"


def _val(v):
    if isinstance(v, (tuple, list)):
        return ",".join(str(x) for x in v)
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def check_fits(est: Estimate, *, force: bool = False, available: Optional[Available] = None,
               device_available: Optional[Available] = None, api: bool = False,
               margin: float = 1.0) -> Estimate:
    """Raise :class:`MemoryGuardError` (one line) when ``est`` needs more than is available;
    return ``est`` otherwise, or always with ``force=True``.

    Budgets: on CPU everything is host RAM (:func:`available_host`); on an accelerator the
    device terms are checked against the device (:func:`available_device`) and the host
    terms against host RAM. ``api``: name Python arguments (``H=…``) and ``force=True``
    instead of flags and ``--force``. ``margin`` scales what is available (1.0: all of it)."""
    if force:
        return est
    checks = []
    if est.split:
        dev = device_available if device_available is not None else available_device()
        if dev is not None:
            checks.append(("device", dev))
        checks.append(("host", available if available is not None else available_host()))
    else:
        checks.append((None, available if available is not None else available_host()))
    for where, av in checks:
        need = est.peak(where) - est.resident
        if need <= av.nbytes * margin:
            continue
        blamed = blame(est, where, int(av.nbytes * margin))
        who = " ".join(_render(f, est.args.get(f, "?"), api) for f, _, _ in blamed)
        dom = est.dominant(where)
        name = lambda f: API_NAMES.get(f, f) if api else "--" + f.replace("_", "-")
        moves = []
        for verb, low in (("lower", True), ("raise", False)):
            fs = [name(f) for f, _, lw in blamed if lw == low]
            if fs:
                moves.append(f"{verb} " + (" and ".join(fs) if len(fs) <= 2 else ", ".join(fs[:-1]) + " and " + fs[-1]))
        advice = ", ".join(moves) + (", or pass force=True" if api else ", or pass --force")
        msg = (f"{est.what}: {who}: needs ~{fmt_bytes(need)} "
               f"(largest: {dom.label} = {dom.formula} = {fmt_bytes(dom.nbytes)}), "
               f"{fmt_bytes(av.nbytes)} available ({av.source}); {advice}")
        raise MemoryGuardError(msg, est, av, [f for f, _, _ in blamed])
    return est


# ---------------------------------------------------------------------------
# The public entry points' guard
# ---------------------------------------------------------------------------

#: environment variable that switches every memory guard off (like ``--force``)
FORCE_ENV = "MHAJAX_FORCE"
#: an API estimate below this is not checked (reading the budget costs more than it protects)
API_FLOOR = 64 * 2 ** 20
_CHECKED = contextvars.ContextVar("mhajax_memory_checked", default=False)


@contextlib.contextmanager
def checked():
    """Within this context the API guards (:func:`guard`) are skipped: a command whose own
    estimate (covering its nested calls) already passed, or was forced, runs inside it, so
    nothing is counted twice."""
    token = _CHECKED.set(True)
    try:
        yield
    finally:
        _CHECKED.reset(token)


def skipped(force: bool = False) -> bool:
    """Whether a guard is off: ``force``, inside :func:`checked`, or ``MHAJAX_FORCE`` set (not 0)."""
    return bool(force) or _CHECKED.get() or os.environ.get(FORCE_ENV, "0").strip() not in ("", "0")


def tree_sizes(params) -> tuple:
    """``(H, p)`` of per-head parameters (every leaf ``[H, ...]``) from their shapes only
    (works on arrays, tracers and ``jax.ShapeDtypeStruct``); ``p = Σ_leaves prod(shape[1:])``."""
    import jax   # not at module level: the memory model itself needs no JAX
    leaves = jax.tree_util.tree_leaves(params)
    if not leaves or not getattr(leaves[0], "shape", None):
        return 0, 0
    H = int(leaves[0].shape[0])
    p = 0
    for leaf in leaves:
        k = 1
        for s in tuple(leaf.shape)[1:]:
            k *= int(s)
        p += k
    return H, p


def dtype_of(x, default: str = "float64") -> str:
    """The float dtype name of an array (``default`` when it has none or is not a float)."""
    name = str(getattr(getattr(x, "dtype", None), "name", getattr(x, "dtype", default)))
    return name if name in ("float64", "float32", "float16", "bfloat16") else default


def guard(estimator: Callable, *, force: bool = False, **sizes) -> Optional[Estimate]:
    """The guard of a public entry point: ``estimator(**sizes, backend=...)`` checked by
    :func:`check_fits` with the arguments named as in Python (``H=…``) and ``force=True`` as
    the way out. Skipped (``None``) when :func:`skipped`; not checked below :data:`API_FLOOR`.
    Returns the estimate."""
    if skipped(force):
        return None
    est = estimator(backend=backend_name(), **sizes)
    if est.peak() - est.resident <= API_FLOOR:
        return est
    return check_fits(est, api=True)


def guard_call(estimator: Callable, params=None, X=None, *, model=None, force: bool = False,
               **extra) -> Optional[Estimate]:
    """:func:`guard` with the sizes read off the arguments of a public entry point: ``H``
    from ``params`` (leaves ``[H, ...]``), ``n, T, d`` and the dtype from ``X [n, T, d]``, the
    model's name; ``extra`` sets other estimator arguments (only those ``estimator`` takes
    are passed). Shapes only: nothing is read or allocated. Arguments whose sizes cannot be
    read are left to the entry point's own validation (``None``, unchecked)."""
    if skipped(force):
        return None
    sizes = dict(extra)
    try:
        if params is not None:
            sizes["heads"] = tree_sizes(params)[0]
        if X is not None:
            shape = tuple(int(v) for v in X.shape)
            if len(shape) < 3:
                return None
            sizes.update(n=shape[-3], tokens=shape[-2], dim=shape[-1], dtype=dtype_of(X))
    except (AttributeError, TypeError, ValueError, IndexError):
        return None
    if model is not None:
        sizes["model"] = getattr(model, "name", str(model))
    accepted = inspect.signature(estimator).parameters
    return guard(estimator, **{k: v for k, v in sizes.items() if k in accepted})


def available(device=None) -> Available:
    """What bounds a new allocation now: the accelerator's free memory
    (:func:`available_device`) on an accelerator, host RAM (:func:`available_host`) on CPU."""
    dev = available_device(device) if backend_name() != "cpu" else None
    return dev if dev is not None else available_host()


__all__ = ["norms_batch", "Term", "Stage", "Estimate", "Available", "guard_call", "available", "API_FLOOR", "MemoryGuardError", "check_fits", "blame",
           "available_host", "available_device", "cgroup_limits", "COMMANDS", "FACTOR",
           "checked", "skipped", "guard", "tree_sizes", "dtype_of", "analysis_batch", "FORCE_ENV",
           "weak_convexity", "convergence", "generalization", "heads_check", "ntk_margin", "one_step",
           "quasi_convexity", "variants", "api_init_params", "api_tokenized_mixture", "api_hessian_extremes",
           "api_dense_hessian", "api_structured_parts", "api_ntk_features", "api_hessian_norms", "api_train",
           "fmt_bytes", "per_head_params", "checkpoints"]
