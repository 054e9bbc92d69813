"""``cosim reproduce [NAME ...] [--quick] [--workers N | --scheduler ADDRESS]``: re-run the published
cases and check their numbers (all of them, full, when no name is given; on Dask with --workers or
--scheduler, every run one task).

Exit 0 when every case reproduces, 1 when a figure fails or a run does not finish (the
table, ``reproduce.json`` and ``reproduce.html`` say which and why).
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path

from cosim.cli.run import add_engine_argument, engine_overrides
from cosim.cli.studies import non_negative_int
from cosim.errors import Problem, ScenarioError
from cosim.studies.reproduce import CASES_DIR, case_files, format_table, load_cases, run_cases, write_outputs


def cmd_reproduce(args: argparse.Namespace) -> int:
    if args.list:
        for path in case_files(args.cases):
            print(path.stem)
        return 0
    if args.out is not None:
        out_folder_check(args.out)
    cases = load_cases(args.names, args.cases)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or Path("runs") / f"reproduce-{stamp}"
    results = run_cases(cases, out, quick=args.quick, extra=engine_overrides(args),
                        progress=None if args.quiet else print_progress, workers=args.workers,
                        scheduler=args.scheduler)
    print(format_table(results))
    json_path, html_path = write_outputs(results, out, args.quick)
    print(f"table: {json_path}; page: {html_path}")
    return 0 if all(r.passed for r in results) else 1


def out_folder_check(out: Path) -> None:
    """Refuse an ``--out`` that cannot be a folder (it, or a folder above it, is a file) before any run.

    Raises:
        ScenarioError: naming the option, the path and the fix.
    """
    above = next((p for p in (out, *out.parents) if p.exists() or p.is_symlink()), None)
    if above is not None and not above.is_dir():
        what = "is a file" if above == out else f"is under {above}, a file"
        raise ScenarioError("cosim reproduce", [Problem("--out", f"{what}, not a folder; give a folder (created "
                                                                 "when missing) for the runs, reproduce.json and "
                                                                 "reproduce.html", str(out))])


def print_progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def add_parsers(sub) -> None:
    p = sub.add_parser("reproduce", help="re-run published cases (scenarios/published/) and check their numbers")
    p.add_argument("names", nargs="*", metavar="NAME", help="cases to run [all]; see --list")
    p.add_argument("--quick", action="store_true", help="shortened runs (what CI runs); some figures need the full run")
    p.add_argument("--out", type=Path, help="folder for the runs, reproduce.json and reproduce.html "
                                            "[runs/reproduce-<UTC time>]")
    p.add_argument("--cases", type=Path, default=CASES_DIR, help=f"folder of case files [{CASES_DIR}]")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument("--workers", type=non_negative_int, default=0,
                   help="run the cases' runs as tasks on this many local Dask worker processes [0: one after "
                        "another in this process]")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run them on a running Dask scheduler's workers, e.g. tcp://10.0.0.5:8786")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override for every run")
    add_engine_argument(p)
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=cmd_reproduce)
