"""Hosting capacity: the largest datacenter load a bus takes without voltage or thermal violations.

For each bus, the load's size is bisected over full runs with the load moved to that bus
(the ``bus`` param of the grid element it feeds). The size is either

* a param of one entity: ``campus.peak_mw`` of a ``FacilityLoad`` (the trace's shape kept)
  or ``pcc.p_mw`` of a constant grid ``Load``; or
* *replay mode*, when the load entity is a grid element fed by connections (``--load pcc``
  for a GPU cluster plus cooling plant feeding ``pcc``): the scenario runs once, and a
  grid-only copy replays what each fed grid element drew (``replay.csv``), the point of
  connection's draw scaled so its peak is the trial's size; PV and storage stay at their
  buses as recorded. The site is not re-simulated per trial (fast, and the shape is the
  site's own), so feedback from grid voltage to the site is not captured.

A run *passes* when, at every step of the whole scenario, every bus stays within
``[v_low_pu, v_high_pu]``, every line and transformer at or below ``loading_max_pct`` and
the power flow converged. (pandapower's ``case33bw`` has no line ratings: on ``ieee33``
only the voltage binds.)

The bisection keeps ``lo`` passing and ``hi`` failing until ``hi - lo <= tol_mw`` and
reports ``lo``: the answer is at most ``tol_mw`` below the true limit, never above. It
assumes violations grow with the load (true for a radial feeder's voltage drop and line
currents; a bus where the answer is not monotonic is mis-reported). First checks: with
the load at ``min_mw`` (the base case, ~no campus) a failing run gives 0 MW and names the
limit already broken; a run passing at ``max_mw`` gives ``max_mw`` marked as a lower bound.

Each bus is one Dask task running its bisection's runs in turn, so buses run in parallel
(``workers``/``scheduler`` as in :func:`cosim.sweep.run_sweep`).
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from tqdm import tqdm

from cosim import grid_models
from cosim.errors import Problem, ScenarioError
from cosim.folder import RunFolder
from cosim.kpis import V_HIGH_PU, V_LOW_PU
from cosim.scenario import Scenario, load_scenario
from cosim.studies.executor import check_workers, run_tasks
from cosim.studies.sweep import run_variant

TABLE_NAME = "hosting.parquet"


@dataclass(frozen=True)
class Limits:
    """What a run must respect to pass."""

    v_low_pu: float = V_LOW_PU
    v_high_pu: float = V_HIGH_PU
    loading_max_pct: float = 100.0


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
    """Run the scenario once, then write a grid-only scenario replaying what it drew.

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
    frame.to_csv(out / "replay.csv")
    path = out / "replay_scenario.toml"
    path.write_text(_replay_toml(scn, grid_sim, driven), encoding="utf-8")
    keys = tuple(f"sims.replay_{load_entity}.columns.{a}.scale" for a in ("p_mw", "q_mvar"))
    return Setup(str(path.resolve()), keys, f"entities.{load_entity}.bus", _grid_entity(scn, grid_sim), {},
                 mw_per_unit=peak_mw, replay_of=str(scn.file))


def _replay_toml(scn: Scenario, grid_sim: str, driven: list[str]) -> str:
    s = scn.scenario
    lines = ["# Written by cosim hosting-capacity: the grid of", f"# {scn.file}",
             "# with its fed elements replaying the base run (replay.csv).", "",
             "[scenario]", f"name = {_toml(s.name + '_replay')}", f"start = {s.start.isoformat().replace('+00:00', 'Z')}",
             f"duration_s = {s.duration_s}", f"step_s = {s.step_s}", f"seed = {s.seed}", "",
             f"[sims.{grid_sim}]", 'adapter = "grid"']
    if scn.sims[grid_sim].step_s:
        lines.append(f"step_s = {scn.sims[grid_sim].step_s}")
    lines += [f"{k} = {_toml(v)}" for k, v in scn.sim_params[grid_sim].items() if v is not None]
    for e in driven:
        columns = {a: {"column": f"{e}.{a}", "scale": 1.0} for a in ("p_mw", "q_mvar")}
        lines += ["", f"[sims.replay_{e}]", 'adapter = "signals"', 'file = "replay.csv"', 'interpolation = "hold"',
                  f"columns = {_toml(columns)}"]
    for eid, spec in scn.entities.items():
        if spec.sim == grid_sim:
            params = {k: v for k, v in scn.entity_params[eid].items() if v is not None}
            lines += ["", f"[entities.{eid}]", f"sim = {_toml(grid_sim)}", f"model = {_toml(spec.model)}"]
            lines += [f"{k} = {_toml(v)}" for k, v in params.items()]
    for e in driven:
        lines += ["", f"[entities.replay_{e}]", f'sim = "replay_{e}"', 'model = "Series"',
                  "", "[[connect]]", f'src = "replay_{e}"', f'dst = "{e}"', 'attrs = ["p_mw", "q_mvar"]']
    return "\n".join(lines) + "\n"


def _toml(value: Any) -> str:
    """A TOML literal of a JSON-like value (strings, numbers, booleans, lists, tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON's escapes are TOML basic-string escapes
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {_toml(v)}" for k, v in value.items() if v is not None) + " }"
    return json.dumps(str(value))


def _bus_entity(scn: Scenario, load_entity: str) -> str | None:
    if "bus" in scn.entity_params.get(load_entity, {}) and scn.entity_params[load_entity].get("bus") is not None:
        return load_entity
    for conn in scn.connect:
        if conn.src == load_entity and scn.entity_params.get(conn.dst, {}).get("bus") is not None:
            return conn.dst
    return None


def feeder_buses(scn: Scenario, grid_entity: str) -> list[str | int]:
    """Every bus of the grid but the slack's: bus names when unique, else indices."""
    sim = scn.entities[grid_entity].sim
    params = scn.sim_params[sim]
    if params.get("engine", "pandapower") != "pandapower":
        raise ScenarioError(scn.file, [Problem("hosting-capacity", "listing a feeder's buses needs the pandapower "
                                                                   "engine; give the buses explicitly")])
    net = grid_models.load_network(params["network"], scn.base_dir, **params.get("network_params", {}))
    slack = set(net.ext_grid.bus) | (set(net.gen.bus[net.gen.slack]) if "slack" in net.gen else set())
    names = list(net.bus.name)
    unique = all(isinstance(n, str) and n for n in names) and len(set(names)) == len(names)
    return [net.bus.name.at[i] if unique else int(i) for i in net.bus.index if i not in slack]


# -- one bus ---------------------------------------------------------------------------
class TrialFailed(Exception):
    """A trial run that says nothing about the grid (a crash, an interrupt, missing data, an
    invalid override): the bus gets ``bound="error"`` instead of a violation."""


#: A failed run's reason that *is* a grid verdict: the power flow diverged with
#: ``on_nonconvergence = "fail"`` (adapters/grid.py).
GRID_FAILURE = "power flow did not converge"


def verdict(run_dir: Path, grid_entity: str, limits: Limits, element: str | None = None
            ) -> tuple[bool, str, dict[str, Any]]:
    """Did the run in ``run_dir`` respect the limits? ``(passed, what broke, grid KPIs)``.

    With ``element``, the grid KPIs get ``peak_drawn_mw``: that element's highest draw.

    Raises:
        TrialFailed: the run failed for a reason other than the grid, or its folder cannot be read.
    """
    folder = RunFolder(run_dir)
    try:
        meta, problem = folder.metadata_checked()
        if problem or not meta:
            raise ValueError(problem or "no metadata.json")
        if meta.get("status") not in ("ok", "degraded"):  # degraded: the grid did not converge somewhere
            reason = str(meta.get("reason"))
            if meta.get("status") == "failed" and GRID_FAILURE in reason:
                return False, "nonconvergence", {}
            raise TrialFailed(f"run {meta.get('status')}: {reason}")
        kpis, problem = folder.kpis_checked()
        if problem or not (folder.path / "kpis.json").is_file():
            raise ValueError(problem or "no kpis.json")
    except (OSError, ValueError, TypeError) as exc:
        raise TrialFailed(f"{run_dir.name}: run folder unreadable: {exc}") from None
    grid = dict(kpis.get(grid_entity, {}))
    if element is not None:
        grid["peak_drawn_mw"] = kpis.get("entities", {}).get(element, {}).get("peak_mw")
    if "vm_min_pu" not in grid:
        raise ValueError(f"{run_dir}: kpis.json has no voltages of {grid_entity!r}; is it the Grid entity?")
    broken = []
    if grid.get("n_nonconverged") or grid["vm_min_pu"] is None:  # no converged step at all: no voltages
        broken.append("nonconvergence")
    vm_min, vm_max = grid["vm_min_pu"], grid.get("vm_max_pu")
    if vm_min is not None and (vm_min < limits.v_low_pu or (vm_max is not None and vm_max > limits.v_high_pu)):
        broken.append("voltage")
    loading = grid.get("max_loading_pct")
    if loading is not None and loading > limits.loading_max_pct:
        broken.append("thermal")
    return not broken, "+".join(broken), grid


def base_case_detail(run_dir: Path, grid_entity: str, limits: Limits) -> str | None:
    """Where the feeder breaks the voltage band with (almost) no load: the worst bus, its voltage,
    and the band that study could use instead (the feeder's own level, rounded down)."""
    folder = RunFolder(run_dir)
    columns = [c for c in folder.column_names() if c.startswith(f"{grid_entity}.bus_") and c.endswith("_vm_pu")]
    if not columns:
        return None
    ts = folder.numeric_columns(columns)
    lows, highs = ts.min(), ts.max()
    worst_low, worst_high = lows.idxmin(), highs.idxmax()
    name = lambda column: column.removeprefix(f"{grid_entity}.bus_").removesuffix("_vm_pu")  # noqa: E731
    if lows[worst_low] < limits.v_low_pu:
        floor = math.floor(lows[worst_low] * 100) / 100
        return (f"without the load, bus {name(worst_low)} is already at {lows[worst_low]:.3f} pu, below "
                f"{limits.v_low_pu:g}; to study from the feeder's own level pass --v-low {floor:.2f}")
    if highs[worst_high] > limits.v_high_pu:
        ceiling = math.ceil(highs[worst_high] * 100) / 100
        return (f"without the load, bus {name(worst_high)} is already at {highs[worst_high]:.3f} pu, above "
                f"{limits.v_high_pu:g}; pass --v-high {ceiling:.2f} to study from there")
    return None


def bisect_bus(setup: Setup, bus: str | int, min_mw: float, max_mw: float, tol_mw: float, limits: Limits,
               out_dir: str, keep_runs: bool = True) -> dict[str, Any]:
    """The hosting capacity at one bus (runs in a Dask worker; see the module docstring)."""
    folder = Path(out_dir) / "runs" / f"bus_{bus}"
    element = setup.bus_key.split(".")[1]  # "entities.<element>.bus"
    record = [f"{element}.p_mw", *(f"{setup.grid_entity}.{a}" for a in ("p_import_mw", "vm_min_pu", "vm_max_pu",
                                                                         "max_loading_pct", "n_nonconverged",
                                                                         "converged"))]
    n_runs = 0

    def trial(size_mw: float) -> tuple[bool, str, dict[str, Any]]:
        nonlocal n_runs
        n_runs += 1
        run_dir = folder / f"{size_mw:.6f}MW"
        # every step is checked: only the grid's summary columns, at the scenario's own step; the
        # base case also records each bus, to say where the feeder already breaks a limit
        base = n_runs == 1
        buses = [f"{setup.grid_entity}.bus_*_vm_pu"] if base else []
        sizes = {key: size_mw / setup.mw_per_unit for key in setup.size_keys}
        overrides = {**setup.overrides, **sizes, setup.bus_key: bus, "record.include": record + buses,
                     "record.exclude": [], "record.step_s": None}
        row = run_variant(setup.scenario, overrides, str(run_dir), allow_commands=setup.allow_commands)
        if row["status"] != "ok" and str(row.get("reason", "")).startswith("invalid scenario"):
            raise TrialFailed(row["reason"])  # the bus or the size is not accepted: not a grid limit
        result = verdict(run_dir, setup.grid_entity, limits, element)
        if base and not result[0]:
            result[2]["base_case"] = base_case_detail(run_dir, setup.grid_entity, limits)
        if not keep_runs:
            shutil.rmtree(run_dir, ignore_errors=True)
        return result

    row: dict[str, Any] = {"bus": str(bus), "hosting_mw": 0.0, "peak_drawn_mw": math.nan, "limited_by": "",
                           "bound": "exact", "vm_min_pu": math.nan, "max_loading_pct": math.nan}
    passed: list[float] = []
    try:
        return _bisect(trial, row, min_mw, max_mw, tol_mw, passed, lambda: n_runs)
    except TrialFailed as exc:  # not a grid verdict: no answer for this bus, and why
        below = f" (passed up to {max(passed):.6g} MW)" if passed else ""
        row.update(hosting_mw=math.nan, limited_by=f"error: {exc}{below}", bound="error", n_runs=n_runs)
        return row


def _bisect(trial, row: dict[str, Any], min_mw: float, max_mw: float, tol_mw: float, passed: list[float],
            runs) -> dict[str, Any]:
    ok, broken, grid = trial(min_mw)
    if not ok:
        detail = grid.get("base_case")
        row.update(limited_by=f"base case: {broken}" + (f" ({detail})" if detail else ""), bound="base case fails",
                   n_runs=runs(), **_grid_row(grid))
        return row
    lo, lo_grid = min_mw, grid
    passed.append(lo)
    ok, broken, grid = trial(max_mw)
    if ok:
        row.update(hosting_mw=max_mw, limited_by="none up to max_mw", bound="lower bound", n_runs=runs(),
                   **_grid_row(grid))
        return row
    hi, hi_broken = max_mw, broken
    while hi - lo > tol_mw:
        mid = 0.5 * (lo + hi)
        ok, broken, grid = trial(mid)
        if ok:
            lo, lo_grid = mid, grid
            passed.append(lo)
        else:
            hi, hi_broken = mid, broken
    row.update(hosting_mw=lo, limited_by=hi_broken, n_runs=runs(), **_grid_row(lo_grid))
    return row


def _grid_row(grid: dict[str, Any]) -> dict[str, Any]:
    return {key: grid.get(key, math.nan) for key in ("peak_drawn_mw", "vm_min_pu", "max_loading_pct")}


# -- the study -------------------------------------------------------------------------
def hosting_capacity(scenario: str | Path, load_entity: str, out_dir: str | Path, buses: list[str | int] | None = None,
                     size_param: str | None = None, bus_entity: str | None = None, min_mw: float = 0.001,
                     max_mw: float = 50.0, tol_mw: float = 0.1, limits: Limits = Limits(),
                     overrides: dict[str, Any] | None = None, workers: int | None = None,
                     scheduler: str | None = None, keep_runs: bool = True, progress: bool = True,
                     allow_commands: bool = False) -> pd.DataFrame:
    """Hosting capacity at each bus; writes ``hosting.parquet``, ``hosting.csv`` and ``hosting.png``.

    Args:
        scenario: the scenario file (its load's shape, its grid, its period).
        load_entity: the entity sized by bisection (see :func:`resolve_setup`).
        out_dir: where the table, the figure and ``runs/bus_<bus>/<size>MW`` go.
        buses: bus names (or indices) to study; default every bus of the feeder but the slack.
        min_mw: the base case's size, ~no load (``peak_mw`` must be > 0). [MW]
        max_mw: the largest size tried. [MW]
        tol_mw: bisection stops when the bracket is this narrow. [MW]
        limits: voltage band and loading limit.
        overrides: dotted overrides applied to every run (e.g. a shorter period).
        workers, scheduler: Dask, as in :func:`cosim.sweep.run_sweep` (one task per bus).

    Returns:
        One row per bus: ``bus``, ``hosting_mw`` (the size param's value; in replay mode
        the peak draw), ``peak_drawn_mw`` (the grid element's highest draw in the largest
        passing run: what the bus really hosted over the period; a ``FacilityLoad``'s
        ``peak_mw`` is its whole trace's peak, which the period may not reach),
        ``limited_by`` (voltage / thermal / nonconvergence, ``base case: …`` or ``none up to
        max_mw``), ``bound``, ``vm_min_pu`` and ``max_loading_pct`` of that run, ``n_runs``.
    """
    if not 0 < min_mw < max_mw or tol_mw <= 0:
        raise ScenarioError("hosting-capacity", [Problem("hosting-capacity", "need 0 < min_mw < max_mw and tol_mw > 0",
                                                         (min_mw, max_mw, tol_mw))])
    check_workers(workers)
    setup, scn = resolve_setup(scenario, load_entity, size_param, bus_entity, overrides, allow_commands)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if setup is None:
        setup = replay_setup(scn, load_entity, out, overrides, allow_commands)
    buses = list(buses) if buses else feeder_buses(scn, setup.grid_entity)
    calls = [(setup, bus, min_mw, max_mw, tol_mw, limits, str(out), keep_runs) for bus in buses]
    (out / "hosting.json").write_text(json.dumps({"setup": asdict(setup), "limits": asdict(limits), "min_mw": min_mw,
                                                  "max_mw": max_mw, "tol_mw": tol_mw}, indent=2, default=str) + "\n")
    rows: dict[int, dict[str, Any]] = {}
    bar = _bar(len(calls), progress)
    try:
        for i, row, error in run_tasks(bisect_bus, calls, workers, scheduler):
            if error is not None:  # e.g. a bus name the grid does not know: that bus only
                row = {"bus": str(buses[i]), "hosting_mw": math.nan, "limited_by": f"error: {error}",
                       "bound": "error", "n_runs": 0}
            rows[i] = row
            _write_tables(buses, rows, out)  # as buses finish: an interrupted study keeps them
            if bar is not None:
                bar.update(1)
    finally:  # interrupted or not, the table holds every finished bus ("not run" for the rest)
        if bar is not None:
            bar.close()
        table = _write_tables(buses, rows, out)
    plot_hosting(table, out / "hosting.png", scn, setup.grid_entity)
    return table


def _write_tables(buses: list[str | int], rows: dict[int, dict[str, Any]], out: Path) -> pd.DataFrame:
    records = [rows.get(i) or {"bus": str(bus), "hosting_mw": math.nan, "limited_by": "the study stopped before "
                               "this bus finished", "bound": "not run", "n_runs": 0} for i, bus in enumerate(buses)]
    table = pd.DataFrame(records)
    table.to_parquet(out / TABLE_NAME, index=False)
    table.to_csv(out / "hosting.csv", index=False)
    return table


def _bar(total: int, progress: bool):
    if not progress:
        return None
    return tqdm(total=total, unit="bus", desc="hosting capacity", file=sys.stderr)


def plot_hosting(table: pd.DataFrame, path: Path, scn: Scenario | None = None, grid_entity: str | None = None) -> Path:
    """Bar chart of MW per bus, and a map of the feeder coloured by MW when it has coordinates."""
    import matplotlib  # heavy (~0.5 s): only when the figure is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after use("Agg"): no display needed

    coords = _coordinates(scn, grid_entity) if scn is not None and grid_entity else None
    ncols = 2 if coords else 1
    fig, axes = plt.subplots(1, ncols, figsize=(7 * ncols, 4.2), squeeze=False)
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
    plt.close(fig)
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
