"""verify.bench_gpu (the accelerator script) in its ``--scale small`` mode on CPU,
its memory arithmetic, and the absence of any P×P array in the checked program.

Truths: numpy eigvalsh of the Hessian from ``jax.hessian`` (``dense_hessian``), hand
arithmetic for the sizes, and the shapes in the traced program. No timing is asserted."""
import json
import re

import jax
import numpy as np
import pytest

from mhajax.bench.timing import problem
from mhajax.curvature.operators import dense_hessian
from mhajax.bench import gpu as bench_gpu


def test_full_scale_sizes_and_memory_estimate():
    """P = 393 216 at H = 256 and >= 1.5e6 at H = 1024 (T = 16, d = 32); the estimate is the
    memory guard's terms (mhajax.runtime.memory.analysis): J is n·P float64 (3.2 GB), B is
    H·p²; their sum fits an H200 (139 GiB) with room, far below P²."""
    big, large = bench_gpu.SCALES["full"]["big"], bench_gpu.SCALES["full"]["large"]
    m = bench_gpu.memory_estimate(*big)
    assert m["P"] == 393_216 == 256 * (16 * 32 + 32 * 32)
    assert m["bytes"]["per-sample Jacobian J [n, P]"] == 1024 * 393_216 * 8
    assert m["bytes"]["head blocks B [H, p, p]"] == 256 * 1536 ** 2 * 8
    assert m["total_bytes"] < 40 * 2 ** 30 < m["dense_hessian_bytes_avoided"]
    assert m["total_bytes"] == m["estimate"].nbytes == sum(m["bytes"].values())
    M = bench_gpu.memory_estimate(*large)
    assert M["P"] >= 1.5e6
    assert M["total_bytes"] < 100 * 2 ** 30


def _max_entries(jaxpr_text):
    """Largest number of entries of any array in a printed jaxpr (sub-jaxprs included)."""
    sizes = [int(np.prod([int(k) for k in s.split(",") if k])) if s else 1
             for s in re.findall(r"f(?:32|64)\[([0-9,]*)\]", jaxpr_text)]
    return max(sizes)


@pytest.mark.slow
def test_no_PxP_array_in_the_check():
    """The traced full check (small scale, H = 8, P = 224, num_steps 64) holds no array
    with P² entries or more: the Hessian is used only through G + B products."""
    H, T, d, n = bench_gpu.SCALES["small"]["large"]
    params, X, y = problem(H, T, d, n)
    P = H * (T * d + d * d)
    text = str(jax.make_jaxpr(bench_gpu._check_fn(64, 2))(params, X, y, jax.random.PRNGKey(0)))
    assert "f64[%d,%d]" % (P, P) not in text
    assert _max_entries(text) < P * P


@pytest.mark.slow
def test_small_scale_run_matches_dense(tmp_path):
    """``--scale small`` runs both stages to completion and writes complete JSON with
    provenance; λ_min/λ_max agree with dense eigvalsh to 1e-8 relative, the residual
    target holds, the certificate is below the Ritz λ_min and the dense λ_min."""
    out = tmp_path / "gpu"
    assert bench_gpu.main(["--scale", "small", "--repeat", "1", "--out", str(out)]) == 0
    res = json.loads((out / "bench_gpu.json").read_text())
    assert res["complete"] is True and res["scale"] == "small"
    assert res["meta"]["backend"] == jax.default_backend() and res["meta"]["dtype"] == "float64"
    assert "jax" in res["meta"]["versions"]
    for stage in ("big", "large"):
        r = res[stage]
        H, T, d, n = bench_gpu.SCALES["small"][stage]
        params, X, y = problem(H, T, d, n)
        A = np.asarray(jax.jit(dense_hessian)(params, X, y))
        ev = np.linalg.eigvalsh(A)
        s = r["solver"]
        assert r["P"] == H * (T * d + d * d)
        assert s["eig_converged"] and s["certified_below_ritz"]
        assert abs(s["lambda_min"] - ev[0]) <= 1e-8 * abs(ev[0])
        assert abs(s["lambda_max"] - ev[-1]) <= 1e-8 * abs(ev[-1])
        assert s["lambda_min_block"] <= ev[0] + 1e-12 * abs(ev[-1])
        assert s["residual_rel"] <= bench_gpu.RESIDUAL_TARGET
    big = res["big"]
    assert set(big["timings"]) == {"gradient", "hvp", "check", "structured_parts", "certificates", "lanczos"}
    assert all(t["compile_s"] > 0 and t["median_s"] > 0 for t in big["timings"].values())
    assert big["ratios"]["check/hvp"] == pytest.approx(
        big["timings"]["check"]["median_s"] / big["timings"]["hvp"]["median_s"])
    assert res["large"]["completed"] is True


@pytest.mark.parametrize("argv, word", [(["--scale", "huge"], "--scale"),
                                        (["--stages", "big,tiny"], "--stages"),
                                        (["--repeat", "0"], "--repeat")])
def test_bad_input_is_refused_before_anything_is_written(tmp_path, capsys, argv, word):
    from mhajax.cli.common import run_main
    out = tmp_path / "o"
    assert run_main(bench_gpu.main, argv + ["--out", str(out)]) == 2
    assert word in capsys.readouterr().err
    assert not out.exists()
