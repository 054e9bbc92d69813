"""Draw docs/guides/img/battery_*.png: the plots of a `cosim battery` run on scenarios/interconnection_study.toml.

    .venv/bin/python docs/make_battery_figures.py [--out-dir docs/guides/img] [--keep DIR]

Runs the battery's LVRT and repeated-fault tests (cosim/studies/battery.py, in this process) into a
temporary folder (or ``--keep DIR``) and copies the battery's own overlay plots: the pictures its page shows.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from cosim.studies.battery import run_battery

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "interconnection_study.toml"
TESTS = ("lvrt", "repeated_faults")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default=str(ROOT / "docs" / "guides" / "img"))
    parser.add_argument("--keep", help="write the battery folder here and keep it")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.keep or tmp)
        run_battery(SCENARIO, out, only=list(TESTS))
        for test in TESTS:
            target = Path(args.out_dir) / f"battery_{test}.png"
            shutil.copyfile(out / "plots" / f"{test}.png", target)
            print(target)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
