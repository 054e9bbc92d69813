"""``cosim run``, ``cosim validate`` and ``cosim list``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from cosim import grid_models, registry
from cosim.errors import Problem, ScenarioError, few
from cosim.gym import check_scenario as check_agent_sections
from cosim.run import run_scenario
from cosim.run.runner import load_scenario
from cosim.scenario import envelopes, parse_set, read_toml
from cosim.scenario.schema import FOREIGN_SECTIONS
from cosim.studies.reproduce import check_case, load_case


def engine_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """``--set`` items plus ``--engine`` / ``--rt-factor`` as the scenario keys they stand for."""
    overrides = parse_set(args.set)
    if getattr(args, "engine", None):
        overrides["scenario.engine"] = args.engine
    if getattr(args, "rt_factor", None) is not None:
        overrides["scenario.rt_factor"] = args.rt_factor
    return overrides


def print_warnings(scn) -> None:
    for text in scn.warnings:
        print(f"warning: {text}", file=sys.stderr)


def _sidecar_case(path: str):
    """The case of a published-case file without its own ``[scenario]`` (a sidecar), else None."""
    try:
        raw = read_toml(Path(path))
    except ScenarioError:
        return None  # load_scenario reports it
    return load_case(path) if "reproduce" in raw and "scenario" not in raw else None


def _validate_envelope(path: str) -> bool:
    """An envelope file (``[envelope]``, no ``[scenario]``: cosim/scenario/envelopes.py) checked and
    summarised; False when ``path`` is not one.

    Raises:
        ScenarioError: every problem of the file, key by key.
    """
    try:
        raw = read_toml(Path(path))
    except ScenarioError:
        return False  # load_scenario reports it
    if "envelope" not in raw or "scenario" in raw:
        return False
    try:
        env = envelopes.load(str(Path(path).resolve()))
    except envelopes.EnvelopeError as exc:
        raise ScenarioError(path, [Problem(p.split(":", 1)[0], p.split(":", 1)[1].strip() if ":" in p else p)
                                   for p in exc.problems]) from None
    kind = "a placeholder (no values: refused for verdicts)" if env.status == "placeholder" else \
        f"{len(env.points)} points, must stay {env.must_stay} {env.continuous:g} {env.unit} after {env.points[-1][0]:g} s"
    print(f"{path}: ok — envelope {env.name} ({env.quantity}"
          f"{', ' + env.voltage_definition if env.voltage_definition else ''}): {kind}")
    return True


def cmd_validate(args: argparse.Namespace) -> int:
    if _validate_envelope(args.scenario):
        return 0
    case = _sidecar_case(args.scenario)
    if case is not None:  # a sidecar: validate every variant's run of its base scenario
        check_case(case, quick=False, extra=engine_overrides(args))
        print(f"{args.scenario}: ok — published case {case.name} on {case.scenario.name}: "
              f"{len(case.variants)} variants ({', '.join(case.variants)}), {len(case.figures)} figures")
        return 0
    scn = load_scenario(args.scenario, engine_overrides(args), args.allow_commands)
    if any(section in scn.raw for section in FOREIGN_SECTIONS):
        check_agent_sections(scn)  # [agent] / [agents.<name>]: read by cosim.gym, checked by it
    if "reproduce" in scn.raw:  # [reproduce]: a published case, checked by cosim reproduce
        check_case(load_case(args.scenario), quick=False, extra=engine_overrides(args))
    print_warnings(scn)
    s = scn.scenario
    print(f"{args.scenario}: ok — {s.name}: {len(scn.sims)} sims, {len(scn.entities)} entities, "
          f"{len(scn.connect)} connections, {scn.until_ticks // scn.ticks(s.step_s)} steps of {s.step_s} s from {s.start:%Y-%m-%d %H:%M} UTC")
    return 0


def _run_federate(args: argparse.Namespace, scn):
    """``--helics CONFIG``: the run as a HELICS value federate (cosim/run/federate.py), on either engine."""
    try:
        from cosim.run.federate import FederationError, load_config, run_federate  # imports helics
    except ModuleNotFoundError as exc:
        raise ScenarioError(args.helics, [Problem("--helics", f"needs the helics package ({exc}); "
                                                              "pip install helics (or the test extra)")]) from None

    cfg = load_config(args.helics, scn)
    try:
        return run_federate(scn, cfg, args.out, report=not args.no_report)
    except KeyboardInterrupt:  # Ctrl-C on the direct engine (a second one on mosaik): the run folder is written
        print("interrupted; the run folder says what was recorded", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)  # a HELICS call may be left pending, and HELICS's clean-up at exit would wait on it
    except FederationError as exc:
        if exc.result is None:  # else the run's outcome below says it, with what was kept
            print(f"error: {exc}", file=sys.stderr)
        args.helics_stuck = exc.stuck
        return exc.result


def cmd_run(args: argparse.Namespace) -> int:
    scn = load_scenario(args.scenario, engine_overrides(args), args.allow_commands)
    print_warnings(scn)
    if getattr(args, "helics", None) is not None:
        result = _run_federate(args, scn)
        if result is None:
            return 1
        code = _report_run(args, scn, result)
        if getattr(args, "helics_stuck", False):  # HELICS's clean-up at exit would wait on the federation
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        return code
    result = run_scenario(scn, args.out, progress=not args.quiet, report=not args.no_report)
    return _report_run(args, scn, result)


def _report_run(args: argparse.Namespace, scn, result) -> int:
    """Print a run's KPIs, warnings and outcome; the exit code."""
    if not args.quiet or not result.ok:
        print(f"\nKPIs ({result.run_dir / 'kpis.json'}):")
        print(format_kpis(result.kpis, "  "))
        print(f"run folder: {result.run_dir}")
        if (result.run_dir / "report.html").is_file():
            print(f"report: {result.run_dir / 'report.html'}")
    for text in result.metadata.get("warnings", []):  # the run's guards (validation's were printed above)
        if text.startswith("after the run: "):
            print(f"warning: {text}", file=sys.stderr)
    behind = result.metadata.get("rt_behind_max_s")
    if behind is not None and behind > 0.5 * (scn.scenario.rt_factor or 0) * scn.scenario.step_s:
        print(f"warning: the run fell behind real time by up to {behind:.2f} s (rt_factor {scn.scenario.rt_factor:g})",
              file=sys.stderr)
    if result.degraded:
        print(f"warning: run degraded: {result.reason}", file=sys.stderr)
        return DEGRADED_EXIT
    if result.ok and result.reason:  # a simulator ended the run early, on purpose (cosim.sdk.EndRun)
        print(f"note: the run ended early: {result.reason}", file=sys.stderr)
    if not result.ok:
        rows = result.folder.n_rows()
        kept = (f"the {rows} steps recorded up to then are in {result.folder.series_path}" if rows else
                "nothing was recorded before it stopped")
        print(f"run {result.status}: {result.reason}\n({kept})", file=sys.stderr)
        return 1
    return 0


#: Exit code of a run that finished but is partly unknown (``status = "degraded"``).
DEGRADED_EXIT = 3


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
    scenarios = Path(__file__).resolve().parents[2] / "scenarios"
    try:
        meta = cls.meta_for(cls.SimParams.model_validate(example, context={"base_dir": scenarios}))
    except (ValueError, OSError):
        return {"models": {}}, "  (attributes depend on the sim's params)"
    shown = ", ".join(f"{k} = {v!r}" for k, v in example.items())
    return meta, f"  (attributes depend on the sim's params; shown for {shown})"


def cmd_list(args: argparse.Namespace) -> int:
    print("adapters (units are in the attribute names):")
    for name, target in registry.available().items():
        cls = registry.adapter_class(name)
        meta, note = _meta_for_listing(cls)
        print(f"\n  {name}  ({target}){note}")
        sim_params = list(cls.SimParams.model_fields)
        if sim_params:
            print(f"    sim params: {', '.join(sim_params)}")
        for model, desc in meta.get("models", {}).items():
            print(f"    {model}  (role: {desc.get('role', '?')})")
            params = [p for p in desc.get("params", []) if p != "eid"]
            if params:
                print(f"      params:  {', '.join(params)}")
            ins = "any" if desc.get("any_inputs") else few(desc.get("inputs", [])) or "-"
            print(f"      inputs:  {ins}")
            print(f"      outputs: {few(desc.get('outputs', [])) or '-'}")
        for line in cls.listing():  # the adapter's own choices (e.g. the datacenter's scheduling policies)
            print(f"    {line}")
    print("\ngrid catalogue (network = ...; also simbench:<code> or a pandapower JSON path):")
    for name, text in grid_models.catalogue().items():
        print(f"  {name:<14} {text}")
    return 0


def add_allow_commands(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-commands", action="store_true",
                        help="let the scenario start programs (a sim's cmd); off by default: a scenario runs no code")


def add_engine_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", choices=("mosaik", "direct"),
                        help="orchestrator: mosaik (default, the one of record) or the in-process direct loop "
                             "(same results, faster); scenario.engine")


def positive_float(text: str) -> float:
    """argparse type: a number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text}")
    return value


def add_parsers(sub) -> None:
    """``run``, ``validate`` and ``list``."""
    p_run = sub.add_parser("run", help="run a scenario into a run folder")
    p_run.add_argument("scenario", type=Path)
    p_run.add_argument("--out", type=Path, default=Path("runs"), help="where run folders go [runs]")
    p_run.add_argument("--quiet", action="store_true", help="no progress bar, no KPI summary")
    p_run.add_argument("--no-report", action="store_true", help="skip report.html")
    p_run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override a scenario key, e.g. --set scenario.seed=3")
    add_engine_argument(p_run)
    add_allow_commands(p_run)
    p_run.add_argument("--rt-factor", type=positive_float, metavar="F",
                       help="real time: F wall seconds per simulated second (scenario.rt_factor)")
    p_run.add_argument("--helics", type=Path, metavar="CONFIG",
                       help="join a HELICS federation as a value federate: broker, name, publications and "
                            "subscriptions in CONFIG (TOML or JSON; docs/guides/helics.md)")
    p_run.set_defaults(func=cmd_run)
    p_val = sub.add_parser("validate", help="check a scenario and list every problem")
    p_val.add_argument("scenario", type=Path)
    p_val.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    add_engine_argument(p_val)
    add_allow_commands(p_val)
    p_val.set_defaults(func=cmd_validate)
    p_list = sub.add_parser("list", help="adapters, their models and attributes; the grid catalogue")
    p_list.set_defaults(func=cmd_list)
