"""Hosting capacity: the largest datacenter load a bus takes, met from below, without voltage or thermal violations.

For each bus, full runs are made with the load moved to that bus (the ``bus`` param of the
grid element it feeds) at growing sizes. The size is either

* a param of one entity: ``campus.peak_mw`` of a ``FacilityLoad`` (the trace's shape kept)
  or ``pcc.p_mw`` of a constant grid ``Load``; or
* *replay mode*, when the load entity is a grid element fed by connections (``--load pcc``
  for a GPU cluster plus cooling plant feeding ``pcc``): the scenario runs once, and a
  grid-only variant of it (the same file with its ``sims``, ``entities`` and ``connect``
  replaced by overrides) replays what each fed grid element drew (``replay.csv``), the point
  of connection's draw scaled so its peak is the trial's size; PV and storage stay at their
  buses as recorded. The site is not re-simulated per trial (fast, and the shape is the
  site's own), so feedback from grid voltage to the site is not captured.

A run *passes* when, at every step of the whole scenario, every checked bus stays within
``[v_low_pu, v_high_pu]`` (the grid's ``allbus_vm_min_pu``/``allbus_vm_max_pu`` over the
buses :class:`~cosim.studies.hosting_buses.VoltageBuses` chooses; by default every bus but the
source and regulator terminals), every line and transformer at or below ``loading_max_pct``
and the power flow converged. (pandapower's ``case33bw`` has no line ratings: on ``ieee33``
only the voltage binds.)

The search (:func:`search_bus`): the base case at ``min_mw`` first; then a *scan* up from it
at the fixed points ``step_mw, 2 step_mw, ...`` (and ``max_mw``) to the first failing point;
then a bisection inside that bracket (the last passing and the first failing point) until it
is ``tol_mw`` narrow. The answer is the bracket's passing end: the first limit met from below,
at most ``tol_mw`` under it, and the same whatever ``max_mw`` is once ``max_mw`` is above it
(the scan points do not depend on ``max_mw``). Bisection alone assumes violations grow with
the load; with tap-changing regulators they do not (a regulator taps up and a bus that
failed passes again), so on a grid whose own controls act (OpenDSS with RegControls or
capacitors and ``regulators = "auto"``) the scan goes on above the first failure to ``max_mw``
and the result lists the scan points where the limits hold again (``holds_again_mw``).
``scan_above`` forces it on or off (on: where else a generator or a meshed network might make
violations come and go; off: fewer runs). A window of violations narrower than ``step_mw`` can fall between two
scan points: make the step smaller to look closer.

A run that fails because the grid's power flow did not converge (``on_nonconvergence =
"fail"``: the run's ``metadata.json`` says ``error_type = "PowerFlowNotConverged"``) is a
violated limit, ``nonconvergence``; a run failed by anything else is no answer for that bus.

Each bus is one Dask task running its search's runs in turn, so buses run in parallel
(``workers``/``scheduler`` as in :func:`cosim.studies.sweep.run_sweep`).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from tqdm import tqdm

from cosim import grid_models
from cosim.errors import PowerFlowNotConverged, Problem, ScenarioError
from cosim.folder import RunFolder
from cosim.kpis import V_HIGH_PU, V_LOW_PU
from cosim.report.figures import new_figure
from cosim.scenario import Scenario, load_scenario
from cosim.studies.executor import check_workers, run_tasks
from cosim.studies.hosting_buses import (
    VoltageBuses,
    feeder_bus_table,
    grid_has_controls,
    grid_sim_params,
    placement_buses,
)
from cosim.studies.sweep import run_variant

TABLE_NAME = "hosting.parquet"

#: The scan's step when none is given: fixed (not a fraction of ``max_mw``, so the answer does not
#: move with it) and a few times the default ``tol_mw``; regulator windows on a 12.47 kV primary
#: are about 1 MW wide (IEEE 8500, bus m1166366: 2.2-3.4 MW at 0.92 pu). [MW]
STEP_MW = 0.5


@dataclass(frozen=True)
class Limits:
    """What a run must respect to pass."""

    v_low_pu: float = V_LOW_PU
    v_high_pu: float = V_HIGH_PU
    loading_max_pct: float = 100.0


@dataclass(frozen=True)
class Search:
    """The sizes tried at each bus (see the module docstring). [MW]"""

    min_mw: float = 0.001
    max_mw: float = 50.0
    tol_mw: float = 0.1
    step_mw: float = STEP_MW
    scan_above: bool | None = None  # None: where the grid's own controls act (grid_has_controls)

    def problems(self) -> list[Problem]:
        where = "hosting-capacity"
        values = (self.min_mw, self.max_mw, self.tol_mw, self.step_mw)
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
            return [Problem(where, "min_mw, max_mw, tol_mw and step_mw must be finite numbers", values)]
        found = []
        if not 0 < self.min_mw < self.max_mw:
            found.append(Problem(where, "need 0 < min_mw < max_mw", (self.min_mw, self.max_mw)))
        if self.tol_mw <= 0 or self.step_mw <= 0:
            found.append(Problem(where, "need tol_mw > 0 and step_mw > 0", (self.tol_mw, self.step_mw)))
        elif self.step_mw < self.tol_mw:
            found.append(Problem(where, "step_mw below tol_mw: the scan would be finer than the answer; give "
                                        f"step_mw >= {self.tol_mw:g}", self.step_mw))
        return found

    def scan_points(self) -> list[float]:
        """``step_mw, 2 step_mw, ...`` above ``min_mw`` and below ``max_mw``, then ``max_mw``. [MW]"""
        points, k = [], math.floor(self.min_mw / self.step_mw + 1e-9) + 1
        while (x := round(k * self.step_mw, 9)) < self.max_mw - 1e-9:
            points.append(x)
            k += 1
        return [*points, self.max_mw]


@dataclass(frozen=True)
class Setup:
    """Where the load is sized and placed, and which grid entity is watched.

    A trial of ``size_mw`` sets every key of ``size_keys`` to ``size_mw / mw_per_unit``.
    """

    scenario: str
    size_keys: tuple[str, ...]  # e.g. ("entities.campus.peak_mw",)
    bus_key: str                # e.g. "entities.pcc.bus"
    grid_entity: str            # the grid's ``Grid`` entity (its KPIs are read)
    overrides: dict[str, Any]
    mw_per_unit: float = 1.0    # replay: the recorded peak, the scales being fractions of it
    replay_of: str | None = None
    allow_commands: bool = False  # the scenario may start programs (--allow-commands)
    voltage_buses: str = "every bus but the source and regulator terminals"


def resolve_setup(scenario: str | Path, load_entity: str, size_param: str | None = None,
                  bus_entity: str | None = None, overrides: dict[str, Any] | None = None,
                  allow_commands: bool = False) -> tuple[Setup, Scenario]:
    """Find the size param, the entity carrying ``bus`` and the Grid entity in a scenario.

    Args:
        load_entity: the entity whose size is bisected (a ``FacilityLoad``, a grid ``Load``…).
        size_param: its param to scale; default ``peak_mw`` when it has one, else ``p_mw``.
        bus_entity: the grid element whose ``bus`` moves; default ``load_entity`` itself
            when it has a ``bus`` param, else the grid element it is connected to.

    Returns:
        The setup (``None`` when ``load_entity`` is a grid element fed by connections and no
        ``size_param`` is given: that is replay mode, see :func:`replay_setup`) and the scenario.

    Raises:
        ScenarioError: naming what is missing and what to pass instead.
    """
    scn = load_scenario(scenario, overrides, allow_commands)
    where = "hosting-capacity"
    if load_entity not in scn.entities:
        known = ", ".join(scn.entities)
        raise ScenarioError(scn.file, [Problem(where, f"no entity {load_entity!r}; entities: {known}")])
    if size_param is None and load_entity in driven_elements(scn, scn.entities[load_entity].sim):
        return None, scn
    params = scn.model_meta(load_entity).get("params", [])
    size_param = size_param or ("peak_mw" if "peak_mw" in params else "p_mw")
    if size_param not in params:
        known = ", ".join(p for p in params if p != "eid")
        fed = _bus_entity(scn, load_entity)
        hint = f"; or size what it feeds, the grid element {fed!r}, by replaying its recorded draw" if fed else ""
        raise ScenarioError(scn.file, [Problem(where, f"{load_entity} ({scn.entities[load_entity].model}) has no "
                                                      f"param {size_param!r}; params: {known}{hint}")])
    bus_entity = bus_entity or _bus_entity(scn, load_entity)
    if bus_entity is None:
        raise ScenarioError(scn.file, [Problem(where, f"{load_entity} is not connected to a grid element with a bus; "
                                                      "name it with bus_entity (e.g. the point of connection 'pcc')")])
    setup = Setup(str(scn.file.resolve()), (f"entities.{load_entity}.{size_param}",), f"entities.{bus_entity}.bus",
                  _grid_entity(scn, scn.entities[bus_entity].sim), dict(overrides or {}),
                  allow_commands=allow_commands)
    return setup, scn


def _grid_entity(scn: Scenario, grid_sim: str) -> str:
    grids = [e for e, spec in scn.entities.items() if spec.sim == grid_sim and scn.role(e) == "grid"]
    if not grids:
        raise ScenarioError(scn.file, [Problem("hosting-capacity", f"sim {grid_sim!r} has no Grid entity; add one "
                                               f"([entities.feeder] sim = {grid_sim!r}, model = \"Grid\")")])
    return grids[0]


def driven_elements(scn: Scenario, sim: str) -> list[str]:
    """Loads, generators and storage of grid sim ``sim`` whose power comes from connections."""
    if not any(spec.sim == sim and scn.role(e) == "grid" for e, spec in scn.entities.items()):
        return []  # not a grid sim
    return sorted({c.dst for c in scn.connect if c.dst in scn.entities and scn.entities[c.dst].sim == sim
                   and scn.role(c.dst) != "grid"})


# -- replay mode -----------------------------------------------------------------------
def replay_setup(scn: Scenario, load_entity: str, out: Path, overrides: dict[str, Any] | None = None,
                 allow_commands: bool = False) -> Setup:
    """Run the scenario once, then set up its grid-only variant replaying what it drew.

    The point of connection's recorded ``p_mw``/``q_mvar`` (IT, cooling, whatever fed it)
    is the load's shape; every other grid element fed by connections (PV, a battery) is
    replayed as recorded and stays at its bus. A trial scales the point of connection's
    draw so its peak is the trial's size. Feedback from the grid to the site (a voltage-
    aware controller) is not re-simulated: the shape is the base run's.

    Raises:
        ScenarioError: the base run failed or drew no power at ``load_entity``.
    """
    grid_sim = scn.entities[load_entity].sim
    driven = driven_elements(scn, grid_sim)
    record = [f"{e}.{a}" for e in driven for a in ("p_mw", "q_mvar")]
    base = out / "base_run"
    row = run_variant(str(scn.file), {**(overrides or {}), "record.include": record, "record.exclude": [],
                                      "record.step_s": None}, str(base), allow_commands=allow_commands)
    if row["status"] != "ok":
        raise ScenarioError(scn.file, [Problem("hosting-capacity", f"the base run failed: {row['reason']}")])
    ts = RunFolder(base).timeseries(record)
    peak_mw = float(ts[f"{load_entity}.p_mw"].max())
    if not peak_mw > 0:
        raise ScenarioError(scn.file, [Problem("hosting-capacity", f"{load_entity} drew no power in the base run "
                                                                   f"(peak {peak_mw} MW): nothing to scale")])
    frame = ts.copy()
    frame.index = [t.isoformat() for t in frame.index]
    frame.index.name = "time_utc"
    replay_csv = out / "replay.csv"
    frame.to_csv(replay_csv)
    keys = tuple(f"sims.replay_{load_entity}.columns.{a}.scale" for a in ("p_mw", "q_mvar"))
    kept = {k: v for k, v in (overrides or {}).items() if k.split(".")[0] == "scenario"}
    return Setup(str(scn.file.resolve()), keys, f"entities.{load_entity}.bus", _grid_entity(scn, grid_sim),
                 {**kept, **replay_overrides(scn, grid_sim, driven, replay_csv.resolve())}, mw_per_unit=peak_mw,
                 replay_of=str(scn.file), allow_commands=allow_commands)


def replay_overrides(scn: Scenario, grid_sim: str, driven: list[str], replay_csv: Path) -> dict[str, Any]:
    """Overrides that turn ``scn`` into its grid alone, each fed element driven by a ``signals`` sim
    replaying its recorded ``p_mw``/``q_mvar`` from ``replay_csv``: whole ``sims``, ``entities`` and
    ``connect`` tables (taken from the scenario as validated, ``--set`` overrides included), and
    empty ``record`` and ``kpis`` tables (theirs may name entities the variant no longer has)."""
    raw = copy.deepcopy(scn.raw)
    sims = {grid_sim: raw["sims"][grid_sim]}
    entities = {eid: raw["entities"][eid] for eid, spec in scn.entities.items() if spec.sim == grid_sim}
    connect = []
    for e in driven:
        sims[f"replay_{e}"] = {"adapter": "signals", "file": str(replay_csv), "interpolation": "hold",
                               "columns": {a: {"column": f"{e}.{a}", "scale": 1.0} for a in ("p_mw", "q_mvar")}}
        entities[f"replay_{e}"] = {"sim": f"replay_{e}", "model": "Series"}
        connect.append({"src": f"replay_{e}", "dst": e, "attrs": ["p_mw", "q_mvar"]})
    return {"scenario.name": f"{scn.scenario.name}_replay", "sims": sims, "entities": entities,
            "connect": connect, "record": {}, "kpis": {}}


def _bus_entity(scn: Scenario, load_entity: str) -> str | None:
    if "bus" in scn.entity_params.get(load_entity, {}) and scn.entity_params[load_entity].get("bus") is not None:
        return load_entity
    for conn in scn.connect:
        if conn.src == load_entity and scn.entity_params.get(conn.dst, {}).get("bus") is not None:
            return conn.dst
    return None


def feeder_buses(scn: Scenario, grid_entity: str, phases: str = "abc") -> list[str | int]:
    """Every bus of the grid where a load of ``phases`` fits, but the slack / source and regulator
    terminals: bus names (pandapower: names when unique, else ids), on either engine."""
    return placement_buses(feeder_bus_table(scn, grid_entity), phases)


# -- one bus ---------------------------------------------------------------------------
class TrialFailed(Exception):
    """A trial run that says nothing about the grid (a crash, an interrupt, missing data, an
    invalid override): the bus gets ``bound="error"`` instead of a violation."""


def verdict(run_dir: Path, grid_entity: str, limits: Limits, element: str | None = None
            ) -> tuple[bool, str, dict[str, Any]]:
    """Did the run in ``run_dir`` respect the limits? ``(passed, what broke, grid KPIs)``.

    The voltages are the grid's all-bus ones (``allbus_vm_min_pu``/``allbus_vm_max_pu``: the
    buses the study checks). With ``element``, the grid KPIs get ``peak_drawn_mw``: that
    element's highest draw.

    Raises:
        TrialFailed: the run failed for a reason other than the grid, or its folder cannot be read.
    """
    folder = RunFolder(run_dir)
    try:
        meta, problem = folder.metadata_checked()
        if problem or not meta:
            raise ValueError(problem or "no metadata.json")
        if meta.get("status") not in ("ok", "degraded"):  # degraded: the grid did not converge somewhere
            if meta.get("status") == "failed" and meta.get("error_type") == PowerFlowNotConverged.__name__:
                return False, "nonconvergence", {}
            raise TrialFailed(f"run {meta.get('status')}: {meta.get('reason')}")
        kpis, problem = folder.kpis_checked()
        if problem or not (folder.path / "kpis.json").is_file():
            raise ValueError(problem or "no kpis.json")
    except (OSError, ValueError, TypeError) as exc:
        raise TrialFailed(f"{run_dir.name}: run folder unreadable: {exc}") from None
    grid = dict(kpis.get(grid_entity, {}))
    if element is not None:
        grid["peak_drawn_mw"] = kpis.get("entities", {}).get(element, {}).get("peak_mw")
    if "allbus_vm_min_pu" not in grid:
        raise ValueError(f"{run_dir}: kpis.json has no voltages of {grid_entity!r}; is it the Grid entity?")
    grid["vm_min_pu"], grid["vm_max_pu"] = grid["allbus_vm_min_pu"], grid.get("allbus_vm_max_pu")
    return (not (broken := violated(grid, limits))), "+".join(broken), grid


def violated(grid: dict[str, Any], limits: Limits) -> list[str]:
    """The limits a run's grid KPIs break: ``nonconvergence``, ``voltage``, ``thermal``."""
    broken = []
    if grid.get("n_nonconverged") or grid["vm_min_pu"] is None:  # no converged step at all: no voltages
        broken.append("nonconvergence")
    vm_min, vm_max = grid["vm_min_pu"], grid.get("vm_max_pu")
    if vm_min is not None and (vm_min < limits.v_low_pu or (vm_max is not None and vm_max > limits.v_high_pu)):
        broken.append("voltage")
    loading = grid.get("max_loading_pct")
    if loading is not None and loading > limits.loading_max_pct:
        broken.append("thermal")
    return broken


def base_case_detail(run_dir: Path, grid_entity: str, limits: Limits,
                     checked_buses: tuple[str, ...] | None = None) -> str | None:
    """Every limit the feeder breaks with (almost) no load, at once: the lowest and the highest
    checked bus voltage and the most loaded line or transformer beyond their limits, each with
    the option a study could pass instead (the feeder's own level, rounded outwards)."""
    folder = RunFolder(run_dir)
    names = folder.column_names()
    grid_kpis = folder.kpis().get(grid_entity, {})
    found = []
    low, high = grid_kpis.get("allbus_vm_min_pu"), grid_kpis.get("allbus_vm_max_pu")
    where_low, where_high = _worst_buses(folder, names, grid_entity, checked_buses)
    if low is not None and low < limits.v_low_pu:
        found.append(f"the lowest checked voltage is {_pu(low, limits.v_low_pu)} pu{where_low}, below "
                     f"{limits.v_low_pu:g} (pass --v-low {math.floor(low * 100) / 100:.2f} to study from the "
                     "feeder's own level)")
    if high is not None and high > limits.v_high_pu:
        found.append(f"the highest checked voltage is {_pu(high, limits.v_high_pu)} pu{where_high}, above "
                     f"{limits.v_high_pu:g} (pass --v-high {math.ceil(high * 100) / 100:.2f} to study from there)")
    loading = grid_kpis.get("max_loading_pct")
    if loading is not None and loading > limits.loading_max_pct:
        found.append(f"{_worst_branch(folder, names, grid_entity)} is loaded to {loading:.1f} %, above "
                     f"{limits.loading_max_pct:g} % (pass --loading-max {math.ceil(loading):.0f}, or give the "
                     "conductor's rating)")
    if grid_kpis.get("n_nonconverged"):
        found.append(f"the power flow did not converge at {grid_kpis['n_nonconverged']} steps")
    return ("without the load: " + "; ".join(found)) if found else None


def _pu(value: float, limit: float) -> str:
    """``value`` to 3 decimals, or as many more (up to 6) as it takes not to read as ``limit``."""
    for digits in range(3, 7):
        if round(value, digits) != round(limit, digits):
            break
    return f"{value:.{digits}f}"


def _worst_buses(folder: RunFolder, names: list[str], grid_entity: str, checked: tuple[str, ...] | None
                 ) -> tuple[str, str]:
    """`` at bus X`` of the lowest and of the highest recorded voltage of a checked bus (per phase
    where the engine reports phases: ``X_a``); ``""`` when none is recorded."""
    prefix, ids = f"{grid_entity}.bus_", set(checked) if checked is not None else None
    name = lambda column: column.removeprefix(prefix).removesuffix("_vm_pu")  # noqa: E731

    def is_checked(key: str) -> bool:
        return ids is None or key in ids or (key[-2:-1] == "_" and key[-1] in "abc" and key[:-2] in ids)

    columns = [c for c in names if c.startswith(prefix) and c.endswith("_vm_pu") and is_checked(name(c))]
    if not columns:
        return "", ""
    ts = folder.numeric_columns(columns)
    lows, highs = ts.min(), ts.max()
    return f" at bus {name(lows.idxmin())}", f" at bus {name(highs.idxmax())}"


def _worst_branch(folder: RunFolder, names: list[str], grid_entity: str) -> str:
    columns = [c for c in names if c.startswith((f"{grid_entity}.line_", f"{grid_entity}.trafo_"))
               and c.endswith("_loading_pct")]
    if not columns:
        return "a line or transformer"
    worst = folder.numeric_columns(columns).max().idxmax()
    kind, _, rest = worst.removeprefix(f"{grid_entity}.").partition("_")
    return f"{'line' if kind == 'line' else 'transformer'} {rest.removesuffix('_loading_pct')}"


#: What a trial records of the grid: its summary columns (every step is checked).
GRID_RECORD = ("p_import_mw", "vm_min_pu", "vm_max_pu", "allbus_vm_min_pu", "allbus_vm_max_pu", "allbus_violation_pu",
               "max_loading_pct", "n_nonconverged", "converged")


def search_bus(setup: Setup, bus: str | int, search: Search, limits: Limits, out_dir: str, keep_runs: bool = True,
               checked_buses: tuple[str, ...] | None = None, progress: bool = False) -> dict[str, Any]:
    """The hosting capacity at one bus (runs in a Dask worker; see the module docstring).

    ``checked_buses``: the ids (as in ``bus_<id>_vm_pu``) of the buses whose voltages are checked,
    to name the worst one in a failing base case (None: every recorded bus). ``progress``: a bar
    over the scan's points (in this process only).
    """
    folder = Path(out_dir) / "runs" / f"bus_{bus}"
    element = setup.bus_key.split(".")[1]  # "entities.<element>.bus"
    record = [f"{element}.p_mw", *(f"{setup.grid_entity}.{a}" for a in GRID_RECORD)]
    n_runs = 0

    def trial(size_mw: float) -> tuple[bool, str, dict[str, Any]]:
        nonlocal n_runs
        n_runs += 1
        run_dir = folder / f"{size_mw:.6f}MW"
        # the base case also records each checked bus and branch, to say where the feeder already breaks a limit
        base = n_runs == 1
        # (patterns that match some output on every grid: a network may have no transformer)
        extra = [f"{setup.grid_entity}.bus_*_vm_pu", f"{setup.grid_entity}.*_loading_pct"] if base else []
        sizes = {key: size_mw / setup.mw_per_unit for key in setup.size_keys}
        overrides = {**setup.overrides, **sizes, setup.bus_key: bus, "record.include": record + extra,
                     "record.exclude": [], "record.step_s": None}
        row = run_variant(setup.scenario, overrides, str(run_dir), allow_commands=setup.allow_commands)
        if row["status"] != "ok" and str(row.get("reason", "")).startswith("invalid scenario"):
            raise TrialFailed(row["reason"])  # the bus or the size is not accepted: not a grid limit
        result = verdict(run_dir, setup.grid_entity, limits, element)
        if base and not result[0]:
            result[2]["base_case"] = base_case_detail(run_dir, setup.grid_entity, limits, checked_buses)
        if not keep_runs:
            shutil.rmtree(run_dir, ignore_errors=True)
        return result

    row: dict[str, Any] = {"bus": str(bus), "hosting_mw": 0.0, "peak_drawn_mw": math.nan, "limited_by": "",
                           "bound": "exact", "vm_min_pu": math.nan, "max_loading_pct": math.nan, "holds_again_mw": ""}
    passed: list[float] = []
    bar = tqdm(total=len(search.scan_points()) + 1, unit="run", desc=f"bus {bus}: scan", file=sys.stderr,
               leave=False) if progress else None
    try:
        return _search(trial, row, search, passed, lambda: n_runs, bar)
    except TrialFailed as exc:  # not a grid verdict: no answer for this bus, and why
        below = f" (passed up to {max(passed):.6g} MW)" if passed else ""
        row.update(hosting_mw=math.nan, limited_by=f"error: {exc}{below}", bound="error", n_runs=n_runs)
        return row
    finally:
        if bar is not None:
            bar.close()


Trial = Callable[[float], tuple[bool, str, dict[str, Any]]]


def _search(trial: Trial, row: dict[str, Any], search: Search, passed: list[float], runs, bar=None) -> dict[str, Any]:
    """Base case, scan to the first failure, bisection inside it, scan on above (module docstring)."""
    tick = (lambda text: (bar.set_postfix_str(text, refresh=False), bar.update(1))) if bar else (lambda text: None)
    stage = (lambda text: bar.set_description_str(f"bus {row['bus']}: {text}")) if bar else (lambda text: None)
    ok, broken, grid = trial(search.min_mw)
    tick(f"{search.min_mw:g} MW {'ok' if ok else broken}")
    if not ok:
        detail = grid.get("base_case")
        row.update(limited_by=f"base case: {broken}" + (f" ({detail})" if detail else ""), bound="base case fails",
                   n_runs=runs(), **_grid_row(grid))
        return row
    lo, lo_grid = search.min_mw, grid
    passed.append(lo)
    points = search.scan_points()
    for k, size in enumerate(points):
        ok, broken, grid = trial(size)
        tick(f"{size:g} MW {'ok' if ok else broken}")
        if ok:
            lo, lo_grid = size, grid
            passed.append(lo)
            continue
        stage("bisect")
        lo, lo_grid, limited_by = _bisect(trial, lo, lo_grid, size, broken, search.tol_mw, passed)
        row.update(hosting_mw=lo, limited_by=limited_by, **_grid_row(lo_grid))
        if search.scan_above:
            stage("scan above")
            row.update(holds_again_mw=", ".join(f"{x:g}" for x in _holding(trial, points[k + 1:], tick)))
        else:
            row.update(holds_again_mw="not scanned")
        row.update(n_runs=runs())
        return row
    row.update(hosting_mw=search.max_mw, limited_by="none up to max_mw", bound="lower bound", n_runs=runs(),
               **_grid_row(lo_grid))
    return row


def _bisect(trial: Trial, lo: float, lo_grid: dict[str, Any], hi: float, hi_broken: str, tol_mw: float,
            passed: list[float]) -> tuple[float, dict[str, Any], str]:
    """Narrow ``[lo, hi]`` (``lo`` passing, ``hi`` failing) to ``tol_mw``: the passing end, its grid
    KPIs, and what broke at the failing end."""
    while hi - lo > tol_mw:
        mid = 0.5 * (lo + hi)
        ok, broken, grid = trial(mid)
        if ok:
            lo, lo_grid = mid, grid
            passed.append(lo)
        else:
            hi, hi_broken = mid, broken
    return lo, lo_grid, hi_broken


def _holding(trial: Trial, sizes: list[float], tick) -> list[float]:
    """The sizes (scan points above the first failure) at which every limit holds again."""
    again = []
    for size in sizes:
        ok, broken, _ = trial(size)
        tick(f"{size:g} MW {'ok' if ok else broken}")
        if ok:
            again.append(size)
    return again


def _grid_row(grid: dict[str, Any]) -> dict[str, Any]:
    return {key: grid.get(key, math.nan) for key in ("peak_drawn_mw", "vm_min_pu", "max_loading_pct")}


# -- the study -------------------------------------------------------------------------
def hosting_capacity(scenario: str | Path, load_entity: str, out_dir: str | Path, buses: list[str | int] | None = None,
                     size_param: str | None = None, bus_entity: str | None = None, min_mw: float = 0.001,
                     max_mw: float = 50.0, tol_mw: float = 0.1, limits: Limits = Limits(),
                     overrides: dict[str, Any] | None = None, workers: int | None = None,
                     scheduler: str | None = None, keep_runs: bool = True, progress: bool = True,
                     allow_commands: bool = False, step_mw: float = STEP_MW, scan_above: bool | None = None,
                     voltage_buses: VoltageBuses | Any = None) -> pd.DataFrame:
    """Hosting capacity at each bus; writes ``hosting.parquet``, ``hosting.csv``, ``hosting.json`` and ``hosting.png``.

    Args:
        scenario: the scenario file (its load's shape, its grid, its period).
        load_entity: the entity sized (see :func:`resolve_setup`).
        out_dir: where the table, the figure and ``runs/bus_<bus>/<size>MW`` go.
        buses: bus names (or indices) where the load goes; default every bus of the feeder where
            the load's phases fit, but the slack / source bus and regulator terminals.
        min_mw: the base case's size, ~no load (``peak_mw`` must be > 0). [MW]
        max_mw: the largest size tried. [MW]
        tol_mw: bisection stops when the bracket is this narrow. [MW]
        step_mw: the scan's step (module docstring). [MW]
        scan_above: scan on above the first failure to ``max_mw`` for sizes where the limits hold
            again; None (default): where the grid's own controls act (module docstring).
        limits: voltage band and loading limit.
        voltage_buses: the buses the voltage band applies to: a :class:`VoltageBuses` or what
            :meth:`VoltageBuses.parse` takes (``"primary"``, a list of names, ``{kv_min, kv_max}``);
            default every bus but the source and regulator terminals.
        overrides: dotted overrides applied to every run (e.g. a shorter period).
        workers, scheduler: Dask, as in :func:`cosim.studies.sweep.run_sweep` (one task per bus).

    Returns:
        One row per bus: ``bus``, ``hosting_mw`` (the size param's value; in replay mode
        the peak draw), ``peak_drawn_mw`` (the grid element's highest draw in the largest
        passing run: what the bus really hosted over the period; a ``FacilityLoad``'s
        ``peak_mw`` is its whole trace's peak, which the period may not reach),
        ``limited_by`` (voltage / thermal / nonconvergence, ``base case: …`` or ``none up to
        max_mw``), ``bound``, ``vm_min_pu`` (of the checked buses) and ``max_loading_pct`` of that
        run, ``holds_again_mw`` (scan points above the answer where every limit holds again;
        ``"not scanned"`` when the scan stopped at the first failure), ``n_runs``.
    """
    search = Search(min_mw, max_mw, tol_mw, step_mw, scan_above)
    if problems := search.problems():
        raise ScenarioError("hosting-capacity", problems)
    voltage_buses = voltage_buses if isinstance(voltage_buses, VoltageBuses) else VoltageBuses.parse(voltage_buses)
    check_workers(workers)
    setup, scn = resolve_setup(scenario, load_entity, size_param, bus_entity, overrides, allow_commands)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if setup is None:
        setup = replay_setup(scn, load_entity, out, overrides, allow_commands)
    setup, checked, table_of_buses = _with_voltage_buses(setup, scn, voltage_buses)
    if scan_above is None:
        search = dataclasses.replace(search, scan_above=grid_has_controls(scn, setup.grid_entity))
    element = setup.bus_key.split(".")[1]
    phases = str(scn.entity_params.get(element, {}).get("phases") or "abc")
    buses = list(buses) if buses else placement_buses(table_of_buses, phases)
    in_process = workers == 0 and scheduler is None
    calls = [(setup, bus, search, limits, str(out), keep_runs, checked, progress and in_process) for bus in buses]
    header = {"setup": asdict(setup) | {"overrides": _short_overrides(setup.overrides)}, "limits": asdict(limits),
              "search": asdict(search)}
    rows: dict[int, dict[str, Any]] = {}
    bar = _bar(len(calls), progress)
    try:
        for i, row, error in run_tasks(search_bus, calls, workers, scheduler):
            if error is not None:  # e.g. a bus name the grid does not know: that bus only
                row = {"bus": str(buses[i]), "hosting_mw": math.nan, "limited_by": f"error: {error}",
                       "bound": "error", "n_runs": 0}
            rows[i] = row
            _write_tables(buses, rows, out, header)  # as buses finish: an interrupted study keeps them
            if bar is not None:
                bar.update(1)
    finally:  # interrupted or not, the table holds every finished bus ("not run" for the rest)
        if bar is not None:
            bar.close()
        table = _write_tables(buses, rows, out, header)
    plot_hosting(table, out / "hosting.png", scn, setup.grid_entity)
    return table


def _with_voltage_buses(setup: Setup, scn: Scenario, voltage_buses: VoltageBuses):
    """The setup with the grid's ``exclude_buses`` leaving the chosen buses, their ids, and every bus."""
    grid_sim, params = grid_sim_params(scn, setup.grid_entity)
    table = feeder_bus_table(scn, setup.grid_entity)
    network = str(params["network"])
    if voltage_buses.is_default:  # the grid's own monitored buses: its exclude_buses, else all but the source's
        own = params.get("exclude_buses")
        if own is None:
            checked = tuple(b.id for b in table if not b.source)
        else:
            named = {str(b).lower() for b in own}
            checked = tuple(b.id for b in table if str(b.ref).lower() not in named and b.id not in named)
        return dataclasses.replace(setup, voltage_buses=voltage_buses.describe()), checked, table
    chosen = voltage_buses.select(table, Path(network).name)
    exclude = voltage_buses.exclude_override(table, Path(network).name)
    overrides = {**setup.overrides, f"sims.{grid_sim}.exclude_buses": exclude}
    return (dataclasses.replace(setup, overrides=overrides, voltage_buses=voltage_buses.describe()),
            tuple(b.id for b in chosen), table)


def _short_overrides(overrides: dict[str, Any]) -> dict[str, Any]:
    """The overrides for ``hosting.json``, a long list (thousands of excluded buses) as its length."""
    return {k: (f"<{len(v)} items>" if isinstance(v, list) and len(v) > 20 else v) for k, v in overrides.items()}


def _write_tables(buses: list[str | int], rows: dict[int, dict[str, Any]], out: Path,
                  header: dict[str, Any] | None = None) -> pd.DataFrame:
    records = [rows.get(i) or {"bus": str(bus), "hosting_mw": math.nan, "limited_by": "the study stopped before "
                               "this bus finished", "bound": "not run", "n_runs": 0} for i, bus in enumerate(buses)]
    table = pd.DataFrame(records)
    table.to_parquet(out / TABLE_NAME, index=False)
    table.to_csv(out / "hosting.csv", index=False)
    if header is not None:
        clean = [{k: _json_value(v) for k, v in r.items()} for r in records]
        (out / "hosting.json").write_text(json.dumps({**header, "buses": clean}, indent=2, default=str) + "\n",
                                          encoding="utf-8")
    return table


def _json_value(value: Any) -> Any:
    """NaN as null (JSON has no NaN), numpy numbers as Python's."""
    if hasattr(value, "item"):
        value = value.item()
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _bar(total: int, progress: bool):
    if not progress:
        return None
    return tqdm(total=total, unit="bus", desc="hosting capacity", file=sys.stderr)


def plot_hosting(table: pd.DataFrame, path: Path, scn: Scenario | None = None, grid_entity: str | None = None) -> Path:
    """Bar chart of MW per bus, and a map of the feeder coloured by MW when it has coordinates."""
    coords = _coordinates(scn, grid_entity) if scn is not None and grid_entity else None
    ncols = 2 if coords else 1
    fig, axes = new_figure(1, ncols, figsize=(7 * ncols, 4.2), squeeze=False)
    ax = axes[0][0]
    colours = ["tab:red" if str(b).startswith("base") else "tab:grey" if b == "lower bound" else "tab:blue"
               for b in table.get("bound", [])]
    ax.bar(table["bus"].astype(str), table["hosting_mw"], color=colours)
    ax.set_xlabel("bus")
    ax.set_ylabel("hosting capacity [MW]")
    ax.set_title("largest load without violations (grey: at max_mw, red: base case fails)", fontsize=9)
    ax.tick_params(axis="x", labelrotation=90, labelsize=7)
    if coords:
        _draw_map(axes[0][1], table, *coords)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def _coordinates(scn: Scenario, grid_entity: str):
    """Bus coordinates and line ends of a pandapower net with GeoJSON ``geo``; None otherwise."""
    try:
        params = scn.sim_params[scn.entities[grid_entity].sim]
        net = grid_models.load_network(params["network"], scn.base_dir, **params.get("network_params", {}))
        xy = {idx: tuple(json.loads(g)["coordinates"]) for idx, g in net.bus["geo"].items()}
    except Exception:  # no geodata (or not pandapower): the bar chart alone
        return None
    names = {idx: str(name) for idx, name in net.bus["name"].items()}
    lines = [(xy[f], xy[t]) for f, t, s in zip(net.line.from_bus, net.line.to_bus, net.line.in_service) if s]
    return xy, names, lines


def bus_positions(buses: list[str], xy: dict[int, tuple[float, float]], names: dict[int, str]) -> dict[str, tuple]:
    """Coordinates of each studied bus, found by name first, then by index (``bus`` may be either)."""
    by_name = {str(i): p for i, p in xy.items()} | {names[i]: p for i, p in xy.items()}  # names win
    return {b: by_name[b] for b in buses if b in by_name}


def _draw_map(ax, table: pd.DataFrame, xy, names, lines) -> None:
    for (x0, y0), (x1, y1) in lines:
        ax.plot([x0, x1], [y0, y1], color="0.7", lw=1, zorder=1)
    mw = dict(zip(table["bus"].astype(str), table["hosting_mw"]))
    positions = bus_positions(list(mw), xy, names)
    pts = [(positions[b], mw[b]) for b in mw if b in positions]
    studied = set(positions.values())
    others = [p for p in xy.values() if p not in studied]
    if others:
        ax.scatter(*zip(*others), s=18, color="0.3", marker="s", zorder=2, label="not studied / slack")
        ax.legend(fontsize=7, loc="best")
    if pts:
        sc = ax.scatter([p[0][0] for p in pts], [p[0][1] for p in pts], c=[p[1] for p in pts], cmap="viridis",
                        s=60, zorder=3)
        ax.figure.colorbar(sc, ax=ax, label="hosting capacity [MW]")
        for (x, y), bus in zip((p[0] for p in pts), (b for b in mw if b in positions)):
            ax.annotate(bus, (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_title("feeder map", fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
