"""Submittal subcommands of ``cosim``: ``battery`` (the model-quality tests) and ``bundle`` (pack and verify).

User mistakes raise ScenarioError or FileNotFoundError, which :func:`cosim.cli.main` prints
without a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cosim.cli.run import add_engine_argument, engine_overrides
from cosim.cli.studies import SOME_FAILED_EXIT, non_negative_int
from cosim.errors import Problem, ScenarioError
from cosim.studies.battery import PAGE_FILE, TESTS, VERDICTS_FILE, run_battery
from cosim.studies.bundle import make_bundle, print_rows, verify_bundle


def cmd_battery(args: argparse.Namespace) -> int:
    out = args.out or Path("runs") / f"battery-{args.scenario.stem}"
    record = run_battery(args.scenario, out, only=args.only or None, poc=args.poc, workers=args.workers,
                         scheduler=args.scheduler, flat_start_s=args.flat_start_s, progress=not args.quiet,
                         overrides=engine_overrides(args))
    width = max(len(f"{c['test']}: {c['case']}") for c in record["cases"])
    for c in record["cases"]:
        print(f"{(c['test'] + ': ' + c['case']).ljust(width)}  {c['verdict']:<15} {c['how']}")
    counts = {v: sum(c["verdict"] == v for c in record["cases"]) for v in ("pass", "fail", "error", "not applicable")}
    print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['error']} did not run to the end, "
          f"{counts['not applicable']} not applicable on the {record['engine']} engine; "
          f"table: {out / VERDICTS_FILE}; page: {out / PAGE_FILE}")
    if counts["error"]:
        print("some runs did not finish: their verdict is 'error' (the reason is in the table)", file=sys.stderr)
        return SOME_FAILED_EXIT
    return 0


def cmd_bundle(args: argparse.Namespace) -> int:
    if args.verify:
        rows = verify_bundle(args.dir)
        print_rows(rows)
        compared = sum(r["expected"] is not None for r in rows)
        print(f"{args.dir}: every file matches its manifest; {compared} of {len(rows)} runs re-run to identical "
              "results" + ("" if compared == len(rows) else " (the others recorded none: packed with --allow-failed)"))
        return 0
    if args.dir.suffix == ".zip" and args.dir.is_file():
        raise ScenarioError(args.dir, [Problem("DIR", "this is a bundle; to check it give --verify", str(args.dir))])
    path = make_bundle(args.dir, args.out, allow_failed=args.allow_failed)
    print(f"bundle: {path}")
    return 0


def add_parsers(sub) -> None:
    """``battery`` and ``bundle``."""
    p = sub.add_parser("battery", help="run the model-quality test battery at the scenario's point of connection")
    p.add_argument("scenario", type=Path)
    p.add_argument("--only", nargs="+", metavar="TEST", choices=list(TESTS),
                   help=f"run only these tests ({', '.join(TESTS)})")
    p.add_argument("--out", type=Path, help="battery folder [runs/battery-<scenario name>]")
    p.add_argument("--poc", metavar="ENTITY", help="the point of connection [the grid element the campus feeds]")
    p.add_argument("--workers", type=non_negative_int, default=0,
                   help="local Dask worker processes [0: in this process]")
    p.add_argument("--scheduler", metavar="ADDRESS", help="a running Dask scheduler, e.g. tcp://10.0.0.5:8786")
    p.add_argument("--flat-start-s", type=float, default=20.0, help="length of the flat-start run [20 s]")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override for every case (TOML literal), before the battery's own keys")
    add_engine_argument(p)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_battery)

    p = sub.add_parser("bundle", help="pack a battery or run folders for a planner (zip with manifest); "
                                      "--verify re-runs a bundle")
    p.add_argument("dir", type=Path, help="a battery folder, a run folder or a folder of runs (with --verify: the zip)")
    p.add_argument("--out", type=Path, help="the zip to write [DIR.zip]")
    p.add_argument("--verify", action="store_true", help="check a bundle's files and re-run its runs")
    p.add_argument("--allow-failed", action="store_true", help="pack runs that did not finish ok (marked as such)")
    p.set_defaults(func=cmd_bundle)
