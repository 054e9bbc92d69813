"""Tariff: a time-of-use electricity tariff declared in the scenario (energy and demand charges).

The tariff is the simulator's params; its one model ``Tariff`` (no params) reports, at
every step, the energy price of the period in force (``price_usd_mwh``), the export
credit (``export_price_usd_mwh``) and, for each demand charge ``<name>``, its rate where
it applies and 0 elsewhere (``dc_<name>_usd_mw``, USD per MW of billed demand per billing
month). ``cosim.accounting`` turns these into the bill: energy charges step by step,
demand charges on the highest 15-minute average import of each month where each applies.

Periods are matched in local time (``tz``) in the order listed; the first that matches
(month, day type, hour window) sets the price, otherwise ``default_usd_mwh`` applies.
Holidays are not modelled (a holiday is priced as its weekday).

A price CSV (day-ahead or real-time prices) needs no code: read it with the ``signals``
adapter and name the column ``price_usd_mwh`` (``from_unit = "usd/kWh"`` converts).

Example (a summer TOU with an on-peak demand charge; ``[[sims.tariff.periods]]`` tables)::

    [sims.tariff]
    adapter = "tariff"
    tz = "America/New_York"
    default_usd_mwh = 65.0

    [[sims.tariff.periods]]
    name = "on_peak"
    months = [6, 7, 8, 9]
    days = "weekdays"
    start_h = 14
    end_h = 19
    energy_usd_mwh = 140.0

    [[sims.tariff.demand_charges]]
    name = "on_peak"
    usd_mw = 9_000.0          # 9 $/kW-month
    periods = ["on_peak"]
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field, field_validator, model_validator

from cosim.sdk import Params, SingleModelSim, TimeZone

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def _check_name(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"name {name!r} must be lower case letters, digits and _ (e.g. on_peak)")
    return name


class Period(Params):
    """One time-of-use period.

    Attributes:
        name: identifier, lower case ``[a-z0-9_]``.
        months: months it applies in, 1–12 (all when empty).
        days: ``all``, ``weekdays`` (Mon–Fri) or ``weekends``.
        start_h, end_h: local hour window ``[start_h, end_h)``; ``start_h > end_h`` wraps
            past midnight; ``0, 24`` is the whole day. [h]
        energy_usd_mwh: energy price in the period. [USD/MWh]
    """

    name: str
    months: list[int] = Field(default_factory=list)
    days: Literal["all", "weekdays", "weekends"] = "all"
    start_h: int = Field(default=0, ge=0, le=24)
    end_h: int = Field(default=24, ge=0, le=24)
    energy_usd_mwh: float

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        return _check_name(name)

    @field_validator("months")
    @classmethod
    def _months(cls, months: list[int]) -> list[int]:
        bad = [m for m in months if not 1 <= m <= 12]
        if bad:
            raise ValueError(f"months {bad} are not in 1..12")
        return months

    def applies(self, local: datetime) -> bool:
        """Whether this period is in force at local time ``local``."""
        if self.months and local.month not in self.months:
            return False
        weekend = local.weekday() >= 5
        if (self.days == "weekdays" and weekend) or (self.days == "weekends" and not weekend):
            return False
        hour = local.hour
        if self.start_h <= self.end_h:
            return self.start_h <= hour < self.end_h
        return hour >= self.start_h or hour < self.end_h


class DemandCharge(Params):
    """A demand charge: rate per MW of the month's highest demand in its periods.

    Attributes:
        name: identifier; the output attribute is ``dc_<name>_usd_mw``.
        usd_mw: rate per MW of billed demand per billing month (1 $/kW-month = 1000). [USD/MW]
        periods: period names where demand counts (all hours when empty).
    """

    name: str
    usd_mw: float = Field(ge=0)
    periods: list[str] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        return _check_name(name)


class SimParams(Params):
    """The tariff (``[sims.<id>]`` keys besides ``adapter``).

    Attributes:
        tz: IANA time zone the periods are written in.
        default_usd_mwh: energy price outside every period. [USD/MWh]
        export_usd_mwh: credit for exported energy. [USD/MWh]
        periods: time-of-use periods, first match wins.
        demand_charges: demand charges.
    """

    tz: TimeZone = "UTC"
    default_usd_mwh: float
    export_usd_mwh: float = 0.0
    periods: list[Period] = Field(default_factory=list)
    demand_charges: list[DemandCharge] = Field(default_factory=list)

    @field_validator("tz")
    @classmethod
    def _tz(cls, tz: str) -> str:
        try:
            ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"tz = {tz!r} is not an IANA time zone (e.g. America/New_York, Etc/GMT+5)") from exc
        return tz

    @model_validator(mode="after")
    def _references(self):
        names = [p.name for p in self.periods]
        if len(set(names)) != len(names):
            raise ValueError(f"period names repeat: {names}")
        charges = [c.name for c in self.demand_charges]
        if len(set(charges)) != len(charges):
            raise ValueError(f"demand charge names repeat: {charges}")
        for charge in self.demand_charges:
            unknown = [p for p in charge.periods if p not in names]
            if unknown:
                raise ValueError(f"demand_charges.{charge.name}.periods: unknown period {unknown}; "
                                 f"known: {', '.join(names) or 'none'}")
        return self


class Tariff:
    """A time-of-use tariff as functions of UTC time (no mosaik).

    Args:
        params: the tariff (:class:`SimParams`).
    """

    def __init__(self, params: SimParams):
        self.p = params
        self.zone = ZoneInfo(params.tz)

    def period_at(self, when: datetime) -> Period | None:
        """The period in force at ``when`` (an aware datetime), or ``None``."""
        local = when.astimezone(self.zone)
        return next((p for p in self.p.periods if p.applies(local)), None)

    def energy_usd_mwh(self, when: datetime) -> float:
        """Energy price at ``when``. [USD/MWh]"""
        period = self.period_at(when)
        return period.energy_usd_mwh if period else self.p.default_usd_mwh

    def demand_rates_usd_mw(self, when: datetime) -> dict[str, float]:
        """``{dc_<name>_usd_mw: rate}`` at ``when``, 0 where a charge does not apply. [USD/MW]"""
        period = self.period_at(when)
        rates = {}
        for charge in self.p.demand_charges:
            applies = not charge.periods or (period is not None and period.name in charge.periods)
            rates[f"dc_{charge.name}_usd_mw"] = charge.usd_mw if applies else 0.0
        return rates

    def outputs(self, when: datetime) -> dict[str, float]:
        return {"price_usd_mwh": self.energy_usd_mwh(when), "export_price_usd_mwh": self.p.export_usd_mwh,
                **self.demand_rates_usd_mw(when)}


class TariffSim(SingleModelSim):
    """Reports the tariff's prices and demand rates at each step (model ``Tariff``)."""

    MODEL, ROLE = "Tariff", "signal"
    OUTPUTS = ("price_usd_mwh", "export_price_usd_mwh")
    SimParams = SimParams
    EXAMPLE = {
        "sim": {
            "tz": "America/New_York", "default_usd_mwh": 60.0,
            "periods": [{"name": "on_peak", "months": [6, 7, 8, 9], "days": "weekdays", "start_h": 14,
                         "end_h": 19, "energy_usd_mwh": 140.0}],
            "demand_charges": [{"name": "on_peak", "usd_mw": 9000.0, "periods": ["on_peak"]}],
        },
        "models": {"Tariff": {}},
    }

    @classmethod
    def meta_for(cls, sim_params: SimParams) -> dict[str, Any]:
        return cls.single_meta(outputs=[*cls.OUTPUTS, *(f"dc_{c.name}_usd_mw" for c in sim_params.demand_charges)])

    def setup(self) -> None:
        super().setup()
        self.tariff = Tariff(self.params)
        #: the keys of :meth:`Tariff.outputs` (what :meth:`forecast` can look ahead)
        self._attrs = frozenset((*self.OUTPUTS, *(f"dc_{c.name}_usd_mw" for c in self.params.demand_charges)))
        self._by_local_hour: dict[tuple[int, int, int], dict[str, float]] = {}  # (_outputs_at)
        #: the outputs of the local hour the last step fell in, and the first tick after it (_step_values)
        self._hour_values: dict[str, float] = {}
        self._hour_start_ticks = self._hour_end_ticks = -1

    def forecast(self, attr: str, start_utc: datetime, n: int, step_s: float) -> list[float] | None:
        """The tariff's ``attr`` at ``start_utc + k * step_s`` for ``k < n`` (it is known ahead)."""
        if attr not in self._attrs:  # the keys of Tariff.outputs, known without computing one
            return None
        if float(step_s).is_integer():  # whole seconds: k steps are exactly k times one step
            step = timedelta(seconds=step_s)
            return [float(self._outputs_at(start_utc + k * step)[attr]) for k in range(n)]
        return [float(self._outputs_at(start_utc + timedelta(seconds=k * step_s))[attr]) for k in range(n)]

    def _outputs_at(self, when: datetime) -> dict[str, float]:
        """``Tariff.outputs(when)``, computed once per local month, weekday and hour: all that
        :meth:`Period.applies` reads of the time, so all the outputs depend on."""
        local = when.astimezone(self.tariff.zone)
        key = (local.month, local.weekday(), local.hour)
        found = self._by_local_hour.get(key)
        if found is None:
            found = self._by_local_hour[key] = self.tariff.outputs(when)
        return found

    def _step_values(self) -> dict[str, float]:
        """:meth:`_outputs_at` of this step's time, looked up once per local hour: a step before the
        tick its local hour ends at takes the outputs of the step that found them (what
        :meth:`Period.applies` reads of the time, the local month, weekday and hour, is the same
        through a local hour while the UTC offset is; the hour is not cached when the offset at its
        last microsecond differs from its start's, and no zone changes its offset twice in an hour)."""
        ticks = self.time_ticks
        if self._hour_end_ticks > ticks >= self._hour_start_ticks:
            return self._hour_values
        when = self.utc(self.seconds(ticks))
        local = when.astimezone(self.tariff.zone)
        values = self._outputs_at(when)
        left_us = 3_600_000_000 - ((local.minute * 60 + local.second) * 1_000_000 + local.microsecond)
        last = (when + timedelta(microseconds=left_us - 1)).astimezone(self.tariff.zone)
        if last.utcoffset() == local.utcoffset():  # one offset through the hour: cache it
            # the ticks k > ticks with (k - ticks) / ticks_per_s seconds < left_us, exactly in integers
            self._hour_start_ticks = ticks
            self._hour_end_ticks = ticks - (-(left_us * self.ticks_per_s) // 1_000_000)
            self._hour_values = values
        return values

    def step_entities(self, time_s: float, inputs: dict[str, dict[str, Any]]) -> None:
        values = self._step_values()  # the same for every entity; each gets its own dict
        for eid in self.entities:
            self.out[eid] = dict(values)
