"""Firm on-site generation: a gas turbine and a small modular reactor following setpoints.

Both follow a setpoint ``p_set_mw`` (generator convention, ``p_mw > 0`` produces, as
pandapower's ``sgen``) within their limits; what they cannot follow is reported as
``p_shortfall_mw = p_set_mw - p_mw`` (positive: produced less than asked). Without a
connected setpoint a unit keeps its last target (its initial power at first).

``GasTurbine`` (or a fuel cell, with its own numbers): output is 0 or within
``[p_min_frac * p_max_mw, p_max_mw]`` (minimum stable load); ramps are limited in both
directions; a start takes ``start_time_s`` before the unit synchronises at minimum load,
and a stop unloads to minimum load and then trips. A setpoint below minimum load means
"off" when it is below half the minimum load and "minimum load" otherwise. Fuel follows
a linear input-output curve through the heat rates at minimum and full load, and CO2 is
fuel energy × emission factor (natural gas: 53.06 kg CO2/mmBtu = 50.29 kg/GJ, US EPA,
40 CFR Part 98 Subpart C, Table C-1). The default heat rates (10.0 GJ/MWh at full load
≈ 9,500 Btu/kWh, 13.0 at minimum load; HHV) are illustrative of a simple-cycle
aeroderivative unit: set them from the unit's datasheet.

``Smr``: a light-water small modular reactor in load-following operation. It never shuts
down here (a trip is not a dispatch decision); output stays within
``[p_min_frac * p_max_mw, p_max_mw]`` and changes at most ``ramp_*_frac_per_min`` of
rated power per minute. The European Utility Requirements ask new LWRs to follow load
between 50 % and 100 % of rated power at 3–5 % per minute (NEA, "Technical and Economic
Aspects of Load Following with Nuclear Power Plants", OECD 2011, which also discusses the
xenon limits below); the defaults are 50 % and 5 %/min.
Xenon: after a power reduction, Xe-135 from the decay of the I-135 inventory builds up for
hours, and its negative reactivity must be offset (rods, boron) to return to power; late in
the fuel cycle the margin for that is small, which is what limits load following after a
down-ramp (NEA 2011). The model tracks the I-135/Xe-135 balance with the textbook point
equations (Lamarsh & Baratta, *Introduction to Nuclear Engineering*, 3rd ed., 2001, §7.5):

    dI/dt = γ_I F − λ_I I,    dX/dt = γ_X F + λ_I I − (λ_X + σ_X φ) X

with the fission rate F and flux φ proportional to power, U-235 yields γ_I = 0.0639,
γ_X = 0.00237, decay constants λ_I = 2.87e-5 /s (6.7 h) and λ_X = 2.09e-5 /s (9.2 h), and
burn-out σ_X φ at rated power ``xe_burn_per_s`` (2.65e-18 cm² × 3e13 n/cm²/s by default, a
typical LWR thermal flux). Each step is integrated exactly for its (constant) power.
``xe_rel_frac`` is the xenon inventory relative to its equilibrium at rated power. While it
exceeds ``1 + xe_margin_frac`` (the excess the control margin cannot offset), the up-ramp
rate is limited to ``xe_ramp_up_frac_per_min``. With the defaults (margin 0.2, 0.5 %/min) a
100 → 50 % reduction (xenon peaks at 1.28 about 5.5 h later) restricts the return from
about 2 h to 11 h after it; a 100 → 70 % one (peak 1.15) does not: deep reductions bind,
shallow ones do not; once the rising flux burns xenon below the margin, the normal rate
resumes. The margin stands for a point in the fuel cycle and is illustrative, not a
specific design's technical specification.

Example ``[entities]`` entries::

    gt  = { sim = "firm", model = "GasTurbine", p_max_mw = 2.0, p_min_frac = 0.4 }
    smr = { sim = "firm", model = "Smr", p_max_mw = 77.0 }
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, Field, model_validator

from cosim.sdk import CosimSim, Params, meta, model_meta

#: 1 GJ/MWh of heat rate at 1 MW is 1 GJ/h = 1/3.6 MW of fuel.
GJ_PER_H_TO_MW = 1.0 / 3.6
#: US EPA 40 CFR 98 Subpart C Table C-1, natural gas: 53.06 kg CO2/mmBtu; 1 mmBtu = 1.055056 GJ.
NATURAL_GAS_KG_CO2_PER_GJ = 53.06 / 1.055056


class UnitParams(Params):
    """Ratings shared by the dispatchable units.

    Attributes:
        p_max_mw: rated (net) output. [MW]
        p_min_frac: minimum stable output as a fraction of rated. [-]
        ramp_up_frac_per_min, ramp_down_frac_per_min: ramp limits, fraction of rated per minute. [1/min]
        p_init_mw: output at the start (0, or within the stable range). [MW]
    """

    p_max_mw: float = Field(gt=0)
    p_min_frac: float = Field(default=0.5, ge=0, lt=1)
    ramp_up_frac_per_min: float = Field(default=0.05, gt=0)
    ramp_down_frac_per_min: float = Field(default=0.05, gt=0)
    p_init_mw: float | None = None

    @property
    def p_min_mw(self) -> float:
        return self.p_min_frac * self.p_max_mw


class GasTurbineParams(UnitParams):
    """Params of one ``GasTurbine``.

    Attributes:
        p_min_frac: minimum stable load (aeroderivatives ~0.25–0.5). [-]
        ramp_up_frac_per_min, ramp_down_frac_per_min: default 0.1 (10 %/min). [1/min]
        start_time_s: from the start command to synchronising at minimum load. [s]
        heat_rate_full_gj_per_mwh, heat_rate_min_gj_per_mwh: fuel per output at full and at
            minimum load, HHV. [GJ/MWh]
        co2_kg_per_gj: emission factor of the fuel (natural gas default). [kg/GJ]
        p_init_mw: default 0 (off). [MW]
    """

    p_min_frac: float = Field(default=0.4, ge=0, lt=1)
    ramp_up_frac_per_min: float = Field(default=0.1, gt=0)
    ramp_down_frac_per_min: float = Field(default=0.1, gt=0)
    start_time_s: float = Field(default=600.0, ge=0)
    heat_rate_full_gj_per_mwh: float = Field(default=10.0, gt=3.6)
    heat_rate_min_gj_per_mwh: float = Field(default=13.0, gt=3.6)
    co2_kg_per_gj: float = Field(default=NATURAL_GAS_KG_CO2_PER_GJ, ge=0)
    p_init_mw: float = 0.0

    @model_validator(mode="after")
    def _init(self):
        _check_init(self, allow_off=True)
        return self


class SmrParams(UnitParams):
    """Params of one ``Smr`` (see the module docstring for the sources of the defaults).

    Attributes:
        xe_margin_frac: xenon excess over its rated-power equilibrium, as a fraction of that
            equilibrium, beyond which the up-ramp is restricted (small late in the cycle). [-]
        xe_ramp_up_frac_per_min: up-ramp limit during the restriction. [1/min]
        xe_burn_per_s: xenon burn-out rate σ_X·φ at rated power. [1/s]
        p_init_mw: default rated power (xenon starts at its equilibrium there). [MW]
    """

    xe_margin_frac: float = Field(default=0.2, ge=0)
    xe_ramp_up_frac_per_min: float = Field(default=0.005, ge=0)
    xe_burn_per_s: float = Field(default=2.65e-18 * 3e13, gt=0)

    @model_validator(mode="after")
    def _init(self):
        _check_init(self, allow_off=False)
        return self


#: I-135 and Xe-135: fission yields (U-235) and decay constants [1/s] (Lamarsh & Baratta §7.5).
GAMMA_I, GAMMA_XE = 0.0639, 0.00237
LAMBDA_I_PER_S, LAMBDA_XE_PER_S = 2.87e-5, 2.09e-5


def xenon_equilibrium(power_frac: float, burn_per_s: float) -> tuple[float, float]:
    """Equilibrium ``(I, X)`` at a power fraction (fission rate at rated power = 1). [s]"""
    iodine = GAMMA_I * power_frac / LAMBDA_I_PER_S
    xenon = (GAMMA_XE * power_frac + LAMBDA_I_PER_S * iodine) / (LAMBDA_XE_PER_S + burn_per_s * power_frac)
    return iodine, xenon


def xenon_step(iodine: float, xenon: float, power_frac: float, dt_s: float, burn_per_s: float) -> tuple[float, float]:
    """Exact solution of the I/Xe equations over ``dt_s`` at constant ``power_frac``. [s]"""
    i_inf, x_inf = xenon_equilibrium(power_frac, burn_per_s)
    k = LAMBDA_XE_PER_S + burn_per_s * power_frac
    c = LAMBDA_I_PER_S * (iodine - i_inf) / (k - LAMBDA_I_PER_S)
    iodine_next = i_inf + (iodine - i_inf) * math.exp(-LAMBDA_I_PER_S * dt_s)
    xenon_next = x_inf + (xenon - x_inf - c) * math.exp(-k * dt_s) + c * math.exp(-LAMBDA_I_PER_S * dt_s)
    return iodine_next, xenon_next


def _check_init(params: UnitParams, allow_off: bool) -> None:
    p = params.p_init_mw
    if p is None:
        return
    if allow_off and p == 0:
        return
    if not params.p_min_mw <= p <= params.p_max_mw:
        off = "0 or " if allow_off else ""
        raise ValueError(f"p_init_mw = {p} must be {off}within [{params.p_min_mw}, {params.p_max_mw}] MW "
                         "(p_min_frac * p_max_mw .. p_max_mw)")


def _finite(p_set_mw: float) -> float:
    if not math.isfinite(p_set_mw):
        raise ValueError(f"p_set_mw must be finite, got {p_set_mw}")
    return p_set_mw


class GasTurbine:
    """A gas turbine following setpoints within its limits (no mosaik). See the module docstring."""

    def __init__(self, params: GasTurbineParams):
        self.p = params
        self.p_mw = params.p_init_mw
        self.target_mw = params.p_init_mw
        self.starting_s = 0.0  # time spent starting; the unit syncs when it reaches start_time_s
        self.n_starts = 0

    def _desired(self, p_set_mw: float) -> float:
        p_set = min(max(p_set_mw, 0.0), self.p.p_max_mw)
        if p_set >= self.p.p_min_mw:
            return p_set
        return 0.0 if p_set < self.p.p_min_mw / 2 else self.p.p_min_mw

    def step(self, p_set_mw: float, dt_s: float) -> float:
        """Move toward ``p_set_mw`` for ``dt_s`` seconds; returns the output over the step. [MW]"""
        desired = self._desired(_finite(p_set_mw))
        up = self.p.ramp_up_frac_per_min * self.p.p_max_mw * dt_s / 60.0
        down = self.p.ramp_down_frac_per_min * self.p.p_max_mw * dt_s / 60.0
        if self.p_mw == 0.0:
            if desired == 0.0:
                self.starting_s = 0.0
                return 0.0
            if self.starting_s == 0.0:
                self.n_starts += 1
            if self.starting_s < self.p.start_time_s:
                self.starting_s += dt_s  # still starting during this whole step: no output yet
                return 0.0
            self.starting_s = 0.0  # the start finished by the beginning of this step
            self.p_mw = self.p.p_min_mw  # synchronised at minimum load
            return self.p_mw
        if desired == 0.0:
            # unload to minimum load, then trip
            self.p_mw = 0.0 if self.p_mw <= self.p.p_min_mw else max(self.p_mw - down, self.p.p_min_mw)
            return self.p_mw
        self.p_mw = min(max(desired, self.p_mw - down), self.p_mw + up)
        self.p_mw = min(max(self.p_mw, self.p.p_min_mw), self.p.p_max_mw)
        return self.p_mw

    def fuel_mw(self, p_mw: float) -> float:
        """Fuel input power at output ``p_mw`` (linear input-output curve, HHV). [MW]"""
        if p_mw <= 0:
            return 0.0
        p_min, p_max = self.p.p_min_mw, self.p.p_max_mw
        f_min = self.p.heat_rate_min_gj_per_mwh * p_min * GJ_PER_H_TO_MW
        f_max = self.p.heat_rate_full_gj_per_mwh * p_max * GJ_PER_H_TO_MW
        if p_max == p_min:
            return f_max
        return f_min + (f_max - f_min) * (p_mw - p_min) / (p_max - p_min)

    def co2_kg_s(self, p_mw: float) -> float:
        """CO2 emission rate at output ``p_mw``: fuel [MJ/s] × factor [kg/GJ] / 1000. [kg/s]"""
        return self.fuel_mw(p_mw) * self.p.co2_kg_per_gj / 1000.0


class Smr:
    """A small modular reactor in load-following operation (no mosaik). See the module docstring."""

    def __init__(self, params: SmrParams):
        self.p = params
        self.p_mw = params.p_max_mw if params.p_init_mw is None else params.p_init_mw
        self.target_mw = self.p_mw
        self.iodine, self.xenon = xenon_equilibrium(self.p_mw / params.p_max_mw, params.xe_burn_per_s)
        self.xenon_rated = xenon_equilibrium(1.0, params.xe_burn_per_s)[1]

    @property
    def xe_rel_frac(self) -> float:
        """Xenon inventory over its equilibrium at rated power. [-]"""
        return self.xenon / self.xenon_rated

    def ramp_up_max_frac_per_min(self) -> float:
        """The up-ramp rate allowed now: reduced while xenon is above the margin. [1/min]"""
        if self.xe_rel_frac > 1.0 + self.p.xe_margin_frac:
            return min(self.p.xe_ramp_up_frac_per_min, self.p.ramp_up_frac_per_min)
        return self.p.ramp_up_frac_per_min

    def step(self, p_set_mw: float, dt_s: float) -> float:
        """Move toward ``p_set_mw`` for ``dt_s`` seconds; returns the output over the step. [MW]"""
        desired = min(max(_finite(p_set_mw), self.p.p_min_mw), self.p.p_max_mw)
        up = self.ramp_up_max_frac_per_min() * self.p.p_max_mw * dt_s / 60.0
        down = self.p.ramp_down_frac_per_min * self.p.p_max_mw * dt_s / 60.0
        self.p_mw = min(max(desired, self.p_mw - down), self.p_mw + up)
        self.iodine, self.xenon = xenon_step(self.iodine, self.xenon, self.p_mw / self.p.p_max_mw, dt_s,
                                             self.p.xe_burn_per_s)
        return self.p_mw


class FirmSim(CosimSim):
    """Dispatchable on-site generators (models ``GasTurbine`` and ``Smr``)."""

    META = meta({
        "GasTurbine": model_meta(inputs=["p_set_mw"], outputs=["p_mw", "p_shortfall_mw", "p_fuel_mw", "co2_kg_s",
                                                               "n_starts"], params=GasTurbineParams, role="fossil_gen"),
        "Smr": model_meta(inputs=["p_set_mw"], outputs=["p_mw", "p_shortfall_mw", "xe_rel_frac",
                                                        "ramp_up_max_frac_per_min"], params=SmrParams, role="clean_gen"),
    })
    ModelParams = {"GasTurbine": GasTurbineParams, "Smr": SmrParams}
    EXAMPLE = {"models": {"GasTurbine": {"p_max_mw": 2.0, "p_init_mw": 1.0}, "Smr": {"p_max_mw": 77.0}}}

    @classmethod
    def input_bounds(cls, model, params, sim_params=None):
        """A dispatch setpoint from 0 (off) to the unit's rating. [MW]"""
        return {"p_set_mw": (0.0, float("inf") if params is None else params.p_max_mw)}

    def setup(self) -> None:
        self.units: dict[str, GasTurbine | Smr] = {}
        self._initial_target: dict[str, float] = {}  # each unit's target before any setpoint [MW]

    def create_entity(self, eid: str, model: str, params: BaseModel | None) -> None:
        self.units[eid] = {"GasTurbine": GasTurbine, "Smr": Smr}[model](params)
        self._initial_target[eid] = self.units[eid].target_mw

    def release(self, eid: str, attr: str) -> None:
        """A setpoint no longer held from outside: the unit goes back to its initial target (a unit
        keeps the last target it was sent, and a held one was never the scenario's)."""
        self.units[eid].target_mw = self._initial_target[eid]

    def step_entities(self, time_s: float, inputs: dict[str, dict[str, Any]]) -> None:
        for eid, unit in self.units.items():
            if "p_set_mw" in inputs.get(eid, {}):
                unit.target_mw = float(inputs[eid]["p_set_mw"])
            p_mw = unit.step(unit.target_mw, self.step_s)
            out = {"p_mw": p_mw, "p_shortfall_mw": unit.target_mw - p_mw}
            if isinstance(unit, GasTurbine):
                out.update(p_fuel_mw=unit.fuel_mw(p_mw), co2_kg_s=unit.co2_kg_s(p_mw), n_starts=unit.n_starts)
            else:
                out.update(xe_rel_frac=unit.xe_rel_frac, ramp_up_max_frac_per_min=unit.ramp_up_max_frac_per_min())
            self.out[eid] = out
