"""Plumbing every layer above may use: result files, resumable progress, sharding over
devices, process setup, progress display and text/Markdown formatting.

* :mod:`~mhajax.runtime.io` — provenance blocks and atomic result files;
* :mod:`~mhajax.runtime.resume` — finished units of a sweep kept on disk;
* :mod:`~mhajax.runtime.sharding` — a sweep's run axis split over devices;
* :mod:`~mhajax.runtime.jaxsetup` — float64, the compilation cache, one BLAS thread;
* :mod:`~mhajax.runtime.progress` — a status line on a terminal;
* :mod:`~mhajax.runtime.format` — numbers and tables for reports;
* :mod:`~mhajax.runtime.memory` — the memory guard: refuses sizes whose dominant arrays
  cannot fit, before anything is allocated;
* :mod:`~mhajax.runtime.lock` — one run at a time per results directory.
"""
