"""Battery: a stationary storage unit with energy, power, efficiency and SoC limits.

Sign: consumer convention, as pandapower's ``storage`` table: ``p_mw > 0`` charges (draws
from the grid), ``p_mw < 0`` discharges. The battery never leaves its limits: a setpoint it
cannot follow is clipped, and ``p_shortfall_mw = p_set_mw - p_mw`` says by how much
(positive: it charged less, or discharged more, than asked).

Energy bookkeeping over a step of ``dt_h`` hours (``e`` is the stored energy):

* self-discharge first: ``e <- e - min(e * (1 - (1 - r)^dt_h), e - e_min)`` with ``r`` the
  fraction lost per hour; it stops at the SoC floor (rates are ~0.1 %/day for Li-ion, so
  the floor hardly matters but keeps ``soc_min_frac`` a hard bound);
* charging at ``p > 0``: ``e <- e + p * eta_charge * dt_h``;
* discharging at ``p < 0``: ``e <- e + p / eta_discharge * dt_h`` (more leaves the cells than
  reaches the grid).

The power is clipped to ``[-p_discharge_max_mw, p_charge_max_mw]`` and then to what the
SoC window ``[soc_min_frac, soc_max_frac] * e_capacity_mwh`` allows in this step.

Optional capacity fade: the usable capacity shrinks by ``fade_per_cycle_frac`` of the
nameplate per equivalent full cycle, where cycles = discharged cell energy / nameplate
(throughput counting with a linear fade, the simplest of the cycle-ageing models
reviewed by Xu et al. 2018, "Modeling of lithium-ion battery degradation for cell life
assessment", IEEE Trans. Smart Grid 9(2):1131-1140; depth-of-discharge weighting and
calendar ageing are not modelled).

Setpoint modes (the ``mode`` entity param):

* ``setpoint``: follows the input ``p_set_mw`` (0 when nothing is connected);
* ``net_load_target``: a built-in rule until controllers exist. From the inputs
  ``p_load_mw`` (site consumption, consumer sign) and ``p_gen_mw`` (on-site generation,
  generator sign) it aims at a site import of ``p_import_target_mw``:
  ``p_set = p_import_target_mw - (p_load_mw - p_gen_mw)``. It discharges whenever the
  site would import more than the target. It charges only from surplus on-site
  generation, unless ``charge_from_grid = true`` lets it also charge from the grid up to
  the target. A target of 0 is self-consumption (store the PV surplus, cover the load from
  storage); a positive target with grid charging is simple peak shaving.

Example ``[entities]`` entry::

    bess = { sim = "storage", model = "Battery", e_capacity_mwh = 4.0, p_charge_max_mw = 1.0,
             p_discharge_max_mw = 1.0, mode = "net_load_target" }
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from cosim.sdk import Params, SingleModelSim

_isfinite = math.isfinite

OUTPUTS = ("p_mw", "p_shortfall_mw", "soc_frac", "e_mwh", "e_capacity_mwh", "e_charged_mwh",
           "e_discharged_mwh", "e_loss_mwh", "n_cycles")
INPUTS = ("p_set_mw", "p_load_mw", "p_gen_mw")


class BatteryRatings(Params):
    """A battery's ratings, efficiencies and SoC window — shared with the controllers that
    plan it (``adapters/controllers/battery_dispatch.py``), so both read the same limits.

    Attributes:
        e_capacity_mwh: nameplate usable energy capacity. [MWh]
        p_charge_max_mw: largest charging power at the grid side. [MW]
        p_discharge_max_mw: largest discharging power at the grid side. [MW]
        eta_charge_frac: grid-to-cell efficiency when charging. [-]
        eta_discharge_frac: cell-to-grid efficiency when discharging. [-]
        soc_min_frac, soc_max_frac: the operating SoC window. [-]
        soc_init_frac: SoC at the start. [-]
    """

    e_capacity_mwh: float = Field(gt=0)
    p_charge_max_mw: float = Field(gt=0)
    p_discharge_max_mw: float = Field(gt=0)
    eta_charge_frac: float = Field(default=0.95, gt=0, le=1)
    eta_discharge_frac: float = Field(default=0.95, gt=0, le=1)
    soc_min_frac: float = Field(default=0.1, ge=0, lt=1)
    soc_max_frac: float = Field(default=0.9, gt=0, le=1)
    soc_init_frac: float = Field(default=0.5, ge=0, le=1)

    @model_validator(mode="after")
    def _window(self):
        if not self.soc_min_frac < self.soc_max_frac:
            raise ValueError(f"soc_min_frac = {self.soc_min_frac} must be below soc_max_frac = "
                             f"{self.soc_max_frac}")
        if not self.soc_min_frac <= self.soc_init_frac <= self.soc_max_frac:
            raise ValueError(f"soc_init_frac = {self.soc_init_frac} is outside the SoC window "
                             f"[{self.soc_min_frac}, {self.soc_max_frac}]; move it inside")
        return self


class BatteryParams(BatteryRatings):
    """Params of one ``Battery`` entity: its :class:`BatteryRatings` plus

    Attributes:
        self_discharge_frac_per_h: fraction of the stored energy lost per hour. [1/h]
        fade_per_cycle_frac: capacity lost per equivalent full cycle, as a fraction of the
            nameplate (0 disables fade; 0.2 / 5000 cycles = 4e-5). [-]
        mode: ``setpoint`` or ``net_load_target`` (see module docstring).
        p_import_target_mw: site import the ``net_load_target`` mode aims at. [MW]
        charge_from_grid: in ``net_load_target`` mode, charge from the grid when the
            site imports less than the target (else only from surplus generation).
    """

    self_discharge_frac_per_h: float = Field(default=0.0, ge=0, lt=1)
    fade_per_cycle_frac: float = Field(default=0.0, ge=0, lt=0.01)
    mode: Literal["setpoint", "net_load_target"] = "setpoint"
    p_import_target_mw: float = 0.0
    charge_from_grid: bool = False


@dataclass(slots=True)
class StepResult:
    """What one battery step did. [MW, MWh]"""

    p_mw: float
    p_shortfall_mw: float
    e_self_discharge_mwh: float
    e_conversion_loss_mwh: float


class Battery:
    """Energy bookkeeping of one battery (no mosaik). See the module docstring.

    Args:
        params: the battery's ratings and limits (:class:`BatteryParams`).
    """

    def __init__(self, params: BatteryParams):
        self.p = params
        self.e_nameplate_mwh = params.e_capacity_mwh
        self.e_capacity_mwh = params.e_capacity_mwh
        self.e_mwh = params.soc_init_frac * params.e_capacity_mwh
        self.e_charged_mwh = 0.0     # grid side, into the battery
        self.e_discharged_mwh = 0.0  # grid side, out of the battery
        self.e_loss_mwh = 0.0        # conversion losses plus self-discharge
        self.e_cell_out_mwh = 0.0    # cell side, counts cycles

    @property
    def e_min_mwh(self) -> float:
        return self.p.soc_min_frac * self.e_capacity_mwh

    @property
    def e_max_mwh(self) -> float:
        return self.p.soc_max_frac * self.e_capacity_mwh

    @property
    def soc_frac(self) -> float:
        return self.e_mwh / self.e_capacity_mwh

    @property
    def n_cycles(self) -> float:
        """Equivalent full cycles: discharged cell energy over the nameplate. [-]"""
        return self.e_cell_out_mwh / self.e_nameplate_mwh

    def limits_mw(self, dt_h: float) -> tuple[float, float]:
        """``(most discharging, most charging)`` power this step allows, consumer sign. [MW]"""
        return self._limits_mw(dt_h, self.e_min_mwh, self.e_max_mwh)

    def _limits_mw(self, dt_h: float, e_min_mwh: float, e_max_mwh: float) -> tuple[float, float]:
        headroom = max(e_max_mwh - self.e_mwh, 0.0)
        available = max(self.e_mwh - e_min_mwh, 0.0)
        p_charge = min(self.p.p_charge_max_mw, headroom / (self.p.eta_charge_frac * dt_h))
        p_discharge = min(self.p.p_discharge_max_mw, available * self.p.eta_discharge_frac / dt_h)
        return -p_discharge, p_charge

    def step(self, p_set_mw: float, dt_s: float) -> StepResult:
        """Follow ``p_set_mw`` (consumer sign) for ``dt_s`` seconds as far as the limits allow.

        The hot path of every run with a battery: :meth:`_limits_mw`, the SoC window and the
        clipping are written out here with conditional expressions where ``min``/``max`` were
        (``max(x, y)`` is ``y if y > x else x`` and ``min(x, y)`` is ``y if y < x else x``,
        which pick the same operand, so the same bits, for every input, signed zeros included).
        """
        if dt_s <= 0:
            raise ValueError(f"dt_s must be positive, got {dt_s}")
        if not _isfinite(p_set_mw):
            raise ValueError(f"p_set_mw must be finite, got {p_set_mw}")
        p = self.p
        dt_h = dt_s / 3600.0
        e_self = self._self_discharge(dt_h) if p.self_discharge_frac_per_h != 0 else 0.0
        e_mwh, e_capacity_mwh = self.e_mwh, self.e_capacity_mwh  # the capacity changes only in _fade, below
        e_min_mwh, e_max_mwh = p.soc_min_frac * e_capacity_mwh, p.soc_max_frac * e_capacity_mwh
        headroom = e_max_mwh - e_mwh
        headroom = 0.0 if 0.0 > headroom else headroom
        available = e_mwh - e_min_mwh
        available = 0.0 if 0.0 > available else available
        p_high = headroom / (p.eta_charge_frac * dt_h)
        p_high = p_high if p_high < p.p_charge_max_mw else p.p_charge_max_mw
        p_low = available * p.eta_discharge_frac / dt_h
        p_low = -(p_low if p_low < p.p_discharge_max_mw else p.p_discharge_max_mw)
        p_mw = p_low if p_low > p_set_mw else p_set_mw
        p_mw = p_high if p_high < p_mw else p_mw
        if p_mw >= 0:
            e_cell = p_mw * p.eta_charge_frac * dt_h
            self.e_charged_mwh += p_mw * dt_h
        else:
            e_cell = p_mw / p.eta_discharge_frac * dt_h
            self.e_discharged_mwh -= p_mw * dt_h
            self.e_cell_out_mwh -= e_cell
        e_conversion = p_mw * dt_h - e_cell
        # Rounding can leave e a hair outside the window; the window is the contract.
        e_mwh += e_cell
        e_mwh = e_min_mwh if e_min_mwh > e_mwh else e_mwh
        self.e_mwh = e_max_mwh if e_max_mwh < e_mwh else e_mwh
        self.e_loss_mwh += e_self + e_conversion
        if p.fade_per_cycle_frac != 0:
            self._fade()
        return StepResult(p_mw, p_set_mw - p_mw, e_self, e_conversion)

    def _self_discharge(self, dt_h: float) -> float:
        rate = self.p.self_discharge_frac_per_h
        if rate == 0:
            return 0.0
        lost = min(self.e_mwh * (1.0 - (1.0 - rate) ** dt_h), max(self.e_mwh - self.e_min_mwh, 0.0))
        self.e_mwh -= lost
        return lost

    def _fade(self) -> None:
        if self.p.fade_per_cycle_frac == 0:
            return
        fade = self.p.fade_per_cycle_frac * self.n_cycles
        self.e_capacity_mwh = self.e_nameplate_mwh * max(1.0 - fade, 1e-6)  # never zero: SoC divides by it
        # A shrinking capacity may push the stored energy above the new ceiling: the BMS
        # recalibrates SoC, so the excess counts as lost.
        if self.e_mwh > self.e_max_mwh:
            self.e_loss_mwh += self.e_mwh - self.e_max_mwh
            self.e_mwh = self.e_max_mwh

    def setpoint_mw(self, inputs: dict[str, Any]) -> float:
        """The setpoint this step from the mode and the inputs. [MW, consumer sign]"""
        if self.p.mode == "setpoint":
            return float(inputs.get("p_set_mw", 0.0))
        net_mw = float(inputs.get("p_load_mw", 0.0)) - float(inputs.get("p_gen_mw", 0.0))
        p_set = self.p.p_import_target_mw - net_mw
        if p_set > 0 and not self.p.charge_from_grid:
            p_set = min(p_set, max(-net_mw, 0.0))  # only the surplus of on-site generation
        return p_set

    def outputs(self, result: StepResult) -> dict[str, float]:
        e_mwh, e_capacity_mwh = self.e_mwh, self.e_capacity_mwh  # (soc_frac and n_cycles written out)
        return {
            "p_mw": result.p_mw, "p_shortfall_mw": result.p_shortfall_mw, "soc_frac": e_mwh / e_capacity_mwh,
            "e_mwh": e_mwh, "e_capacity_mwh": e_capacity_mwh,
            "e_charged_mwh": self.e_charged_mwh, "e_discharged_mwh": self.e_discharged_mwh,
            "e_loss_mwh": self.e_loss_mwh, "n_cycles": self.e_cell_out_mwh / self.e_nameplate_mwh,
        }


class BatterySim(SingleModelSim):
    """Batteries (model ``Battery``); each step follows its setpoint for one step length.

    The power set at time t holds over [t, t + step_s): the outputs at t are the power
    applied over that step and the SoC at its end.
    """

    MODEL, PARAMS, ROLE, PHYSICS = "Battery", BatteryParams, "storage", Battery
    INPUTS, OUTPUTS = INPUTS, OUTPUTS
    EXAMPLE = {
        "models": {"Battery": {"e_capacity_mwh": 4.0, "p_charge_max_mw": 1.0, "p_discharge_max_mw": 1.0}},
    }

    @classmethod
    def input_bounds(cls, model: str, params: BaseModel | None,
                     sim_params: BaseModel | None = None) -> dict[str, tuple[float, float]]:
        """``p_set_mw`` within the power limits (consumer sign: discharge negative). [MW]"""
        if params is None:
            return {}
        return {"p_set_mw": (-params.p_discharge_max_mw, params.p_charge_max_mw)}

    def advance(self, battery: Battery, time_s: float, inputs: dict[str, Any]) -> dict[str, float]:
        return battery.outputs(battery.step(battery.setpoint_mw(inputs), self.step_s))
