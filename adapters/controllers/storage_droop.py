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
inverter on IEEE 13's 675c, ``s`` ≈ 0.17 pu/Mvar, settles at 0.1 Mvar and swings at 0.3 Mvar
with the default curve). The OFO controller (:mod:`.ofo`) damps this by construction.

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

from cosim.sdk import Params, SingleModelSim

OUTPUTS = ("q_mvar", "p_set_mw", "error_pu")


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

    def build(self, eid: str, params: StorageDroopParams) -> StorageDroopParams:
        return params

    def advance(self, p: StorageDroopParams, time_s: int, inputs: dict[str, Any]) -> dict[str, Any]:
        v = inputs.get("vm_pu")
        v = math.nan if v is None else float(v)
        out = droop_output(v, p)
        return {"q_mvar": -out if p.mode == "qv" else 0.0, "p_set_mw": -out if p.mode == "pv" else 0.0,
                "error_pu": p.v_ref_pu - v if math.isfinite(v) else math.nan}
