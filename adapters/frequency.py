"""System frequency of one balancing area: aggregated swing equation, governors, optional AGC.

The linearised single-area model of Kundur (*Power System Stability and Control*, 1994, ch. 11
and 12) and Anderson & Mirheydar ("A low-order system frequency response model", IEEE Trans.
Power Systems 5(3):720-729, 1990), per unit on the area's base ``s_base_mw`` (Δf in pu of
``f_nominal_hz``, powers in pu of ``s_base_mw``)::

    2H dΔf/dt = ΔPm − ΔPe − D Δf                          swing equation, load damping D
    ΔPe       = n_sites (p_mw − p_mw(0)) + p_gen_lost_mw  the net power change seen by the area
    governor  : (1 + s T_gov) ΔPv = ΔPref − db(Δf) / R   droop R, deadband db (the preset's)
    turbine   : (1 + s T_ch)  ΔPch = ΔPv;  reheat (1 + s T_rh) ΔPrh = ΔPch
                ΔPm = F_hp ΔPch + (1 − F_hp) ΔPrh      (non-reheat when ``t_reheat_s`` = 0)
    AGC       : dΔPref/dt = −K_i β Δf,  β = D + 1/R     (off when ``agc_ki_per_s`` = 0)

A time constant of 0 drops its lag. ``reserve_mw`` (optional) caps the governors' response
(headroom of the units on primary control). For a load step ΔP (pu) the primary-control
settling deviation is ``Δf_ss = −ΔP / (D + 1/R)`` (β, the area frequency response
characteristic) and the initial RoCoF ``−ΔP f0 / (2H)``; with one lumped lag the nadir has a
closed form (Anderson & Mirheydar 1990; derived in ``/work/notes/frequency.md`` §1.4), which
``tests/adapters/test_frequency.py`` checks.

Inputs (summed over connections): ``p_mw``, the consumer-sign power of everything connected to
the area (datacenters, loads, batteries: a battery discharging is negative); its value at the
first step is the balanced operating point. ``p_gen_lost_mw``: generation tripped (positive MW
lost), e.g. from a signals file; the entity param ``gen_trips = [[t_s, mw], ...]`` adds
scheduled trips. ``n_sites`` lets one modelled site stand for several alike sites.

Outputs at time t describe the area at t: ``f_hz`` (the state at t; frequency is continuous),
``rocof_hz_s`` (df/dt just after the inputs of t apply), ``f_nadir_hz`` / ``f_zenith_hz``
(lowest / highest frequency since the start, over the internal sub-steps), ``p_mech_mw``
(the generation's response ΔPm, governors and AGC), ``p_agc_mw`` (the AGC's reference shift)
and ``p_imbalance_mw`` (ΔPe in MW). Internally each step
is integrated with classic Runge-Kutta at sub-steps of at most ``dt_max_s`` (10 ms), so the
result does not depend on the scenario's step (inputs are held over a step).

Presets (``preset``; every value can be overridden). Each carries the governor deadband its
interconnection asks of its units (``deadband_hz``; 0 gives the linear model):

* ``ercot`` (60 Hz): base 60 GW online; frequency response β = 750 MW/0.1 Hz (ERCOT bias of
  739-764 MW/0.1 Hz, Power Operations Bulletin #779, c. 2016) split into load damping D = 1
  and governors 1/R = 6.5 on the system base (R ≈ 0.154: about a third of the online fleet on a
  5 % droop); H = 4 s (240 GW·s, inside the ~130-300 GW·s ERCOT reports, *from memory*; see the
  notes); governor 0.2 s, reheat steam turbine T_ch 0.3 s, F_hp 0.3, T_rh 7 s (Kundur's typical
  values). Deadband ±16.6 mHz (NERC BAL-001-TRE-2: at most ±0.0166 Hz for units other than
  mechanical-governor steam and hydro units).
* ``eastern`` (Eastern Interconnection-like, a summer evening): base 550 GW online (EI peak
  demand is ~600-700 GW); H = 4 s (2,200 GW·s); β = 2,500 MW/0.1 Hz (NERC's measured EI
  frequency response has run ~2,000-3,000 MW/0.1 Hz in its Frequency Response Annual Analyses
  against an obligation near 1,000 MW/0.1 Hz; *from memory*, our pick inside it) → D = 1,
  1/R = 1.727 on the base; deadband ±36 mHz (FERC Order 842, 2018: new units' primary frequency
  response deadband at most ±0.036 Hz; NERC's Primary Frequency Control guideline says the same).
* ``western`` (Western Interconnection-like): base 150 GW online; H = 4 s (600 GW·s);
  β = 1,500 MW/0.1 Hz (measured WI frequency response ~1,300-2,000 MW/0.1 Hz, same reports,
  *from memory*) → D = 1, 1/R = 5; deadband ±36 mHz (FERC Order 842).
* ``europe_50hz`` (Continental Europe-like): base 300 GW; H = 5 s; load self-regulation 1 %/Hz
  → D = 0.5; primary control 3,000 MW fully at 200 mHz (15 GW/Hz) → 1/R = 2.5; the same
  governor/turbine constants; deadband ±10 mHz (ENTSO-E: FCR insensitivity and dead band
  together at most ±10 mHz). The 3,000 MW reference incident then settles at −175 mHz
  (−167 mHz in the linear model, ``deadband_hz = 0``).

With a deadband db the primary-control settling deviation of a step ΔP (pu) beyond it is
``Δf_ss = −(ΔP + db/R) / (D + 1/R)`` (pu; the governors answer only ``|Δf| − db``).
These are illustrative aggregate values for studies, not calibrated system models.

Example ``[entities]`` entry::

    area = { sim = "freq", model = "Area", preset = "ercot", gen_trips = [[10.0, 1500.0]] }
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from cosim.sdk import Params, SingleModelSim, as_tuple

OUTPUTS = ("f_hz", "f_dev_hz", "rocof_hz_s", "f_nadir_hz", "f_zenith_hz", "p_mech_mw", "p_agc_mw",
           "p_imbalance_mw")
INPUTS = ("p_mw", "p_gen_lost_mw")

#: preset -> defaults (see the module docstring for the sources)
_STEAM = {"f_nominal_hz": 60.0, "t_gov_s": 0.2, "t_ch_s": 0.3, "f_hp_frac": 0.3, "t_reheat_s": 7.0}
PRESETS: dict[str, dict[str, float]] = {
    "ercot": {**_STEAM, "s_base_mw": 60_000.0, "h_s": 4.0, "d_pu": 1.0, "r_pu": 1.0 / 6.5,
              "deadband_hz": 0.0166},
    # β 25,000 MW/Hz on 550 GW at 60 Hz: 25,000 * 60 / 550,000 = 2.727 pu = D 1 + 1/R 1.727
    "eastern": {**_STEAM, "s_base_mw": 550_000.0, "h_s": 4.0, "d_pu": 1.0, "r_pu": 550_000.0 / (25_000.0 * 60.0 - 550_000.0),
                "deadband_hz": 0.036},
    # β 15,000 MW/Hz on 150 GW: 6 pu = D 1 + 1/R 5
    "western": {**_STEAM, "s_base_mw": 150_000.0, "h_s": 4.0, "d_pu": 1.0, "r_pu": 0.2, "deadband_hz": 0.036},
    "europe_50hz": {**_STEAM, "f_nominal_hz": 50.0, "s_base_mw": 300_000.0, "h_s": 5.0, "d_pu": 0.5, "r_pu": 0.4,
                    "deadband_hz": 0.010},
}


def _pairs(value: Any) -> Any:
    """A TOML array of ``[t_s, mw]`` arrays as a tuple of tuples."""
    return tuple(as_tuple(v) for v in value) if isinstance(value, list) else value


class AreaParams(Params):
    """Params of one balancing ``Area`` (None: the preset's value).

    Attributes:
        preset: ``ercot``, ``eastern``, ``western`` or ``europe_50hz`` (module docstring).
        f_nominal_hz: nominal frequency. [Hz]
        s_base_mw: the area's base (online generation). [MW]
        h_s: aggregate inertia constant on the base. [s]
        d_pu: load damping, pu power per pu frequency. [-]
        r_pu: governor droop on the base (effective, all units on primary control). [-]
        t_gov_s, t_ch_s: governor and steam-chest (turbine) time constants; 0 drops the lag. [s]
        f_hp_frac: high-pressure share of the turbine power (reheat units). [-]
        t_reheat_s: reheater time constant; 0 is a non-reheat turbine. [s]
        agc_ki_per_s: AGC integral gain on the ACE β Δf; 0 is off. [1/s]
        deadband_hz: governor deadband (no-step); None: the preset's, 0 for the linear model. [Hz]
        reserve_mw: largest governor response either way; None: unlimited. [MW]
        gen_trips: ``[[t_s, p_mw], ...]``: generation lost at t_s (negative: generation added). [s, MW]
        n_sites: alike sites the connected ``p_mw`` stands for. [-]
        p_ref_mw: the balanced operating point of ``p_mw``; None: its value at the first step. [MW]
        dt_max_s: largest internal integration step. [s]
    """

    preset: Literal["ercot", "eastern", "western", "europe_50hz"] = "ercot"
    f_nominal_hz: float | None = Field(default=None, gt=0)
    s_base_mw: float | None = Field(default=None, gt=0)
    h_s: float | None = Field(default=None, gt=0)
    d_pu: float | None = Field(default=None, ge=0)
    r_pu: float | None = Field(default=None, gt=0)
    t_gov_s: float | None = Field(default=None, ge=0)
    t_ch_s: float | None = Field(default=None, ge=0)
    f_hp_frac: float | None = Field(default=None, ge=0, le=1)
    t_reheat_s: float | None = Field(default=None, ge=0)
    agc_ki_per_s: float = Field(default=0.0, ge=0)
    deadband_hz: float | None = Field(default=None, ge=0)
    reserve_mw: float | None = Field(default=None, gt=0)
    gen_trips: Annotated[tuple[tuple[float, float], ...], BeforeValidator(_pairs)] = ()
    n_sites: float = Field(default=1.0, gt=0)
    p_ref_mw: float | None = None
    dt_max_s: float = Field(default=0.01, gt=0, le=1.0)

    @model_validator(mode="after")
    def _preset(self):
        for key, value in PRESETS[self.preset].items():
            if getattr(self, key) is None:
                object.__setattr__(self, key, value)
        for t_s, _p in self.gen_trips:
            if t_s < 0:
                raise ValueError(f"gen_trips: a trip at t_s = {t_s} is before the start; give t_s >= 0")
        return self


class Area:
    """The area's state and its integration (plain Python, no mosaik)."""

    def __init__(self, p: AreaParams):
        self.p = p
        self.beta_pu = p.d_pu + 1.0 / p.r_pu
        self.x = [0.0, 0.0, 0.0, 0.0, 0.0]  # Δf, ΔPv, ΔPch, ΔPrh, ΔPref (pu)
        self.time_s = 0.0
        self.f_min_hz = self.f_max_hz = p.f_nominal_hz
        self.p_ref_mw = p.p_ref_mw
        self.reserve_pu = p.reserve_mw / p.s_base_mw if p.reserve_mw is not None else math.inf

    # -- the model -------------------------------------------------------------------------
    def _deadband(self, df_pu: float) -> float:
        db = self.p.deadband_hz / self.p.f_nominal_hz
        return math.copysign(max(abs(df_pu) - db, 0.0), df_pu)

    def _algebraic(self, x: list[float]) -> tuple[float, float, float, float]:
        """``(ΔPv, ΔPch, ΔPm, governor input)`` with the zero-lag stages resolved. [pu]"""
        p = self.p
        u = x[4] - self._deadband(x[0]) / p.r_pu
        u = min(max(u, -self.reserve_pu), self.reserve_pu)
        pv = x[1] if p.t_gov_s > 0 else u
        pch = x[2] if p.t_ch_s > 0 else pv
        pm = p.f_hp_frac * pch + (1.0 - p.f_hp_frac) * x[3] if p.t_reheat_s > 0 else pch
        return pv, pch, pm, u

    def derivative(self, x: list[float], pe_pu: float) -> list[float]:
        p = self.p
        pv, pch, pm, u = self._algebraic(x)
        return [(pm - pe_pu - p.d_pu * x[0]) / (2.0 * p.h_s),
                (u - x[1]) / p.t_gov_s if p.t_gov_s > 0 else 0.0,
                (pv - x[2]) / p.t_ch_s if p.t_ch_s > 0 else 0.0,
                (pch - x[3]) / p.t_reheat_s if p.t_reheat_s > 0 else 0.0,
                -p.agc_ki_per_s * self.beta_pu * x[0]]

    def _rk4(self, dt: float, pe_pu: float) -> None:
        x = self.x
        k1 = self.derivative(x, pe_pu)
        k2 = self.derivative([a + 0.5 * dt * b for a, b in zip(x, k1)], pe_pu)
        k3 = self.derivative([a + 0.5 * dt * b for a, b in zip(x, k2)], pe_pu)
        k4 = self.derivative([a + dt * b for a, b in zip(x, k3)], pe_pu)
        self.x = [a + dt / 6.0 * (b + 2 * c + 2 * d + e) for a, b, c, d, e in zip(x, k1, k2, k3, k4)]

    def _track(self) -> None:
        f = self.f_hz
        self.f_min_hz, self.f_max_hz = min(self.f_min_hz, f), max(self.f_max_hz, f)

    # -- stepping --------------------------------------------------------------------------
    @property
    def f_hz(self) -> float:
        return self.p.f_nominal_hz * (1.0 + self.x[0])

    def imbalance_mw(self, time_s: float, p_mw: float, p_gen_lost_mw: float) -> float:
        """ΔPe at ``time_s``: load change times ``n_sites`` plus generation lost. [MW]"""
        if self.p_ref_mw is None:
            self.p_ref_mw = p_mw
        tripped = sum(mw for t_s, mw in self.p.gen_trips if t_s <= time_s + 1e-9)
        return self.p.n_sites * (p_mw - self.p_ref_mw) + p_gen_lost_mw + tripped

    def step(self, time_s: float, dt_s: float, p_mw: float, p_gen_lost_mw: float) -> dict[str, float]:
        """Outputs at ``time_s`` and the state advanced over ``[time_s, time_s + dt_s)``."""
        p = self.p
        pe_mw = self.imbalance_mw(time_s, p_mw, p_gen_lost_mw)
        pe_pu = pe_mw / p.s_base_mw
        _pv, _pch, pm, _u = self._algebraic(self.x)
        out = {"f_hz": self.f_hz, "f_dev_hz": self.x[0] * p.f_nominal_hz,
               "rocof_hz_s": self.derivative(self.x, pe_pu)[0] * p.f_nominal_hz,
               "f_nadir_hz": self.f_min_hz, "f_zenith_hz": self.f_max_hz,
               "p_mech_mw": pm * p.s_base_mw,
               "p_agc_mw": self.x[4] * p.s_base_mw, "p_imbalance_mw": pe_mw}
        self.advance(time_s, dt_s, pe_pu)
        return out

    def advance(self, start_s: float, dt_s: float, pe_pu: float) -> None:
        """Integrate ``[start_s, start_s + dt_s)`` at the imbalance ``pe_pu``, in sub-steps of at
        most ``dt_max_s``; a scheduled trip inside the step starts a sub-step at its time."""
        p = self.p
        inside = sorted(t for t, _ in p.gen_trips if start_s + 1e-9 < t < start_s + dt_s - 1e-9)
        bounds = [start_s, *inside, start_s + dt_s]
        for a, b in zip(bounds, bounds[1:]):
            later_mw = sum(mw for t_s, mw in p.gen_trips if start_s + 1e-9 < t_s <= a + 1e-9)
            pe = pe_pu + later_mw / p.s_base_mw
            n = max(1, math.ceil((b - a) / p.dt_max_s - 1e-9))
            for _ in range(n):
                self._rk4((b - a) / n, pe)
                self._track()
        self.time_s = start_s + dt_s


class FrequencySim(SingleModelSim):
    """Balancing areas (model ``Area``); each step integrates the swing equation over the step."""

    MODEL, PARAMS, ROLE, PHYSICS = "Area", AreaParams, "other", Area
    INPUTS, OUTPUTS = INPUTS, OUTPUTS
    EXAMPLE = {"models": {"Area": {"preset": "ercot", "gen_trips": [[2.0, 1000.0]]}}}

    def advance(self, area: Area, time_s: float, inputs: dict[str, Any]) -> dict[str, float]:
        return area.step(float(time_s), float(self.step_s), float(inputs.get("p_mw", 0.0)),
                         float(inputs.get("p_gen_lost_mw", 0.0)))
