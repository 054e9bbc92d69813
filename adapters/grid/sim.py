"""Grid adapter: a network solved each step, by pandapower/lightsim2grid or by OpenDSS.

Two engines behind one adapter (``engine`` in ``[sims.<id>]``; the entities, attribute
names and KPIs are the same, so swapping the grid is changing two keys):

* ``engine = "pandapower"`` (default): a balanced pandapower network, described below.
* ``engine = "opendss"``: an unbalanced three-phase OpenDSS circuit (``grid_models``'s
  ``ieee13``/``ieee34``/``ieee123`` feeders or any ``.dss`` file) with its regulators and
  capacitors, solved by DSS-Extensions (:mod:`.opendss_flow`). Extra keys:
  ``regulators = "auto" | "fixed"``, ``tap_positions = {<regcontrol> = <steps>}`` and
  ``control_mode = "static" | "time"`` (time-delayed regulator action on the sim clock).
  Besides ``bus_<id>_vm_pu`` (the mean of the bus's phases) the Grid reports
  ``bus_<id>_<a|b|c>_vm_pu`` per phase, ``reg_<id>_tap_count`` (tap position, steps from
  neutral) and ``reg_<id>_tap_pu`` per regulator, ``cap_<id>_in_service`` and
  ``cap_<id>_q_mvar`` per capacitor and ``n_tap_changes`` (cumulative tap operations);
  input ``reg_<id>_tap_set_count`` holds a regulator at that tap [steps from neutral] from
  the step it arrives (its RegControl off; NaN hands it back), e.g. from ``tap_schedule``;
  input ``cap_<id>_set_count`` closes that many of a capacitor's steps (0 = out of service,
  1 = a one-step bank in; its CapControl, if any, off from the first command; NaN leaves it),
  e.g. from ``cap_switch`` (on the pandapower engine the same for a shunt:
  ``shunt_<id>_set_count`` sets ``net.shunt.step``, 0 to ``max_step``);
  ``vm_min_pu``/``vm_max_pu`` span every phase. Elements take ``phases = "abc"``
  (balanced three-phase, default) or a subset (``"a"``, ``"bc"``…, power split equally),
  and OpenDSS's load model: ``load_model = "constant_power"`` (default), ``"constant_current"``
  or ``"constant_impedance"``, held between ``vmin_pu`` and ``vmax_pu`` (default 0.95 and
  1.05 pu, OpenDSS's defaults; constant impedance outside, so below 0.95 pu the feeder
  carries less than the element's ``p_mw``: see ``opendss_flow.py``).

All-bus voltage outputs (both engines), over the *monitored* bus-phases: every phase of every
bus except ``exclude_buses`` (default: the source bus, i.e. the slack / Vsource bus, and the
terminal buses of every regulator transformer; on IEEE 13 these are 650 and rg60, as
OpenG2G excludes ``sourcebus``, ``650`` and ``rg60`` on its variant), against the band
``[v_low_pu, v_high_pu]`` (default [0.95, 1.05] pu): ``allbus_vm_min_pu``,
``allbus_vm_max_pu``, ``allbus_violation_pu`` = Σ over monitored bus-phases of
max(v_low − v, 0) + max(v − v_high, 0) [pu] and ``n_allbus_violating`` (bus-phases strictly
outside the band). Each Load/Sgen/Storage reports the same over the phases it connects to:
``vm_phase_min_pu``, ``vm_phase_max_pu``, ``vm_violation_pu`` (its point of connection).
The KPIs (``cosim/kpis/grid.py``) integrate these over time.

The pandapower engine:

The network is defined in pandapower (a ``grid_models`` catalogue name, ``simbench:<code>``
or a pandapower JSON file). :class:`PowerFlow` converts it once with pandapower's own
``_pd2ppc`` (so switches, bus fusing, out-of-service elements and transformer models are
exactly pandapower's), keeps the admittance matrices, and per step only rebuilds the bus
injections and runs lightsim2grid's KLU Newton-Raphson warm-started from the previous
voltages. A line switched in or out of service rebuilds the matrices. Results (voltages,
loadings, losses, slack import) are computed as pandapower's ``runpp`` reports them.

Entities:

* ``Grid`` (one per sim): outputs ``vm_min_pu``, ``vm_max_pu``, ``p_import_mw`` and
  ``q_import_mvar`` (at the slack, positive = import from upstream), ``losses_mw`` (lines
  and transformers), ``max_loading_pct``, ``converged``, ``n_nonconverged`` and per element
  ``bus_<id>_vm_pu``, ``line_<id>_loading_pct``, ``trafo_<id>_loading_pct``; inputs
  ``line_<id>_in_service``, ``n_buses_unsupplied`` (buses the network as given supplies that
  have no voltage in this step: cut from every source by an opened line; the extremes
  ``vm_min_pu`` etc. are over the energised buses, this count sits beside them). ``<id>`` is the
  element name sanitised to ``[a-z0-9_]`` (its index when the name is missing or not unique).
* ``Load``, ``Sgen``, ``Storage``: ``bus=`` attaches a new element at that bus (name or
  index), ``element=`` drives an existing one. Inputs and outputs ``p_mw`` [MW] and
  ``q_mvar`` [Mvar] (what the element asks for; consumer convention for Load and Storage,
  generator convention for Sgen, as pandapower's tables), output ``vm_pu`` at the element's bus
  and ``p_served_mw``, what the grid served it in the same sign: ``p_mw`` on an energised bus
  (pandapower's elements are constant power), short of it on OpenDSS below the element's
  ``vmin_pu`` (where OpenDSS serves a load as an impedance), 0 on a de-energised bus (its
  voltages NaN). An input replaces the background profile of that element from then on.

Background profiles (SimBench's 15-minute year) are mapped to the scenario time by day of
year and time of day, so any scenario year works; each value holds for its quarter hour.
A line out of service (or in an island) reports 0 % loading; buses in an island report NaN
voltages, as pandapower does.

Line trips (both engines) come as events in ``[sims.<id>]``: ``line_trips = [[t_s, duration_s,
"line"], ...]`` and/or ``line_trips_file`` (a CSV with the columns ``t_s,duration_s,line``; ``#``
lines are comments), the line by name, id or (pandapower) index. The line is out of service in
every step whose time ``t`` lies in ``[t_s, t_s + duration_s)`` (the grid is a steady-state solve at
each step's time, so a trip shorter than the grid's step is seen only when a step starts inside
it) and back in service after, unless a ``line_<id>_in_service`` input holds it open. With trips
given the Grid also outputs ``n_lines_out`` (lines out of service by a trip or an input) and
``n_buses_islanded`` (buses left without a source: their ``bus_<id>_vm_pu`` is NaN, their loads are
not served and not in ``p_import_mw``); an island is reported, never an error (the run's
``supply`` KPIs count its time and what was not served, and the run ends ``degraded``).

When the power flow does not converge, ``converged`` is False, ``n_nonconverged`` counts up and
every result of the step is NaN: the Grid's voltages, loadings, losses, import and all-bus
outputs (OpenDSS: per-phase voltages and capacitor Mvar too; tap and capacitor settings stay),
each element's voltages and ``p_served_mw``; an element's ``p_mw``/``q_mvar`` still say what it
asked for. Never the last solved values. ``on_nonconvergence`` says what such a step does:
``"continue_nan"`` (the default) goes on with those NaN results, ``"fail"`` ends the run with
``PowerFlowNotConverged``; ``"hold"`` is accepted as an older name of ``"continue_nan"``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from cosim import grid_models
from cosim.adapters.grid.backend import GridBackend, opendss_circuit_info, opendss_circuit_size, opendss_grid_outputs
from cosim.adapters.grid.checks import (
    opendss_entity_problems,
    pandapower_entity_problems,
    sim_problems,
)
from cosim.adapters.grid.opendss_faults import (
    FaultSchedule,
    PHASE_OUTPUTS,
    bus_phase_voltages,
    phase_outputs,
)
from cosim.adapters.grid.opendss_flow import OpenDssFlow, sanitise as dss_sanitise
from cosim.adapters.grid.pandapower_tables import (
    ELEMENT_ATTRS,
    ELEMENT_VOLTAGE_OUTPUTS,
    GRID_OUTPUTS,
    KINDS,
    MODEL_KIND,
    SERVED_ATTR,
    element_ids,
    locate_in,
)
from cosim.adapters.grid.params import ElementParams, SimParams
from cosim.adapters.grid.voltage_band import band_stats, nan_extremes
from cosim.sdk import CosimSim, PowerFlowNotConverged, ScenarioContext, meta, model_meta, tuple_getter

__all__ = ["ELEMENT_P_MAX_FLOOR_MW", "SUMMARY_EXTRA_OUTPUTS", "TRIP_OUTPUTS", "GridSim", "cap_set_attr",
           "shunt_set_attr", "tap_set_attr"]


#: Grid outputs the OpenDSS engine writes when read, with the per-element ones (GridSim._write_detail).
FLOW_OUTPUTS = ("losses_mw", "max_loading_pct")
#: Grid outputs added when line trips are given.
TRIP_OUTPUTS = ("n_lines_out", "n_buses_islanded")
#: Grid outputs beyond the common ones that sum up the whole network (recorded by default).
SUMMARY_EXTRA_OUTPUTS = ("n_tap_changes", *TRIP_OUTPUTS)


@dataclass
class _Attached:
    kind: str
    pos: int
    bus_pos: int
    p_mw: float | None  # None: follow the background profile / tabulated value
    q_mvar: float | None


class GridSim(CosimSim):
    """mosaik adapter of :class:`PowerFlow`."""

    SimParams: ClassVar = SimParams
    ModelParams: ClassVar = {model: ElementParams for model in MODEL_KIND}
    EXAMPLE: ClassVar = {
        "sim": {"network": "ieee33"},
        "models": {"Grid": {}, "Load": {"bus": "18", "p_mw": 1.0}, "Sgen": {"bus": "18", "p_mw": 0.5},
                   "Storage": {"bus": "33"}},
        "single": ["Grid"],
    }
    _META_CACHE: ClassVar[dict[str, dict[str, Any]]] = {}
    _SIZE_CACHE: ClassVar[dict[str, tuple[float, dict[str, tuple[int, int]]]]] = {}

    # -- validation hooks ---------------------------------------------------------------
    @classmethod
    def meta_for(cls, sim_params: SimParams) -> dict[str, Any]:
        trips = list(TRIP_OUTPUTS) if sim_params.all_line_trips() else []
        if sim_params.engine == "opendss":
            info = opendss_circuit_info(grid_models.dss_file(sim_params.network))
            return _build_meta(info.ids, [*opendss_grid_outputs(info), *trips],
                               [*(tap_set_attr(i) for i in info.ids["reg"]), *(cap_set_attr(i) for i in info.ids["cap"])],
                               element_outputs=list(PHASE_OUTPUTS))
        key = _meta_key(sim_params)
        if key not in cls._META_CACHE:
            net = grid_models.load_network(sim_params.network, copy=False, **sim_params.network_params)
            shunts = [shunt_set_attr(i) for i in element_ids(net.shunt)] if len(net.shunt) else []
            cls._META_CACHE[key] = _build_meta({t: element_ids(net[t]) for t in ("bus", "line", "trafo")}, trips,
                                               extra_inputs=shunts)
            cls._SIZE_CACHE[key] = (_tabulated_mw(net), {a: (0, top) for a, top in zip(shunts, _max_steps(net.shunt))})
        return cls._META_CACHE[key]

    @classmethod
    def input_bounds(cls, model: str, params: ElementParams | None,
                     sim_params: SimParams | None = None) -> dict[str, tuple[float, float]]:
        """Element powers within +-``element_p_max_mw``; switches 0 or 1 (the unit's range); a
        regulator's tap within its own MinTap..MaxTap, a capacitor's closed steps within 0..NumSteps
        (OpenDSS); a shunt's step within 0..``max_step`` (pandapower). [MW, Mvar, steps]"""
        if sim_params is None:
            return {}
        cls.meta_for(sim_params)  # fills the size cache of a pandapower network
        tabulated_mw, steps = cls._SIZE_CACHE.get(_meta_key(sim_params), (0.0, {}))
        if sim_params.engine == "opendss":
            tabulated_mw, steps = _opendss_size(grid_models.dss_file(sim_params.network))
        if model != "Grid":
            top = sim_params.element_p_max_mw or max(ELEMENT_P_MAX_FLOOR_MW, 10 * tabulated_mw)
            return {"p_mw": (-top, top), "q_mvar": (-top, top)}
        return {attr: (float(low), float(high)) for attr, (low, high) in steps.items()}

    @classmethod
    def check(cls, sim_params: SimParams, ctx: ScenarioContext) -> list[str]:
        try:
            cls.meta_for(sim_params)
            return sim_problems(sim_params, ctx)
        except (ValueError, TypeError, OSError) as exc:
            return [f"network {sim_params.network!r}: {exc}"]

    @classmethod
    def check_entity(cls, model: str, params: ElementParams | None, ctx: ScenarioContext,
                     sim_params: SimParams | None = None) -> list[str]:
        """An unknown bus or element is named at validation, before any simulator starts."""
        if params is None or sim_params is None:
            return []
        if sim_params.engine == "opendss":
            return opendss_entity_problems(model, params, sim_params)
        if params.dss_load_options():
            return ['load_model, vmin_pu and vmax_pu apply to engine = "opendss" (pandapower elements are '
                    "constant power at any voltage); drop them"]
        if params.phases != "abc":
            return [f"phases = {params.phases!r}: the pandapower engine is balanced; "
                    'use phases = "abc" or engine = "opendss"']
        return pandapower_entity_problems(model, params, sim_params)

    def built_from(self) -> frozenset[str] | None:
        """The pandapower model after set-up depends on neither the start nor the seed (profiles are
        read by the step's time) and lives in this object; an OpenDSS circuit lives in its engine."""
        return frozenset({"duration_s"}) if self.params.engine == "pandapower" and type(self) is GridSim else None

    # -- mosaik hooks -------------------------------------------------------------------
    def setup(self) -> None:
        p = self.params
        self.flow: GridBackend
        if p.engine == "opendss":
            path = grid_models.dss_file(p.network)
            self.flow = OpenDssFlow(path, regulators=p.regulators, tap_positions=p.tap_positions,
                                    control_mode=p.control_mode, info=opendss_circuit_info(path))
        else:
            from cosim.adapters.grid.pandapower_flow import PowerFlow  # imports pandapower: its engine only

            net = grid_models.load_network(p.network, **p.network_params)
            self.flow = PowerFlow(net, solver=p.solver, key=grid_models.network_key(p.network, **p.network_params))
        self.grid_eid: str | None = None
        self.attached: dict[str, _Attached] = {}
        self.n_nonconverged = 0
        self._line_attr = {f"line_{i}_in_service": pos for pos, i in enumerate(self.flow.ids["line"])}
        self._tap_attr = {tap_set_attr(i): pos for pos, i in enumerate(self.flow.ids.get("reg", []))}
        self._cap_attr = {cap_set_attr(i): pos for pos, i in enumerate(self.flow.ids.get("cap", []))}
        shunts = self.flow.net.shunt if p.engine == "pandapower" else ()
        self._shunt_attr = {shunt_set_attr(i): pos for pos, i in enumerate(element_ids(shunts))} if len(shunts) else {}
        self._shunt_initial = [float(v) for v in shunts["step"]] if len(shunts) else []  # the network's own steps
        self._bus_attrs = [f"bus_{i}_vm_pu" for i in self.flow.ids["bus"]]
        self._line_attrs = [f"line_{i}_loading_pct" for i in self.flow.ids["line"]]
        self._trafo_attrs = [f"trafo_{i}_loading_pct" for i in self.flow.ids["trafo"]]
        self._profiles = self._load_profiles() if p.profiles and p.engine == "pandapower" else []
        self._buffers: tuple | None = None  # the injection buffers (_injection_buffers), None: to copy
        self._element_attrs = [*self._bus_attrs, *self._line_attrs, *self._trafo_attrs]
        self._trips = [(t_s, t_s + duration_s, self._line_pos(line)) for t_s, duration_s, line in p.all_line_trips()]
        self._line_held_open: set[int] = set()  # lines a line_<id>_in_service input opened
        self._line_initial = ([bool(v) for v in self.flow.net.line["in_service"]] if p.engine == "pandapower"
                              else [True] * len(self.flow.ids["line"]))  # the scenario's own states
        self._scenario_pq: dict[str, tuple[float | None, float | None]] = {}  # each element's own p, q
        self._trip_state: dict[int, bool] = {}  # the state _switch_lines last gave a trip's line
        self._faults = FaultSchedule(self.flow.dss, list(p.faults), self.flow.info.buses) if p.faults else None
        # buses the network as given leaves without voltage (out of service, or cut off in its file):
        # not counted by n_buses_unsupplied, which counts what the run's switching de-energised
        if p.engine == "opendss":
            self._dead_at_start = np.zeros(len(self.flow.ids["bus"]), bool)
            isolated = list(opendss_circuit_info(grid_models.dss_file(p.network)).isolated_buses)
            self._dead_at_start[[i for i in isolated if i < len(self._dead_at_start)]] = True
        else:
            self._dead_at_start = self.flow.dead_bus_mask()
            # the summary of a solve in C with it, when the engine's kernels are built (same numbers)
            self.flow.set_band(np.flatnonzero(self._monitored_mask(len(self.flow.node_vm_pu))), p.v_low_pu, p.v_high_pu,
                               self._dead_at_start)
        self._unsolved: dict[str, float] | None = None  # the Grid's outputs of a step that did not solve

    def _line_pos(self, ref: str) -> int:
        """Position of a trip's line: by name, sanitised id or (pandapower) index."""
        ids = self.flow.ids["line"]
        if self.params.engine == "pandapower":
            return locate_in(self.flow.net, "line", ref, ids)
        names = [n.lower() for n in self.flow.info.lines]
        if ref.lower() in names:
            return names.index(ref.lower())
        if dss_sanitise(ref) in ids:
            return ids.index(dss_sanitise(ref))
        raise ValueError(f"line_trips: unknown line {ref!r}")

    def _switch_lines(self, time_s: float) -> None:
        """Lines out of service now: those held open by an input and those inside a trip."""
        if not self._trips:
            return
        tripped = {pos for start, end, pos in self._trips if start - 1e-9 <= time_s < end - 1e-9}
        for pos in sorted({pos for _, _, pos in self._trips}):
            closed = pos not in tripped and pos not in self._line_held_open
            if self._trip_state.get(pos) != closed:  # switch only on a change (OpenDSS: two commands)
                self.flow.set_line_in_service(pos, closed)
                self._trip_state[pos] = closed

    def create_entity(self, eid: str, model: str, params: ElementParams | None) -> None:
        if model == "Grid":
            if self.grid_eid is not None:
                raise ValueError(f"grid sim {self.sid}: one Grid entity per sim, already have {self.grid_eid}")
            self.grid_eid = eid
            self._fill_grid_outputs(converged=False)
            return
        kind = MODEL_KIND[model]
        if params.phases != "abc" and self.params.engine != "opendss":
            raise ValueError(f"{eid}: phases = {params.phases!r} needs engine = \"opendss\" (pandapower is balanced)")
        if params.bus is not None:
            extra = {"phases": params.phases, **params.dss_load_options()} if self.params.engine == "opendss" else {}
            pos = self.flow.attach(kind, params.bus, params.p_mw, params.q_mvar, name=eid, **extra)
            self._buffers = None  # the engine's tables have grown
            entity = _Attached(kind, pos, self.flow.bus_of(kind, pos), params.p_mw, params.q_mvar)
        else:
            pos = self.flow.locate(kind, params.element)
            given = params.model_fields_set
            entity = _Attached(kind, pos, self.flow.bus_of(kind, pos),
                               params.p_mw if "p_mw" in given else None,
                               params.q_mvar if "q_mvar" in given else None)
        self.attached[eid] = entity
        self._scenario_pq[eid] = (entity.p_mw, entity.q_mvar)
        self._out[eid] = {"p_mw": math.nan, "q_mvar": math.nan, **dict.fromkeys(ELEMENT_VOLTAGE_OUTPUTS, math.nan),
                         SERVED_ATTR: math.nan}
        if self.params.engine == "opendss":
            self._out[eid].update(dict.fromkeys(PHASE_OUTPUTS, math.nan))

    def step_entities(self, time_s: float, inputs: dict[str, dict[str, Any]]) -> None:
        self._apply_inputs(inputs)
        self._switch_lines(float(time_s))
        p_mw, q_mvar = self._injections(time_s)
        clock = {"time_s": time_s} if self.params.engine == "opendss" else {}
        if self._faults is not None:  # a faulted step: loads as admittances, controls held off
            self.flow.controls_held = self._faults.apply(float(time_s), self.params.control_mode)
        converged = self.flow.solve(p_mw, q_mvar, **clock)
        if not converged:
            self.n_nonconverged += 1
            if self.params.on_nonconvergence == "fail":
                raise PowerFlowNotConverged(
                    f"grid sim {self.sid}: power flow did not converge at {self.utc(time_s).isoformat()} "
                    f"(t = {time_s} s); set on_nonconvergence = \"continue_nan\" to go on with NaN results for such steps"
                )
        self._fill_grid_outputs(converged)
        self._fill_element_outputs(converged, p_mw, q_mvar)

    def _fill_element_outputs(self, converged: bool, p_mw: dict[str, np.ndarray], q_mvar: dict[str, np.ndarray]) -> None:
        """Each element's ``p_mw``/``q_mvar`` (what it asked for, solved or not) and, from the solve, its
        voltages and ``p_served_mw``: NaN when the step did not solve, NaN voltages and 0 served on a
        de-energised bus (module docstring)."""
        low, high = self.params.v_low_pu, self.params.v_high_pu
        opendss = self.params.engine == "opendss"
        if converged and not opendss:  # balanced: one reading, the bus's (element_vm_pu's, without a call)
            vm_at, out, isfinite, nan = self.flow.vm_pu.item, self._out, math.isfinite, math.nan
            for eid, e in self.attached.items():
                # an entity's own value is the one _injections wrote (a float64 holds a float exactly)
                asked = e.p_mw if e.p_mw is not None else float(p_mw[e.kind][e.pos])
                q = e.q_mvar if e.q_mvar is not None else float(q_mvar[e.kind][e.pos])
                vm = vm_at(e.bus_pos)
                # band_stats_one's numbers, inline (a call and a dict per element); served: pandapower's elements
                # are constant power, so what they asked; none on a dead bus
                if isfinite(vm):
                    under, over = low - vm, vm - high  # max(x, 0.0) as written out: 0.0 when 0.0 > x, else x
                    out[eid] = {"p_mw": asked, "q_mvar": q, "vm_pu": vm, "vm_phase_min_pu": vm, "vm_phase_max_pu": vm,
                                "vm_violation_pu": (0.0 if under < 0.0 else under) + (0.0 if over < 0.0 else over),
                                SERVED_ATTR: asked}
                else:
                    out[eid] = {"p_mw": asked, "q_mvar": q, "vm_pu": vm, "vm_phase_min_pu": nan, "vm_phase_max_pu": nan,
                                "vm_violation_pu": nan, SERVED_ATTR: 0.0}
            return
        for eid, e in self.attached.items():
            asked = float(p_mw[e.kind][e.pos])
            out = {"p_mw": asked, "q_mvar": float(q_mvar[e.kind][e.pos])}
            if not converged:
                out.update(dict.fromkeys(ELEMENT_VOLTAGE_OUTPUTS, math.nan))
                out[SERVED_ATTR] = math.nan
                if opendss:
                    out.update(dict.fromkeys(PHASE_OUTPUTS, math.nan))
                self._out[eid] = out
                continue
            stats = band_stats(self.flow.element_node_vm_pu(e.kind, e.pos), low, high)
            out["vm_pu"] = self.flow.element_vm_pu(e.kind, e.pos)
            stats.pop("n_violating")
            out.update(stats)
            if not math.isfinite(stats["vm_phase_max_pu"]):  # no phase has a voltage: de-energised
                out[SERVED_ATTR] = 0.0
                out.update(dict.fromkeys(PHASE_OUTPUTS, math.nan))  # no voltage, as vm_pu
            else:  # what OpenDSS served (short of p_mw below vmin_pu); per-phase and sequence voltages
                out[SERVED_ATTR] = self.flow.element_served_mw(e.kind, e.pos)
                phasors = bus_phase_voltages(self.flow.dss, self.flow.info.buses[e.bus_pos])
                out.update(phase_outputs(phasors, self.flow.elements[e.kind][e.pos].phases))
            self._out[eid] = out

    def release(self, eid: str, attr: str) -> None:
        """Input ``attr`` of ``eid`` is no longer held from outside: back to the scenario's own value
        (a line to its state in the network, or its trips; a regulator to its RegControl; a
        capacitor to its states before the input took it, and its CapControl; a shunt to its step
        in the network; an element's power to its params, its profile or its table)."""
        if eid != self.grid_eid:
            p_mw, q_mvar = self._scenario_pq[eid]
            entity = self.attached[eid]
            if attr == "p_mw":
                entity.p_mw = p_mw
            elif attr == "q_mvar":
                entity.q_mvar = q_mvar
            if self._buffers is not None and attr in ("p_mw", "q_mvar"):
                # the buffers keep what was last written: put back the table's value (a profile
                # writes over it at the next step, an own value of the entity too)
                table, buffer = (self.flow.p0, self._buffers[0]) if attr == "p_mw" else (self.flow.q0, self._buffers[1])
                buffer[entity.kind][entity.pos] = table[entity.kind][entity.pos]
        elif attr in self._tap_attr:
            self.flow.set_tap_count(self._tap_attr[attr], None)
        elif attr in self._cap_attr:
            self.flow.release_cap(self._cap_attr[attr])
        elif attr in self._shunt_attr:
            pos = self._shunt_attr[attr]
            self.flow.set_shunt_step(pos, self._shunt_initial[pos])
        elif attr in self._line_attr:
            pos = self._line_attr[attr]
            self._line_held_open.discard(pos)
            self._trip_state.pop(pos, None)
            self.flow.set_line_in_service(pos, self._line_initial[pos])

    def accelerations(self) -> dict[str, dict[str, object]]:
        """The OpenDSS engine's read path of this feeder (``opendss_yprim_reads``), once read; none for
        pandapower, whose kept analysis is the process's (noted at import)."""
        said = getattr(getattr(self, "flow", None), "accelerations", None)
        return said() if said is not None else {}

    def finalize(self) -> None:
        if self.params.engine == "opendss":
            self.flow.close()

    # -- helpers ------------------------------------------------------------------------
    def _apply_inputs(self, inputs: dict[str, dict[str, Any]]) -> None:
        for eid, values in inputs.items():
            if eid == self.grid_eid:
                for attr, value in values.items():
                    if attr in self._tap_attr:
                        self.flow.set_tap_count(self._tap_attr[attr], None if value is None else float(value))
                    elif attr in self._cap_attr:
                        self.flow.set_cap_count(self._cap_attr[attr], None if value is None else float(value))
                    elif attr in self._shunt_attr:
                        self.flow.set_shunt_step(self._shunt_attr[attr], None if value is None else float(value))
                    else:
                        pos, closed = self._line_attr[attr], bool(value >= 0.5)
                        self.flow.set_line_in_service(pos, closed)
                        (self._line_held_open.discard if closed else self._line_held_open.add)(pos)
                        self._trip_state.pop(pos, None)
                continue
            entity = self.attached[eid]
            if "p_mw" in values:
                entity.p_mw = float(values["p_mw"])
            if "q_mvar" in values:
                entity.q_mvar = float(values["q_mvar"])

    def _injections(self, time_s: float) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Element powers for this step: tables, then profiles, then entity values."""
        p, q = self._injection_buffers()
        if self._profiles:
            row = self._profile_row(time_s)
            for target, kind, pos, values in self._profiles:
                target_arr = p if target == "p" else q
                target_arr[kind][pos] = values[min(row, len(values) - 1)]
        for e in self.attached.values():
            if e.p_mw is not None:
                p[e.kind][e.pos] = e.p_mw
            if e.q_mvar is not None:
                q[e.kind][e.pos] = e.q_mvar
        return p, q

    def _injection_buffers(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Per-kind power arrays holding the tables, kept from step to step.

        Every step writes the same positions (each profile's elements, each entity with a
        value; a released entity's position gets its table's value back, :meth:`release`), so
        the other positions keep the tabulated value and the tables need copying only when the
        engine's change (an element attached: :meth:`create_entity` drops the buffers then), not
        every step.
        """
        if self._buffers is None:
            own = getattr(self.flow, "injection_buffers", None)  # pandapower: the arrays its solve reads
            self._buffers = own() if own is not None else ({k: v.copy() for k, v in self.flow.p0.items()},
                                                           {k: v.copy() for k, v in self.flow.q0.items()})
        return self._buffers

    def _profile_row(self, time_s: float) -> int:
        """Row of the profile year at the same day of year and time of day. [-]"""
        t = self.utc(time_s)
        seconds = (t.timetuple().tm_yday - 1) * 86_400 + t.hour * 3600 + t.minute * 60 + t.second
        return seconds // self._profile_step_s

    def _monitored_mask(self, n_nodes: int) -> np.ndarray:
        """Per node: True where the all-bus voltage outputs read it (module docstring)."""
        if getattr(self, "_monitored", None) is None or len(self._monitored) != n_nodes:
            excluded = self._excluded_buses()
            self._monitored = ~np.isin(self.flow.node_bus, excluded) if n_nodes else np.zeros(0, bool)
        return self._monitored

    def _numpy_summary(self) -> tuple[list, np.ndarray | Callable[[], np.ndarray]]:
        """The Grid's summary of a solved step, in :meth:`_fill_grid_outputs`' order, and every bus's, line's
        and trafo's value (numpy's forms; the pandapower engine's C kernels give the same numbers). On
        OpenDSS the largest loading and the values are functions that give them when called: the
        loadings cost OpenDSS a read of every element's currents (opendss_flow.py)."""
        f = self.flow
        vm = f.vm_pu
        def max_loading() -> float:
            return nan_extremes(np.concatenate([f.line_loading_pct, f.trafo_loading_pct]))[1]

        def values() -> np.ndarray:
            return np.concatenate([vm, f.line_loading_pct, f.trafo_loading_pct])

        if self.params.engine != "opendss":
            max_loading, values = max_loading(), values()
        extremes = getattr(f, "node_vm_pu", vm)  # OpenDSS: extremes over every phase
        stats = band_stats(extremes[self._monitored_mask(len(extremes))], self.params.v_low_pu, self.params.v_high_pu)
        dead = np.isnan(vm)
        n_unsupplied = int(np.count_nonzero(dead & ~self._dead_at_start)) if len(vm) == len(
            self._dead_at_start) else int(np.count_nonzero(dead))
        return ([*nan_extremes(extremes), max_loading, stats["vm_phase_min_pu"], stats["vm_phase_max_pu"],
                 stats["vm_violation_pu"], stats["n_violating"], n_unsupplied, int(dead.sum())], values)

    def _excluded_buses(self) -> list[int]:
        names = self.params.exclude_buses
        if names is None:
            return self.flow.default_excluded_buses()
        return [self.flow.locate_bus(name) for name in names]

    def _load_profiles(self) -> list[tuple[str, str, np.ndarray, np.ndarray]]:
        tables = grid_models.load_profiles(self.params.network, **self.params.network_params)
        self._profile_step_s = grid_models.profile_step_s(self.params.network) or 900
        out = []
        for key, frame in (tables or {}).items():
            kind, column = key.split(".")
            if kind not in KINDS or column not in ELEMENT_ATTRS:
                continue
            pos = self.flow.net[kind].index.get_indexer(frame.columns)
            keep = pos >= 0
            out.append((column[0], kind, pos[keep], frame.to_numpy()[:, keep]))
        return out

    def _fill_grid_outputs(self, converged: bool) -> None:
        if self.grid_eid is None:
            return
        self._detail = None  # this step's detail replaces the last one's, or the unsolved values do
        out = self._out[self.grid_eid]
        out["converged"] = bool(converged)
        out["n_nonconverged"] = self.n_nonconverged
        if self._trips:  # the switching state is known whether or not the flow solved
            out["n_lines_out"] = self.flow.n_lines_out()
        if not converged:  # nothing solved: every result of this step is unknown
            out.update(self._unsolved_outputs())
            return
        f = self.flow
        summary, values = getattr(f, "summary", None), getattr(f, "element_values", None)
        if summary is None:  # not computed with the solve (OpenDSS, or the C kernels not built)
            summary, values = self._numpy_summary()
        (out["vm_min_pu"], out["vm_max_pu"], max_loading, out["allbus_vm_min_pu"], out["allbus_vm_max_pu"],
         out["allbus_violation_pu"], n_violating, n_unsupplied, n_dead) = summary
        out["n_allbus_violating"], out["n_buses_unsupplied"] = int(n_violating), int(n_unsupplied)
        out["p_import_mw"], out["q_import_mvar"] = f.p_import_mw, f.q_import_mvar
        if self._trips:
            out["n_buses_islanded"] = int(n_dead)
        # every element's value (bus, line, trafo order), every phase's voltage and (OpenDSS) the losses and
        # the largest loading: held as arrays (or functions) and written into the outputs when someone
        # reads them (_write_detail), group by group in _detail_groups' order
        detail = [(self._element_attrs, values)]
        if self.params.engine == "opendss":
            out.update(f.device_outputs(phases=False))
            detail += [(f.phase_attrs, f.phase_vm_pu()), (FLOW_OUTPUTS, lambda: [f.losses_mw, max_loading()])]
        else:
            out["losses_mw"], out["max_loading_pct"] = f.losses_mw, max_loading
        self._detail = detail

    # -- outputs written when read -----------------------------------------------------
    # The Grid's per-element outputs (one per bus, line, transformer and, on OpenDSS, bus-phase:
    # 18,000 on IEEE 8500) are kept as arrays after a step and written into its output dict only
    # when something reads them: get_data asking for one of them, or any read of ``out`` (tests,
    # probes). A run recording only the summary never pays for the 18,000 dict entries a step. On
    # OpenDSS the losses and the largest loading are held too (as a function), and each group is
    # written on its own: a run that records neither never has OpenDSS compute the currents
    # behind them.
    @property
    def out(self) -> dict[str, dict[str, Any]]:
        if self._detail is not None:
            self._write_detail()
        return self._out

    @out.setter
    def out(self, value: dict[str, dict[str, Any]]) -> None:
        self._out, self._detail = value, None
        self._plans: list[tuple] = []  # get_data's plans of the last requests, oldest first (_plan_for)

    def _write_detail(self, groups: frozenset[int] | None = None) -> None:
        """Write the held groups (all, or those at positions ``groups``) into the Grid's outputs."""
        detail, out = self._detail, self._out[self.grid_eid]
        for k, (attrs, values) in enumerate(detail):
            if values is not None and (groups is None or k in groups):
                detail[k] = (attrs, None)
                got = values() if callable(values) else values
                out.update(zip(attrs, got.tolist() if isinstance(got, np.ndarray) else got))
        if groups is None or all(values is None for _, values in detail):
            self._detail = None

    def _detail_groups(self) -> list[list[str] | tuple[str, ...]]:
        """The names of each group of held outputs, in _fill_grid_outputs' order."""
        if self.params.engine == "opendss":
            return [self._element_attrs, self.flow.phase_attrs, FLOW_OUTPUTS]
        return [self._element_attrs]

    def get_data(self, outputs):
        """:meth:`CosimSim.get_data`'s answer (the same values and key order), by a plan made once per
        request (each reader asks the same every step; the plans of the last few requests are kept):
        per entity its outputs when it asks for all of them, else the ones it names; the Grid's per-element outputs written only when asked.

        An element's (Load, Sgen, Storage) outputs when all are asked for are its output dict itself,
        not a copy: each step builds a new one (:meth:`_fill_element_outputs`) and none is changed
        once built, so what a reader or a cache holds keeps the values of its step. The Grid's dict is
        updated in place at every step (:meth:`_fill_grid_outputs`, :meth:`_write_detail`): a copy."""
        order = list(outputs)
        for plan in self._plans:
            # the same request: the same entities in the same order (dicts compare equal in any
            # order), each with the same attrs in the same order (lists compare in order)
            if plan[1] == order and plan[0] == outputs:
                break
        else:
            if len(self._plans) >= PLANS_KEPT:  # forget the oldest: the size stays bounded
                del self._plans[0]
            plan = self._plan_for(outputs)
            self._plans.append(plan)
        _, _, entries, reads = plan
        if reads and self._detail is not None:
            self._write_detail(reads)
        out = self._out
        data = {}
        for eid, n_all, key, getter, built in entries:
            values = out[eid]
            # all its outputs asked for: the dict (built: new at every step) or a copy (n_all: their
            # number when planned; outputs are only ever added, so the same number means the same names)
            if len(values) == n_all or values.keys() == frozenset(key):  # (the second: not planned so)
                data[eid] = values if built else dict(values)
                continue
            try:
                data[eid] = dict(zip(key, getter(values)))
            except KeyError:
                data[eid] = {attr: values.get(attr) for attr in key}
        return data

    def _plan_for(self, outputs) -> tuple:
        """``(request, its entities in order, per entity (eid, its number of outputs when it asks for
        them all else -1, attrs, getter, whether its output dict is built anew at every step: an
        element's), the groups of held outputs it reads)``."""
        entries = []
        for eid, attrs in outputs.items():
            key, values = tuple(attrs), self._out[eid]
            entries.append((eid, len(values) if values.keys() == frozenset(key) else -1, key, tuple_getter(key),
                            eid != self.grid_eid))
        asked = set(outputs.get(self.grid_eid, ()))
        reads = frozenset(k for k, attrs in enumerate(self._detail_groups()) if not asked.isdisjoint(attrs))
        return {eid: list(attrs) for eid, attrs in outputs.items()}, list(outputs), entries, reads

    def _unsolved_outputs(self) -> dict[str, Any]:
        """The Grid's outputs of a step whose power flow did not solve: every voltage, loading, flow,
        loss and import NaN (the OpenDSS devices' tap and capacitor settings stay: they are known)."""
        if self._unsolved is None:
            nan = math.nan
            names = [a for a in GRID_OUTPUTS if a not in ("converged", "n_nonconverged")]
            self._unsolved = {**dict.fromkeys(names, nan), **dict.fromkeys(self._element_attrs, nan)}
            if self._trips:
                self._unsolved["n_buses_islanded"] = nan
        values = dict(self._unsolved)
        if self.params.engine == "opendss":
            values.update(self.flow.device_outputs(solved=False))
        return values


#: how many requests' plans get_data keeps (each engine reader asks the same every step: a recorder,
#: a gym's observations, a connection's reads; a few readers, each one request)
PLANS_KEPT = 8


#: the least ``element_p_max_mw`` defaults to, for a network with little or nothing tabulated [MW]
ELEMENT_P_MAX_FLOOR_MW = 100.0


def _meta_key(sim_params: SimParams) -> str:
    trips = list(TRIP_OUTPUTS) if sim_params.all_line_trips() else []
    return json.dumps([sim_params.network, sim_params.network_params, trips,
                       grid_models.file_version(sim_params.network)], sort_keys=True, default=str)


def _tabulated_mw(net) -> float:
    """Σ |p_mw| of the network's loads, static generators and storage units. [MW]"""
    return float(sum(net[t].p_mw.abs().sum() for t in ("load", "sgen", "storage") if t in net and len(net[t])))


def _opendss_size(path: Path) -> tuple[float, dict[str, tuple[int, int]]]:
    """An OpenDSS circuit's Σ |kW| of its loads and generators [MW], and the step range of each
    regulator's tap input (MinTap..MaxTap from neutral) and capacitor's (0..NumSteps). [MW, steps]"""
    info, size = opendss_circuit_info(path), opendss_circuit_size(path)
    steps = {tap_set_attr(reg_id): taps for reg_id, taps in zip(info.ids["reg"], size.tap_ranges)}
    steps.update({cap_set_attr(cap_id): (0, n) for cap_id, n in zip(info.ids["cap"], size.cap_steps)})
    return size.tabulated_mw, steps


def _max_steps(shunt) -> list[int]:
    """Each shunt's largest step (``max_step``; 1 where none is given), as the engine takes them. [steps]"""
    if "max_step" not in shunt:
        return [1] * len(shunt)
    return [int(v) if v == v else 1 for v in shunt["max_step"]]


def tap_set_attr(reg_id: str) -> str:
    """The Grid input that holds regulator ``reg_id`` at a tap (OpenDSS engine). [steps]"""
    return f"reg_{reg_id}_tap_set_count"


def shunt_set_attr(shunt_id: str) -> str:
    """The Grid input that sets shunt ``shunt_id``'s step (pandapower engine; ``net.shunt.step``). [steps]"""
    return f"shunt_{shunt_id}_set_count"


def cap_set_attr(cap_id: str) -> str:
    """The Grid input that sets capacitor ``cap_id``'s closed steps (OpenDSS engine). [steps]"""
    return f"cap_{cap_id}_set_count"


def _build_meta(ids: dict[str, list[str]], extra_outputs: list[str] = (), extra_inputs: list[str] = (),
                element_outputs: list[str] = ()) -> dict[str, Any]:
    per_element = [*(f"bus_{i}_vm_pu" for i in ids["bus"]), *(f"line_{i}_loading_pct" for i in ids["line"]),
                   *(f"trafo_{i}_loading_pct" for i in ids["trafo"])]
    # the summary outputs (the common ones, tap changes, trips) by default; one per bus, line, trafo,
    # phase or device only on request
    summary = {*GRID_OUTPUTS, *SUMMARY_EXTRA_OUTPUTS}
    grid_outputs = [*GRID_OUTPUTS, *per_element, *extra_outputs]
    models = {"Grid": model_meta(inputs=[*(f"line_{i}_in_service" for i in ids["line"]), *extra_inputs],
                                 outputs=grid_outputs, role="grid",
                                 detail=[*per_element, *(o for o in extra_outputs if o not in summary)])}
    for model in MODEL_KIND:
        models[model] = model_meta(inputs=ELEMENT_ATTRS, outputs=[*ELEMENT_ATTRS, *ELEMENT_VOLTAGE_OUTPUTS, SERVED_ATTR, *element_outputs],
                                   params=ElementParams,
                                   role="grid_element")
    return meta(models)
