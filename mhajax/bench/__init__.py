"""Speed benchmarks (``python -m verify.bench``, ``python -m verify.bench_gpu``): every
number a ratio against a baseline measured in the same run, with provenance.

* :mod:`~mhajax.bench.timing` — timing helpers and benchmark problems;
* :mod:`~mhajax.bench.suite` — the CPU suite (whole processes, per-point costs, devices);
* :mod:`~mhajax.bench.gpu` — the prepared accelerator run;
* :mod:`~mhajax.bench.peer_torch` — the torch.func peer (needs the ``bench`` extra).
"""
