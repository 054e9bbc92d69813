"""FMU: runs any FMU (FMI 2.0 or 3.0; co-simulation, or model exchange through fmpy's solvers).

One simulator runs one FMU file; each entity is one instance of it, and the model name is
the FMU's ``modelName`` (``ChillerPlant``). The attributes come from the model description:
inputs and tunable parameters are mosaik inputs, outputs are mosaik outputs, and every
input or parameter may be given a start value as an entity key. FMUs stay SI inside; names
and units are mapped once, at this boundary:

* automatically, from the variable's unit: ``q_load`` [W] becomes ``q_load_mw`` [MW],
  ``t_wet`` [K] becomes ``t_wet_c`` [°C] (a ``relativeQuantity`` K becomes ``_k``),
  ``water`` [m3] stays ``water_m3``; a name that already ends with a unit suffix and has no
  unit stays as it is, and a dimensionless one gets ``_ratio``;
* or explicitly, by an ``[attrs]`` table in a sidecar file ``<fmu stem>.attrs.toml`` next to
  the FMU, overridden by ``attrs`` in the scenario: ``"T_room" = "t_room_c"`` (conversion
  from the FMU unit to the suffix) or ``"x" = { name = "x_m", scale = 0.01, offset = 0 }``
  (``scenario = fmu * scale + offset``), or ``"y" = "skip"`` to leave a variable out.

Shipped FMUs (``thermal_fmus/``) are named (``fmu = "ChillerPlant"``) and built on first use
when missing or stale; any other FMU is a path (relative to the scenario's folder).

Units: the common SI units are mapped to cosim's suffixes (``UNIT_MAP``); any other unit
keeps its SI value under a suffix derived from the unit string (``m/s2`` -> ``accel_m_s2``).
A variable that cannot be named automatically is left out with a warning at validation, never
refused: strings, binaries and clocks (no numeric column), an array without a fixed size, a
unit no suffix follows from, a name already taken. FMI 3.0 arrays of numbers become one
attribute per element, ``<name>_<i>_<unit>`` (1-based, row-major: ``temps_2_c``,
``gain_1_3_ratio``), as FMI 2.0's structured names ``x[2]`` do. An explicit mapping that
cannot be followed is an error.

Timing: at mosaik time ``t`` the inputs are set and the FMU advances over ``[t, t + step_s)``
(``fmi2DoStep``, or the model-exchange solver). With ``outputs_at = "step_end"`` (the
default) the outputs reported at ``t`` are the values at the end of that interval, so a
quasi-steady output (plant power) matches the inputs it was computed from; the values at
``t = 0`` (the initial state) are then not in the time series, because the engines record
each simulator's outputs after its step at ``t``, and the first one already ends at
``step_s``. With ``outputs_at = "step_start"`` they are the values at ``t`` itself, after the
inputs at ``t`` are set and before the step: the row at ``t = 0`` holds the initial outputs,
a state (a room temperature) is sampled at the row's own time, and an output the FMU
computes only in its step lags one step behind its inputs.

Model exchange: continuous inputs are set in continuous-time mode, discrete inputs and
tunable parameters in event mode (FMI 2.0 3.2.3, FMI 3.0 3.2.1); the solver keeps its state
across steps and restarts only when an input changed or at an event.

An FMU that asks to terminate the simulation (``terminateSimulation``, ``fmi2Terminated``
after a discarded ``fmi2DoStep``, FMI 3.0's ``terminate``) or returns ``discard`` from a step
ends the run cleanly: status ``ok``, the rows up to then kept, the reason naming the FMU and
the time. A binary that does not load is one error naming the FMU, the binary's path inside
it and the OS's reason.

Example ``[sims]`` entry::

    cooling = { adapter = "fmu", fmu = "ChillerPlant", step_s = 60 }
"""

from __future__ import annotations

import math
import shutil
from typing import Any

from pydantic import BaseModel

from cosim.sdk import ScenarioContext, SingleModelSim, unit_of, unit_range
from cosim.adapters.fmu.archive import extract as extract_fmu
from cosim.adapters.fmu.description import FmuError, Interface, binary_problems, describe
from cosim.adapters.fmu.instance import FmuInstance
from cosim.adapters.fmu.params import EveryModel, SimParams

__all__ = ["FmuSim"]


def _g(value: float | None, none: str = "-inf") -> str:
    return none if value is None else f"{value:g}"


class FmuSim(SingleModelSim):
    """Instances of one FMU as mosaik entities (model name = the FMU's ``modelName``; its
    attributes and role from the model description, see :meth:`meta_for`)."""

    SimParams = SimParams
    ModelParams = EveryModel()
    EXAMPLE = {
        "sim": {"fmu": "ChillerPlant"},
        "models": {"ChillerPlant": {"q_chiller_ref_mw": 1.4, "t_chw_supply_setpoint_c": 12.0}},
    }

    @classmethod
    def interface(cls, sim_params: SimParams) -> Interface:
        try:
            return describe(sim_params.fmu, sim_params.attrs, sim_params.interface)
        except FmuError as exc:
            raise ValueError(str(exc)) from exc

    @classmethod
    def check(cls, sim_params: SimParams, ctx: ScenarioContext | None) -> list[str]:
        """Problems found before anything starts: a binary for this platform must be inside.
        Variables left out are warnings (``"warning: ..."``), not problems."""
        try:
            iface = describe(sim_params.fmu, sim_params.attrs, sim_params.interface)
        except FmuError as exc:
            return [str(exc)]
        return [*binary_problems(iface), *("warning: " + text for text in iface.warnings())]

    @classmethod
    def meta_for(cls, sim_params: SimParams) -> dict[str, Any]:
        iface = cls.interface(sim_params)
        return {**cls.META, "models": {iface.model: iface.meta(sim_params.role)}}

    @classmethod
    def check_entity(cls, model: str, params: BaseModel | None, ctx: ScenarioContext,
                     sim_params: BaseModel | None = None) -> list[str]:
        """Every entity key must be an input or parameter of the FMU, with a numeric value."""
        if sim_params is None or params is None:
            return []
        iface = cls.interface(sim_params)
        problems = []
        for key, value in (params.model_extra or {}).items():
            if key not in iface.settable:
                problems.append(f"{key}: {iface.path.name} has no input or parameter of that name; "
                                f"settable: {', '.join(iface.settable)}")
            elif isinstance(value, bool) or not isinstance(value, (int, float)):
                problems.append(f"{key} = {value!r}: give a number (in the unit of the suffix)")
            elif not math.isfinite(value):
                problems.append(f"{key} = {value!r}: give a finite number (in the unit of the suffix)")
            else:
                low, high = iface.ports[key].bounds()
                if (low is not None and value < low) or (high is not None and value > high):
                    problems.append(f"{key} = {value!r}: outside [{_g(low)}, {_g(high, 'inf')}] {unit_of(key) or ''}, the "
                                    f"min and max {iface.path.name}'s model description gives; give a value inside them")
        return problems

    @classmethod
    def input_bounds(cls, model: str, params: BaseModel | None,
                     sim_params: BaseModel | None = None) -> dict[str, tuple[float, float]]:
        """Each input's min and max from the model description; an end it does not give is the
        unit's plausible range (``cosim.sdk.INPUT_RANGES``), or, for a unit without one, 1000 times
        the larger of 1 and the input's start value on either side. [input units]"""
        if sim_params is None:
            return {}
        iface = cls.interface(sim_params)
        bounds = {}
        for attr in iface.inputs:
            port = iface.ports[attr]
            low, high = port.bounds()
            fallback = unit_range(attr)
            if fallback is None:
                reach = 1000.0 * max(1.0, abs(port.from_fmu(port.start)))
                fallback = (-reach, reach)
            bounds[attr] = (fallback[0] if low is None else low, fallback[1] if high is None else high)
        return bounds

    def setup(self) -> None:
        super().setup()
        self.iface = self.interface(self.params)
        self._starts: dict[str, dict[str, Any]] = {}  # each entity's start values (its keys) [scenario units]
        self._released: dict[str, dict[str, float]] = {}  # inputs to set back at the next step [scenario units]
        self._sample_first = self.params.outputs_at == "step_start"
        self._step_s = float(self.step_s)  # the communication step [s]
        try:
            self.unzipdir = extract_fmu(self.iface.path)  # within the size limits, nothing outside its folder
        except Exception as exc:
            raise FmuError(f"{self.iface.path.name}: cannot extract the FMU: {exc}") from exc

    def build(self, eid: str, params: BaseModel | None) -> FmuInstance:
        p = self.params
        self._starts[eid] = dict(params.model_extra or {}) if params is not None else {}
        return FmuInstance(self.iface, self.unzipdir, eid, dict(params.model_extra or {}), step_s=self.step_s,
                           solver=p.solver, solver_step_s=p.solver_step_s, rtol=p.rtol, log=p.log)

    def release(self, eid: str, attr: str) -> None:
        """An input no longer held from outside goes back, from the next step, to its start value
        (the entity's key, else the model description's): an FMU keeps the last value it was set."""
        port = self.iface.ports[attr]
        value = self._starts.get(eid, {}).get(attr, port.from_fmu(port.start))
        self._released.setdefault(eid, {})[attr] = float(value)

    def advance(self, inst: FmuInstance, time_s: float, inputs: dict[str, Any]) -> dict[str, Any]:
        if self._released:
            released = self._released.pop(inst.name, None)
            if released:  # a value sent this step (a connection taking over again) wins
                inputs = {**released, **inputs}
        return inst.exchange(inputs, float(time_s), self._step_s, self._sample_first)

    @property
    def instances(self) -> dict[str, FmuInstance]:
        return getattr(self, "entities", {})

    def finalize(self) -> None:
        for inst in self.instances.values():
            inst.close()
        unzipdir = getattr(self, "unzipdir", None)
        if unzipdir:
            shutil.rmtree(unzipdir, ignore_errors=True)
