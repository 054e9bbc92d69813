"""The model-quality test battery: a campus run through a fixed set of disturbances at its point of connection.

``cosim battery SCENARIO`` builds one variant of the scenario per test case (dotted overrides, as
a sweep's variants: :mod:`.variants`), runs them as a sweep (:func:`cosim.studies.sweep.run_sweep`:
in this process, or on Dask with ``workers``/``scheduler``), judges each run by its test's
criterion (pure functions of the point-of-connection channels: :mod:`.battery_criteria`), draws the
channels of every test's cases over each other and writes one page for the whole battery.

The tests follow the structure of ERCOT's Dynamic Model Quality Test Guideline (ERCOT Dynamics
Working Group Procedure Manual, Revision 24, 5 June 2025, section 3.1.5: flat start (3.1.5.2), small
voltage disturbance (3.1.5.3), LVRT (3.1.5.4), HVRT, frequency disturbance, phase-angle jump; the
section numbers as listed for that revision by the gridmo MQT template's page), with two tests from NERC's
review of the 10 July 2024 event (repeated faults; NERC, "Incident Review: Considering
Simultaneous Voltage-Sensitive Load Reductions", 8 Jan 2025) and a loss-of-largest-unit event.
The guideline's pass thresholds are not in this project: every tolerance here is cosim's, stated
with its reason in :data:`TESTS`, and a keyword of :func:`run_battery`.

How a disturbance reaches the campus depends on the grid engine of the point of connection
(:func:`support`): *native* (the engine's own event: an ANDES bus fault or machine trip, an
OpenDSS Fault element) or *imposed* (``adapters/poc_events.py`` between the grid and the campus's
ride-through entity: the campus sees the disturbance, the grid only the campus's response). A
test an engine cannot run is listed as not applicable with the reason, never passed.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cosim.adapters.andes_grid import CASES, load_case
from cosim.errors import Problem, ScenarioError
from cosim.folder import RunFolder, write_json
from cosim.scenario import read_toml
from cosim.scenario.load import apply_overrides
from cosim.scenario.envelopes import EnvelopeError, load as load_envelope, shipped
from cosim.studies.battery_criteria import (DIST_ENTITY, Tolerances, drift_verdict, poc_channels,
                                           ride_through_verdict)
from cosim.studies.battery_page import write_page, write_plots
from cosim.studies.sweep import run_sweep

BATTERY_FILE = "battery.json"
VERDICTS_FILE = "verdicts.csv"
PAGE_FILE = "battery.html"
DIST_SIM = "battery_events"
#: time before every disturbance (the pre-disturbance values are read over it) and after it [s]
PRE_S, POST_S = 2.0, 8.0
#: how long a voltage or frequency step is held (cosim's choice) [s]
STEP_HOLD_S = 10.0
#: NERC's review of 10 July 2024: six faults within 82 s (auto-reclosing onto a failed arrester).
#: The review gives the count and the span; the faults' own times are not in this project, so
#: they are spread evenly over the span (cosim's choice). [-, s]
REPEATED_N, REPEATED_SPAN_S = 6, 82.0
#: fault length where the scenario gives none (6 cycles at 60 Hz; cosim's choice) [s]
FAULT_S = 0.1
ENGINES = ("andes", "opendss", "pandapower")


@dataclass(frozen=True)
class Test:
    """One test of the battery: what it does, its criterion and where the criterion comes from."""

    name: str
    title: str
    criterion: str
    source: str


TESTS = {t.name: t for t in (
    Test("flat_start", "Flat start: no disturbance",
         "drift (max - min after the first step) of P and Q below {drift_frac:.1%} of the initial |S|, of V below "
         "{drift_v_pu:g} pu, of f below {drift_f_hz:g} Hz",
         "ERCOT DWG Procedure Manual 3.1.5.2 (flat start test); tolerances are cosim's: a model that initialises in "
         "equilibrium moves by numerical noise only"),
    Test("voltage_step", "Voltage steps of +5 % and -5 % for 10 s",
         "no transfer to backup, and P back to at least {recover_frac:.0%} of its pre-step value within "
         "{recover_s:g} s of the step's end",
         "ERCOT DWG Procedure Manual 3.1.5.3 (small voltage disturbance test); recovery threshold is cosim's"),
    Test("lvrt", "Low-voltage ride-through at each envelope's corners",
         "inside the envelope (held at a corner): no transfer to backup, and P back to at least {recover_frac:.0%} "
         "of its pre-disturbance value within {recover_s:g} s of the voltage's return",
         "ERCOT DWG Procedure Manual 3.1.5.4 (LVRT test); envelopes from their files' [source]; recovery threshold "
         "is cosim's (a load that ceases must come back: NERC's 2025 incident review)"),
    Test("hvrt", "High-voltage ride-through at each envelope's corners",
         "as LVRT, for a swell held at the corner of a must_stay = \"below\" envelope",
         "ERCOT DWG Procedure Manual 3.1.5 (HVRT test); envelopes from their files' [source]"),
    Test("frequency_step", "Frequency steps of +0.5 Hz and -0.5 Hz (ramp 0.5 s, held 10 s)",
         "no transfer to backup, and P back to at least {recover_frac:.0%} of its pre-step value within "
         "{recover_s:g} s of the step's end",
         "ERCOT DWG Procedure Manual 3.1.5 (frequency disturbance test); the ramp (1 Hz/s) is cosim's"),
    Test("phase_jump", "20 degree phase-angle jump",
         "no transfer to backup",
         "ERCOT DWG Procedure Manual 3.1.5 (phase-angle jump test)"),
    Test("repeated_faults", f"Repeated faults: {REPEATED_N} faults in {REPEATED_SPAN_S:g} s",
         "no transfer to backup through every fault, and P back to at least {recover_frac:.0%} of its "
         "pre-disturbance value within {recover_s:g} s of the last fault",
         "NERC, Incident Review: Considering Simultaneous Voltage-Sensitive Load Reductions (8 Jan 2025): six faults "
         "in 82 s on 10 July 2024; the faults' times are spread evenly (the review gives count and span)"),
    Test("loss_of_largest_unit", "Loss of the largest synchronous machine",
         "no transfer to backup, and P at least {recover_frac:.0%} of its pre-event value at the end",
         "a frequency event every planning study runs (NERC TPL-001 category P1 loss of a generator); criterion is "
         "cosim's"),
)}

#: how each engine applies each test: "native", "imposed", or the reason it cannot
SUPPORT: dict[str, dict[str, str]] = {
    "flat_start": {e: "native" for e in ENGINES},
    "voltage_step": {e: "imposed" for e in ENGINES},
    "lvrt": {e: "imposed" for e in ENGINES},
    "hvrt": {e: "imposed" for e in ENGINES},
    "frequency_step": {e: "imposed" for e in ENGINES},
    "phase_jump": {e: "not applicable: the grid is a phasor (RMS) model and the campus a P/Q load behind "
                      "ride-through logic with no angle input; a jump changes neither its P nor its Q"
                   for e in ENGINES},
    "repeated_faults": {"andes": "native", "opendss": "native", "pandapower": "imposed"},
    "loss_of_largest_unit": {"andes": "native",
                             "opendss": "not applicable: the feeder's source is stiff (no machine to lose)",
                             "pandapower": "not applicable: a power flow has no machines' dynamics"},
}


# -- the site: what the battery needs from the scenario ---------------------------------------
@dataclass
class Site:
    """The point of connection of a scenario and what drives it."""

    path: Path
    raw: dict[str, Any]
    poc: str
    grid_sim: str
    engine: str
    ride_through: str | None
    step_s: float
    f_nominal_hz: float = 60.0
    envelopes: list[str] = field(default_factory=list)


def find_site(path: str | Path, poc: str | None = None, overrides: dict[str, Any] | None = None) -> Site:
    """The point of connection of the scenario at ``path`` (``poc``, or the one grid element fed by
    the campus), its engine and ride-through entity, with ``overrides`` (dotted keys) applied.

    Raises:
        ScenarioError: no point of connection, several without ``poc``, or steps of 1 s or more.
    """
    path = Path(path)
    raw = apply_overrides(read_toml(path), overrides)
    sims, entities = raw.get("sims", {}), raw.get("entities", {})
    grid_sims = {s for s, body in sims.items()
                 if isinstance(body, dict) and body.get("adapter") in ("andes_grid", "grid")}
    fed = []
    for c in raw.get("connect", []):
        dst, src = str(c.get("dst", "")), str(c.get("src", ""))
        if entities.get(dst, {}).get("sim") in grid_sims and entities.get(src, {}).get("sim") not in grid_sims:
            fed.append((dst, src))
    candidates = list(dict.fromkeys(d for d, _ in fed))
    if poc is None:
        verdict_refs = ((raw.get("kpis") or {}).get("ride_through_verdict") or {}).get("envelopes") or {}
        poc = next(iter(verdict_refs), None) if len(candidates) != 1 else candidates[0]
    if poc is None or poc not in entities or entities[poc].get("sim") not in grid_sims:
        known = ", ".join(candidates) or "none"
        why = ("no grid element (an andes_grid or grid Load) is fed by the campus" if not candidates
               else f"not a grid element; the ones fed: {known}" if poc is not None
               else f"several grid elements are fed: {known}; give --poc ENTITY")
        fix = ("the battery needs a point of connection: " + why + "; connect the campus (or its ride-through "
               "entity) to a grid Load")
        problem = Problem("--poc", fix, poc) if poc is not None else Problem("connect", fix)
        raise ScenarioError(path, [problem])
    grid_sim = entities[poc]["sim"]
    adapter = sims[grid_sim]["adapter"]
    engine = "andes" if adapter == "andes_grid" else ("opendss" if sims[grid_sim].get("engine") == "opendss"
                                                      else "pandapower")
    scenario = raw.get("scenario", {})
    step_s = float(sims[grid_sim].get("step_s", scenario.get("step_s", 60.0)))
    if step_s >= 1.0:
        raise ScenarioError(path, [Problem("scenario.step_s", "the battery's disturbances last 0.1-10 s: give "
                                           "sub-second steps, e.g. step_s = 0.1 and tick_s = 0.1", step_s)])
    ride = [src for dst, src in fed if dst == poc and sims.get(entities[src].get("sim"), {}).get("adapter")
            == "ride_through"]
    refs = ((raw.get("kpis") or {}).get("ride_through_verdict") or {}).get("envelopes") or {}
    return Site(path=path, raw=raw, poc=poc, grid_sim=grid_sim, engine=engine,
                ride_through=ride[0] if ride else None, step_s=step_s, envelopes=list(refs.get(poc, [])))


# -- the cases: one run each -------------------------------------------------------------------
@dataclass
class Case:
    """One run of the battery: a test's variant of the scenario."""

    test: str
    name: str
    how: str
    overrides: dict[str, Any]
    t_event_s: float = PRE_S
    t_clear_s: float = PRE_S
    note: str = ""


def support(test: str, site: Site) -> str:
    """``native``, ``imposed`` or why ``test`` cannot run on the site's engine."""
    how = SUPPORT[test][site.engine]
    if how == "imposed" and site.ride_through is None:
        return ("not applicable: an imposed disturbance acts through the campus's ride-through entity "
                "(adapters/ride_through.py), and none feeds the point of connection")
    return how


def _base(site: Site, duration_s: float) -> dict[str, Any]:
    """Overrides every case shares: its span, the scenario's own events off, the channels recorded."""
    sim = site.raw["sims"][site.grid_sim]
    out: dict[str, Any] = {"scenario.duration_s": math.ceil(duration_s - 1e-9)}  # whole seconds, as the schema asks
    if site.engine == "andes":
        out.update({f"sims.{site.grid_sim}.faults": [], f"sims.{site.grid_sim}.gen_trips": []})
    elif "faults" in sim:
        out[f"sims.{site.grid_sim}.faults"] = []
    include = list((site.raw.get("record") or {}).get("include", []))
    if include:
        wanted = [f"{site.poc}.*"] + ([f"{site.ride_through}.*"] if site.ride_through else [])
        out["record.include"] = list(dict.fromkeys([*include, *wanted]))
    return out


def _imposed(site: Site, base: dict[str, Any], voltage: list | None = None, frequency: list | None = None
             ) -> dict[str, Any]:
    """``base`` plus a PocEvents entity feeding the ride-through entity (and its frequency, when imposed)."""
    raw = site.raw
    params: dict[str, Any] = {"sim": DIST_SIM, "model": "PocEvents", "f_nominal_hz": site.f_nominal_hz}
    attrs = []
    if voltage:
        params["voltage"], attrs = voltage, ["vm_sag_pu", "t_sag_s"]
    connects = copy.deepcopy(raw.get("connect", []))
    if frequency:
        params["frequency"] = frequency
        attrs.append("f_hz")
        for c in connects:  # the imposed frequency replaces the grid's at the ride-through input
            if c.get("dst") == site.ride_through:
                c["attrs"] = [a for a in c.get("attrs", []) if (a[-1] if isinstance(a, list) else a) != "f_hz"]
                if isinstance(c.get("initial_data"), dict):
                    c["initial_data"].pop("f_hz", None)
        connects = [c for c in connects if c.get("attrs") != []]
    connects.append({"src": DIST_ENTITY, "dst": site.ride_through, "attrs": attrs})
    if voltage:  # the levels are absolute: the events read the bus voltage the ride-through entity reads
        vm_attr = _voltage_source(raw.get("connect", []), site)
        if vm_attr is not None:
            connects.append({"src": site.poc, "dst": DIST_ENTITY, "attrs": [[vm_attr, "vm_pu"]], "time_shifted": True,
                             "initial_data": {vm_attr: 1.0}})
    out = {**base, f"sims.{DIST_SIM}": {"adapter": "poc_events"}, f"entities.{DIST_ENTITY}": params,
           "connect": connects}
    if "record.include" in out:
        out["record.include"] = [*out["record.include"], f"{DIST_ENTITY}.*"]
    return out


def _voltage_source(connects: list[dict[str, Any]], site: Site) -> str | None:
    """The point of connection's attribute that feeds the ride-through entity's ``vm_pu``."""
    for c in connects:
        if c.get("src") == site.poc and c.get("dst") == site.ride_through:
            for a in c.get("attrs", []):
                src, dst = (a[0], a[-1]) if isinstance(a, list) else (a, a)
                if dst == "vm_pu":
                    return src
    return None


def _steps(site: Site, seconds: float) -> float:
    """``seconds`` rounded down to whole steps (at least one). [s]"""
    return max(1, math.floor(seconds / site.step_s + 1e-9)) * site.step_s


def corners(envelope_names: list[str], side: str, site: Site) -> tuple[list[tuple[str, float, float]], list[str]]:
    """``(label, level, duration_s)`` of every corner of the ``side`` envelopes, and the corners the
    step cannot hold (shorter than one step) as notes. A corner holds the boundary's level of a point
    until the next point's time (the last point is the continuous limit: no corner)."""
    found, skipped = [], []
    for name in envelope_names:
        envelope = load_envelope(name, site.path.parent)
        if envelope.quantity != "voltage" or envelope.must_stay != side or envelope.status != "published":
            continue
        for (_t0, level), (t1, _next) in zip(envelope.points, envelope.points[1:]):
            label = f"{envelope.name} {level:g} pu for {t1:g} s"
            if t1 < site.step_s - 1e-9:
                skipped.append(f"{label}: shorter than one step of {site.step_s:g} s")
            else:
                found.append((label, level, t1))
    return found, skipped


def envelopes_for(site: Site) -> list[str]:
    """The envelopes the scenario names at the point of connection, else every published shipped voltage one."""
    if site.envelopes:
        return site.envelopes
    names = []
    for name in shipped():
        try:
            if load_envelope(name).status == "published":
                names.append(name)
        except EnvelopeError:
            continue
    return names


def build_cases(site: Site, tests: list[str], flat_start_s: float = 20.0) -> tuple[list[Case], dict[str, str]]:
    """The runs of ``tests`` on ``site``, and each test's support (``native``/``imposed``/why not)."""
    cases: list[Case] = []
    how_by_test = {t: support(t, site) for t in tests}
    for test in tests:
        how = how_by_test[test]
        if how not in ("native", "imposed"):
            continue
        made = _BUILDERS[test](site, how, flat_start_s)
        if not made:
            how_by_test[test] = "not applicable: no published envelope gives a corner here (see notes)"
        cases += made
    return _merge_same(cases), how_by_test


def _merge_same(cases: list[Case]) -> list[Case]:
    """One run for cases with the same overrides (two envelopes sharing a corner), named after both."""
    seen: dict[str, Case] = {}
    out = []
    for case in cases:
        key = json.dumps(case.overrides, sort_keys=True) if case.overrides else f"{case.test}/{case.name}"
        if key in seen:
            seen[key].name += f" = {case.name}"
            continue
        seen[key] = case
        out.append(case)
    return out


def _flat_start(site: Site, how: str, flat_start_s: float) -> list[Case]:
    return [Case("flat_start", "flat start", how, _base(site, flat_start_s), t_event_s=flat_start_s,
                 t_clear_s=flat_start_s)]


def _voltage_step(site: Site, how: str, _f: float) -> list[Case]:
    hold = STEP_HOLD_S
    return [Case("voltage_step", f"{sign}5 %", how,
                 _imposed(site, _base(site, PRE_S + hold + POST_S), voltage=[[PRE_S, hold, factor]]),
                 t_clear_s=PRE_S + hold) for sign, factor in (("+", 1.05), ("-", 0.95))]


def _ride_through(side: str, test: str):
    def build(site: Site, how: str, _f: float) -> list[Case]:
        found, skipped = corners(envelopes_for(site), side, site)
        out = []
        for label, level, duration_s in found:
            hold = _steps(site, duration_s)
            factor = level if level != 1.0 else 1.0 - 1e-6
            out.append(Case(test, label, how, _imposed(site, _base(site, PRE_S + hold + POST_S),
                                                       voltage=[[PRE_S, hold, max(factor, 0.0)]]),
                            t_clear_s=PRE_S + hold, note=f"held {hold:g} s at {level:g} pu"))
        for note in skipped:
            out_note = Case(test, note.split(":")[0], "not applicable: " + note.split(": ", 1)[1], {})
            out.append(out_note)
        return out
    return build


def _frequency_step(site: Site, how: str, _f: float) -> list[Case]:
    hold, ramp = STEP_HOLD_S, 0.5
    return [Case("frequency_step", f"{delta:+g} Hz", how,
                 _imposed(site, _base(site, PRE_S + hold + ramp + POST_S), frequency=[[PRE_S, hold, delta, ramp]]),
                 t_clear_s=PRE_S + hold + ramp, note=f"ramp {ramp:g} s ({abs(delta) / ramp:g} Hz/s)")
            for delta in (0.5, -0.5)]


def _repeated_faults(site: Site, how: str, _f: float) -> list[Case]:
    spacing = REPEATED_SPAN_S / (REPEATED_N - 1)
    times = [round((PRE_S + k * spacing) / site.step_s) * site.step_s for k in range(REPEATED_N)]
    times = [round(t, 6) for t in times]
    duration = PRE_S + REPEATED_SPAN_S + POST_S
    sim = site.raw["sims"][site.grid_sim]
    length = _steps(site, FAULT_S)
    base = _base(site, duration)
    if how == "imposed":
        return [Case("repeated_faults", "6 faults", how,
                     _imposed(site, base, voltage=[[t, length, 0.5] for t in times]), t_clear_s=times[-1] + length,
                     note=f"imposed sags to 0.5 pu of {length:g} s (cosim's depth)")]
    if site.engine == "andes":
        bus = site.raw["entities"][site.poc]["bus"]
        own = [f for f in sim.get("faults", []) if str(f[2]) == str(bus)]
        x_pu = float(own[0][3]) if own else 0.02
        base[f"sims.{site.grid_sim}.faults"] = [[t, length, bus, x_pu] for t in times]
        note = f"bus faults at bus {bus} through x = {x_pu:g} pu, {length:g} s each"
    else:
        bus = site.raw["entities"][site.poc].get("bus")
        base[f"sims.{site.grid_sim}.faults"] = [{"bus": bus, "kind": "3ph", "t_s": t, "clearing_s": length}
                                                for t in times]
        note = f"three-phase faults at bus {bus}, {length:g} s each"
    return [Case("repeated_faults", "6 faults", how, base, t_clear_s=times[-1] + length, note=note)]


def _loss_of_largest_unit(site: Site, how: str, _f: float) -> list[Case]:
    gen, rating = largest_unit(site.raw["sims"][site.grid_sim].get("case", "ieee39"), site.path.parent)
    base = _base(site, PRE_S + 2 * STEP_HOLD_S)
    base[f"sims.{site.grid_sim}.gen_trips"] = [[PRE_S, gen]]
    return [Case("loss_of_largest_unit", f"trip {gen}", how, base, t_clear_s=PRE_S + 2 * STEP_HOLD_S,
                 note=f"{gen}, {rating:g} MVA, the case's largest machine")]


def largest_unit(case: str, base_dir: Path) -> tuple[str, float]:
    """The idx and rating of the ANDES case's largest synchronous machine (by MVA rating). [-, MVA]"""
    if case not in CASES and not Path(case).is_absolute():
        case = str((base_dir / case).resolve())
    system = load_case(case)
    ratings = [float(s) for s in system.GENROU.Sn.v]
    k = int(np.argmax(ratings))
    return str(system.GENROU.idx.v[k]), ratings[k]


_BUILDERS = {"flat_start": _flat_start, "voltage_step": _voltage_step, "lvrt": _ride_through("above", "lvrt"),
             "hvrt": _ride_through("below", "hvrt"), "frequency_step": _frequency_step,
             "repeated_faults": _repeated_faults, "loss_of_largest_unit": _loss_of_largest_unit}


# -- verdicts ---------------------------------------------------------------------------------
def judge_case(case: Case, ch: pd.DataFrame, tol: Tolerances) -> tuple[bool, str]:
    """The verdict of ``case`` on its channels and the measured figures as text."""
    if case.test == "flat_start":
        return drift_verdict(ch, tol)
    return ride_through_verdict(ch, case.t_event_s, case.t_clear_s, tol,
                                at_end=case.test in ("loss_of_largest_unit", "phase_jump"))


def criterion_text(test: str, tol: Tolerances) -> str:
    return TESTS[test].criterion.format(**asdict(tol))


# -- the battery -------------------------------------------------------------------------------
def run_battery(scenario: str | Path, out_dir: str | Path, only: list[str] | None = None, poc: str | None = None,
                workers: int | None = 0, scheduler: str | None = None, flat_start_s: float = 20.0,
                tol: Tolerances | None = None, progress: bool = False,
                overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Build, run and judge the battery; write ``battery.json``, ``verdicts.csv``, the plots and
    ``battery.html`` into ``out_dir``. Returns the battery record (``battery.json``'s content).
    ``overrides`` (dotted keys, as ``--set``) apply to the scenario before every case's own.

    Raises:
        ScenarioError: an unknown test, no point of connection, steps of 1 s or more.
    """
    tol = tol or Tolerances()
    tests = list(only or TESTS)
    unknown = [t for t in tests if t not in TESTS]
    if unknown:
        raise ScenarioError("--only", [Problem("--only", f"unknown test; the battery's tests: {', '.join(TESTS)}", t)
                                       for t in unknown])
    site = find_site(scenario, poc, overrides)
    cases, how_by_test = build_cases(site, tests, flat_start_s)
    for case in cases:
        if case.overrides:
            case.overrides = {**(overrides or {}), **case.overrides}
    runnable = [c for c in cases if c.how in ("native", "imposed")]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = run_sweep(site.path, [c.overrides for c in runnable], out, workers=workers, scheduler=scheduler,
                      progress=progress, names=[f"{c.test}/{c.name}" for c in runnable]) if runnable else None
    rows = []
    for case in cases:
        row: dict[str, Any] = {"test": case.test, "case": case.name, "how": case.how, "note": case.note,
                               "criterion": criterion_text(case.test, tol), "source": TESTS[case.test].source}
        if case.how in ("native", "imposed"):
            k = runnable.index(case)
            run = table.iloc[k]
            row.update({"variant": run["variant"], "run_dir": str(Path(run["run_dir"]).relative_to(out.resolve())
                                                                  if Path(run["run_dir"]).is_absolute()
                                                                  else Path(run["run_dir"]).relative_to(out)),
                        "overrides": case.overrides, "t_event_s": case.t_event_s, "t_clear_s": case.t_clear_s})
            row.update(_judge_run(case, out / row["run_dir"], site, tol, run["status"], run.get("reason")))
        else:
            row.update({"verdict": "not applicable", "measured": case.how.removeprefix("not applicable: ")})
        rows.append(row)
    for test, how in how_by_test.items():
        if how not in ("native", "imposed") and not any(r["test"] == test for r in rows):
            rows.append({"test": test, "case": "—", "how": how, "note": "", "verdict": "not applicable",
                         "measured": how.removeprefix("not applicable: "), "criterion": criterion_text(test, tol),
                         "source": TESTS[test].source})
    record = {"scenario": str(site.path.resolve()), "scenario_name": site.path.name, "poc": site.poc,
              "grid_sim": site.grid_sim, "engine": site.engine, "ride_through": site.ride_through,
              "step_s": site.step_s, "tolerances": asdict(tol), "support": support_table(site),
              "cases": rows}
    write_json(out / BATTERY_FILE, record)
    verdict_table(record).to_csv(out / VERDICTS_FILE, index=False)
    titles = {name: t.title for name, t in TESTS.items()}
    write_plots(record, out, titles, poc_channels)
    write_page(record, out, titles, {name: t.source for name, t in TESTS.items()}, ENGINES)
    return record


def _judge_run(case: Case, run_dir: Path, site: Site, tol: Tolerances, status: str, reason: Any) -> dict[str, Any]:
    folder = RunFolder(run_dir)
    if status not in ("ok",) or not folder.series_path.is_file():
        return {"verdict": "error", "status": status, "measured": f"run {status}: {reason}"}
    ch = poc_channels(folder.timeseries(), site.poc, site.ride_through)
    passed, measured = judge_case(case, ch, tol)
    return {"verdict": "pass" if passed else "fail", "status": status, "measured": measured}


def support_table(site: Site) -> dict[str, dict[str, str]]:
    """Per test, per engine: ``native``, ``imposed`` or why not (this site's engine with its ride-through)."""
    out = {test: dict(engines) for test, engines in SUPPORT.items()}
    for test in out:
        out[test][site.engine] = support(test, site)
    return out


def verdict_table(record: dict[str, Any]) -> pd.DataFrame:
    """One row per case: test, case, how, verdict, criterion, measured, source."""
    cols = ["test", "case", "how", "verdict", "criterion", "measured", "note", "source", "run_dir"]
    return pd.DataFrame([{c: r.get(c, "") for c in cols} for r in record["cases"]], columns=cols)


def read_battery(out_dir: str | Path) -> dict[str, Any]:
    """The ``battery.json`` of a battery folder."""
    return json.loads((Path(out_dir) / BATTERY_FILE).read_text(encoding="utf-8"))
