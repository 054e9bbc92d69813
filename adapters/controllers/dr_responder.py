"""DR event responder: meets a utility's requested reduction with the cheapest mix of levers.

Inputs come from the ``dr_events`` adapter (``event_active``, ``dr_reduction_mw``,
``dr_cap_mw``, ``dr_notice_s``, ``dr_remaining_s``) and from the site's meters:
``p_site_mw`` (the site's net draw at the utility meter, consumer sign: connect the
facility's loads *and* the battery's ``p_mw`` to it, the inputs are summed), ``p_dc_mw``
(the GPU cluster's ``p_mw``) and optionally ``soc_frac`` (the battery's) and
``tank_soc_frac`` (a ChilledWaterTank's ``soc_frac``).

Baseline (stated, one of ``baseline_method``): the mean of ``p_site_mw`` over
``baseline_window_s`` *just before the event starts* (``before_start``, meter-before, the
default) or *just before the notice* (``before_notice``: pre-cooling after the notice
cannot inflate it; needs the notice to fall inside the run). The baseline is frozen for
the event. A reduction event asks ``dr_requested_mw = dr_reduction_mw`` (or, from an OpenADR
percent offset, ``dr_reduction_frac`` of the baseline; the larger of the two); a cap event asks
``max(baseline - dr_cap_mw, 0)``; the target draw is ``baseline - requested``.

Control: one commanded reduction ``R`` [MW], set to the request when the event starts
(feed-forward) and corrected each step by integral feedback on the metered draw,
``R <- clip(R + gain_frac * (p_site - target), 0, R_max)``. ``R`` is filled into the levers
in order of performance cost, cheapest first (so the costliest is released first):

1. battery discharge, up to ``battery_p_max_mw`` while ``soc_frac`` is above ``soc_min_frac``
   (no performance cost) -> ``p_set_mw`` (consumer sign, negative = discharge);
2. cooling: discharging a chilled-water tank, up to ``tank_q_max_mw`` of cooling while
   ``tank_soc_frac`` is above ``tank_soc_min_frac``, saving an estimated ``tank_mw_per_mw``
   of plant electricity per MW of cooling (about 1 / plant COP) -> ``q_charge_cmd_mw``
   (negative); then raising the chilled-water setpoint from ``t_chw_nominal_c`` up to
   ``t_chw_max_c`` at an estimated ``cooling_mw_per_k`` -> ``t_chw_supply_setpoint_c`` (costs
   thermal margin only; note the shipped ChillerPlant's curves earn no credit above 8.89 °C
   leaving water, so with its default 12 °C the lever saves nothing: leave
   ``cooling_mw_per_k = 0`` there). Pre-cooling, during the ``precool_s`` before the start:
   the tank charges at ``tank_q_max_mw`` and the setpoint drops by ``precool_k``;
3. capping GPU power through the cluster's facility limit ``p_limit_mw = p_dc_ref - R_gpu``
   (``p_dc_ref`` is the cluster's mean draw over the baseline window). The cluster meets a
   limit in its own documented order: caps low-priority jobs, pauses flexible jobs, caps
   normal then high priority; inference is never throttled;
4. pausing flexible jobs: the part of ``R_gpu`` above ``gpu_cap_max_mw`` also raises
   ``pause_flexible_frac = (R_gpu - gpu_cap_max_mw) / flexible_mw``.

After the event ``R`` ramps to zero over ``release_s`` (softens the rebound), then the
battery recharges at ``recharge_mw`` up to ``soc_recharge_frac`` and the tank at
``tank_recharge_mw`` until full.

Timing: setpoints reach the plants one step later (time-shifted edges), and ``dr_events``
reports the reduction only once the event is active, so the first event step delivers
nothing; over an event of N steps that costs 1/N of the energy.

Reported each step: ``dr_requested_mw``, ``dr_delivered_mw = baseline - p_site`` (signed;
0 outside events), ``dr_shortfall_mw = max(requested - delivered, 0)``, ``p_baseline_mw``,
``p_target_mw``, ``dr_command_mw`` (R), ``p_metered_mw`` (the ``p_site_mw`` it read, for the
rebound KPI). With ``enabled = false`` the responder only measures
and reports (the no-control baseline run), its setpoints neutral.

Example ``[entities]`` entry::

    responder = { sim = "ctl", model = "Responder", battery_p_max_mw = 0.3, cooling_mw_per_k = 0.01 }
"""

from __future__ import annotations

from collections import deque
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from cosim.sdk import Params, SingleModelSim

INPUTS = ("event_active", "dr_reduction_mw", "dr_reduction_frac", "dr_cap_mw", "dr_notice_s", "dr_remaining_s",
          "p_site_mw", "p_dc_mw", "soc_frac", "tank_soc_frac")
OUTPUTS = ("p_set_mw", "q_charge_cmd_mw", "t_chw_supply_setpoint_c", "p_limit_mw", "pause_flexible_frac",
           "dr_requested_mw", "dr_delivered_mw", "dr_shortfall_mw", "p_baseline_mw", "p_target_mw",
           "dr_command_mw", "p_metered_mw")


#: ``p_limit_mw`` when no limit applies: the datacenter reads NaN as unconstrained (a
#: time-shifted edge needs a number, and TOML's ``initial_data`` can say ``nan``).
NO_LIMIT = float("nan")


class ResponderParams(Params):
    """Params of one ``Responder`` entity.

    Attributes:
        enabled: act on events; ``false`` only measures and reports (the baseline run).
        baseline_method: ``before_start`` or ``before_notice`` (see module docstring).
        baseline_window_s: averaging window of the baseline. [s]
        gain_frac: integral gain on the metered error per step. [-]
        battery_p_max_mw: discharge the responder may ask of the battery (0: no battery). [MW]
        soc_min_frac: stop discharging at this SoC. [-]
        recharge_mw, soc_recharge_frac: recharge after the event at this power up to this SoC. [MW, -]
        tank_q_max_mw: cooling the responder may take from a chilled-water tank (0: no tank). [MW]
        tank_mw_per_mw: plant electricity saved per MW of cooling from the tank (~1/COP). [-]
        tank_soc_min_frac: stop discharging the tank here. [-]
        tank_recharge_mw: recharge the tank after the event at this cooling rate. [MW]
        t_chw_nominal_c, t_chw_max_c: chilled-water setpoint normally and the most it may be raised to. [°C]
        cooling_mw_per_k: estimated site saving per kelvin raised (0 disables the lever). [MW/K]
        precool_k, precool_s: lower the setpoint by this much during this long before the start. [K, s]
        gpu_cap_max_mw: reduction expected from capping alone before pausing is asked. [MW]
        flexible_mw: power of the flexible jobs (0 disables the pause knob). [MW]
        p_dc_floor_mw: the lowest facility limit the responder sets on the cluster. [MW]
        release_s: ramp-down of the reduction after the event. [s]
    """

    enabled: bool = True
    baseline_method: Literal["before_start", "before_notice"] = "before_start"
    baseline_window_s: float = Field(default=3600.0, gt=0)
    gain_frac: float = Field(default=0.7, gt=0, le=1.5)
    battery_p_max_mw: float = Field(default=0.0, ge=0)
    soc_min_frac: float = Field(default=0.1, ge=0, lt=1)
    recharge_mw: float = Field(default=0.0, ge=0)
    soc_recharge_frac: float = Field(default=0.9, gt=0, le=1)
    tank_q_max_mw: float = Field(default=0.0, ge=0)
    tank_mw_per_mw: float = Field(default=0.2, gt=0, le=1)
    tank_soc_min_frac: float = Field(default=0.05, ge=0, lt=1)
    tank_recharge_mw: float = Field(default=0.0, ge=0)
    t_chw_nominal_c: float = 12.0
    t_chw_max_c: float = 12.0
    cooling_mw_per_k: float = Field(default=0.0, ge=0)
    precool_k: float = Field(default=0.0, ge=0)
    precool_s: float = Field(default=0.0, ge=0)
    gpu_cap_max_mw: float = Field(default=1e9, ge=0)
    flexible_mw: float = Field(default=0.0, ge=0)
    p_dc_floor_mw: float = Field(default=0.0, ge=0)
    release_s: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _setpoints(self):
        if self.t_chw_max_c < self.t_chw_nominal_c:
            raise ValueError(f"t_chw_max_c = {self.t_chw_max_c} is below t_chw_nominal_c = "
                             f"{self.t_chw_nominal_c}; the DR lever raises the setpoint")
        return self


class Responder:
    """The responder's state and policy (no mosaik). See the module docstring.

    Args:
        params: :class:`ResponderParams`.
        step_s: controller step. [s]
    """

    def __init__(self, params: ResponderParams, step_s: float):
        self.p, self.step_s = params, float(step_s)
        self.history: deque[tuple[float, float, float]] = deque()  # (time_s, p_site_mw, p_dc_mw)
        self.baseline_mw: float | None = None
        self.dc_ref_mw: float | None = None
        self.command_mw = 0.0
        self.release_from_mw = 0.0
        self.in_event = False
        self.announced = False
        self.fresh = False

    # -- baseline ---------------------------------------------------------------------------------
    def _remember(self, time_s: float, p_site: float | None, p_dc: float | None) -> None:
        if p_site is not None:
            self.history.append((time_s, p_site, p_dc if p_dc is not None else float("nan")))
        keep = max(self.p.baseline_window_s, self.step_s)
        while self.history and self.history[0][0] < time_s - keep - self.step_s:
            self.history.popleft()

    def _freeze_baseline(self, time_s: float) -> None:
        rows = [r for r in self.history if time_s - self.p.baseline_window_s <= r[0] < time_s]
        if not rows:  # the run starts inside the window: the earliest meter readings we have
            rows = list(self.history)[:1]
        if rows:
            self.baseline_mw = sum(r[1] for r in rows) / len(rows)
            dcs = [r[2] for r in rows if r[2] == r[2]]
            self.dc_ref_mw = sum(dcs) / len(dcs) if dcs else None

    # -- the step ----------------------------------------------------------------------------------
    def step(self, time_s: float, m: dict[str, Any]) -> dict[str, Any]:
        """One control step from the measurements ``m`` (inputs by name); returns the outputs."""
        active = bool(m.get("event_active") or False)
        notice_s = m.get("dr_notice_s")
        p_site, p_dc = m.get("p_site_mw"), m.get("p_dc_mw")
        self._remember(time_s, p_site, p_dc)  # the baseline reads only times before now
        if notice_s is not None and not active and not self.announced:
            self.announced = True
            if self.p.baseline_method == "before_notice":
                self._freeze_baseline(time_s)
        if active and not self.in_event:
            self.in_event = True
            if self.p.baseline_method == "before_start" or self.baseline_mw is None:
                self._freeze_baseline(time_s)
            self.command_mw, self.fresh = 0.0, True
        elif not active and self.in_event:
            self.in_event, self.announced = False, False
            self.release_from_mw = self.command_mw
        report = self._report(active, m, p_site)
        if active and self.p.enabled:
            self._feedback(report, p_site)
        elif not active:
            self._release()
        out = self._allocate(m.get("soc_frac"), m.get("tank_soc_frac"), notice_s, active)
        out.update(report)
        out["dr_command_mw"] = self.command_mw
        out["p_metered_mw"] = p_site
        if not active and self.command_mw == 0 and notice_s is None:
            self.baseline_mw = None if self.p.baseline_method == "before_start" else self.baseline_mw
        return out

    def _report(self, active: bool, m: dict[str, Any], p_site: float | None) -> dict[str, Any]:
        if not active or self.baseline_mw is None:
            return {"dr_requested_mw": 0.0, "dr_delivered_mw": 0.0, "dr_shortfall_mw": 0.0,
                    "p_baseline_mw": self.baseline_mw, "p_target_mw": None}
        requested = float(m.get("dr_reduction_mw") or 0.0)
        requested = max(requested, float(m.get("dr_reduction_frac") or 0.0) * self.baseline_mw)
        cap = m.get("dr_cap_mw")
        if cap is not None:
            requested = max(requested, self.baseline_mw - float(cap), 0.0)
        delivered = self.baseline_mw - p_site if p_site is not None else 0.0
        return {"dr_requested_mw": requested, "dr_delivered_mw": delivered,
                "dr_shortfall_mw": max(requested - delivered, 0.0), "p_baseline_mw": self.baseline_mw,
                "p_target_mw": self.baseline_mw - requested}

    def _feedback(self, report: dict[str, Any], p_site: float | None) -> None:
        requested = report["dr_requested_mw"]
        if self.fresh:
            self.command_mw, self.fresh = requested, False  # feed-forward at the start
        elif p_site is not None:
            self.command_mw += self.p.gain_frac * (p_site - report["p_target_mw"])
        self.command_mw = min(max(self.command_mw, 0.0), self.max_command_mw())
        self.release_from_mw = self.command_mw

    def _release(self) -> None:
        if self.command_mw <= 0:
            return
        rate = self.release_from_mw * self.step_s / self.p.release_s if self.p.release_s > 0 else self.command_mw
        self.command_mw = max(self.command_mw - rate, 0.0)

    def max_command_mw(self) -> float:
        """The most the levers can take: battery + cooling + the cluster down to its floor. [MW]"""
        cooling = self.p.cooling_mw_per_k * (self.p.t_chw_max_c - self.p.t_chw_nominal_c)
        tank = self.p.tank_q_max_mw * self.p.tank_mw_per_mw
        gpu = max((self.dc_ref_mw or 0.0) - self.p.p_dc_floor_mw, 0.0)
        return self.p.battery_p_max_mw + tank + cooling + gpu

    # -- levers --------------------------------------------------------------------------------------
    def _allocate(self, soc: float | None, tank_soc: float | None, notice_s: float | None,
                  active: bool) -> dict[str, Any]:
        p = self.p
        out: dict[str, Any] = {"p_set_mw": 0.0, "q_charge_cmd_mw": 0.0, "t_chw_supply_setpoint_c": p.t_chw_nominal_c,
                               "p_limit_mw": NO_LIMIT, "pause_flexible_frac": 0.0}
        if not p.enabled:
            return out
        left = self.command_mw
        battery_ok = soc is None or soc > p.soc_min_frac + 1e-3
        discharge = min(left, p.battery_p_max_mw) if battery_ok else 0.0
        out["p_set_mw"] = -discharge
        left -= discharge
        tank_ok = tank_soc is None or tank_soc > p.tank_soc_min_frac + 1e-3
        tank_mw = min(left, p.tank_q_max_mw * p.tank_mw_per_mw) if tank_ok else 0.0
        out["q_charge_cmd_mw"] = -tank_mw / p.tank_mw_per_mw
        left -= tank_mw
        if p.cooling_mw_per_k > 0:
            raise_k = min(left / p.cooling_mw_per_k, p.t_chw_max_c - p.t_chw_nominal_c)
            out["t_chw_supply_setpoint_c"] = p.t_chw_nominal_c + raise_k
            left -= raise_k * p.cooling_mw_per_k
        if left > 1e-9 and self.dc_ref_mw is not None:
            out["p_limit_mw"] = max(self.dc_ref_mw - left, p.p_dc_floor_mw)
            if p.flexible_mw > 0:
                out["pause_flexible_frac"] = min(max(left - p.gpu_cap_max_mw, 0.0) / p.flexible_mw, 1.0)
        if not active and self.command_mw == 0:
            precool = notice_s is not None and 0 < notice_s <= p.precool_s
            if precool:
                out["t_chw_supply_setpoint_c"] = p.t_chw_nominal_c - p.precool_k
            if tank_soc is not None and tank_soc < 0.98:
                out["q_charge_cmd_mw"] = p.tank_q_max_mw if precool else p.tank_recharge_mw
            if soc is not None and soc < p.soc_recharge_frac and p.recharge_mw > 0 and notice_s is None:
                out["p_set_mw"] = p.recharge_mw
        return out


class DrResponderSim(SingleModelSim):
    """DR event responders (model ``Responder``)."""

    MODEL, PARAMS, ROLE = "Responder", ResponderParams, "controller"
    INPUTS, OUTPUTS = INPUTS, OUTPUTS
    EXAMPLE = {"models": {"Responder": {"battery_p_max_mw": 0.3}}}

    def build(self, eid: str, params: ResponderParams) -> Responder:
        return Responder(params, self.step_s)

    def advance(self, responder: Responder, time_s: float, inputs: dict[str, Any]) -> dict[str, Any]:
        return responder.step(time_s, inputs)
