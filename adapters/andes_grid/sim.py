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
  ``kundur`` (two areas, four machines); the path of an ANDES case file (``.xlsx`` / ``.json``);
  or a power-flow case, a PSS/E RAW (``.raw``, v32-v35) or MATPOWER (``.m``), with its dynamic
  data in ``dyr`` (a PSS/E DYR, read by ANDES's own reader: ``andes.load(raw, addfile=dyr)``; a
  MATPOWER case's generators take the machine ids 1, 2, ... at each bus). Both paths are relative
  to the scenario. Checked before the run: a RAW or MATPOWER case without ``dyr``; DYR records of
  models ANDES does not have (one problem naming each model, its count, the file and what the run
  does without it; ``skip_unsupported_dyr = true`` runs without them); DYR records at buses the
  case does not have. The case's own scripted events (Toggle, Fault, Alter devices) are moved
  past the end of the run: only the events of the scenario happen.
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
* ``Load`` (``bus = <bus number or name>``; an unknown one is refused naming the nearest names, a
  name several buses share asks for the number): a load that cosim drives. Inputs ``p_mw`` and
  ``q_mvar`` (consumer sign); outputs ``p_mw``, ``q_mvar`` (what it asked for, as on the other grid
  engines), ``p_served_mw`` (what it drew at the end of the step: an impedance set at the step's
  start voltage, so it follows the voltage inside the step; with a native PERC1, its constant power
  times its connected shares), ``vm_pu`` (its bus voltage at the end
  of the step), ``vm_min_pu`` (lowest over the step's
  sub-steps: a 100 ms dip shows also at 1 s steps), ``f_hz`` (the bus frequency of an ANDES
  ``BusFreq`` measurement at the bus), ``rocof_hz_s``, and ``p_connected_frac`` /
  ``q_connected_frac`` (PERC1's shares at the end of the step, 0 once its frequency trip has acted;
  1 without it: connect them to a ``ride_through``'s ``p_grid_connected_frac`` /
  ``q_grid_connected_frac`` so its UPS accounting carries the ceased share). With ``perc1 = {...}``
  (``ride_through``'s PERC1 keys) or ``perc1_dyr = "<record>.dyr"`` (``cosim model-record``'s
  output; ``perc1_id`` picks the record) the load is a PERC1 device inside ANDES
  (``adapters/andes_grid/perc1.py``): it draws ``p_mw``/``q_mvar`` at constant power times its shares,
  which ANDES evaluates at every iteration of every sub-step.

Coupling: at step ``t`` the Load's input power is set (without PERC1: as the impedance that draws
exactly that power at the bus voltage of ``t``) and the case is integrated over ``[t, t + step_s)``; the outputs
of step ``t`` describe that interval: the state at its end and the extremes inside it. The first
step's input is the initial operating point: the power flow and ANDES's initialisation are solved
with it, so the run starts in equilibrium. A machine pair losing synchronism (ANDES's criterion:
rotor angles more than 180° apart) ends the run early and cleanly (status ok, the reason names
the time); an integration that does not converge fails it, and the outputs of that step are NaN
(the loads' asked ``p_mw``/``q_mvar`` excepted), so a Session or a live run that reads them after
the failure never reads the last solved step's values as this one's. No cosim input isolates a bus
here (no line inputs or trips), so ANDES has no de-energised outputs.
A case ANDES cannot start fails with
the step that failed: setup, power flow, or TDS initialisation (the largest mismatch named).

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

import math
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

import cosim.adapters.andes_grid.perc1_record as record
from cosim.adapters.andes_grid.cases import (
    MACHINES,
    S_BASE_MVA,
    STEP_MAX_S,
    case_info,
    default_dt_s,
    dyr_problems,
    find_bus,
    load_case,
    machines,
    needs_dyr,
)
from cosim.adapters.andes_grid.params import LoadParams, SimParams, perc1_of
from cosim.sdk import CosimSim, EndRun, Params, ScenarioContext, meta, model_meta, sanitise, to_ticks

GRID_OUTPUTS = ("f_hz", "f_nadir_hz", "f_zenith_hz", "rocof_hz_s", "vm_min_pu", "vm_max_pu", "delta_spread_deg",
                "p_load_mw", "p_gen_mw")
LOAD_INPUTS = ("p_mw", "q_mvar")
LOAD_OUTPUTS = ("p_mw", "q_mvar", "p_served_mw", "vm_pu", "vm_min_pu", "f_hz", "rocof_hz_s", "p_connected_frac", "q_connected_frac")


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
        gen_attrs, bus_attrs = _element_outputs(case_info(sim_params.case, sim_params.dyr))
        grid_out = [*GRID_OUTPUTS, *(a for pair in gen_attrs for a in pair), *bus_attrs]
        return meta({"Grid": model_meta(outputs=grid_out, params=Params, role="grid"),
                     "Load": model_meta(LOAD_INPUTS, LOAD_OUTPUTS, LoadParams, role="grid_element")})

    @classmethod
    def bus_number(cls, sim_params: SimParams, bus: Any) -> int | str:
        """The case's number of ``bus`` (given by number or name), for a DYR record."""
        idx = find_bus(sim_params.case, bus, sim_params.dyr)
        return int(idx) if idx.isdigit() else idx

    @classmethod
    def check(cls, sim_params: SimParams, ctx: ScenarioContext) -> list[str]:
        p = sim_params
        if p.dyr is not None and needs_dyr(p.case) and Path(p.dyr).is_file() and Path(p.case).is_file():
            problems = dyr_problems(p.case, p.dyr, p.skip_unsupported_dyr)
            if problems:
                return problems
        try:
            info = case_info(p.case, p.dyr)
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
                find_bus(sim_params.case, bus, sim_params.dyr)
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
            case_info(sim_params.case, sim_params.dyr)
        except ValueError:
            return []  # the sim's own check reports it
        try:
            bus = find_bus(sim_params.case, params.bus, sim_params.dyr)
        except ValueError as exc:
            return [f"bus = {params.bus!r}: {exc}"]
        try:
            perc1 = perc1_of(params, bus)
        except ValueError as exc:
            return [str(exc)]
        if perc1 is not None and abs(perc1.f_nominal_hz - case_info(sim_params.case, sim_params.dyr)["f_hz"]) > 1e-9:
            return [f"perc1.f_nominal_hz = {perc1.f_nominal_hz:g}: the case runs at "
                    f"{case_info(sim_params.case, sim_params.dyr)['f_hz']:g} Hz; set f_nominal_hz to it"]
        return []

    # -- life cycle ---------------------------------------------------------------------------
    def setup(self) -> None:
        p = self.params
        self.native_uid: dict[str, int] = {}
        self.system = load_case(p.case, p.dyr)
        self.info = case_info(p.case, p.dyr)
        self._gen_attrs, self._bus_attrs = _element_outputs(self.info)
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
        bus = find_bus(self.params.case, params.bus, self.params.dyr)
        self._load_params[eid] = {"p_mw": params.p_mw, "q_mvar": params.q_mvar}
        self.loads[eid] = {"bus": bus, "p_mw": params.p_mw, "q_mvar": params.q_mvar, "pq": f"cosim_{eid}",
                           "bf": f"cosim_bf_{eid}", "perc1": perc1_of(params, bus), "native": f"cosim_perc1_{eid}"}

    def _start(self, inputs: dict[str, dict[str, Any]]) -> None:
        """Add the loads (at their first-step power), faults and trips; power flow; TDS init."""
        ss, p = self.system, self.params
        bus_idx = {str(i): i for i in ss.Bus.idx.v}
        if any(load["perc1"] is not None for load in self.loads.values()):
            from cosim.adapters.andes_grid.perc1 import register  # noqa: PLC0415 — ANDES code only when used

            register(ss)
        for eid, load in self.loads.items():
            load.update({k: float(inputs.get(eid, {}).get(k, load[k])) for k in LOAD_INPUTS})
            b = bus_idx[load["bus"]]
            ss.add("PQ", {"idx": load["pq"], "name": load["pq"], "bus": b, "Vn": self.info["vn_kv"][load["bus"]],
                          "p0": load["p_mw"] / S_BASE_MVA, "q0": load["q_mvar"] / S_BASE_MVA})
            ss.add("BusFreq", {"idx": load["bf"], "bus": b})
            if load["perc1"] is not None:  # the PQ carries the power flow and t = 0; PERC1 from the first step
                values = load["perc1"].model_dump()
                ss.add("PERC1", {"idx": load["native"], "name": load["native"], "bus": b, "busf": load["bf"],
                                 "p0": load["p_mw"] / S_BASE_MVA, "q0": load["q_mvar"] / S_BASE_MVA,
                                 **{name: float(values[key]) for name, (key, _u, _m) in record.PARAMS.items()}})
        self.faults = []
        for k, (t_s, duration_s, bus, x_pu) in enumerate(p.faults):
            idx = f"cosim_fault_{k}"
            ss.add("PQ", {"idx": idx, "name": idx, "bus": bus_idx[find_bus(p.case, bus, p.dyr)],
                          "Vn": self.info["vn_kv"][find_bus(p.case, bus, p.dyr)], "p0": 0.0, "q0": 0.0})
            self.faults.append((to_ticks(t_s, self.ticks_per_s), to_ticks(t_s + duration_s, self.ticks_per_s), idx,
                                1.0 / x_pu))
        for t_s, gen in p.gen_trips:
            model = next(m for m in MACHINES if gen in [str(i) for i in getattr(ss, m).idx.v])
            ss.add("Toggle", {"model": model, "dev": gen, "t": float(t_s)})
        if not ss.setup():
            raise RuntimeError(f"{self.sid}: ANDES could not set up case {p.case!r} (step failed: setup, before the "
                               "power flow); check the case's data (ANDES's log names the device)")
        ss.PFlow.run()
        if not ss.PFlow.converged:
            raise RuntimeError(f"{self.sid}: case {p.case!r} has no power-flow solution with the cosim loads "
                               f"({self._load_text()}) (step failed: power flow); lower the load or move it to a "
                               "stronger bus")
        tds = ss.TDS.config
        # one integration step per TDS.run call, ended exactly at tf: tstep above the sub-step keeps ANDES's
        # own step control from leaving a float residue before tf
        tds.tstep, tds.no_tqdm, tds.save_every, tds.tf = 10.0 * self.step_s, 1, 0, 0.0
        ss.TDS.init()
        mismatch, where = self._init_mismatch() if ss.TDS.initialized and ss.TDS.test_ok is False else (0.0, "")
        if mismatch > ss.TDS.config.tol:
            raise RuntimeError(f"{self.sid}: ANDES's initialisation of case {p.case!r} leaves the dynamic models out "
                               f"of equilibrium (step failed: TDS initialisation, after a converged power flow; "
                               f"largest mismatch {mismatch:.3g} in {where}): the dynamic data do not fit the power "
                               "flow (a limit or a setpoint); check the case's dynamic data")
        if not ss.TDS.initialized:
            raise RuntimeError(f"{self.sid}: ANDES could not initialise the dynamic models of case {p.case!r} with "
                               f"the cosim loads ({self._load_text()}) (step failed: TDS initialisation, after a "
                               "converged power flow); check the case's dynamic data or the load")
        self.uid = {eid: ss.PQ.idx2uid(load["pq"]) for eid, load in self.loads.items()}
        self.bf_uid = {eid: ss.BusFreq.idx2uid(load["bf"]) for eid, load in self.loads.items()}
        self.bus_uid = {eid: ss.Bus.idx2uid(bus_idx[load["bus"]]) for eid, load in self.loads.items()}
        self.native_uid = {eid: ss.PERC1.idx2uid(load["native"]) for eid, load in self.loads.items()
                           if load["perc1"] is not None}
        self.fault_uids = [ss.PQ.idx2uid(idx) for _a, _b, idx, _y in self.faults]
        self.machines = machines(ss)
        self.weights = np.array([m.M.v[i] * m.Sn.v[i] for m, i in self.machines])
        self.f0_hz = self.info["f_hz"]
        self.f_coi_hz = self._coi_hz()
        self.f_min_hz = self.f_max_hz = self.f_coi_hz
        self.started = True

    def _init_mismatch(self) -> tuple[float, str]:
        """The largest equation residual after ANDES's initialisation, and its variable, over the devices
        in service (a device switched off, e.g. a governor with u = 0, keeps residuals that never act)."""
        ss = self.system
        dae = ss.dae
        residual = np.abs(np.asarray(dae.fg, dtype=float)).copy()
        for model in ss.models.values():
            if not model.n or "u" not in model.__dict__:
                continue
            off = np.asarray(model.u.v) == 0
            if not off.any():
                continue
            for var in model.cache.all_vars.values():
                if var.__class__.__name__.startswith("Ext") or not hasattr(var, "a") or len(var.a) != model.n:
                    continue
                offset = 0 if var.v_code == "x" else dae.n
                residual[offset + np.asarray(var.a)[off]] = 0.0
        worst = int(np.argmax(residual))
        names = list(dae.x_name) + list(dae.y_name)
        return float(residual[worst]), names[worst]

    def _load_text(self) -> str:
        return ", ".join(f"{eid}: {ld['p_mw']:g} MW at bus {ld['bus']}" for eid, ld in self.loads.items()) or "none"

    def _coi_hz(self) -> float:
        omega = np.array([m.omega.v[i] for m, i in self.machines])
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
            if eid in self.native_uid:  # PERC1 draws it (constant power times its shares); the PQ is empty
                ss.PERC1.p0.v[self.native_uid[eid]] = load["p_mw"] / S_BASE_MVA
                ss.PERC1.q0.v[self.native_uid[eid]] = load["q_mvar"] / S_BASE_MVA
                ss.PQ.Req.v[self.uid[eid]] = ss.PQ.Xeq.v[self.uid[eid]] = 0.0
                continue
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
            names = [*GRID_OUTPUTS, *(a for pair in self._gen_attrs for a in pair), *self._bus_attrs]
            self.out[self.grid_eid] = dict.fromkeys(names, math.nan)

    def _outputs(self, vm_min: dict[str, float], rocof_hz_s: float) -> None:
        ss, f0 = self.system, self.f0_hz
        v = ss.Bus.v.v
        for eid, load in self.loads.items():
            vm = float(v[self.bus_uid[eid]])
            if eid in self.native_uid:
                n = self.native_uid[eid]
                on = float(ss.PERC1.SH.on[n])  # 0 once the frequency trip has acted
                p_share, q_share = float(ss.PERC1.LP_y.v[n]) * on, float(ss.PERC1.LQ_y.v[n]) * on
                p_served_mw = float(ss.PERC1.p0.v[n]) * p_share * S_BASE_MVA
            else:
                p_share = q_share = 1.0
                p_served_mw = float(ss.PQ.Req.v[self.uid[eid]]) * vm * vm * S_BASE_MVA
            self.out[eid] = {"p_mw": load["p_mw"], "q_mvar": load["q_mvar"], "p_served_mw": p_served_mw, "vm_pu": vm, "vm_min_pu": vm_min[eid],
                             "f_hz": float(ss.BusFreq.f.v[self.bf_uid[eid]]) * f0,
                             "rocof_hz_s": rocof_hz_s, "p_connected_frac": p_share, "q_connected_frac": q_share}
        if self.grid_eid is None:
            return
        delta = np.degrees([m.delta.v[i] for m, i in self.machines])
        pe = np.array([m.Pe.v[i] for m, i in self.machines])
        pq = ss.PQ
        p_load = float((pq.Req.v * v[ss.Bus.idx2uid(pq.bus.v)] ** 2).sum()) * S_BASE_MVA
        p_load += sum(self.out[eid]["p_served_mw"] for eid in self.native_uid)
        out = {"f_hz": self.f_coi_hz, "f_nadir_hz": self.f_min_hz, "f_zenith_hz": self.f_max_hz,
               "rocof_hz_s": rocof_hz_s, "vm_min_pu": float(v.min()), "vm_max_pu": float(v.max()),
               "delta_spread_deg": float(delta.max() - delta.min()), "p_load_mw": p_load,
               "p_gen_mw": float(pe.sum()) * S_BASE_MVA}
        for (f_attr, p_attr), (m, i), pe_i in zip(self._gen_attrs, self.machines, pe):
            out[f_attr] = float(m.omega.v[i]) * f0
            out[p_attr] = float(pe_i) * S_BASE_MVA
        for attr, vb in zip(self._bus_attrs, v):
            out[attr] = float(vb)
        self.out[self.grid_eid] = out


def _element_outputs(info: dict[str, Any]) -> tuple[list[tuple[str, str]], list[str]]:
    """The Grid's outputs of each machine (frequency, power) and each bus (voltage), named by the
    case's ids under the id rule of every grid engine (:func:`cosim.sdk.sanitise`)."""
    gens = [sanitise(g) for g in info["gens"]]
    return [(f"gen_{g}_f_hz", f"gen_{g}_p_mw") for g in gens], [f"bus_{sanitise(b)}_vm_pu" for b in info["buses"]]
