"""Wind: a wind farm from a turbine power curve, with the wind speed brought to hub height.

The measured wind speed (``wind_m_s`` at ``measurement_height_m``, 10 m for airport and
TMY3 stations) is extrapolated to hub height with the logarithmic profile
``v_hub = v · ln(h_hub / z0) / ln(h_meas / z0)`` (neutral surface layer, roughness length
``z0``) or the power law ``v_hub = v · (h_hub / h_meas)^alpha`` (alpha = 1/7 ≈ 0.143, the
classic open-terrain value). The turbine's power curve is interpolated linearly between
its tabulated points, is 0 below the first point and above cut-out, and the farm's output
is ``n_turbines × P(v_hub) × availability × (1 − loss)``. A measured hourly mean is held
over its hour; no turbulence or wake model beyond the lumped ``loss_frac``.

Sign: generator convention (``p_mw > 0`` is production). An optional input ``p_limit_mw``
curtails the output (``p_avail_mw`` is what the farm could produce, ``p_curtailed_mw`` the
difference).

Turbines (tabulated electrical power curves, published by NREL in
https://github.com/NREL/turbine-models, BSD-3-Clause):

* ``nrel_5mw``: NREL 5 MW offshore reference turbine, 126 m rotor, 90 m hub, cut-in 3,
  rated 11.4, cut-out 25 m/s (Jonkman et al. 2009, NREL/TP-500-38060; table
  ``Offshore/NREL_5MW_126_RWT.csv``).
* ``iea_3p3mw``: 3.3 MW land-based turbine, 156 m rotor, 110 m hub (the IEA Task 37/LBNL
  "BAR" business-as-usual reference; table ``Onshore/BAR_BAU-LBNL-IEA_3.3MW_156.csv``),
  cut-in 4, rated 9, cut-out 25 m/s.

Example ``[entities]`` entry::

    wf = { sim = "wind", model = "WindFarm", turbine = "iea_3p3mw", n_turbines = 3, roughness_m = 0.1 }
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field, model_validator

from cosim.sdk import Params, SingleModelSim


@dataclass(frozen=True)
class Turbine:
    """A turbine type: rating, hub height and tabulated power curve. [MW, m, m/s, kW]"""

    rated_mw: float
    hub_height_m: float
    cut_out_m_s: float
    speeds_m_s: tuple[float, ...]
    power_kw: tuple[float, ...]


TURBINES: dict[str, Turbine] = {
    # NREL/turbine-models Offshore/NREL_5MW_126_RWT.csv, power column [kW], every tabulated point
    # up to rated (flat at 5000 kW from 11.6 m/s to cut-out).
    "nrel_5mw": Turbine(5.0, 90.0, 25.0,
                        (3, 4, 5, 6, 7, 8, 9, 10, 10.1, 10.2, 10.3, 10.4, 10.5, 10.6, 10.7, 10.8, 10.9,
                         11, 11.1, 11.2, 11.3, 11.4, 11.5, 11.6, 25),
                        (40.5, 177.7, 403.9, 737.6, 1187.2, 1771.1, 2518.6, 3448.41, 3552.15, 3657.95,
                         3765.16, 3873.95, 3984.49, 4096.56, 4210.69, 4326.15, 4443.41, 4562.51, 4683.43,
                         4806.18, 4929.92, 5000.37, 5000.02, 5000.0, 5000.0)),
    # NREL/turbine-models Onshore/BAR_BAU-LBNL-IEA_3.3MW_156.csv, power column [kW] at its 0.25 m/s
    # steps (0 up to 3.75 m/s, 3300 kW from 9 m/s to cut-out).
    "iea_3p3mw": Turbine(3.3, 110.0, 25.0,
                         (3.75, 4, 4.25, 4.5, 4.75, 5, 5.25, 5.5, 5.75, 6, 6.25, 6.5, 6.75, 7, 7.25, 7.5,
                          7.75, 8, 8.25, 8.5, 8.75, 9, 25),
                         (0.0, 300.1882, 360.0646, 427.4164, 502.6833, 586.3051, 678.7214, 780.3720,
                          891.6967, 1013.1352, 1145.1271, 1288.1122, 1442.5303, 1608.8211, 1787.4243,
                          1978.7796, 2183.3268, 2401.5056, 2633.7557, 2880.5168, 3142.2287, 3300.0, 3300.0)),
}


class WindFarmParams(Params):
    """Params of one ``WindFarm`` entity.

    Attributes:
        turbine: turbine type, a key of :data:`TURBINES`.
        n_turbines: number of turbines. [-]
        hub_height_m: hub height; the turbine's reference height when ``None``. [m]
        measurement_height_m: height of the measured wind speed. [m]
        profile: ``log`` (roughness length) or ``power`` (shear exponent).
        roughness_m: roughness length z0 for ``log`` (0.03 open farmland, 0.1 crops, 0.5+ suburbs). [m]
        shear_alpha_ratio: exponent for ``power``. [-]
        availability_frac: share of turbines available (forced and planned outages). [-]
        loss_frac: lumped wake, electrical and other losses. [-]
    """

    turbine: Literal["nrel_5mw", "iea_3p3mw"] = "iea_3p3mw"
    n_turbines: int = Field(default=1, ge=1)
    hub_height_m: float | None = Field(default=None, gt=0)
    measurement_height_m: float = Field(default=10.0, gt=0)
    profile: Literal["log", "power"] = "log"
    roughness_m: float = Field(default=0.03, gt=0, lt=5)
    shear_alpha_ratio: float = Field(default=1.0 / 7.0, ge=0, le=1)
    availability_frac: float = Field(default=0.97, ge=0, le=1)
    loss_frac: float = Field(default=0.1, ge=0, lt=1)

    @model_validator(mode="after")
    def _heights_above_roughness(self):
        hub_m = self.hub_height_m or TURBINES[self.turbine].hub_height_m
        if self.profile == "log" and min(self.measurement_height_m, hub_m) <= self.roughness_m:
            raise ValueError(f"the log profile needs the measurement height ({self.measurement_height_m:g} m) and hub "
                             f"height ({hub_m:g} m) above the roughness length ({self.roughness_m:g} m)")
        return self


def hub_speed_log_m_s(v_m_s: float, h_meas_m: float, h_hub_m: float, z0_m: float) -> float:
    """Logarithmic wind profile (neutral stability). [m/s]"""
    if min(h_meas_m, h_hub_m) <= z0_m:
        raise ValueError(f"heights ({h_meas_m}, {h_hub_m} m) must exceed the roughness length {z0_m} m")
    return v_m_s * math.log(h_hub_m / z0_m) / math.log(h_meas_m / z0_m)


def hub_speed_power_m_s(v_m_s: float, h_meas_m: float, h_hub_m: float, alpha: float) -> float:
    """Power-law wind profile. [m/s]"""
    return v_m_s * (h_hub_m / h_meas_m) ** alpha


def turbine_power_mw(turbine: Turbine, v_hub_m_s: float) -> float:
    """One turbine's electrical output from its power curve. [MW]"""
    if v_hub_m_s < turbine.speeds_m_s[0] or v_hub_m_s > turbine.cut_out_m_s:
        return 0.0
    return float(np.interp(v_hub_m_s, turbine.speeds_m_s, turbine.power_kw)) / 1000.0


class WindFarm:
    """A farm of identical turbines (no mosaik).

    Args:
        params: turbine, count, heights and losses (:class:`WindFarmParams`).
    """

    def __init__(self, params: WindFarmParams):
        self.p = params
        self.turbine = TURBINES[params.turbine]
        self.hub_height_m = params.hub_height_m or self.turbine.hub_height_m

    @property
    def rated_mw(self) -> float:
        return self.p.n_turbines * self.turbine.rated_mw

    def hub_speed_m_s(self, wind_m_s: float) -> float:
        """Wind speed at hub height from the measured one. [m/s]"""
        v = max(float(wind_m_s), 0.0)
        if self.p.profile == "log":
            return hub_speed_log_m_s(v, self.p.measurement_height_m, self.hub_height_m, self.p.roughness_m)
        return hub_speed_power_m_s(v, self.p.measurement_height_m, self.hub_height_m, self.p.shear_alpha_ratio)

    def power_mw(self, wind_m_s: float) -> float:
        """Farm output at measured wind speed ``wind_m_s``. [MW]"""
        per_turbine = turbine_power_mw(self.turbine, self.hub_speed_m_s(wind_m_s))
        return self.p.n_turbines * per_turbine * self.p.availability_frac * (1.0 - self.p.loss_frac)


class WindSim(SingleModelSim):
    """Wind farms (model ``WindFarm``) driven by a measured wind speed ``wind_m_s``."""

    MODEL, PARAMS, ROLE, PHYSICS = "WindFarm", WindFarmParams, "clean_gen", WindFarm
    INPUTS = ("wind_m_s", "p_limit_mw")
    OUTPUTS = ("p_mw", "p_avail_mw", "p_curtailed_mw", "v_hub_m_s")
    EXAMPLE = {"models": {"WindFarm": {"turbine": "iea_3p3mw", "n_turbines": 2}}}

    @classmethod
    def input_bounds(cls, model, params, sim_params=None):
        """A curtailment limit from 0 to the farm's rating. [MW]"""
        top = float("inf") if params is None else params.n_turbines * TURBINES[params.turbine].rated_mw
        return {"p_limit_mw": (0.0, top)}

    def advance(self, farm: WindFarm, time_s: float, inputs: dict[str, Any]) -> dict[str, float]:
        wind = float(inputs.get("wind_m_s", 0.0))
        p_avail = farm.power_mw(wind)
        p_mw = min(p_avail, max(float(inputs["p_limit_mw"]), 0.0)) if "p_limit_mw" in inputs else p_avail
        return {"p_mw": p_mw, "p_avail_mw": p_avail, "p_curtailed_mw": p_avail - p_mw,
                "v_hub_m_s": farm.hub_speed_m_s(wind)}
