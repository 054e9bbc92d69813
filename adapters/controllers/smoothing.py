"""Power smoothing: a battery (or the UPS's storage) fills the valleys and shaves the peaks of a
training job's compute/communication swing, so the grid sees a slow power.

The site power ``p_mw`` (consumer sign, e.g. a Cluster's ``p_mw``) is low-passed with time
constant ``tau_s`` (first order, exact for a held input: ``y += (1 − e^(−Δt/τ)) (p − y)``); the
battery's setpoint is ``p_set_mw = y − p`` (charging in the communication phase, discharging
in the compute phase), clipped to ``±p_max_mw``. With normal (not time-shifted) connections
``campus → smoother → battery`` the battery acts in the same step, so the point of connection
draws ``p + p_battery ≈ y``. The cost is the battery's round-trip losses (its ``e_loss_mwh``)
and its cycling (the smoothing is zero-mean, SoC stays around its start). This stands for the
storage-based smoothing of Choukse et al. (arXiv 2508.14318, rack/datacenter energy storage)
and NVIDIA's GB300 NVL72 PSU storage; a GPU power floor ("burn" in the valleys) is not modelled.

``enabled = false`` outputs 0: the same scenario without smoothing.

Example ``[entities]`` entry::

    smooth = { sim = "ctl", model = "Smoother", tau_s = 10.0, p_max_mw = 5.0 }
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field

from cosim.sdk import Params, SingleModelSim

OUTPUTS = ("p_set_mw", "p_target_mw")


class SmootherParams(Params):
    """Params of one ``Smoother``.

    Attributes:
        tau_s: low-pass time constant (longer than the swing's period). [s]
        p_max_mw: the battery's power limit either way. [MW]
        enabled: false: no smoothing (``p_set_mw`` = 0).
    """

    TIME_CONSTANTS = ('tau_s',)

    tau_s: float = Field(default=10.0, gt=0)
    p_max_mw: float = Field(default=1.0, gt=0)
    enabled: bool = True


class Smoother:
    """The low-pass state (plain Python)."""

    def __init__(self, p: SmootherParams):
        self.p = p
        self.y_mw: float | None = None

    def step(self, dt_s: float, p_mw: float | None) -> dict[str, float]:
        if p_mw is None:
            return {"p_set_mw": 0.0, "p_target_mw": self.y_mw if self.y_mw is not None else 0.0}
        self.y_mw = p_mw if self.y_mw is None else self.y_mw + (1.0 - math.exp(-dt_s / self.p.tau_s)) * (p_mw - self.y_mw)
        p_set = min(max(self.y_mw - p_mw, -self.p.p_max_mw), self.p.p_max_mw) if self.p.enabled else 0.0
        return {"p_set_mw": p_set, "p_target_mw": self.y_mw}


class SmoothingSim(SingleModelSim):
    """Power-smoothing controllers (model ``Smoother``)."""

    MODEL, PARAMS, ROLE, PHYSICS = "Smoother", SmootherParams, "controller", Smoother
    INPUTS, OUTPUTS = ("p_mw",), OUTPUTS
    EXAMPLE = {"models": {"Smoother": {"tau_s": 5.0, "p_max_mw": 2.0}}}

    def advance(self, smoother: Smoother, time_s: float, inputs: dict[str, Any]) -> dict[str, float]:
        p_mw = inputs.get("p_mw")
        return smoother.step(float(self.step_s), None if p_mw is None else float(p_mw))
