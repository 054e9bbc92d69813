"""Site load targets on a live run: a power target reached along a ramp through the facility limit.

A *site* is an IT load (role ``it``) that takes a facility limit (input ``p_limit_mw``) and reports its
draw (output ``p_mw``, consumer sign): a datacenter ``Cluster``. A load target
(:meth:`SiteTargets.set_target`) holds ``p_limit_mw`` on it, moved from the measured draw to
``target_p_mw`` at ``ramp_mw_per_min`` (one value per step, the value the ramp reaches at the step's
end), then holds it for ``hold_s`` (``None``: until replaced or released) and releases it (the
scenario's own limit applies again). The adapter's physics decides what the site actually draws
(GPU caps, paused jobs, the idle floor): the target is a request, never a guarantee.

After every step (:meth:`SiteTargets.after_step`) each site's measured draw is compared with its
target; events are kept in order with a sequence number (``seq``) for the server-sent event stream:

* ``target_set``, ``target_released``: a target began, ended (hold over, replaced, or released).
* ``ramp_end``: the ramp's time is up (``met`` says whether the draw is at or below the target).
* ``target_not_met``: a breach: at the ramp's end or later the draw is above the target plus the
  tolerance (once per target, again after it was met in between).
* ``target_met``: the draw came down to the target after a ``target_not_met``.
* ``facility_limit_reached``: the draw reached the site's facility limit (the smaller of the
  scenario's ``p_limit_mw`` and ``rated_mw`` for it; none without either), once per crossing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from cosim.errors import Problem, ScenarioError, few

#: The input a site's target acts through, and the output it is measured by. [MW]
LIMIT_INPUT, POWER_OUTPUT = "p_limit_mw", "p_mw"
#: The output by which an adapter tells how far above its limit it stayed (a datacenter's floor,
#: inference it does not throttle); shown in the power status when the site reports it. [MW]
EXCESS_OUTPUT = "p_limit_excess_mw"
#: A target counts as met while the draw is at most the target plus this share of it ... [-]
MET_TOLERANCE_FRAC = 0.01
#: ... and never less than this. [MW]
MET_TOLERANCE_MIN_MW = 0.001
#: Events kept per run (the oldest go first). [-]
MAX_EVENTS = 10_000


class UnknownSite(LookupError):
    """A request named an entity that is no site (no IT load, or no ``p_limit_mw`` input or ``p_mw`` output)."""


@dataclass
class LoadTarget:
    """One target on one site; times are simulation times. [MW, MW/min, s]"""

    target_p_mw: float
    ramp_mw_per_min: float
    hold_s: float | None
    start_p_mw: float
    start_s: float
    ramp_end_s: float

    def limit_mw(self, step_start_s: float, step_s: float) -> float:
        """The limit held over the step from ``step_start_s``: where the ramp is at the step's end. [MW]"""
        moved_mw = self.ramp_mw_per_min * max(0.0, step_start_s + step_s - self.start_s) / 60.0
        gap_mw = self.target_p_mw - self.start_p_mw
        return self.target_p_mw if moved_mw >= abs(gap_mw) else self.start_p_mw + math.copysign(moved_mw, gap_mw)

    @property
    def end_s(self) -> float:
        """When the hold is over (inf: held until replaced or released). [s]"""
        return math.inf if self.hold_s is None else self.ramp_end_s + self.hold_s

    def tolerance_mw(self) -> float:
        return max(MET_TOLERANCE_MIN_MW, MET_TOLERANCE_FRAC * self.target_p_mw)


@dataclass
class Site:
    """A site's range, facility limit, latest reading and target state. [MW]"""

    eid: str
    low_mw: float
    high_mw: float
    facility_limit_mw: float
    target: LoadTarget | None = None
    ramp_state: str = "none"  # none, ramping, holding, released
    p_mw: float | None = None
    measured_s: float | None = None  # end of the step p_mw is the mean over [s]
    excess_mw: float | None = None  # what the adapter could not bring under the limit (its p_limit_excess_mw)
    limit_mw: float | None = None  # the limit the target holds now
    met: bool | None = None
    breached: bool = False
    at_facility_limit: bool = False


class SiteTargets:
    """The sites of a scenario, their targets and their events (see the module docstring).

    Not thread-safe by itself: :class:`cosim.live.run.LiveRun` calls it under its lock.

    Args:
        bounds: per site, the range of its ``p_limit_mw`` input. [MW]
        static_limits: per site, its facility limit from the scenario (None: none known). [MW]
    """

    def __init__(self, bounds: dict[str, tuple[float, float]], static_limits: dict[str, float | None]):
        self.sites = {eid: Site(eid, low, high, math.inf if static_limits.get(eid) is None else static_limits[eid])
                      for eid, (low, high) in bounds.items()}
        self.events: list[dict[str, Any]] = []
        self.n_events = 0

    def site(self, eid: str) -> Site:
        if eid not in self.sites:
            raise UnknownSite(f"no site {eid!r} (a site is an IT load, role 'it', that takes the input {LIMIT_INPUT} "
                              f"and reports {POWER_OUTPUT}); sites: {few(list(self.sites)) or 'none in this scenario'}")
        return self.sites[eid]

    # -- requests ------------------------------------------------------------------------------
    def check(self, eid: str, body: Any) -> tuple[float, float, float | None]:
        """``(target_p_mw, ramp_mw_per_min, hold_s)`` from a request body.

        Raises:
            UnknownSite: no such site.
            ScenarioError: a missing, unknown or bad key, or a target outside the site's range.
        """
        site = self.site(eid)
        where = f"sites.{eid}"
        example = '{"target_p_mw": 0.5, "ramp_mw_per_min": 0.1, "hold_s": 600}'
        if not isinstance(body, dict):
            raise ScenarioError("request", [Problem(where, f"give a JSON object, e.g. {example}", body)])
        problems = [Problem(f"{where}.{key}", "unknown key; keys: target_p_mw, ramp_mw_per_min, hold_s", body[key])
                    for key in body if key not in ("target_p_mw", "ramp_mw_per_min", "hold_s")]
        target, ramp, hold = body.get("target_p_mw"), body.get("ramp_mw_per_min"), body.get("hold_s")
        if not _number(target):
            problems.append(Problem(f"{where}.target_p_mw", f"give the target as a number of MW, e.g. {example}", target))
        elif not site.low_mw <= target <= site.high_mw:
            problems.append(Problem(f"{where}.target_p_mw",
                                    f"{target:g} MW is outside {eid}'s range [{site.low_mw:g}, {site.high_mw:g}] MW "
                                    f"(the bounds of its {LIMIT_INPUT}); give a target within it", target))
        if not _number(ramp) or ramp <= 0:
            problems.append(Problem(f"{where}.ramp_mw_per_min",
                                    "give the ramp as a number of MW per minute above 0, e.g. 0.1", ramp))
        if hold is not None and (not _number(hold) or hold < 0):
            problems.append(Problem(f"{where}.hold_s", "give the hold as seconds (0 or more), or null to hold the "
                                                       "target until it is replaced or released", hold))
        if problems:
            raise ScenarioError("request", problems)
        return float(target), float(ramp), None if hold is None else float(hold)

    def set_target(self, eid: str, target_p_mw: float, ramp_mw_per_min: float, hold_s: float | None,
                   now_s: float, step_s: float) -> float:
        """Start a checked target at ``now_s`` (the next step); the limit to hold over that step. [MW]"""
        site = self.site(eid)
        if site.target is not None and site.ramp_state in ("ramping", "holding"):
            self._emit(site, "target_released", now_s, reason="replaced by a new target")
        start_mw = site.p_mw if site.p_mw is not None else (site.limit_mw if site.limit_mw is not None
                                                           else target_p_mw)
        start_mw = min(max(start_mw, site.low_mw), site.high_mw)  # a limit the input takes
        ramp_end_s = now_s + abs(target_p_mw - start_mw) / ramp_mw_per_min * 60.0
        site.target = LoadTarget(target_p_mw, ramp_mw_per_min, hold_s, start_mw, now_s, ramp_end_s)
        site.ramp_state, site.met, site.breached = "ramping", None, False
        site.limit_mw = site.target.limit_mw(now_s, step_s)
        self._emit(site, "target_set", now_s, start_p_mw=start_mw, ramp_end_s=ramp_end_s,
                   end_s=None if hold_s is None else site.target.end_s)
        return site.limit_mw

    def release(self, eid: str, now_s: float) -> bool:
        """End the site's target (its limit is released); False if it had none active."""
        site = self.site(eid)
        if site.ramp_state not in ("ramping", "holding"):
            return False
        self._end(site, now_s, "released by request")
        return True

    # -- stepping ------------------------------------------------------------------------------
    def after_step(self, step_start_s: float, step_s: float,
                   outputs: dict[str, dict[str, Any]]) -> dict[str, float | None]:
        """Read the step's draws, emit events; per site whose limit changes, the limit for the next
        step (None: release it)."""
        end_s = step_start_s + step_s
        changes: dict[str, float | None] = {}
        for site in self.sites.values():
            p_mw = outputs.get(site.eid, {}).get(POWER_OUTPUT)
            if not isinstance(p_mw, (int, float)) or isinstance(p_mw, bool):  # null: no reading this step
                continue
            site.p_mw, site.measured_s = float(p_mw), end_s
            excess = outputs[site.eid].get(EXCESS_OUTPUT)
            site.excess_mw = float(excess) if isinstance(excess, (int, float)) and not isinstance(excess, bool) else None
            self._check_facility(site, end_s)
            if site.ramp_state in ("ramping", "holding"):
                change = self._follow(site, end_s, step_s)
                if change is not False:
                    changes[site.eid] = change
        return changes

    def _follow(self, site: Site, end_s: float, step_s: float) -> float | None | bool:
        target = site.target
        site.met = site.p_mw <= target.target_p_mw + target.tolerance_mw()
        if site.ramp_state == "ramping" and end_s >= target.ramp_end_s - 1e-9:
            site.ramp_state = "holding"
            self._emit(site, "ramp_end", end_s, met=site.met)
        if site.ramp_state == "holding":
            if not site.met and not site.breached:
                site.breached = True
                self._emit(site, "target_not_met", end_s, shortfall_mw=site.p_mw - target.target_p_mw)
            elif site.met and site.breached:
                site.breached = False
                self._emit(site, "target_met", end_s)
        if end_s >= target.end_s - 1e-9:
            self._end(site, end_s, "hold over")
            return None
        limit = target.limit_mw(end_s, step_s)
        if limit == site.limit_mw:
            return False
        site.limit_mw = limit
        return limit

    def _check_facility(self, site: Site, end_s: float) -> None:
        if not math.isfinite(site.facility_limit_mw):
            return
        reached = site.p_mw >= site.facility_limit_mw - MET_TOLERANCE_MIN_MW
        if reached and not site.at_facility_limit:
            self._emit(site, "facility_limit_reached", end_s, facility_limit_mw=site.facility_limit_mw)
        site.at_facility_limit = reached

    def _end(self, site: Site, now_s: float, reason: str) -> None:
        site.ramp_state, site.limit_mw = "released", None
        self._emit(site, "target_released", now_s, reason=reason)

    def _emit(self, site: Site, kind: str, time_s: float, **details: Any) -> None:
        self.n_events += 1
        target = site.target
        self.events.append({"seq": self.n_events, "event": kind, "site": site.eid, "time_s": time_s,
                            "p_mw": site.p_mw, "target_p_mw": None if target is None else target.target_p_mw,
                            **details})
        del self.events[:-MAX_EVENTS]

    # -- reading -------------------------------------------------------------------------------
    def status(self, eid: str) -> dict[str, Any]:
        """The site's measured draw, its target and ramp state, its facility limit, met or not."""
        site = self.site(eid)
        target = site.target
        return {
            "site": eid, "p_mw": site.p_mw, "measured_at_s": site.measured_s,
            "range_mw": [site.low_mw, site.high_mw],
            "facility_limit_mw": site.facility_limit_mw if math.isfinite(site.facility_limit_mw) else None,
            "at_facility_limit": site.at_facility_limit,
            "ramp_state": site.ramp_state, "p_limit_mw": site.limit_mw, "p_limit_excess_mw": site.excess_mw,
            "target": None if target is None else {
                "target_p_mw": target.target_p_mw, "ramp_mw_per_min": target.ramp_mw_per_min,
                "hold_s": target.hold_s, "start_p_mw": target.start_p_mw, "start_s": target.start_s,
                "ramp_end_s": target.ramp_end_s, "end_s": None if target.hold_s is None else target.end_s,
                "tolerance_mw": target.tolerance_mw()},
            "met": site.met if site.ramp_state in ("ramping", "holding") else None,
        }

    def events_after(self, eid: str, seq: int) -> list[dict[str, Any]]:
        """The site's events with a sequence number above ``seq``, oldest first."""
        return [e for e in self.events if e["seq"] > seq and e["site"] == eid]


def _number(value: Any) -> bool:
    """A finite JSON number (an int past float's range is none)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
