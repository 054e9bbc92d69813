"""Study subcommands of ``cosim``: ``sweep``, ``hosting-capacity``, ``report``, ``compare``.

User mistakes raise ScenarioError or FileNotFoundError, which :func:`cosim.cli.main` prints
without a traceback.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

from cosim.cli.run import add_allow_commands, add_engine_argument, engine_overrides
from cosim.errors import Problem, ScenarioError
from cosim.kpis import V_HIGH_PU, V_LOW_PU
from cosim.report import write_report
from cosim.run.repair import repair
from cosim.scenario import parse_set
from cosim.studies.compare import compare, expand_runs, format_table, spectrum_png, write_compare_html
from cosim.studies.hosting import STEP_MW, Limits, hosting_capacity
from cosim.studies.hosting_buses import VoltageBuses
from cosim.studies.hosting_file import is_hosting_file, load_hosting_file
from cosim.studies.sweep import run_sweep
from cosim.studies.variants import SweepSpec, load_sweep_file


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0 (``--workers -1`` would start a cluster that never runs)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0 (0 runs in this process), got {value}")
    return value


def cmd_sweep(args: argparse.Namespace) -> int:
    grid = parse_set(args.set, many=True)
    if args.engine:
        grid["scenario.engine"] = [args.engine]
    try:
        is_sweep_file = "sweep" in tomllib.loads(args.file.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        is_sweep_file = False  # load_scenario names the problem below
    spec = load_sweep_file(args.file) if is_sweep_file else SweepSpec(scenario=args.file)
    spec.grid.update(grid)  # --set adds grid keys to a sweep file's, or replaces them
    variants = spec.variants()
    out = args.out or Path("runs") / f"sweep-{args.file.stem}"
    table = run_sweep(spec.scenario, variants, out, workers=args.workers, scheduler=args.scheduler,
                      progress=not args.quiet, retry_failed=not args.keep_failed, reports=args.reports,
                      allow_commands=args.allow_commands, names=spec.names())
    failed = table[table["status"] != "ok"]
    for _, row in failed.iterrows():
        print(f"{row['status']}: {row['variant']}: {row['reason']}", file=sys.stderr)
    print(f"{len(table)} variants, {len(table) - len(failed)} ok, {len(failed)} failed; table: {out / 'sweep.parquet'}")
    return SOME_FAILED_EXIT if len(failed) else 0


#: Exit code of a sweep or hosting study in which some run did not finish ok (the table has them all).
SOME_FAILED_EXIT = 2


def cmd_hosting(args: argparse.Namespace) -> int:
    study = hosting_arguments(args)
    out = args.out or Path("runs") / f"hosting-{args.scenario.stem}"
    step_mw = study.pop("step_mw")
    table = hosting_capacity(out_dir=out, step_mw=step_mw, workers=args.workers, scheduler=args.scheduler,
                             progress=not args.quiet, allow_commands=args.allow_commands, **study)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"table: {out / 'hosting.csv'}; results: {out / 'hosting.json'}; figure: {out / 'hosting.png'}")
    for _, row in table.iterrows():
        if row.get("holds_again_mw") and row["holds_again_mw"] != "not scanned":
            print(f"note: bus {row['bus']}: every limit holds again at {row['holds_again_mw']} MW, above the "
                  f"{row['hosting_mw']:.3f} MW answer (scan step {step_mw:g} MW): violations come and go with "
                  "the load (regulator taps); the answer is the first limit met from below", file=sys.stderr)
    base = table[table["bound"] == "base case fails"]
    if len(base) and len(base) == len(table):
        print(f"warning: every bus fails already without the load: {base.iloc[0]['limited_by']}", file=sys.stderr)
    errors = table[table["bound"].isin(["error", "not run"])]
    if len(errors):
        print(f"{len(errors)} of {len(table)} buses have no answer (errors above)", file=sys.stderr)
        return SOME_FAILED_EXIT
    return 0


#: ``hosting-capacity`` options a study file may give instead, with their defaults.
HOSTING_DEFAULTS = {"min_mw": 0.001, "max_mw": 50.0, "tol_mw": 0.1, "step_mw": STEP_MW, "v_low_pu": V_LOW_PU,
                    "v_high_pu": V_HIGH_PU, "loading_max_pct": 100.0, "param": None, "bus_entity": None,
                    "scan_above": None}


def hosting_arguments(args: argparse.Namespace) -> dict:
    """:func:`hosting_capacity`'s arguments from a scenario or ``[hosting]`` study file and the command
    line (an option given on the command line wins; ``--set`` adds to the file's ``[hosting.set]``)."""
    spec = load_hosting_file(args.scenario) if is_hosting_file(args.scenario) else {}
    given = {"min_mw": args.min_mw, "max_mw": args.max_mw, "tol_mw": args.tol_mw, "step_mw": args.step_mw,
             "v_low_pu": args.v_low, "v_high_pu": args.v_high, "loading_max_pct": args.loading_max,
             "param": args.param, "bus_entity": args.bus_entity, "scan_above": args.scan_above}
    value = {k: given[k] if given[k] is not None else spec.get(k, default) for k, default in HOSTING_DEFAULTS.items()}
    load = args.load or spec.get("load")
    if not load:
        raise ScenarioError("--load", [Problem("--load", "name the entity to size (e.g. --load pcc), or give "
                                                         "load = \"pcc\" in the study file's [hosting]")])
    cli_buses = args.voltage_buses is not None or args.voltage_kv_min is not None or args.voltage_kv_max is not None
    return {"scenario": spec.get("scenario", args.scenario), "load_entity": load,
            "buses": args.bus or spec.get("buses"), "size_param": value["param"], "bus_entity": value["bus_entity"],
            "min_mw": value["min_mw"], "max_mw": value["max_mw"], "tol_mw": value["tol_mw"],
            "step_mw": value["step_mw"], "scan_above": value["scan_above"],
            "voltage_buses": voltage_buses_arg(args) if cli_buses else spec.get("voltage_buses"),
            "limits": Limits(value["v_low_pu"], value["v_high_pu"], value["loading_max_pct"]),
            "overrides": {**spec.get("overrides", {}), **engine_overrides(args)}}


def voltage_buses_arg(args: argparse.Namespace) -> VoltageBuses:
    """``--voltage-buses`` and ``--voltage-kv-min``/``--voltage-kv-max`` as one choice."""
    if args.voltage_kv_min is None and args.voltage_kv_max is None:
        return VoltageBuses.parse(args.voltage_buses, "--voltage-buses")
    if args.voltage_buses not in (None, "all", "primary"):
        raise ScenarioError("--voltage-buses", [Problem("--voltage-buses", "a list of buses and a kV range do not "
                                                        "combine; give one of them", args.voltage_buses)])
    chosen = VoltageBuses(primary=args.voltage_buses == "primary", kv_min=args.voltage_kv_min,
                          kv_max=args.voltage_kv_max)
    chosen.check("--voltage-kv-min/--voltage-kv-max")
    return chosen


def cmd_repair(args: argparse.Namespace) -> int:
    done = repair(args.run, report=not args.no_report)
    print(f"{done.run_dir}: {done.status}, {done.rows} rows" + "".join(f"; {n}" for n in done.notes))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    print(write_report(args.run, args.out))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    if args.html.is_dir():  # checked first: a wrong path should not wait for the table
        raise ScenarioError("--html", [Problem("--html", f"{args.html} is a folder; give the HTML file to write, "
                                                         f"e.g. {args.html / 'compare.html'}")])
    dirs, labels = expand_runs(args.runs)
    table = compare(dirs, labels, only=args.kpis or None)
    print(format_table(table))
    figures = {}
    for column in args.spectrum:
        runs = [c for c in table.columns if not str(c).startswith("Δ")]
        png = spectrum_png(dirs, runs, column)
        if png is None:
            print(f"warning: no run recorded {column} at steps of 0.5 s or less: no spectrum", file=sys.stderr)
        else:
            figures[f"Power spectrum of {column}"] = png
    print(f"html: {write_compare_html(table, args.html, figures)}")
    return 0


def add_parsers(sub) -> None:
    """``sweep``, ``hosting-capacity``, ``report`` and ``compare``."""
    p = sub.add_parser("sweep", help="run variants of a scenario on Dask; merge KPIs into sweep.parquet")
    p.add_argument("file", type=Path, help="a scenario file, or a sweep file with a [sweep] section")
    p.add_argument("--set", action="append", default=[], metavar="KEY=V1,V2",
                   help="sweep a key over values (TOML literals; quote strings that look like numbers)")
    p.add_argument("--out", type=Path, help="sweep folder [runs/sweep-<file name>]; re-running skips finished variants")
    p.add_argument("--workers", type=non_negative_int,
                   help="local Dask worker processes [2]; 0 runs in this process")
    p.add_argument("--scheduler", metavar="ADDRESS", help="a running Dask scheduler, e.g. tcp://10.0.0.5:8786")
    p.add_argument("--keep-failed", action="store_true", help="do not re-run variants that failed before")
    p.add_argument("--reports", action="store_true", help="write report.html in every run folder")
    add_engine_argument(p)
    add_allow_commands(p)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("hosting-capacity", help="largest load (MW) per bus without voltage/thermal violations")
    p.add_argument("scenario", type=Path, help="a scenario file, or a study file with a [hosting] section "
                                               "(options given here win over the file's)")
    p.add_argument("--load", help="entity whose size is searched, e.g. campus (required unless the study file "
                                  "names it)")
    p.add_argument("--param", help="its size param [peak_mw if it has one, else p_mw]")
    p.add_argument("--bus-entity", help="grid element whose bus moves [the load itself, or what it feeds]")
    p.add_argument("--bus", action="append", default=[],
                   help="a bus where the load goes (repeat); default every bus where its phases fit, but the "
                        "slack / source and regulator terminals")
    p.add_argument("--min-mw", type=float, help="the base case's size, ~no load [0.001 MW]")
    p.add_argument("--max-mw", type=float, help="the largest size tried [50 MW]")
    p.add_argument("--tol-mw", type=float, help="the answer's resolution (bisection) [0.1 MW]")
    p.add_argument("--step-mw", type=float,
                   help=f"the scan's step up to the first failure and above it [{STEP_MW:g} MW]; a window of "
                        "violations narrower than this can be missed")
    above = p.add_mutually_exclusive_group()
    above.add_argument("--scan-above", dest="scan_above", action="store_const", const=True,
                       help="scan on above the first failure to --max-mw for sizes where the limits hold again "
                            "[on where the grid's own regulators or capacitor controls act]")
    above.add_argument("--no-scan-above", dest="scan_above", action="store_const", const=False,
                       help="stop at the first failure")
    p.add_argument("--voltage-buses", metavar="all|primary|BUS,BUS,...",
                   help="the buses the voltage band applies to: every bus but the source and regulator terminals "
                        "[all], the distribution primary (1-35 kV), or these buses")
    p.add_argument("--voltage-kv-min", type=float, metavar="KV",
                   help="check buses of at least this nominal line-to-line voltage [kV]")
    p.add_argument("--voltage-kv-max", type=float, metavar="KV",
                   help="check buses of at most this nominal line-to-line voltage [kV]")
    p.add_argument("--v-low", type=float, help="lowest bus voltage allowed [0.95 pu]")
    p.add_argument("--v-high", type=float, help="highest bus voltage allowed [1.05 pu]")
    p.add_argument("--loading-max", type=float, help="highest line/trafo loading allowed [100 %%]")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override for every run")
    add_engine_argument(p)
    add_allow_commands(p)
    p.add_argument("--out", type=Path)
    p.add_argument("--workers", type=non_negative_int, help="local Dask worker processes [2]; 0 runs in this process")
    p.add_argument("--scheduler", metavar="ADDRESS")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_hosting)

    p = sub.add_parser("repair", help="make a killed run's folder whole: assemble what it recorded, "
                                      "mark it failed, write KPIs and report")
    p.add_argument("run", type=Path)
    p.add_argument("--no-report", action="store_true")
    p.set_defaults(func=cmd_repair)

    p = sub.add_parser("report", help="write report.html for a run folder")
    p.add_argument("run", type=Path)
    p.add_argument("--out", type=Path, help="where to write it [RUN/report.html]")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("compare", help="KPIs of runs side by side (first = baseline), terminal and HTML")
    p.add_argument("runs", type=Path, nargs="+", help="run folders (baseline first), or a sweep folder for its runs")
    p.add_argument("--html", type=Path, default=Path("compare.html"), help="HTML page to write [compare.html]")
    p.add_argument("--kpis", action="append", default=[], metavar="PREFIX",
                   help="keep the KPIs starting with PREFIX (e.g. swing.campus); repeatable")
    p.add_argument("--spectrum", action="append", default=[], metavar="ENTITY.ATTR",
                   help="overlay this column's power spectrum of every run in the HTML (e.g. campus.p_mw); repeatable")
    p.set_defaults(func=cmd_compare)
