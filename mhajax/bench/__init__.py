"""Speed benchmarks (``python -m verify.bench``, ``python -m verify.bench_gpu``): every
number a ratio against a baseline measured in the same run, with provenance.

* :mod:`~mhajax.bench.timing` — timing helpers and benchmark problems;
* :mod:`~mhajax.bench.suite` — the CPU suite (whole processes, per-point costs, devices);
* :mod:`~mhajax.bench.gpu` — the prepared accelerator run;
* :mod:`~mhajax.bench.peer_torch` — the torch.func peer (needs the ``bench`` extra);
* :mod:`~mhajax.bench.peer_arpack` — the matrix-free peer at large P: torch double-backward
  HVPs into SciPy's ARPACK.

The two peers import neither jax nor mhajax: the suite hands them its data through an
``.npz`` and runs them by path, so their times are their own.
"""
