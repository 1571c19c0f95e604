"""Symmetric eigensolvers that are safe inside batched, jitted XLA programs on CPU.

On CPU, jaxlib 0.10's batched LAPACK kernels fan their batch out into XLA's
intra-op thread pool and wait for it from a pool worker; two such kernels
running at once (e.g. two ``eigvalsh`` of a ``vmap``-ed analysis) can occupy
every worker and wait on each other forever — seen here as a hang with 0% CPU
on a 2-core machine (stack: ``lapack_dsyevd_ffi`` -> ``ParallelBatchMap`` ->
``BlockingCounter::Wait``). Issue 14 found the other side of that wait: a second pool
worker inside ``dsyevd`` -> ``dormtr`` -> OpenBLAS's *threaded* GEMM
(``exec_blas_async_wait``) of SciPy's bundled OpenBLAS (``scipy.libs/libscipy_openblas``,
which is jaxlib's CPU LAPACK). With every loaded OpenBLAS on one thread, that hang (two
batched calls) does not occur (reproduced and checked in all variants).

Single-threaded OpenBLAS is not always enough: a program with four independent batched
``eigh`` calls (``jnp.linalg.eigh`` of four [64, 112, 112] batches, OpenBLAS on one thread)
hung on its first run on 2 quiet cores (issue 14, 2026-12-01; three such calls and two ran 30
and 200 times without a hang, and under load the four sometimes ran). Each batched kernel
blocks a thread while its batch runs on XLA's pool, so enough of them at once leave no thread
to run the batches. ``vmap`` used to build such programs: it turns every single-matrix call
into a batched kernel, and the links-all κ-chain analysis ``vmap``-ed over 6 points (H = 16,
n = 64) then held five independent ones and hung (2026-12-01, reproduced twice). On CPU,
``vmap`` now loops over the axis it adds (``lax.map``; :func:`_sequential_under_vmap`): each
call site stays one kernel of the batch it was written with, so a vmapped program holds as many
independent batched calls as the unmapped one. mhajax's own programs hold at most two, vmapped
or not (:func:`batched_calls_in_flight` counts them in a traced program; ``tests/test_linalg.py``
checks every one); a user who jits several analyses together can build more. For such
programs ``MHAJAX_CPU_EIGH=loop`` hands
LAPACK **one matrix per call** (a ``lax.map`` loop inside the program, and a ``custom_vmap``
rule so that ``vmap`` maps the same way): no kernel fans out or waits, and the results are
the batched call's to the bit. It is not the default because it costs every program: the
κ-chain analysis at H = 16 compiled 0.3–0.6 s slower and its links-all run went from 0.50–0.56 s to
0.60–0.68 s (the batch's occasional second core is given up), and the curvature and chain
tests took 758 s instead of 627 s.

So on CPU the route is chosen once per process (:func:`lapack_single_threaded`):

* every loaded OpenBLAS single-threaded (``mhajax.runtime.jaxsetup.single_threaded_blas``,
  which every command and the test suite call first) — ``jnp.linalg`` inside the XLA
  program, like on accelerators (``MHAJAX_CPU_EIGH=loop``: one matrix per LAPACK call,
  above). A program without host callbacks can be written to JAX's persistent compilation
  cache (a program with one cannot), so a second run of a command compiles nothing;
* otherwise (a library user who never single-threaded OpenBLAS), or with the environment
  variable ``MHAJAX_CPU_EIGH=callback`` — NumPy's LAPACK through ``jax.pure_callback``
  (it runs outside the XLA pool and handles any batch shape itself).

On accelerators we use ``jnp.linalg`` unchanged. The
callbacks hand their work to one dedicated thread: with several CPU devices
(sharded sweeps), OpenBLAS entered from many XLA threads was seen to hang.
That thread runs matrices of size <= ``SINGLE_THREAD_MAX`` with OpenBLAS
limited to one thread: small eigenproblems gain nothing from threads, and on a
loaded machine OpenBLAS's thread hand-off made them 10–50x slower (measured:
``eigvalsh`` of 16 matrices 112x112 took 9 ms on one thread, 90–500 ms on two).

Both functions take ``A [..., m, m]`` (symmetric; only the lower triangle is
read, as in LAPACK) and return eigenvalues in ascending order; a matrix with a NaN or inf
entry gets NaN results on every route.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import functools
import importlib.machinery
import importlib.util
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jcore


def _on_cpu() -> bool:
    return jax.default_backend() == "cpu"


# One dedicated thread makes every LAPACK call: OpenBLAS entered from many
# distinct XLA worker threads (several CPU devices) was seen to hang.
_LAPACK = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mhajax-lapack")


SINGLE_THREAD_MAX = 512  # matrices up to this size are solved with one OpenBLAS thread


#: SciPy's extension modules that jaxlib's CPU LAPACK kernels take their routines from
SCIPY_LAPACK_MODULES = ("scipy.linalg.cython_blas", "scipy.linalg.cython_lapack")


class _BindOnImport:
    """A one-shot ``sys.meta_path`` finder: when ``scipy.linalg`` itself is imported after
    :func:`load_lapack` loaded its two LAPACK modules, bind them as its attributes once its
    ``__init__`` has run (a plain import binds a submodule to its parent; loading one by
    file cannot, the parent not existing yet)."""

    def find_spec(self, name, path=None, target=None):
        if name != "scipy.linalg":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            for full in SCIPY_LAPACK_MODULES:
                if full in sys.modules:
                    setattr(module, full.rsplit(".", 1)[1], sys.modules[full])

        spec.loader.exec_module = exec_module
        return spec


def _load_scipy_extension(name: str) -> None:
    """Load SciPy's compiled module ``name`` (``scipy.sub.mod``) from its file under its own
    name, without importing its parent package's ``__init__``; raise if it cannot be."""
    import scipy   # the top-level package only: ~7 ms

    folder = os.path.join(os.path.dirname(scipy.__file__), *name.split(".")[1:-1])
    stem = name.rsplit(".", 1)[1]
    path = next(p for p in (os.path.join(folder, stem + s) for s in importlib.machinery.EXTENSION_SUFFIXES)
                if os.path.exists(p))
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise


@functools.lru_cache(maxsize=1)
def load_lapack() -> bool:
    """Load the LAPACK that jaxlib's CPU kernels call, and say whether it is loaded.

    jaxlib takes its LAPACK routines from SciPy's ``scipy.linalg.cython_lapack`` (and
    ``cython_blas``), which bring ``scipy.libs/libscipy_openblas``. Imported the usual way,
    they first run ``scipy.linalg``'s package ``__init__``: 0.17–0.28 s of every command's
    start on 2 cores (it pulls ``numpy.f2py``, ``unittest`` and SciPy's array-API layer;
    issue 14), for two modules that load in ~13 ms. So they are loaded from their files under
    their own names: jaxlib finds them in ``sys.modules``, and a later ``import scipy.linalg``
    gets them bound as its attributes as usual (:class:`_BindOnImport`). If that fails (a
    SciPy laid out otherwise), ``scipy.linalg`` is imported as before; False only where SciPy
    is missing."""
    if "scipy.linalg" not in sys.modules:
        binder = _BindOnImport()
        sys.meta_path.insert(0, binder)   # also binds a module loaded before a failure below
        try:
            for name in SCIPY_LAPACK_MODULES:
                if name not in sys.modules:
                    _load_scipy_extension(name)
            return True
        except Exception:   # noqa: BLE001 - any failure: the plain import below decides
            pass
    try:
        import scipy.linalg  # noqa: F401
    except ImportError:
        return False
    return True


@functools.lru_cache(maxsize=1)
def openblas_controls() -> tuple:
    """``(get, set)`` pairs for every OpenBLAS loaded in this process, found
    through ``/proc/self/maps`` (Linux); empty where there is none or no procfs."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({ln.split()[-1] for ln in f if "openblas" in ln.lower() and "/" in ln})
    except OSError:
        return ()
    controls = []
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("scipy_", ""):
            for suffix in ("64_", ""):
                get = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
                put = getattr(lib, f"{prefix}openblas_set_num_threads{suffix}", None)
                if get is not None and put is not None:
                    get.restype, put.argtypes = ctypes.c_int, [ctypes.c_int]
                    controls.append((get, put))
    return tuple(controls)


@contextlib.contextmanager
def _blas_threads_for(m: int):
    """One OpenBLAS thread while solving matrices of size ``m <= SINGLE_THREAD_MAX``
    (restored afterwards); no change for larger ones."""
    controls = openblas_controls() if m <= SINGLE_THREAD_MAX else ()
    saved = [get() for get, _ in controls]
    for _, put in controls:
        put(1)
    try:
        yield
    finally:
        for (_, put), n in zip(controls, saved):
            put(n)


def _np_eigvalsh(a, dtype):
    return _LAPACK.submit(_np_eigvalsh_locked, a, dtype).result()


def _np_eigvalsh_locked(a, dtype):
    a = np.asarray(a)
    with _blas_threads_for(a.shape[-1]):
        return _np_eigvalsh_raw(a, dtype)


def _np_eigvalsh_raw(a, dtype):
    if not np.all(np.isfinite(a)):  # LAPACK would fail; report NaN like the GPU path
        out = np.linalg.eigvalsh(np.nan_to_num(a, nan=0.0, posinf=0.0, neginf=0.0))
        bad = ~np.all(np.isfinite(a), axis=(-2, -1))
        out[bad] = np.nan
        return out.astype(dtype)
    return np.linalg.eigvalsh(a).astype(dtype)


def _np_eigh(a, dtype):
    return _LAPACK.submit(_np_eigh_locked, a, dtype).result()


def _np_eigh_locked(a, dtype):
    a = np.asarray(a)
    with _blas_threads_for(a.shape[-1]):
        return _np_eigh_raw(a, dtype)


def _np_eigh_raw(a, dtype):
    finite = np.all(np.isfinite(a), axis=(-2, -1))
    w, v = np.linalg.eigh(np.where(finite[..., None, None], a, 0.0))
    w[~finite] = np.nan
    v[~finite] = np.nan
    return w.astype(dtype), v.astype(dtype)


CPU_EIGH_ENV = "MHAJAX_CPU_EIGH"  # "callback": the host-callback route on CPU; "loop": one matrix per call


def one_matrix_per_call() -> bool:
    """Whether the CPU route loops over a batch (``$MHAJAX_CPU_EIGH`` is ``loop``); read when
    a program is traced (the traced-program cache keys on the variable)."""
    return _on_cpu() and os.environ.get(CPU_EIGH_ENV, "").strip().lower() == "loop"


@functools.lru_cache(maxsize=1)
def lapack_single_threaded() -> bool:
    """Whether the CPU eigensolvers may run inside XLA: every OpenBLAS loaded in the process
    — SciPy's included, which is jaxlib's CPU LAPACK (loaded here if it is not yet) — runs
    one thread, and ``$MHAJAX_CPU_EIGH`` is not ``callback``. Checked once per process, at
    the first trace of :func:`eigvalsh`/:func:`eigh` on CPU; False where no OpenBLAS can
    be found (then the callback route, safe anywhere, is used)."""
    if os.environ.get(CPU_EIGH_ENV, "").strip().lower() == "callback":
        return False
    if not load_lapack():   # jaxlib's CPU LAPACK: scipy.libs/libscipy_openblas
        return False
    openblas_controls.cache_clear()  # SciPy's OpenBLAS may have been loaded since the last look
    controls = openblas_controls()
    return bool(controls) and all(get() == 1 for get, _ in controls)


def _in_xla() -> bool:
    return not _on_cpu() or lapack_single_threaded()


def _finite_guard(A):
    """``(finite [...], A0)``: which matrices of ``A [..., m, m]`` are finite, and A with the
    others replaced by 0 (LAPACK is never handed a NaN)."""
    finite = jnp.all(jnp.isfinite(A), axis=(-2, -1))
    return finite, jnp.where(finite[..., None, None], A, jnp.zeros((), A.dtype))


def _sequential_under_vmap(solve):
    """``solve`` (a ``jnp.linalg`` routine of ``A [..., m, m]``), with a ``custom_vmap`` rule
    that loops over the axis ``vmap`` adds (``lax.map``) instead of merging it into the LAPACK
    batch: a call site stays one kernel of the batch it was written with. Without it, ``vmap``
    turns every single-matrix call into a batched kernel, and a vmapped analysis holds more
    independent batched calls than XLA's pool can run at once (module docstring).
    Derivatives are ``solve``'s own (``custom_jvp``; reverse mode included)."""

    @jax.custom_batching.custom_vmap
    def call(a):
        return solve(a)

    @call.def_vmap
    def _rule(axis_size, in_batched, a):
        out = jax.lax.map(call, a) if in_batched[0] else call(a)
        return out, jax.tree_util.tree_map(lambda _: bool(in_batched[0]), out)

    @jax.custom_jvp
    def differentiable(a):
        return call(a)

    @differentiable.defjvp
    def _jvp(primals, tangents):   # custom_vmap has no transpose: differentiate ``solve`` itself
        return jax.jvp(solve, primals, tangents)

    return differentiable


def _one_at_a_time(solve):
    """``solve`` (a ``jnp.linalg`` routine of one ``[m, m]`` matrix) for ``A [..., m, m]``,
    one matrix per LAPACK call: ``lax.map`` over the flattened batch, and the same under
    ``vmap`` (:func:`_sequential_under_vmap`), so no call is a batched kernel (module docstring)."""
    one = _sequential_under_vmap(solve)

    def apply(A):
        if A.ndim == 2:
            return one(A)
        m = A.shape[-1]
        out = jax.lax.map(one, A.reshape((-1, m, m)))
        return jax.tree_util.tree_map(lambda o: o.reshape(A.shape[:-2] + o.shape[1:]), out)

    return apply


_eigh_cpu = _one_at_a_time(jnp.linalg.eigh)
_eigvalsh_cpu = _one_at_a_time(jnp.linalg.eigvalsh)
_eigh_batched = _sequential_under_vmap(jnp.linalg.eigh)
_eigvalsh_batched = _sequential_under_vmap(jnp.linalg.eigvalsh)


def _xla_route(solve, batched, one_by_one):
    """The in-program solver: ``one_by_one`` (``MHAJAX_CPU_EIGH=loop``), else ``batched`` on CPU
    (``vmap`` loops, :func:`_sequential_under_vmap`), else ``solve`` (accelerators batch well)."""
    if one_matrix_per_call():
        return one_by_one
    return batched if _on_cpu() else solve


def eigvalsh(A: jax.Array) -> jax.Array:
    """Eigenvalues ``[..., m]`` (ascending) of symmetric ``A [..., m, m]``.
    A matrix with a NaN or inf entry gets NaN eigenvalues (on every backend)."""
    if _in_xla():
        finite, A0 = _finite_guard(A)
        w = _xla_route(jnp.linalg.eigvalsh, _eigvalsh_batched, _eigvalsh_cpu)(A0)
        return jnp.where(finite[..., None], w, jnp.nan)
    dtype = np.dtype(A.dtype)  # fixed at trace time: the callback thread may see other jax flags
    out = jax.ShapeDtypeStruct(A.shape[:-1], dtype)
    return jax.pure_callback(lambda a: _np_eigvalsh(a, dtype), out, A, vmap_method="broadcast_all")


def eigh(A: jax.Array):
    """``(w [..., m], V [..., m, m])`` with ``A V = V diag(w)``, ``w`` ascending;
    NaN for a matrix with a NaN or inf entry."""
    if _in_xla():
        finite, A0 = _finite_guard(A)
        w, V = _xla_route(jnp.linalg.eigh, _eigh_batched, _eigh_cpu)(A0)
        return jnp.where(finite[..., None], w, jnp.nan), jnp.where(finite[..., None, None], V, jnp.nan)
    dtype = np.dtype(A.dtype)
    outs = (jax.ShapeDtypeStruct(A.shape[:-1], dtype), jax.ShapeDtypeStruct(A.shape, dtype))
    return jax.pure_callback(lambda a: _np_eigh(a, dtype), outs, A, vmap_method="broadcast_all")


# ---------------------------------------------------------------------------
# How many batched eigensolver kernels a program can have in flight at once
# ---------------------------------------------------------------------------

_LOOPS = ("while", "scan", "cond")   # their iterations / branches run one at a time


def _subjaxprs(eqn) -> list:
    found = []
    for v in eqn.params.values():
        for x in (v if isinstance(v, (tuple, list)) else (v,)):
            if isinstance(x, jcore.ClosedJaxpr):
                found.append(x.jaxpr)
            elif isinstance(x, jcore.Jaxpr):
                found.append(x)
    return found


def _nodes(jaxpr, env: dict, nodes: list, producer: dict) -> None:
    """Append ``(weight, parents)`` per equation of ``jaxpr`` to ``nodes``: a batched ``eigh``
    weighs 1; a loop or ``cond`` weighs :func:`_in_flight` of its bodies (the largest); a call
    (``jit``, ``custom_jvp``, ``custom_vmap``, ...) is inlined; anything else weighs 0.
    ``env`` maps a variable to the outer variable it stands for, ``producer`` a variable to
    the index of its node (variables themselves are the keys: they stay alive)."""
    for eqn in jaxpr.eqns:
        keys = [None if isinstance(a, jcore.Literal) else env.get(a, a) for a in eqn.invars]
        subs = _subjaxprs(eqn)
        if (len(subs) == 1 and eqn.primitive.name not in _LOOPS and len(subs[0].invars) == len(eqn.invars)
                and len(subs[0].outvars) == len(eqn.outvars)):
            inner = dict(env)
            inner.update({v: k for v, k in zip(subs[0].invars, keys) if k is not None})
            _nodes(subs[0], inner, nodes, producer)
            for o, io in zip(eqn.outvars, subs[0].outvars):
                if not isinstance(io, jcore.Literal):
                    env[o] = inner.get(io, io)
            continue
        if eqn.primitive.name == "eigh":
            weight = int(eqn.invars[0].aval.ndim > 2)
        else:
            weight = max((_in_flight(sub) for sub in subs), default=0)
        nodes.append((weight, {producer[k] for k in keys if k in producer}))
        producer.update({o: len(nodes) - 1 for o in eqn.outvars})


def _in_flight(jaxpr) -> int:
    """The maximum weight of a set of nodes no two of which are ordered by a data dependency
    (a maximum antichain, with a node of weight w as w incomparable copies): by Dilworth's
    theorem, the number of copies minus a maximum matching of the comparability graph."""
    nodes: list = []
    _nodes(jaxpr, {}, nodes, {})
    heavy_above = []                              # per node: the weighted nodes it depends on
    for w, parents in nodes:
        above = set()
        for q in parents:
            above |= heavy_above[q] | ({q} if nodes[q][0] else set())
        heavy_above.append(above)
    copies = [i for i, (w, _) in enumerate(nodes) for _ in range(w)]
    later = [[b for b, j in enumerate(copies) if i in heavy_above[j]] for i in copies]
    match: dict = {}                              # right copy -> left copy

    def augment(a, seen):
        for b in later[a]:
            if b not in seen:
                seen.add(b)
                if b not in match or augment(match[b], seen):
                    match[b] = a
                    return True
        return False

    return len(copies) - sum(augment(a, set()) for a in range(len(copies)))


def batched_calls_in_flight(fn, *args, **kwargs) -> int:
    """The most batched eigensolver kernels (``eigh`` of ``[..., m, m]`` with a batch) that no
    data dependency orders in ``fn``'s program at these arguments: how many can be in flight at
    once. Structural (traced with ``jax.make_jaxpr``, nothing runs): a loop counts as its body,
    a call as its inside. On CPU each such kernel can hold a thread of XLA's pool while its
    batch waits for another (module docstring): mhajax's programs hold at most two; four hung.
    Above two, consider ``MHAJAX_CPU_EIGH=loop``. Counts the in-program route only (the
    callback route has no batched kernel)."""
    return _in_flight(jax.make_jaxpr(fn)(*args, **kwargs).jaxpr)


def norm(x: jax.Array, axis=None) -> jax.Array:
    """Euclidean norm that neither overflows nor underflows: ``s·||x/s||`` with
    ``s = max|x|`` (plain ``sqrt(Σx²)`` squares tiny residuals to zero and
    huge ones to inf). ``axis=None`` flattens; returns 0 for a zero vector, NaN for a
    vector with a NaN entry and inf for one with an inf entry (never 0: a residual of a
    NaN vector must not read as converged)."""
    s = jnp.max(jnp.abs(x), axis=axis, keepdims=True)   # NaN if any entry is NaN
    scaled = (s > 0) & jnp.isfinite(s)
    safe = jnp.where(scaled, s, 1.0)
    out = jnp.where(scaled, safe * jnp.sqrt(jnp.sum((x / safe) ** 2, axis=axis, keepdims=True)),
                    jnp.where(s == 0, jnp.zeros((), s.dtype), s))
    return jnp.squeeze(out, axis=axis) if axis is not None else out.reshape(())
