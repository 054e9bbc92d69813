"""Draw docs/figures/scaling.png: time per simulated step and peak memory against the work of a run
(simulated days, feeder buses, GPUs of a campus, campuses on a feeder), on the direct engine.

    .venv/bin/python docs/figures/scaling.py [--quick] [--out docs/figures/scaling.png]

Runs ``bench/bench_scaling.py --plot`` (a fresh process per case; ~5-15 min on a 2-core machine,
more when it is busy): the figure carries the date and the machine's load of its run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer and shorter cases (a check, not the figure)")
    parser.add_argument("--out", default=str(Path(__file__).with_suffix(".png")))
    args = parser.parse_args(argv)
    command = [sys.executable, str(ROOT / "bench" / "bench_scaling.py"), "--plot", args.out,
               *(["--quick"] if args.quick else [])]
    return subprocess.run(command, cwd=ROOT).returncode


if __name__ == "__main__":
    raise SystemExit(main())
