"""Sharding a sweep's run axis over all local devices (JAX's own machinery).

A sweep evaluates the same pure function on a batch of independent runs
(seeds × configurations, or checkpoints). :func:`over_runs` pads that leading
axis to a multiple of the device count, splits it over a 1-D ``Mesh`` named
``"runs"`` with ``jax.shard_map`` (each device runs the function on its own
block), and drops the padding. With one device it is the plain ``jit``.

Multi-host (multi-process): after ``jax.distributed.initialize(...)``, ``jax.devices()``
lists every process's devices and the same call spans them: every process passes the
*same* full batch (it is a function of the seeds), each device computes its block of
the run axis, and every process gets the full result back (an all-gather), so the
calling code needs no change. Run the same script in every process
(docs/reliability.md, docs/examples/multihost.py).

:func:`over_blocks` splits a *traced* computation instead: inside a jitted program, the
independent blocks of one analysis (a Hessian's head blocks, an inertia count's partial sums)
go to the devices, each block computed by the same program on any device count, so the
result is the one-device result bit for bit.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def device_count() -> int:
    """The number of devices a sweep is split over (every process's)."""
    return jax.device_count()


#: the unit of a split: an analysis cuts its independent work into gcd(size, BLOCKS) blocks
#: (:func:`over_blocks`), so 1, 2, 4 or 8 devices can share them
BLOCKS = 8


def block_devices(blocks: int) -> int:
    """How many devices :func:`over_blocks` splits ``blocks`` blocks over: all local devices
    when there are several, they divide ``blocks`` and this is one process; else 1."""
    d = jax.local_device_count()
    if d > 1 and blocks % d == 0 and jax.process_count() == 1:
        return d
    return 1


def over_blocks(fn, blocks: tuple):
    """``jnp.stack([fn(*b) for b in blocks])``: ``fn`` applied to each block along the leading
    axis (length Bk) of every leaf of ``blocks``, one block after another (``lax.map``), and
    split over :func:`block_devices` devices: each device takes its contiguous blocks from the
    replicated inputs (so no sharding flows back into the code that made them) and the
    results are all-gathered in block order. Every block is computed by the same program
    with the same shapes whatever the device count, so the result does not depend on it,
    bit for bit (sums over blocks are the caller's, in block order). Traceable: for use
    inside ``jit`` (inputs must not be committed to one device)."""
    Bk = jax.tree_util.tree_leaves(blocks)[0].shape[0]
    d = block_devices(Bk)

    def run(*a):
        return jax.lax.map(lambda x: fn(*x), a)
    if d == 1:
        return run(*blocks)
    mesh = jax.sharding.Mesh(np.asarray(jax.local_devices()), ("blocks",))
    per = Bk // d

    def body(*a):
        i = jax.lax.axis_index("blocks")
        mine = jax.tree_util.tree_map(lambda v: jax.lax.dynamic_slice_in_dim(v, i * per, per), a)
        return jax.tree_util.tree_map(lambda v: jax.lax.all_gather(v, "blocks", tiled=True), run(*mine))
    specs = jax.tree_util.tree_map(lambda _: P(), blocks)
    return jax.shard_map(body, mesh=mesh, in_specs=specs, out_specs=P(), check_vma=False)(*blocks)


def _pad(a, total):
    n = a.shape[0]
    if n == total:
        return a
    reps = jnp.repeat(a[-1:], total - n, axis=0)  # pad with copies of the last run
    return jnp.concatenate([a, reps], axis=0)


def over_runs(fn, batched: tuple, replicated: tuple = (), devices=None):
    """``fn(*batched, *replicated)`` where every leaf of ``batched`` has the run
    axis first (same length B) and ``fn`` maps over it; the run axis is split
    over ``devices`` (default all). Returns ``fn``'s output (run axis first,
    length B). ``fn`` must be traceable; it is jitted here."""
    devices = jax.devices() if devices is None else devices
    ndev = len(devices)
    leaves = jax.tree_util.tree_leaves(batched)
    B = leaves[0].shape[0]
    if ndev == 1:
        return jax.jit(fn)(*batched, *replicated)
    total = -(-B // ndev) * ndev
    padded = jax.tree_util.tree_map(lambda a: _pad(a, total), batched)
    mesh = jax.sharding.Mesh(np.asarray(devices), ("runs",))
    in_specs = tuple(jax.tree_util.tree_map(lambda _: P("runs"), b) for b in padded) + \
        tuple(jax.tree_util.tree_map(lambda _: P(), r) for r in replicated)
    smap = jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=P("runs"), check_vma=False)
    if jax.process_count() > 1:
        return _over_processes(smap, mesh, padded, replicated, B)
    # Wait (without holding the GIL) before touching the result: CPU callbacks
    # inside the program need the GIL to finish.
    out = jax.block_until_ready(jax.jit(smap)(*padded, *replicated))
    return jax.tree_util.tree_map(lambda a: a[:B], out)


def _global(a, sharding):
    """A global array from a value every process holds in full (each process places
    only the blocks of its own devices)."""
    a = np.asarray(a)
    return jax.make_array_from_callback(a.shape, sharding, lambda idx: a[idx])


def _over_processes(smap, mesh, padded, replicated, B):
    """:func:`over_runs` when the mesh spans several processes: global inputs in,
    an all-gather of the run axis out (every process returns the full result)."""
    runs, rep = NamedSharding(mesh, P("runs")), NamedSharding(mesh, P())
    gb = jax.tree_util.tree_map(lambda a: _global(a, runs), padded)
    gr = jax.tree_util.tree_map(lambda a: _global(a, rep), replicated)
    out = jax.block_until_ready(jax.jit(smap)(*gb, *gr))
    full = multihost_utils.process_allgather(out, tiled=True)
    return jax.tree_util.tree_map(lambda a: jnp.asarray(a[:B]), full)
