"""Storage droop: a battery inverter's Q–V or P–V response to its own bus voltage.

The local rule IEEE 1547-2018 calls volt-var (Q–V) and volt-watt (P–V), in the form OpenG2G's
``LocalVoltageStorageDroopController`` uses (gpu2grid/openg2g, ``openg2g/controller/storage.py``):
with the error ``e = v_ref_pu - v`` (v: the measured voltage, e.g. the lowest phase at the
battery's bus), the output is zero inside the deadband and grows linearly past it::

    out = 0                                        |e| <= deadband_pu
    out = gain · sign(e) · (|e| - deadband_pu)     otherwise, clipped to ±limit
    gain = limit / (full_output_error_pu - deadband_pu)   (full output at |e| = full_output_error_pu)

``out > 0`` supports a low voltage: mode ``qv`` injects reactive power (``q_mvar = -out``,
consumer sign, limit ``q_max_mvar``), mode ``pv`` discharges (``p_set_mw = -out``, limit
``p_max_mw``). ``allow_negative_output = false`` never absorbs or charges (only supports low
voltages). The battery's SoC is not managed: it clips a setpoint it cannot follow.

Stability: stepped with the grid, the loop is ``v_(k+1) = v0 + s · gain · (v_ref - deadband - v_k)``
with ``s`` the bus's sensitivity to the output (pu per Mvar or MW): it settles only when
``s · gain < 1``; a stiff gain on a weak phase swings between the limits (a single-phase
inverter on IEEE 13's 675c, ``s`` ≈ 0.16 pu/Mvar at its operating point, 0.15 at zero output,
settles at 0.1 Mvar and swings at 0.3 Mvar with the default curve; measured, 0.27 settles and 0.28
swings). The OFO controller (:mod:`.ofo`) damps this by construction.

Validation checks it (:func:`loop_gain_warnings`, through ``check_scenario``): for each enabled
``qv`` droop whose ``q_mvar`` feeds a grid element, the grid adapter solves its network as the
scenario builds it (initial values), then with that element injecting ``SENSITIVITY_STEP_FRAC``
of ``q_max_mvar`` more; the slope places the loop's operating point, and two more solves there
give ``s`` (:func:`q_sensitivity_pu_per_mvar`), read off the voltage the droop measures (its
``vm_pu`` source when that is an output of the same grid, else the element's
``vm_phase_min_pu``). ``s · gain >= 1`` is a warning naming the ``q_max_mvar`` and
``full_output_error_pu`` at which it would be 1 (on 675c: 0.283 Mvar); a solve that fails there is
a warning that the loop was not checked. Mode ``pv`` is not
checked: its ``p_set_mw`` reaches the grid through a battery, whose limits and SoC the loop
also passes through.

Model ``StorageDroop``. Input ``vm_pu`` (connect the battery element's ``vm_phase_min_pu``, or a
bus phase renamed). Outputs ``q_mvar`` (to the grid Storage element), ``p_set_mw`` (to the
battery), ``error_pu``. Connect them time shifted: the response acts from the next step.

Example ``[entities]`` entry::

    droop = { sim = "ctl", model = "StorageDroop", mode = "qv", q_max_mvar = 0.3 }
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, model_validator

from cosim.adapters.grid import GridSim
from cosim.adapters.grid import SimParams as GridSimParams
from cosim.sdk import Params, SingleModelSim

OUTPUTS = ("q_mvar", "p_set_mw", "error_pu")
#: the Q step of the validation's sensitivity solve, a share of ``q_max_mvar``: small enough to stay
#: linear, large enough to be read above the power flow's tolerance. [-]
SENSITIVITY_STEP_FRAC = 0.1


class StorageDroopParams(Params):
    """Params of one ``StorageDroop`` entity.

    Attributes:
        mode: ``qv`` (reactive power) or ``pv`` (active power).
        v_ref_pu: the voltage aimed at. [pu]
        deadband_pu: no response while ``|v_ref - v|`` is within it. [pu]
        full_output_error_pu: the error at which the output reaches its limit. [pu]
        q_max_mvar: the inverter's reactive limit (mode ``qv``). [Mvar]
        p_max_mw: the battery's power limit (mode ``pv``). [MW]
        allow_negative_output: also absorb / charge when the voltage is high.
        enabled: ``false`` outputs zero (the baseline).
    """

    mode: Literal["qv", "pv"] = "qv"
    v_ref_pu: float = Field(default=1.0, gt=0)
    deadband_pu: float = Field(default=0.005, ge=0)
    full_output_error_pu: float = Field(default=0.05, gt=0)
    q_max_mvar: float = Field(default=0.0, ge=0)
    p_max_mw: float = Field(default=0.0, ge=0)
    allow_negative_output: bool = True
    enabled: bool = True

    @model_validator(mode="after")
    def _ranges(self):
        if self.full_output_error_pu <= self.deadband_pu:
            raise ValueError(f"full_output_error_pu = {self.full_output_error_pu:g} must exceed "
                             f"deadband_pu = {self.deadband_pu:g}")
        limit = self.q_max_mvar if self.mode == "qv" else self.p_max_mw
        if not limit > 0:
            raise ValueError(f"mode = {self.mode!r}: give its limit ({'q_max_mvar' if self.mode == 'qv' else 'p_max_mw'})")
        return self


def droop_output(v_pu: float, p: StorageDroopParams) -> float:
    """The support output for voltage ``v_pu`` (> 0 lifts a low voltage), clipped. [Mvar or MW]"""
    if not p.enabled or v_pu is None or math.isnan(v_pu):
        return 0.0
    limit = p.q_max_mvar if p.mode == "qv" else p.p_max_mw
    error = p.v_ref_pu - v_pu
    if abs(error) <= p.deadband_pu:
        return 0.0
    gain = limit / (p.full_output_error_pu - p.deadband_pu)
    out = gain * math.copysign(abs(error) - p.deadband_pu, error)
    if not p.allow_negative_output:
        out = max(out, 0.0)
    return min(max(out, -limit), limit)


class StorageDroopSim(SingleModelSim):
    """Q–V / P–V droop of a battery inverter (model ``StorageDroop``)."""

    MODEL, PARAMS, ROLE, PHYSICS = "StorageDroop", StorageDroopParams, "controller", None
    INPUTS, OUTPUTS = ("vm_pu",), OUTPUTS
    EXAMPLE = {"models": {"StorageDroop": {"mode": "qv", "q_max_mvar": 0.3}}}

    @classmethod
    def check_scenario(cls, scn: Any) -> list[str]:
        """A ``qv`` droop whose loop gain at the grid element it feeds is 1 or more (:func:`loop_gain_warnings`)."""
        return loop_gain_warnings(scn)

    def build(self, eid: str, params: StorageDroopParams) -> StorageDroopParams:
        return params

    def advance(self, p: StorageDroopParams, time_s: int, inputs: dict[str, Any]) -> dict[str, Any]:
        v = inputs.get("vm_pu")
        v = math.nan if v is None else float(v)
        out = droop_output(v, p)
        return {"q_mvar": -out if p.mode == "qv" else 0.0, "p_set_mw": -out if p.mode == "pv" else 0.0,
                "error_pu": p.v_ref_pu - v if math.isfinite(v) else math.nan}


# -- validation: the loop gain s · gain ----------------------------------------------------------
def droop_gain(p: StorageDroopParams) -> float:
    """The curve's slope past the deadband: limit / (full_output_error_pu - deadband_pu). [Mvar/pu or MW/pu]"""
    return (p.q_max_mvar if p.mode == "qv" else p.p_max_mw) / (p.full_output_error_pu - p.deadband_pu)


def loop_gain_warnings(scn: Any) -> list[str]:
    """One warning per enabled ``qv`` droop of the validated scenario ``scn`` whose loop gain
    ``s · gain`` at the grid element its ``q_mvar`` feeds is 1 or more (module docstring)."""
    found = []
    for eid, spec in scn.entities.items():
        if spec.model != StorageDroopSim.MODEL:
            continue
        p = StorageDroopParams.model_validate(scn.entity_params.get(eid, {}))
        element = _fed_grid_element(scn, eid) if p.mode == "qv" and p.enabled else None
        if element is None:
            continue
        try:
            s = q_sensitivity_pu_per_mvar(scn, element, _measured_output(scn, eid, element), p)
        except ValueError as exc:  # not checked is said, never a silent pass
            found.append(f"entities.{eid}: its Q-V loop gain was not checked: {exc}")
            continue
        if s * droop_gain(p) >= 1.0:
            found.append(_loop_gain_text(eid, element, p, s))
    return found


def _is_grid_element(scn: Any, eid: str) -> bool:
    spec = scn.entities[eid]
    return isinstance(scn.sim_models.get(spec.sim), GridSimParams) and spec.model != "Grid"


def _fed_grid_element(scn: Any, eid: str) -> str | None:
    """The grid element (Load, Sgen, Storage) the droop's ``q_mvar`` sets, if any."""
    for conn in scn.connect:
        if conn.src == eid and ("q_mvar", "q_mvar") in conn.pairs() and _is_grid_element(scn, conn.dst):
            return conn.dst
    return None


def _measured_output(scn: Any, eid: str, element: str) -> tuple[str, str]:
    """The ``(entity, output)`` of the element's grid the droop reads as ``vm_pu``; else the element's lowest phase."""
    grid_sim = scn.entities[element].sim
    for conn in scn.connect:
        for src_attr, dst_attr in conn.pairs():
            if conn.dst == eid and dst_attr == "vm_pu" and scn.entities[conn.src].sim == grid_sim:
                return conn.src, src_attr
    return element, "vm_phase_min_pu"


def q_sensitivity_pu_per_mvar(scn: Any, element: str, measured: tuple[str, str],
                              p: StorageDroopParams) -> float | None:
    """``∂v / ∂(injected Q)`` of ``measured`` for grid element ``element`` at the loop's operating
    point, from power flows of its grid sim as the scenario builds it (every entity of it at its
    initial values): the slope at zero output (two solves) places the point where the droop and
    the grid agree; when that output is not zero, the slope there (two more; on IEEE 13's
    675c it is some 10 % above the slope at zero). [pu/Mvar]

    Raises:
        ValueError: a solve failed or gave no finite slope (the reason, for the validation warning).
    """
    probe = None
    try:
        probe = _GridProbe(scn, element, measured)
        dq_mvar = SENSITIVITY_STEP_FRAC * p.q_max_mvar
        v0 = probe.v_pu(0.0)
        s = (probe.v_pu(dq_mvar) - v0) / dq_mvar
        out = _operating_output(v0, s, p) if s > 0 else 0.0
        if out != 0.0:
            back = math.copysign(dq_mvar, out)  # towards zero: within the inverter's limits
            s = (probe.v_pu(out) - probe.v_pu(out - back)) / back
    except Exception as exc:  # noqa: BLE001 — any failure of the probe grid: said by the caller, the run reports the grid
        raise ValueError(f"the power flows of {element}'s grid at validation failed ({type(exc).__name__}: {exc})") from exc
    finally:
        if probe is not None:
            probe.close()
    if not math.isfinite(s):
        raise ValueError(f"the power flows of {element}'s grid gave no finite sensitivity (s = {s})")
    return float(s)


def _operating_output(v0_pu: float, s_pu_per_mvar: float, p: StorageDroopParams) -> float:
    """The output ``out = droop_output(v0 + s · out)`` (unique: the left side rises, the right falls), by bisection. [Mvar]"""
    low, high = -p.q_max_mvar, p.q_max_mvar
    for _ in range(60):
        mid = 0.5 * (low + high)
        if mid - droop_output(v0_pu + s_pu_per_mvar * mid, p) < 0:
            low = mid
        else:
            high = mid
    return 0.5 * (low + high)


class _GridProbe:
    """A grid sim built as the scenario builds it, solved for a droop output at one element (validation only)."""

    def __init__(self, scn: Any, element: str, measured: tuple[str, str]) -> None:
        sid, ctx = scn.entities[element].sim, scn.context
        self.element, self.measured, self.sim = element, measured, GridSim()
        self.sim.init(sid, ctx.tick_s, start_utc=ctx.start_utc.isoformat(), step_s=scn.sim_step_s(sid),
                      duration_s=ctx.duration_s, seed=ctx.seed, **scn.sim_params[sid])
        for eid, spec in scn.entities.items():
            if spec.sim == sid:
                self.sim.create(1, spec.model, eid=eid, **scn.entity_params.get(eid, {}))
        self.sim.step_collapsed(0, {})
        self.q0_mvar = self.sim.out[element]["q_mvar"]

    def v_pu(self, out_mvar: float) -> float:
        """The measured voltage with the element injecting ``out_mvar`` more (consumer sign: q - out). [pu]"""
        self.sim.step_collapsed(0, {self.element: {"q_mvar": self.q0_mvar - out_mvar}})
        if self.sim.n_nonconverged:
            raise RuntimeError("the power flow did not converge")
        return float(self.sim.out[self.measured[0]][self.measured[1]])

    def close(self) -> None:
        if hasattr(self.sim, "flow"):
            self.sim.finalize()


def _loop_gain_text(eid: str, element: str, p: StorageDroopParams, s: float) -> str:
    span_pu = p.full_output_error_pu - p.deadband_pu
    gain = droop_gain(p)
    return (f"entities.{eid}: a Q-V droop that cannot settle: on {element} the voltage it measures moves "
            f"s = {s:.3g} pu/Mvar (power flows at its operating point), its gain is q_max_mvar / (full_output_error_pu - "
            f"deadband_pu) = {gain:.3g} Mvar/pu, so the loop gain s·gain = {s * gain:.2f} >= 1 and stepped "
            f"with the grid it swings between its limits; set q_max_mvar below {span_pu / s:.3g} or "
            f"full_output_error_pu above {p.deadband_pu + s * p.q_max_mvar:.3g} (or use the OFO controller)")
