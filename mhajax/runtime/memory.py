"""The memory guard: sizes whose arrays cannot fit are refused before anything is allocated.

An :class:`Estimate` lists the dominant arrays of a command or call as ``(label, shape)``
and counts ``Σ prod(shape)·b`` bytes, ``b`` = 8 (float64) or 4 (float32) per entry. Arrays of
different phases are added, and the long tail (labels, gradients, n×n Gram matrices,
batches bounded by a fixed entry budget) is left out: the estimate tells an absurd size
from a reasonable one, it is not the exact peak. Symbols: S runs, n samples, T tokens,
d token dimension, H heads, p parameters per head (softmax: T·d + d²), P = H·p, C checkpoints,
m Lanczos basis size. The terms:

=======================  ====================  =========================================
array                    shape                 in
=======================  ====================  =========================================
data X                   [S, n, T, d]          every check (:func:`data`)
checkpoints θ_k          [S, C, P]             GD (:func:`gd`)
losses L̂_k               [S, steps + 1]        GD
GD step activations      [4, S, n, H, T, T],   a gradient step (:func:`step`): scores,
                         [2, S, n, H, T, d]    attention, A·X, their cotangents
attention weights        [S, n, H, T, T]       a forward pass over n samples
per-sample Jacobian J    [n, P]                the Hessian's factors (:func:`analysis`),
                                               NTK features [S, n, P]
head blocks B            [H, p, p]             the Hessian's factors
eigenvectors Q, K̃ = QᵀK  [H, p, p], [P, n]     certified methods (all but ``block``)
Lanczos basis            [m, P]                ``lanczos``
dense Hessian ∇²L̂        [P, P]                ``dense``
=======================  ====================  =========================================

:func:`guard` refuses (:class:`MemoryGuardError`, an ``InputError``: exit 2, one line) an
estimate above :func:`available` (equal fits), naming the sizes to blame (:func:`blame`).
It runs at the door only, never inside traced code: where a command starts
(:func:`mhajax.cli.verify.memory_guard`, each flag blamed against its config's default) and in
the public entries of :mod:`mhajax.api` (:func:`guard_call`, :func:`guard_args`, each argument
blamed against 1), which then call the plain functions below. ``force`` (``--force``,
``force=True``) or ``MHAJAX_FORCE=1`` skip it.
"""
from __future__ import annotations

import math
import os
import resource
import sys
from dataclasses import dataclass
from typing import Callable, Optional

from mhajax.errors import InputError

#: environment variable that switches the guard off (like ``--force``)
FORCE_ENV = "MHAJAX_FORCE"


@dataclass(frozen=True)
class Estimate:
    """``terms``: the dominant arrays of ``what``, ``((label, shape), ...)``; ``itemsize``: b."""

    what: str
    terms: tuple
    itemsize: int = 8

    @property
    def nbytes(self) -> int:
        """``Σ_terms prod(shape)·b``."""
        return entries(self.terms) * self.itemsize

    def largest(self) -> tuple:
        """``(label, bytes)`` of the largest term."""
        label, shape = max(self.terms, key=lambda t: math.prod(t[1]))
        return label, math.prod(shape) * self.itemsize


def entries(terms) -> int:
    """``Σ prod(shape)`` over ``(label, shape)`` terms."""
    return sum(math.prod(shape) for _, shape in terms)


def ints(v) -> tuple:
    """A list size as a tuple of ints: ``(1, 4, 16)``, ``"1,4,16"`` (a flag not parsed yet) or ``16``."""
    if isinstance(v, str):
        return tuple(int(x) for x in v.split(",") if x.strip())
    return tuple(int(x) for x in v) if isinstance(v, (tuple, list)) else (int(v),)


def data(S, n, T, d) -> tuple:
    """The data ``X [S, n, T, d]``."""
    return ("data X [S, n, T, d]", (S, n, T, d))


def step(S, n, T, d, H) -> list:
    """A gradient step of S runs on n samples: per (run, sample, head) the scores, the attention
    weights and their cotangents, four ``[T, T]``, and ``A·X`` with its cotangent, two ``[T, d]``."""
    return [("GD step: scores, attention and cotangents [4, S, n, H, T, T]", (4, S, n, H, T, T)),
            ("GD step: A·X and cotangent [2, S, n, H, T, d]", (2, S, n, H, T, d))]


def gd(S, n, T, d, H, p, C, steps) -> list:
    """GD of S runs at once (:func:`mhajax.api.train`): the checkpoints ``[S, C, P]``, the
    losses ``[S, steps + 1]`` and a :func:`step`."""
    return [("checkpoints θ_k [S, C, P]", (S, C, H * p)), ("losses L̂_k [S, steps + 1]", (S, steps + 1))] + step(
        S, n, T, d, H)


def analysis(n, T, H, p, method, m=64, coupled=False) -> list:
    """The Hessian at one θ (:mod:`mhajax.curvature.spectrum`, ``method`` resolved): its factors
    ``J [n, P]`` and ``B [H, p, p]``; every method but ``block`` adds B's eigenvectors
    ``Q [H, p, p]`` and ``K̃ = QᵀK [P, n]``, ``lanczos`` its basis ``[min(m, P), P]``, ``dense``
    ``∇²L̂ [P, P]``. A coupled model has no factors: its Lanczos basis and the attention
    weights ``[n, H, T, T]`` of the linearized gradient."""
    P = H * p
    basis = ("Lanczos basis [m, P]", (min(m, P), P))
    if coupled:
        return [basis, ("attention weights [n, H, T, T]", (n, H, T, T))]
    out = [("per-sample Jacobian J [n, P]", (n, P)), ("head blocks B [H, p, p]", (H, p, p))]
    if method != "block":
        out += [("eigenvectors Q of B [H, p, p]", (H, p, p)), ("K̃ = QᵀK [P, n]", (P, n))]
    if method == "lanczos":
        out.append(basis)
    if method == "dense":
        out.append(("dense Hessian ∇²L̂ [P, P]", (P, P)))
    return out


def head_norms(H, m) -> list:
    """The largest head norm of one sample (:mod:`mhajax.curvature.headnorms`): the H head
    matrices ``[H, m, m]`` and their Schur blocks (about two more of that size)."""
    return [("one sample's head matrices and Schur blocks [3, H, m, m]", (3, H, m, m))]


class MemoryGuardError(InputError):
    """The estimate exceeds the memory available (an ``InputError``: exit 2)."""

    def __init__(self, message, estimate=None, available=None, blamed=()):
        super().__init__(message)
        self.estimate, self.available, self.blamed = estimate, available, tuple(blamed)


def forced(force: bool = False) -> bool:
    """Whether the guard is off: ``force``, or ``MHAJAX_FORCE`` set to anything but 0."""
    return bool(force) or os.environ.get(FORCE_ENV, "0").strip() not in ("", "0")


def _size(v):
    """The largest number of a size (``64``, ``2.5``, ``(1, 4, 16)``, ``"1,4,16"``); None otherwise."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return v
    try:
        return max(float(x) for x in (v.split(",") if isinstance(v, str) else v))
    except (TypeError, ValueError):
        return None


def blame(nbytes: Callable, sizes: dict, reference: dict, budget: int) -> tuple:
    """``(names, "or" | "and")``: the sizes (numbers or lists of them) to blame for
    ``nbytes(sizes) > budget``, in the order of ``sizes``, each reset to its ``reference``:
    all sizes whose reset alone fits (``"or"``: any one will do); else, greedily, the reset
    that lowers ``nbytes`` most, then the next, until it fits or none lowers it (``"and"``).
    A size equal to its reference lowers nothing: it is never named."""
    changed = [k for k in sizes if _size(sizes[k]) is not None]
    alone = [k for k in changed if nbytes({**sizes, k: reference[k]}) <= budget]
    if alone:
        return alone, "or"
    cur, out = dict(sizes), []
    while nbytes(cur) > budget:
        rest = [k for k in changed if k not in out]
        best = min(rest, key=lambda k: nbytes({**cur, k: reference[k]}), default=None)
        if best is None or nbytes({**cur, best: reference[best]}) >= nbytes(cur):
            break
        cur, out = {**cur, best: reference[best]}, out + [best]
    return [k for k in changed if k in out], "and"


def _show(v) -> str:
    if isinstance(v, (tuple, list)):
        return ",".join(map(str, v))
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def guard(estimate: Callable, sizes: dict, reference: dict, *, force: bool = False, api: bool = False,
          budget: Optional["Available"] = None) -> Optional[Estimate]:
    """``estimate(sizes)`` (an :class:`Estimate`) if its bytes are at most ``budget`` (default
    :func:`available`), else :class:`MemoryGuardError` in one line: what, the blamed sizes
    (:func:`blame`, against ``reference``) and their values, the bytes needed and the largest
    term, the bytes available and their source, what to do. ``api``: the sizes are Python
    arguments (``H=…``, ``force=True``), else flags (``--heads …``, ``--force``). None,
    nothing estimated, when :func:`forced`."""
    if forced(force):
        return None
    est, av = estimate(sizes), budget or available()
    if est.nbytes <= av.nbytes:
        return est
    names, conj = blame(lambda s: estimate(s).nbytes, sizes, reference, av.nbytes)
    who = " ".join(f"{k}={_show(sizes[k])}" if api else f"{k} {_show(sizes[k])}" for k in names)
    verbs = ["raise" if _size(sizes[k]) < (_size(reference[k]) or 0) else "lower" for k in names]
    todo = (f"{verbs[0]} " + f" {conj} ".join(names) if len(set(verbs)) == 1
            else f" {conj} ".join(f"{v} {k}" for v, k in zip(verbs, names)))
    label, big = est.largest()
    raise MemoryGuardError(f"{est.what}: {who + ': ' if who else ''}needs ~{fmt_bytes(est.nbytes)} (largest: "
                           f"{label} = {fmt_bytes(big)}), {fmt_bytes(av.nbytes)} available ({av.source}); "
                           f"{todo + ', or ' if todo else ''}pass {'force=True' if api else '--force'}",
                           est, av, names)


def guard_call(what: str, terms: Callable, itemsize: int, *, force: bool = False,
               **sizes) -> Optional[Estimate]:
    """The guard of a public function: ``Estimate(what, terms(**sizes), itemsize)``, each
    argument blamed against 1 (:func:`guard` with ``api=True``)."""
    return guard(lambda s: Estimate(what, tuple(terms(**s)), itemsize), sizes, dict.fromkeys(sizes, 1),
                 force=force, api=True)


def guard_args(what: str, terms: Callable, params, X, *, force: bool = False) -> Optional[Estimate]:
    """:func:`guard_call` of a function of θ (leaves ``[H, ...]``) and ``X [n, T, d]``:
    ``terms(H, n, T, d, p)``, ``p = Σ_leaves prod(shape[1:])`` (θ's, never blamed), b =
    X's itemsize. Shapes only (arrays, tracers, ``jax.ShapeDtypeStruct``); None, unchecked,
    when they are not of this form (the function's own validation reports it)."""
    import jax
    try:
        leaves = jax.tree_util.tree_leaves(params)
        H, p = int(leaves[0].shape[0]), sum(math.prod(leaf.shape[1:]) for leaf in leaves)
        n, T, d = (int(s) for s in X.shape)
        b = X.dtype.itemsize
    except (AttributeError, IndexError, TypeError, ValueError):
        return None
    return guard_call(what, lambda **s: terms(p=p, **s), b, force=force, H=H, n=n, T=T, d=d)


def fmt_bytes(x: float) -> str:
    """``1.5 KiB``, ``436 GiB``, ``1000 GiB``, ``220000 EiB`` (binary units, 3 significant
    digits, no exponent)."""
    for unit, k in (("EiB", 2 ** 60), ("PiB", 2 ** 50), ("TiB", 2 ** 40), ("GiB", 2 ** 30), ("MiB", 2 ** 20),
                    ("KiB", 2 ** 10)):
        if abs(x) >= k:
            v = f"{x / k:.3g}"
            return f"{float(v):.0f} {unit}" if "e" in v else f"{v} {unit}"
    return f"{int(x)} B"


@dataclass(frozen=True)
class Available:
    """Bytes a new allocation may take now, and where that number comes from."""

    nbytes: int
    source: str


def _read(path) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""


def _field(text, key, unit=1):
    """The integer after ``key`` (``"key: 12 kB"`` or ``"key 12"``) in ``text``, times ``unit``; 0 if absent."""
    for line in text.splitlines():
        words = line.split()
        if len(words) > 1 and words[0].rstrip(":") == key and words[1].isdigit():
            return int(words[1]) * unit
    return 0


def _limit(text):
    """A cgroup file's bytes; None for ``max``, a missing file or "unlimited" (>= 2^60)."""
    text = text.strip()
    return int(text) if text.isdigit() and int(text) < 2 ** 60 else None


def cgroup_limits(root="/sys/fs/cgroup", proc_cgroup="/proc/self/cgroup") -> list:
    """``[(bytes free, source)]`` for the memory limit of this process's cgroup and of each
    ancestor directory that exists (in a container the group is often mounted at the root):
    v2 (``0::/path``) ``memory.max − (memory.current − inactive_file)``, v1
    (``N:memory:/path``) ``memory.limit_in_bytes − (memory.usage_in_bytes − total_inactive_file)``."""
    out = []
    for line in _read(proc_cgroup).splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[1] == "":
            base, limit, usage, inactive = root, "memory.max", "memory.current", "inactive_file"
        elif "memory" in parts[1].split(","):
            base, limit, usage, inactive = (os.path.join(root, "memory"), "memory.limit_in_bytes",
                                            "memory.usage_in_bytes", "total_inactive_file")
        else:
            continue
        names = [x for x in parts[2].split("/") if x]
        for i in range(len(names), -1, -1):
            d = os.path.join(base, *names[:i])
            lim = _limit(_read(os.path.join(d, limit)))
            if lim is not None:
                used = (_limit(_read(os.path.join(d, usage))) or 0) - _field(_read(os.path.join(d, "memory.stat")), inactive)
                out.append((max(0, lim - max(0, used)), f"cgroup {limit} of {d}"))
    return out


def available_host() -> Available:
    """Host RAM: the least of ``MemAvailable`` (/proc/meminfo), every cgroup limit
    (:func:`cgroup_limits`), and ``ulimit -v`` / ``ulimit -d`` less this process's
    ``VmSize`` / ``VmData``."""
    mem = _field(_read("/proc/meminfo"), "MemAvailable", 1024)
    cands = ([(mem, "host RAM, MemAvailable")] if mem else []) + cgroup_limits()
    status = _read("/proc/self/status")
    for lim, key, name in ((resource.RLIMIT_AS, "VmSize", "ulimit -v"), (resource.RLIMIT_DATA, "VmData", "ulimit -d")):
        soft = resource.getrlimit(lim)[0]
        if soft != resource.RLIM_INFINITY:
            cands.append((max(0, soft - _field(status, key, 1024)), name))
    nbytes, source = min(cands) if cands else (2 ** 62, "unknown (no /proc)")
    return Available(nbytes, source)


def available_device() -> Optional[Available]:
    """An accelerator's free memory, ``bytes_limit − bytes_in_use`` of ``device.memory_stats()``
    (the first device); None on CPU, before JAX is imported, or where the backend reports none."""
    if "jax" not in sys.modules:
        return None
    dev = sys.modules["jax"].devices()[0]
    stats = (dev.memory_stats() or {}) if dev.platform != "cpu" else {}
    if not stats.get("bytes_limit"):
        return None
    return Available(stats["bytes_limit"] - stats.get("bytes_in_use", 0), f"{dev.platform}:{dev.id} memory")


def available() -> Available:
    """What a new allocation may take: the less of host RAM and (on an accelerator) device memory."""
    return min(filter(None, (available_host(), available_device())), key=lambda a: a.nbytes)
