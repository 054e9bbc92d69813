"""Draw docs/figures/scaling.png from bench_scaling's figures (docs/figures/scaling.json).

One panel per axis (duration, GPUs, campuses, buses): time per simulated step and peak RSS against
the work, log axes. To measure afresh (~10 min on a busy 2-core machine) and redraw::

    .venv/bin/python bench/bench_scaling.py --json docs/figures/scaling.json
    .venv/bin/python docs/figures/scaling.py      # a second
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCH = HERE.parents[1] / "bench" / "bench_scaling.py"


def main() -> None:
    spec = importlib.util.spec_from_file_location("bench_scaling", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.plot(json.loads((HERE / "scaling.json").read_text()), HERE / "scaling.png")


if __name__ == "__main__":
    main()
