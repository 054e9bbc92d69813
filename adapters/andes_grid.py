"""Transmission dynamics: an ANDES time-domain (transient stability) simulation stepped by cosim.

ANDES (Cui, Li & Tomsovic, "Hybrid symbolic-numeric framework for power system modeling and
analysis", IEEE Trans. Power Systems 36(2), 2021; PyPI ``andes``) integrates the full
differential-algebraic model of a transmission case: synchronous machines (GENROU), their
exciters, stabilisers and governors, the network's algebraic equations. This adapter steps it at
the simulator's ``step_s`` (the scenario's ``tick_s`` or a multiple), so a datacenter campus, a
ride-through model or a controller can sit at a bus of a standard case and exchange P, Q, V and f
with it every step.

``[sims.<id>]`` keys:

* ``case``: a case shipped with ANDES, with its dynamic data: ``ieee14``, ``ieee39`` (the New
  England 39-bus system, 10 machines), ``wecc`` (the WECC 179-bus system, 29 machines),
  ``kundur`` (two areas, four machines), or the path of an ANDES case file (``.xlsx`` /
  ``.json``). The case's own scripted events (Toggle, Fault, Alter devices) are moved past the
  end of the run: only the events of the scenario happen.
* ``dt_s``: ANDES's integration step (implicit trapezoid); each cosim step is ``step_s / dt_s``
  sub-steps, so ``dt_s`` must divide ``step_s`` (default: the largest divisor of the step not above
  1/30 s, ANDES's own default). ``step_s`` may be at most 1 s: the campus's P is held over a
  step, and a longer hold is not a transient-stability study.
* ``faults = [[t_s, duration_s, bus, x_pu], ...]``: three-phase bus faults through a reactance
  ``x_pu`` (system base, 100 MVA; smaller is deeper), each on from ``t_s`` for ``duration_s``. A
  fault is a shunt admittance ``1 / (j x_pu)`` at the bus, switched at the simulator's steps (so
  ``t_s`` and ``duration_s`` are whole steps).
* ``gen_trips = [[t_s, gen], ...]``: a synchronous machine (its ANDES idx, e.g. ``"GENROU_1"``)
  tripped at ``t_s``.

The background loads keep ANDES's TDS load model (constant impedance, ANDES's ``PQ`` default).

Entities:

* ``Grid`` (one per sim): outputs ``f_hz`` (the centre-of-inertia frequency: machine speeds
  weighted by their inertia ``M * Sn``), ``f_nadir_hz`` / ``f_zenith_hz`` (lowest / highest since
  the start, over the sub-steps), ``rocof_hz_s`` (COI frequency change over the last step / step),
  ``vm_min_pu`` / ``vm_max_pu`` over the buses, ``delta_spread_deg`` (largest rotor-angle
  difference between machines), ``p_load_mw`` (every load's draw), ``p_gen_mw`` (the machines'
  electrical power), per machine ``gen_<id>_f_hz`` and ``gen_<id>_p_mw``, per bus
  ``bus_<id>_vm_pu``.
* ``Load`` (``bus = <ANDES bus idx or name>``): a load that cosim drives. Inputs ``p_mw`` and
  ``q_mvar`` (consumer sign); outputs ``p_mw``, ``q_mvar`` (what it asked for, as on the other grid
  engines), ``p_served_mw`` (what it drew at the end of the step: an impedance set at the step's
  start voltage, so it follows the voltage inside the step), ``vm_pu`` (its bus voltage at the end
  of the step), ``vm_min_pu`` (lowest over the step's
  sub-steps: a 100 ms dip shows also at 1 s steps), ``f_hz`` (the bus frequency of an ANDES
  ``BusFreq`` measurement at the bus) and ``rocof_hz_s``.

Coupling: at step ``t`` the Load's input power is set (as the impedance that draws exactly that
power at the bus voltage of ``t``) and the case is integrated over ``[t, t + step_s)``; the outputs
of step ``t`` describe that interval: the state at its end and the extremes inside it. The first
step's input is the initial operating point: the power flow and ANDES's initialisation are solved
with it, so the run starts in equilibrium. A machine pair losing synchronism (ANDES's criterion:
rotor angles more than 180° apart) ends the run early and cleanly (status ok, the reason names
the time); an integration that does not converge fails it, and the outputs of that step are NaN
(the loads' asked ``p_mw``/``q_mvar`` excepted), so a Session or a live run that reads them after
the failure never reads the last solved step's values as this one's. No cosim input isolates a bus
here (no line inputs or trips), so ANDES has no de-energised outputs.

Example::

    [sims.tgrid]
    adapter = "andes_grid"
    case = "ieee39"
    faults = [[10.0, 0.1, 16, 0.05]]

    [entities.pcc]
    sim = "tgrid"
    model = "Load"
    bus = 16
"""

from __future__ import annotations

import logging
import math
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, ClassVar

import numpy as np
from pydantic import BeforeValidator, Field, ValidationInfo, field_validator

from cosim.sdk import CosimSim, EndRun, Params, ScenarioContext, as_tuple, meta, model_meta, to_ticks

#: Cases shipped with ANDES (with their dynamic data) by short name.
CASES = {"ieee14": "ieee14/ieee14_full.xlsx", "ieee39": "ieee39/ieee39_full.xlsx",
         "wecc": "wecc/wecc_full.xlsx", "kundur": "kundur/kundur_full.xlsx"}
#: ANDES's default integration step. [s]
DT_DEFAULT_S = 1.0 / 30.0
#: The longest step this adapter takes. [s]
STEP_MAX_S = 1.0
#: ANDES's system base. [MVA]
S_BASE_MVA = 100.0
#: A time far past any run: where the case's own scripted events are moved. [s]
NEVER_S = 1e9
#: ANDES models whose devices are scripted events, and their time parameters.
EVENT_TIMES = {"Toggle": ("t",), "Alter": ("t",), "Fault": ("tf", "tc")}

GRID_OUTPUTS = ("f_hz", "f_nadir_hz", "f_zenith_hz", "rocof_hz_s", "vm_min_pu", "vm_max_pu", "delta_spread_deg",
                "p_load_mw", "p_gen_mw")
LOAD_INPUTS = ("p_mw", "q_mvar")
LOAD_OUTPUTS = ("p_mw", "q_mvar", "p_served_mw", "vm_pu", "vm_min_pu", "f_hz", "rocof_hz_s")


def _rows(value: Any) -> Any:
    return tuple(as_tuple(v) for v in value) if isinstance(value, list) else value


def _andes():
    import andes  # noqa: PLC0415 — sympy/numba code: ~0.4 s, only for scenarios that use this adapter
    # its errors come back as ours; no debug log file (ANDES writes one by default: ~14 % of a sub-step)
    andes.config_logger(stream_level=logging.CRITICAL, file=False)
    logging.getLogger("andes").setLevel(logging.CRITICAL)
    return andes


def case_path(case: str) -> str:
    """The file of ``case`` (a shipped name or a path).

    Raises:
        ValueError: an unknown name or a missing file, naming the choices.
    """
    if case in CASES:
        return _andes().get_case(CASES[case])
    path = Path(case)
    if path.suffix.lower() not in (".xlsx", ".json") or not path.is_file():
        raise ValueError(f"case = {case!r}: give one of {', '.join(CASES)} (shipped with ANDES) or an ANDES case "
                         "file (.xlsx or .json) that exists")
    return str(path)


def load_case(case: str):
    """An ANDES ``System`` of ``case``, not yet set up, its scripted events moved past the run."""
    andes = _andes()
    path = case_path(case)
    fix = "give an ANDES case file (.xlsx or .json, e.g. written by andes.io.xlsx.write) with its Bus table"
    try:
        system = andes.load(path, setup=False, no_output=True, default_config=True)
    except Exception as exc:  # a file ANDES cannot parse (a JSON syntax error is a ValueError too)
        raise ValueError(f"case = {case!r}: ANDES could not read it ({type(exc).__name__}: {exc}); {fix}") from None
    if system is None:
        raise ValueError(f"case = {case!r}: ANDES could not read it; {fix}")
    if not system.Bus.n:
        raise ValueError(f"case = {case!r}: ANDES read no buses from it (is it an ANDES case?); {fix}")
    if not system.GENROU.n:
        raise ValueError(f"case = {case!r}: no synchronous machine (GENROU), so no frequency to simulate; give a "
                         "case with its dynamic data (e.g. ANDES's ieee14_full.xlsx rather than ieee14.raw)")
    for model, names in EVENT_TIMES.items():
        for name in names:
            values = getattr(system, model).__dict__[name].v
            for i in range(len(values)):
                values[i] = NEVER_S
    return system


def case_info(case: str) -> dict[str, Any]:
    """``{"buses": {idx: name}, "vn_kv": {idx: kV}, "gens": [idx], "f_hz": nominal}`` of a case
    (cached per case, and per modification of a case file: a notebook may edit it between runs)."""
    path = Path(case)
    stat = path.stat() if path.is_file() else None
    return _case_info(case, (stat.st_mtime_ns, stat.st_size) if stat else None)


@lru_cache(maxsize=8)
def _case_info(case: str, _version: tuple[int, int] | None) -> dict[str, Any]:
    system = load_case(case)
    buses = {_key(i): str(n) for i, n in zip(system.Bus.idx.v, system.Bus.name.v)}
    vn = {_key(i): float(v) for i, v in zip(system.Bus.idx.v, system.Bus.Vn.v)}
    return {"buses": buses, "vn_kv": vn, "gens": [str(g) for g in system.GENROU.idx.v],
            "f_hz": float(system.config.freq)}


def _key(idx: Any) -> str:
    return str(idx)


def sanitise(name: Any) -> str:
    """An ANDES idx as an attribute id: lower case, ``[a-z0-9_]``."""
    return "".join(c if c.isalnum() else "_" for c in str(name).lower()).strip("_")


def find_bus(case: str, bus: Any) -> str:
    """The bus idx (as text) of ``bus``, given as idx or name.

    Raises:
        ValueError: unknown bus, naming some known ones.
    """
    info = case_info(case)
    if _key(bus) in info["buses"]:
        return _key(bus)
    by_name = {n.lower(): i for i, n in info["buses"].items()}
    if str(bus).lower() in by_name:
        return by_name[str(bus).lower()]
    known = ", ".join(f"{i} ({n})" for i, n in list(info["buses"].items())[:8])
    raise ValueError(f"unknown bus {bus!r} in case {case!r}; give a bus idx or name, e.g. {known} "
                     f"({len(info['buses'])} buses)")


def default_dt_s(step_s: float) -> float:
    """The largest ``step_s / n`` not above ANDES's 1/30 s. [s]"""
    return step_s / max(1, math.ceil(step_s / DT_DEFAULT_S - 1e-9))


class SimParams(Params):
    """``[sims.<id>]`` of ``adapter = "andes_grid"`` (module docstring).

    Attributes:
        case: a shipped case name or an ANDES case file.
        dt_s: ANDES integration step; None: the largest divisor of the step up to 1/30 s. [s]
        faults: ``[[t_s, duration_s, bus, x_pu], ...]``. [s, s, -, pu]
        gen_trips: ``[[t_s, gen], ...]``. [s, -]
    """

    case: str = "ieee39"
    dt_s: float | None = Field(default=None, gt=0, le=STEP_MAX_S)
    faults: Annotated[tuple[tuple[float, float, int | str, float], ...], BeforeValidator(_rows)] = ()
    gen_trips: Annotated[tuple[tuple[float, str], ...], BeforeValidator(_rows)] = ()
    #: the largest |p_mw| and |q_mvar| a Load takes from outside (``Session.set``, the live API):
    #: ten times the 100 MVA system base by default [MW]
    load_p_max_mw: float = Field(default=10 * S_BASE_MVA, gt=0, allow_inf_nan=False)

    @field_validator("case")
    @classmethod
    def _resolve_file(cls, value: str, info: ValidationInfo) -> str:
        """A relative case file resolves from the scenario file's folder."""
        base_dir = (info.context or {}).get("base_dir")
        if value not in CASES and base_dir is not None and not Path(value).is_absolute():
            return str((Path(base_dir) / value).resolve())
        return value

    @field_validator("faults")
    @classmethod
    def _faults(cls, value):
        for t_s, duration_s, bus, x_pu in value:
            if t_s < 0 or duration_s <= 0 or x_pu <= 0:
                raise ValueError(f"fault ({t_s:g}, {duration_s:g}, {bus!r}, {x_pu:g}): give t_s >= 0, duration_s > 0 "
                                 "and x_pu > 0 (the fault reactance on the 100 MVA base)")
        return value


class LoadParams(Params):
    """A cosim-driven load at ``bus`` (idx or name); ``p_mw``/``q_mvar`` hold until the first input. [MW, Mvar]"""

    bus: int | str
    p_mw: float = 0.0
    q_mvar: float = 0.0


class AndesGridSim(CosimSim):
    """mosaik adapter of an ANDES time-domain simulation (models ``Grid`` and ``Load``)."""

    SimParams: ClassVar = SimParams
    ModelParams: ClassVar = {"Grid": Params, "Load": LoadParams}
    # span_s: the tick test integrates 20 s + 60 s (2 x 2,400 sub-steps at ~5 ms) instead of its half hour
    EXAMPLE: ClassVar = {"sim": {"case": "ieee14"}, "models": {"Grid": {}, "Load": {"bus": 9, "p_mw": 10.0}},
                         "single": ["Grid"], "span_s": 80}

    @classmethod
    def input_bounds(cls, model: str, params: Any, sim_params: SimParams | None = None) -> dict[str, tuple[float, float]]:
        """A Load's powers within +-``load_p_max_mw``. [MW, Mvar]"""
        top = SimParams.model_fields["load_p_max_mw"].default if sim_params is None else sim_params.load_p_max_mw
        return {"p_mw": (-top, top), "q_mvar": (-top, top)} if model == "Load" else {}

    def release(self, eid: str, attr: str) -> None:
        """A Load's power no longer held from outside: back to its params' value."""
        if eid in self.loads and attr in LOAD_INPUTS:
            self.loads[eid][attr] = self._load_params[eid][attr]

    @classmethod
    def meta_for(cls, sim_params: SimParams) -> dict[str, Any]:
        info = case_info(sim_params.case)
        grid_out = [*GRID_OUTPUTS, *(f"gen_{sanitise(g)}_{a}" for g in info["gens"] for a in ("f_hz", "p_mw")),
                    *(f"bus_{sanitise(b)}_vm_pu" for b in info["buses"])]
        return meta({"Grid": model_meta(outputs=grid_out, params=Params, role="grid"),
                     "Load": model_meta(LOAD_INPUTS, LOAD_OUTPUTS, LoadParams, role="grid_element")})

    @classmethod
    def check(cls, sim_params: SimParams, ctx: ScenarioContext) -> list[str]:
        try:
            info = case_info(sim_params.case)
        except ValueError as exc:
            return [str(exc)]
        problems = []
        if ctx.step_s > STEP_MAX_S + 1e-12:
            problems.append(f"step_s = {ctx.step_s:g}: ANDES is stepped at most every {STEP_MAX_S:g} s (the campus "
                            "power is held over a step); set step_s = 0.1 (or tick_s and step_s at most 1)")
        dt = sim_params.dt_s
        if dt is not None and abs(ctx.step_s / dt - round(ctx.step_s / dt)) > 1e-6:
            problems.append(f"dt_s = {dt:g} does not divide step_s = {ctx.step_s:g}: give dt_s = step_s / n, e.g. "
                            f"{default_dt_s(ctx.step_s):g}")
        tps = round(1.0 / ctx.tick_s)
        for k, (t_s, duration_s, bus, _x) in enumerate(sim_params.faults):
            try:
                find_bus(sim_params.case, bus)
            except ValueError as exc:
                problems.append(f"faults[{k}]: {exc}")
            for name, value in (("t_s", t_s), ("duration_s", duration_s)):
                try:
                    ticks = to_ticks(value, tps)
                except ValueError:
                    ticks = None
                if ticks is None or ticks % to_ticks(ctx.step_s, tps):
                    problems.append(f"faults[{k}].{name} = {value:g} is not a whole number of steps of {ctx.step_s:g} "
                                    "s: faults switch at this simulator's steps")
        for k, (_t, gen) in enumerate(sim_params.gen_trips):
            if str(gen) not in info["gens"]:
                problems.append(f"gen_trips[{k}]: unknown machine {gen!r}; this case has {', '.join(info['gens'])}")
        return problems

    @classmethod
    def check_entity(cls, model: str, params: Any, ctx: ScenarioContext, sim_params: Any = None) -> list[str]:
        if model != "Load" or params is None or sim_params is None:
            return []
        try:
            case_info(sim_params.case)
            find_bus(sim_params.case, params.bus)
        except ValueError as exc:
            return [str(exc)]
        return []

    # -- life cycle ---------------------------------------------------------------------------
    def setup(self) -> None:
        p = self.params
        self.system = load_case(p.case)
        self.info = case_info(p.case)
        self.dt_s = p.dt_s if p.dt_s is not None else default_dt_s(self.step_s)
        self.n_sub = max(1, round(self.step_s / self.dt_s))
        self.loads: dict[str, dict[str, Any]] = {}
        self._load_params: dict[str, dict[str, float]] = {}  # each Load's own p_mw, q_mvar
        self.grid_eid: str | None = None
        self.started = False
        self.fault_uids: list[int] = []

    def create_entity(self, eid: str, model: str, params: Any) -> None:
        if model == "Grid":
            self.grid_eid = eid
            return
        bus = find_bus(self.params.case, params.bus)
        self._load_params[eid] = {"p_mw": params.p_mw, "q_mvar": params.q_mvar}
        self.loads[eid] = {"bus": bus, "p_mw": params.p_mw, "q_mvar": params.q_mvar, "pq": f"cosim_{eid}",
                           "bf": f"cosim_bf_{eid}"}

    def _start(self, inputs: dict[str, dict[str, Any]]) -> None:
        """Add the loads (at their first-step power), faults and trips; power flow; TDS init."""
        ss, p = self.system, self.params
        bus_idx = {str(i): i for i in ss.Bus.idx.v}
        for eid, load in self.loads.items():
            load.update({k: float(inputs.get(eid, {}).get(k, load[k])) for k in LOAD_INPUTS})
            b = bus_idx[load["bus"]]
            ss.add("PQ", {"idx": load["pq"], "name": load["pq"], "bus": b, "Vn": self.info["vn_kv"][load["bus"]],
                          "p0": load["p_mw"] / S_BASE_MVA, "q0": load["q_mvar"] / S_BASE_MVA})
            ss.add("BusFreq", {"idx": load["bf"], "bus": b})
        self.faults = []
        for k, (t_s, duration_s, bus, x_pu) in enumerate(p.faults):
            idx = f"cosim_fault_{k}"
            ss.add("PQ", {"idx": idx, "name": idx, "bus": bus_idx[find_bus(p.case, bus)],
                          "Vn": self.info["vn_kv"][find_bus(p.case, bus)], "p0": 0.0, "q0": 0.0})
            self.faults.append((to_ticks(t_s, self.ticks_per_s), to_ticks(t_s + duration_s, self.ticks_per_s), idx,
                                1.0 / x_pu))
        for t_s, gen in p.gen_trips:
            ss.add("Toggle", {"model": "GENROU", "dev": gen, "t": float(t_s)})
        ss.setup()
        ss.PFlow.run()
        if not ss.PFlow.converged:
            raise RuntimeError(f"{self.sid}: case {p.case!r} has no power-flow solution with the cosim loads "
                               f"({self._load_text()}); lower the load or move it to a stronger bus")
        tds = ss.TDS.config
        # one integration step per TDS.run call, ended exactly at tf: tstep above the sub-step keeps ANDES's
        # own step control from leaving a float residue before tf
        tds.tstep, tds.no_tqdm, tds.save_every, tds.tf = 10.0 * self.step_s, 1, 0, 0.0
        ss.TDS.init()
        if not ss.TDS.initialized:
            raise RuntimeError(f"{self.sid}: ANDES could not initialise the dynamic models of case {p.case!r} with "
                               f"the cosim loads ({self._load_text()}); check the case's dynamic data or the load")
        self.uid = {eid: ss.PQ.idx2uid(load["pq"]) for eid, load in self.loads.items()}
        self.bf_uid = {eid: ss.BusFreq.idx2uid(load["bf"]) for eid, load in self.loads.items()}
        self.bus_uid = {eid: ss.Bus.idx2uid(bus_idx[load["bus"]]) for eid, load in self.loads.items()}
        self.fault_uids = [ss.PQ.idx2uid(idx) for _a, _b, idx, _y in self.faults]
        self.weights = ss.GENROU.M.v * ss.GENROU.Sn.v
        self.f0_hz = self.info["f_hz"]
        self.f_coi_hz = self._coi_hz()
        self.f_min_hz = self.f_max_hz = self.f_coi_hz
        self.started = True

    def _load_text(self) -> str:
        return ", ".join(f"{eid}: {ld['p_mw']:g} MW at bus {ld['bus']}" for eid, ld in self.loads.items()) or "none"

    def _coi_hz(self) -> float:
        omega = self.system.GENROU.omega.v
        return float((omega * self.weights).sum() / self.weights.sum() * self.f0_hz)

    # -- stepping ----------------------------------------------------------------------------
    def step_entities(self, time_s: float, inputs: dict[str, dict[str, Any]]) -> None:
        if not self.started:
            self._start(inputs)
        ss = self.system
        v = ss.Bus.v.v
        for eid, load in self.loads.items():
            given = inputs.get(eid, {})
            for attr in LOAD_INPUTS:
                if attr in given:
                    load[attr] = float(given[attr])
            vm2 = max(float(v[self.bus_uid[eid]]), 1e-3) ** 2
            ss.PQ.Req.v[self.uid[eid]] = load["p_mw"] / S_BASE_MVA / vm2
            ss.PQ.Xeq.v[self.uid[eid]] = load["q_mvar"] / S_BASE_MVA / vm2
        for (on, off, _idx, y_pu), uid in zip(self.faults, self.fault_uids):
            ss.PQ.Xeq.v[uid] = y_pu if on <= self.time_ticks < off else 0.0
        vm_min = {eid: math.inf for eid in self.loads}
        f_start = self.f_coi_hz
        for k in range(1, self.n_sub + 1):
            self._substep(time_s + k * self.step_s / self.n_sub, time_s)
            for eid in self.loads:
                vm_min[eid] = min(vm_min[eid], float(v[self.bus_uid[eid]]))
            self.f_coi_hz = self._coi_hz()
            self.f_min_hz, self.f_max_hz = min(self.f_min_hz, self.f_coi_hz), max(self.f_max_hz, self.f_coi_hz)
        self._outputs(vm_min, (self.f_coi_hz - f_start) / self.step_s)

    def _substep(self, t_end_s: float, step_start_s: float) -> None:
        ss = self.system
        ss.TDS.config.tf = t_end_s
        ss.TDS.run(no_summary=True)
        if abs(ss.dae.t - t_end_s) < 1e-9:
            ss.dae.t = np.float64(t_end_s)
        if ss.TDS.busted:
            message = ss.TDS.err_msg or "integration stopped"
            if "criteria" in message:
                raise EndRun(f"{self.sid}: machines lost synchronism at t = {float(ss.dae.t):.3f} s (ANDES's criterion: "
                             "rotor angles more than 180 degrees apart); the step from "
                             f"{step_start_s:g} s is the last recorded")
            self._unsolved_outputs()
            raise RuntimeError(f"{self.sid}: ANDES's integration did not converge at t = {float(ss.dae.t):.3f} s "
                               f"({message}); try a smaller dt_s or a less severe event")
        if ss.dae.t != t_end_s:  # never report a step that ANDES did not reach
            self._unsolved_outputs()
            raise RuntimeError(f"{self.sid}: ANDES stopped at t = {float(ss.dae.t):.6f} s short of {t_end_s:.6f} s "
                               "without an error of its own; try another dt_s")

    def _unsolved_outputs(self) -> None:
        """Every output NaN but the loads' asked powers: the step did not integrate."""
        for eid, load in self.loads.items():
            self.out[eid] = {**dict.fromkeys(LOAD_OUTPUTS, math.nan), "p_mw": load["p_mw"], "q_mvar": load["q_mvar"]}
        if self.grid_eid is not None:
            info = self.info
            names = [*GRID_OUTPUTS, *(f"gen_{sanitise(g)}_{a}" for g in info["gens"] for a in ("f_hz", "p_mw")),
                     *(f"bus_{sanitise(b)}_vm_pu" for b in info["buses"])]
            self.out[self.grid_eid] = dict.fromkeys(names, math.nan)

    def _outputs(self, vm_min: dict[str, float], rocof_hz_s: float) -> None:
        ss, f0 = self.system, self.f0_hz
        v = ss.Bus.v.v
        for eid, load in self.loads.items():
            vm = float(v[self.bus_uid[eid]])
            self.out[eid] = {"p_mw": load["p_mw"], "q_mvar": load["q_mvar"],
                             "p_served_mw": float(ss.PQ.Req.v[self.uid[eid]]) * vm * vm * S_BASE_MVA,
                             "vm_pu": vm, "vm_min_pu": vm_min[eid],
                             "f_hz": float(ss.BusFreq.f.v[self.bf_uid[eid]]) * f0,
                             "rocof_hz_s": rocof_hz_s}
        if self.grid_eid is None:
            return
        delta = np.degrees(ss.GENROU.delta.v)
        pq = ss.PQ
        p_load = float((pq.Req.v * v[ss.Bus.idx2uid(pq.bus.v)] ** 2).sum()) * S_BASE_MVA
        out = {"f_hz": self.f_coi_hz, "f_nadir_hz": self.f_min_hz, "f_zenith_hz": self.f_max_hz,
               "rocof_hz_s": rocof_hz_s, "vm_min_pu": float(v.min()), "vm_max_pu": float(v.max()),
               "delta_spread_deg": float(delta.max() - delta.min()), "p_load_mw": p_load,
               "p_gen_mw": float(ss.GENROU.Pe.v.sum()) * S_BASE_MVA}
        for g, omega, pe in zip(self.info["gens"], ss.GENROU.omega.v, ss.GENROU.Pe.v):
            out[f"gen_{sanitise(g)}_f_hz"] = float(omega) * f0
            out[f"gen_{sanitise(g)}_p_mw"] = float(pe) * S_BASE_MVA
        for b, vb in zip(self.info["buses"], v):
            out[f"bus_{sanitise(b)}_vm_pu"] = float(vb)
        self.out[self.grid_eid] = out
