"""Compare every number in two trees of summary.json files.

    python tools/compare_summaries.py BEFORE_DIR AFTER_DIR [--rtol 1e-12] [--show 5]

For every BEFORE_DIR/**/summary.json, the file at the same path under AFTER_DIR is loaded and
every leaf compared: numbers with ``|a − b| <= rtol·max(|a|, |b|)`` (NaN equals NaN), anything
else for equality. Keys that describe a run rather than its results are skipped (timings,
provenance ``meta``, paths). Prints one line per file with its count of differing leaves and
the first ``--show`` of them, grouped by key name; exits 1 when any leaf differs.
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import sys
from pathlib import Path

SKIP = ("wall_time_s", "timings", "timings_s", "meta", "seconds", "summary", "train_s", "analysis_s")


def differences(a, b, rtol: float, path=()):
    """``[(path, why, a, b)]`` for every leaf where ``a`` and ``b`` differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if k in SKIP:
                continue
            if k not in b:
                out.append((path + (k,), "only before", a[k], None))
            elif k not in a:
                out.append((path + (k,), "only after", None, b[k]))
            else:
                out += differences(a[k], b[k], rtol, path + (k,))
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [(path, f"length {len(a)} -> {len(b)}", None, None)]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, rtol, path + (i,))]
    num = (int, float)
    if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) and not isinstance(b, bool):
        if (math.isnan(a) and math.isnan(b)) or a == b:
            return []
        rel = abs(a - b) / max(abs(a), abs(b))
        return [] if rel <= rtol else [(path, f"rel {rel:.2e}", a, b)]
    return [] if (a == b and type(a) is type(b)) else [(path, "differs", a, b)]


def main(argv=None) -> int:
    """Compare the two trees; print the differences; exit 1 if there are any."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--rtol", type=float, default=1e-12)
    p.add_argument("--show", type=int, default=5)
    args = p.parse_args(argv)
    bad = 0
    for f in sorted(Path(args.before).rglob("summary.json")):
        rel = f.relative_to(args.before)
        g = Path(args.after) / rel
        if not g.exists():
            print(f"{rel}: missing after")
            bad += 1
            continue
        out = differences(json.loads(f.read_text()), json.loads(g.read_text()), args.rtol)
        keys = collections.Counter(next((str(k) for k in reversed(d[0]) if not isinstance(k, int)), "?") for d in out)
        total = len(out)
        print(f"{rel}: {total} differing leaves" + (f" (by key: {dict(keys)})" if total else " (all agree)"))
        for path, why, x, y in out[:args.show]:
            print("   ", "/".join(map(str, path)), why, x, y)
        bad += bool(total)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
