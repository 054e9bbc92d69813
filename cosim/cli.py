"""The ``cosim`` command: ``run``, ``validate``, ``list``; studies (``sweep``,
``hosting-capacity``, ``report``, ``compare``) are in ``cosim/cli_studies.py``.

A user mistake prints one message naming the file, key, value and fix, and exits 1 —
never a traceback (set ``COSIM_DEBUG=1`` to see one for a bug report).
"""

from __future__ import annotations

import argparse
import os
import sys
import tomllib
import traceback
from pathlib import Path
from typing import Any

from cosim.scenario import ScenarioError, _few, load_scenario


def _parse_set(items: list[str]) -> dict[str, Any]:
    """``--set scenario.seed=3`` -> ``{"scenario.seed": 3}`` (values are TOML literals, else strings)."""
    overrides = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ScenarioError("--set", [_problem(item, "expected KEY=VALUE, e.g. scenario.seed=3")])
        try:
            overrides[key] = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            overrides[key] = text
    return overrides


def _problem(value: str, message: str):
    from cosim.scenario import Problem

    return Problem("--set", message, value)


def cmd_validate(args: argparse.Namespace) -> int:
    scn = load_scenario(args.scenario, _parse_set(args.set))
    s = scn.scenario
    print(f"{args.scenario}: ok — {s.name}: {len(scn.sims)} sims, {len(scn.entities)} entities, "
          f"{len(scn.connect)} connections, {s.duration_s // s.step_s} steps of {s.step_s} s from {s.start:%Y-%m-%d %H:%M} UTC")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from cosim.runner import run_scenario

    scn = load_scenario(args.scenario, _parse_set(args.set))
    result = run_scenario(scn, args.out, progress=not args.quiet, report=not args.no_report)
    if not args.quiet or not result.ok:
        print(f"\nKPIs ({result.run_dir / 'kpis.json'}):")
        print(format_kpis(result.kpis, "  "))
        print(f"run folder: {result.run_dir}")
        if (result.run_dir / "report.html").is_file():
            print(f"report: {result.run_dir / 'report.html'}")
    if not result.ok:
        print(f"run failed: {result.reason}\n(what was recorded up to then is in {result.run_dir / 'timeseries.parquet'})",
              file=sys.stderr)
        return 1
    return 0


def format_kpis(kpis: dict[str, Any], indent: str = "") -> str:
    """KPIs as an indented ``key: value`` listing."""
    lines = []
    for key, value in kpis.items():
        if isinstance(value, dict):
            lines.append(f"{indent}{key}:")
            lines.append(format_kpis(value, indent + "  "))
        elif isinstance(value, float):
            lines.append(f"{indent}{key}: {value:.6g}")
        else:
            lines.append(f"{indent}{key}: {value}")
    return "\n".join(line for line in lines if line)


def _meta_for_listing(cls) -> tuple[dict[str, Any], str]:
    """The class META, or, when attributes depend on params, the META for the adapter's example."""
    if cls.META.get("models"):
        return cls.META, ""
    example = cls.EXAMPLE.get("sim", {})
    scenarios = Path(__file__).resolve().parents[1] / "scenarios"
    try:
        meta = cls.meta_for(cls.SimParams.model_validate(example, context={"base_dir": scenarios}))
    except (ValueError, OSError):
        return {"models": {}}, "  (attributes depend on the sim's params)"
    shown = ", ".join(f"{k} = {v!r}" for k, v in example.items())
    return meta, f"  (attributes depend on the sim's params; shown for {shown})"


def cmd_list(args: argparse.Namespace) -> int:
    from cosim import registry

    print("adapters (units are in the attribute names):")
    for name, target in registry.available().items():
        cls = registry.adapter_class(name)
        meta, note = _meta_for_listing(cls)
        print(f"\n  {name}  ({target}){note}")
        sim_params = list(cls.SimParams.model_fields)
        if sim_params:
            print(f"    sim params: {', '.join(sim_params)}")
        for model, desc in meta.get("models", {}).items():
            print(f"    {model}")
            params = [p for p in desc.get("params", []) if p != "eid"]
            if params:
                print(f"      params:  {', '.join(params)}")
            ins = "any" if desc.get("any_inputs") else _few(desc.get("inputs", [])) or "-"
            print(f"      inputs:  {ins}")
            print(f"      outputs: {_few(desc.get('outputs', [])) or '-'}")
    try:
        import grid_models

        print("\ngrid catalogue (network = ...; also simbench:<code> or a pandapower JSON path):")
        for name, text in grid_models.catalogue().items():
            print(f"  {name:<14} {text}")
    except (ImportError, AttributeError):
        pass
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cosim", description="Co-simulation of AI datacenters with the grids, cooling plants and sources around them.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="run a scenario into a run folder")
    p_run.add_argument("scenario", type=Path)
    p_run.add_argument("--out", type=Path, default=Path("runs"), help="where run folders go [runs]")
    p_run.add_argument("--quiet", action="store_true", help="no progress bar, no KPI summary")
    p_run.add_argument("--no-report", action="store_true", help="skip report.html")
    p_run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override a scenario key, e.g. --set scenario.seed=3")
    p_run.set_defaults(func=cmd_run)
    p_val = sub.add_parser("validate", help="check a scenario and list every problem")
    p_val.add_argument("scenario", type=Path)
    p_val.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p_val.set_defaults(func=cmd_validate)
    p_list = sub.add_parser("list", help="adapters, their models and attributes; the grid catalogue")
    p_list.set_defaults(func=cmd_list)
    from cosim.cli_studies import add_study_parsers

    add_study_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ScenarioError, FileNotFoundError) as exc:
        print(str(exc), file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        print(str(exc) or "interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug, not a user mistake: one line unless asked for more
        if os.environ.get("COSIM_DEBUG"):
            traceback.print_exc()
        print(f"cosim: internal error: {type(exc).__name__}: {exc} (set COSIM_DEBUG=1 for the traceback)",
              file=sys.stderr)
        return 2
