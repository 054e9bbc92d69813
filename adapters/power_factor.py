"""Power factor: a metering point that sums its active-power inputs and adds lagging reactive power.

For sources that report active power only (a cluster's GPU power ``p_gpu_mw``, a trace of
base load), so that a grid element draws ``q = p · tan(acos(pf))`` with them, the way a
simulator that attaches a datacenter at a fixed power factor does (OpenG2G attaches its
datacenter loads at pf 0.95, its external loads at 0.96).

Model ``PowerFactor``. Input ``p_mw`` (several sources are summed); outputs ``p_mw`` and
``q_mvar`` (consumer sign). Role ``other``: it adds no demand of its own to the accounting.

Example ``[entities]`` entry::

    meter = { sim = "pf", model = "PowerFactor", power_factor = 0.95 }
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field

from cosim.sdk import Params, SingleModelSim


class PowerFactorParams(Params):
    """Params of one ``PowerFactor`` entity.

    Attributes:
        power_factor: lagging displacement power factor, ``0 < pf <= 1``. [-]
        p_mw: the active power while no input arrives. [MW]
    """

    power_factor: float = Field(default=1.0, gt=0, le=1)
    p_mw: float = 0.0


class PowerFactorSim(SingleModelSim):
    """Sum active power, add reactive power at a power factor (model ``PowerFactor``)."""

    MODEL, PARAMS, ROLE = "PowerFactor", PowerFactorParams, "other"
    INPUTS, OUTPUTS = ("p_mw",), ("p_mw", "q_mvar")
    EXAMPLE = {"models": {"PowerFactor": {"power_factor": 0.95, "p_mw": 1.0}}}

    def build(self, eid: str, params: PowerFactorParams) -> PowerFactorParams:
        return params

    def advance(self, p: PowerFactorParams, time_s: float, inputs: dict[str, Any]) -> dict[str, float]:
        value = inputs.get("p_mw")
        p_mw = p.p_mw if value is None or not math.isfinite(float(value)) else float(value)
        return {"p_mw": p_mw, "q_mvar": p_mw * math.tan(math.acos(p.power_factor))}
