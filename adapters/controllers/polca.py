"""POLCA: power oversubscription of an LLM inference cluster by two-threshold GPU capping.

The mechanism of Patel et al., "POLCA: Power Oversubscription in LLM Cloud Providers"
(arXiv:2308.12908, 2023): deploy more servers than the facility's power budget covers at
nameplate, and keep the measured power under the budget by capping GPUs only when it comes
close, lowest priority first:

* above the first threshold ``t1_frac * p_budget_mw`` cap the low-priority workloads
  (low-priority inference, or low-priority training classes);
* above the second threshold ``t2_frac * p_budget_mw`` cap everything;
* uncap with hysteresis: leave a level only once the power is ``hysteresis_frac *
  p_budget_mw`` below the threshold that set it, one level per step (the measured power is
  the *capped* power, so uncapping raises it again; the band keeps that from flapping).

POLCA caps GPU frequency; here the cap is a per-GPU power limit (the datacenter's
``p_cap_*_w`` knobs, whose speed and power follow the Zeus curves). The thresholds and cap
levels are parameters; the defaults are this project's choice, not the paper's.

Model ``Polca``. Input ``p_mw``: the power under the budget (connect every cluster's ``p_mw``;
several sources are summed). Outputs ``p_cap_low_prio_w`` and ``p_cap_high_prio_w`` (connect,
time shifted, to a Cluster's ``p_cap_infer_w``, ``p_cap_low_w``, ``p_cap_w``...: uncapped
they equal ``p_uncapped_w``, the GPU's maximum limit), ``n_cap_level`` (0 uncapped, 1 low
priority capped, 2 all capped), ``p_budget_mw`` and ``p_over_budget_mw``.

Example ``[entities]`` entry::

    polca = { sim = "ctl", model = "Polca", p_budget_mw = 1.4, t1_frac = 0.85, t2_frac = 0.95 }
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from cosim.sdk import Params, SingleModelSim

OUTPUTS = ("p_cap_low_prio_w", "p_cap_high_prio_w", "n_cap_level", "p_budget_mw", "p_over_budget_mw")


class PolcaParams(Params):
    """Params of one ``Polca`` entity.

    Attributes:
        p_budget_mw: the facility (or row) power budget the servers share. [MW]
        t1_frac: first threshold (cap low priority) as a share of the budget. [-]
        t2_frac: second threshold (cap everything) as a share of the budget. [-]
        hysteresis_frac: uncap a level once the power is this share of the budget below
            the threshold that set it. [-]
        p_uncapped_w: the per-GPU limit written when uncapped (the GPU's maximum; 700 W for
            the H100 SXM). [W]
        p_cap_low_prio_w: cap of the low-priority GPUs at level 1 and 2. [W]
        p_cap_high_prio_w: cap of the high-priority GPUs at level 2. [W]
        enabled: ``false`` writes ``p_uncapped_w`` always (the no-control baseline of the
            same scenario).
    """

    p_budget_mw: float = Field(gt=0)
    t1_frac: float = Field(default=0.85, gt=0, le=1)
    t2_frac: float = Field(default=0.95, gt=0, le=1)
    hysteresis_frac: float = Field(default=0.05, ge=0, lt=1)
    p_uncapped_w: float = Field(default=700.0, gt=0)
    p_cap_low_prio_w: float = Field(default=350.0, gt=0)
    p_cap_high_prio_w: float = Field(default=450.0, gt=0)
    enabled: bool = True

    @model_validator(mode="after")
    def _ordered(self):
        if self.t1_frac >= self.t2_frac:
            raise ValueError(f"t1_frac = {self.t1_frac:g} must be below t2_frac = {self.t2_frac:g} "
                             "(the first threshold caps low priority, the second everything)")
        for name in ("p_cap_low_prio_w", "p_cap_high_prio_w"):
            if getattr(self, name) > self.p_uncapped_w:
                raise ValueError(f"{name} = {getattr(self, name):g} W is above p_uncapped_w = "
                                 f"{self.p_uncapped_w:g} W; a cap must not exceed the uncapped limit")
        return self


class PolcaPolicy:
    """The two-threshold state machine (plain Python).

    Args:
        params: thresholds, hysteresis and cap levels.
    """

    def __init__(self, params: PolcaParams):
        self.p = params
        self.level = 0

    def thresholds_mw(self) -> tuple[float, float]:
        """``(first, second)`` threshold. [MW]"""
        return self.p.t1_frac * self.p.p_budget_mw, self.p.t2_frac * self.p.p_budget_mw

    def update(self, p_mw: float | None) -> int:
        """Move the capping level for the measured power ``p_mw`` and return it. [MW -> -]"""
        if not self.p.enabled or p_mw is None:
            return self.level if self.p.enabled else 0
        t1, t2 = self.thresholds_mw()
        band = self.p.hysteresis_frac * self.p.p_budget_mw
        if p_mw > t2:
            self.level = 2
        elif p_mw > t1:
            self.level = max(self.level, 1)
        if self.level == 2 and p_mw < t2 - band:
            self.level = 1
        elif self.level == 1 and p_mw < t1 - band:
            self.level = 0
        return self.level

    def caps_w(self) -> tuple[float, float]:
        """``(low-priority, high-priority)`` per-GPU caps of the current level. [W]"""
        low = self.p.p_cap_low_prio_w if self.level >= 1 else self.p.p_uncapped_w
        high = self.p.p_cap_high_prio_w if self.level >= 2 else self.p.p_uncapped_w
        return low, high

    def outputs(self, p_mw: float | None) -> dict[str, Any]:
        """One step: update with ``p_mw`` and report the caps."""
        level = self.update(p_mw)
        low, high = self.caps_w()
        over = max((p_mw or 0.0) - self.p.p_budget_mw, 0.0)
        return {"p_cap_low_prio_w": low, "p_cap_high_prio_w": high, "n_cap_level": level,
                "p_budget_mw": self.p.p_budget_mw, "p_over_budget_mw": over}


class PolcaSim(SingleModelSim):
    """POLCA capping controllers (model ``Polca``)."""

    MODEL, PARAMS, ROLE, PHYSICS = "Polca", PolcaParams, "controller", PolcaPolicy
    INPUTS, OUTPUTS = ("p_mw",), OUTPUTS
    EXAMPLE = {"models": {"Polca": {"p_budget_mw": 1.4}}}

    def advance(self, policy: PolcaPolicy, time_s: float, inputs: dict[str, Any]) -> dict[str, Any]:
        p_mw = inputs.get("p_mw")
        return policy.outputs(None if p_mw is None else float(p_mw))
