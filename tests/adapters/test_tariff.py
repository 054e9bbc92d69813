"""Tariff: period matching in local time, outputs, and a bill computed by hand."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone, tzinfo

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from cosim.adapters.tariff import SimParams, Tariff, TariffSim
from cosim.kpis import accounting
from cosim.roles import RunRoles

TOU = {
    "tz": "America/New_York", "default_usd_mwh": 60.0, "export_usd_mwh": 25.0,
    "periods": [
        {"name": "on_peak", "months": [6, 7, 8, 9], "days": "weekdays", "start_h": 14, "end_h": 19,
         "energy_usd_mwh": 140.0},
        {"name": "night", "start_h": 22, "end_h": 6, "energy_usd_mwh": 40.0},
    ],
    "demand_charges": [{"name": "facility", "usd_mw": 5000.0},
                       {"name": "on_peak", "usd_mw": 9000.0, "periods": ["on_peak"]}],
}


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


def test_periods_in_local_time():
    tariff = Tariff(SimParams(**TOU))
    # Monday 2024-07-15: EDT = UTC-4, so 14:00 local is 18:00 UTC
    assert tariff.energy_usd_mwh(_utc("2024-07-15T17:59:00")) == 60.0
    assert tariff.energy_usd_mwh(_utc("2024-07-15T18:00:00")) == 140.0
    assert tariff.energy_usd_mwh(_utc("2024-07-15T22:59:00")) == 140.0
    assert tariff.energy_usd_mwh(_utc("2024-07-15T23:00:00")) == 60.0
    assert tariff.energy_usd_mwh(_utc("2024-07-16T02:00:00")) == 40.0   # 22:00 local: night wraps midnight
    assert tariff.energy_usd_mwh(_utc("2024-07-13T19:00:00")) == 60.0   # Saturday: no on-peak
    assert tariff.energy_usd_mwh(_utc("2024-01-15T19:00:00")) == 60.0   # January: no on-peak
    assert tariff.demand_rates_usd_mw(_utc("2024-07-15T18:30:00")) == {"dc_facility_usd_mw": 5000.0,
                                                                       "dc_on_peak_usd_mw": 9000.0}
    assert tariff.demand_rates_usd_mw(_utc("2024-07-15T12:00:00"))["dc_on_peak_usd_mw"] == 0.0


def test_bill_by_hand():
    """One July weekday (Mon 2024-07-15, local 00:00 = 04:00 UTC) at 1-hour steps, site import
    2 MW all day except 5 MW during 15:00–16:00 local (on-peak) and 6 MW at 23:00 local (night).

    Energy: night hours 22–06 local = 8 h, of which 7 h at 2 MW and 1 h at 6 MW:
    (7·2 + 6)·40 = 800; on-peak 14–19 = 5 h: (4·2 + 5)·140 = 1820; the other 11 h at 60:
    11·2·60 = 1320. Total 3940 $.
    Demand: facility peak 6 MW × 5000 = 30 000; on-peak peak 5 MW × 9000 = 45 000. Total 78 940 $.
    """
    start = "2024-07-15T04:00:00+00:00"
    sim = TariffSim()
    sim.init("tariff", time_resolution=1.0, start_utc=start, step_s=3600, duration_s=86_400, seed=0,
             **SimParams(**TOU).model_dump(mode="json"))
    sim.create(1, "Tariff", eid="tou")
    rows = []
    for t in range(0, 86_400, 3600):
        sim.step(t, {}, 86_400)
        rows.append(dict(sim.get_data({"tou": list(sim.meta["models"]["Tariff"]["outputs"])})["tou"]))
    index = pd.date_range(start, periods=24, freq="1h")
    ts = pd.DataFrame(rows, index=index).add_prefix("tou.")
    load = np.full(24, 2.0)
    load[15] = 5.0   # 15:00 local
    load[23] = 6.0   # 23:00 local
    ts["campus.p_mw"] = load
    kpis = accounting.compute(ts, RunRoles({"campus": "it"}), 3600, demand_interval_s=3600)
    assert kpis["cost"]["energy_usd"] == pytest.approx(3940.0)
    assert kpis["cost"]["demand"]["tou.dc_facility_usd_mw@2024-07"]["charge_usd"] == pytest.approx(30_000.0)
    assert kpis["cost"]["demand"]["tou.dc_on_peak_usd_mw@2024-07"]["charge_usd"] == pytest.approx(45_000.0)
    assert kpis["cost"]["total_usd"] == pytest.approx(78_940.0)


def test_bad_tariffs_are_refused_with_the_place():
    with pytest.raises(ValidationError, match="unknown period"):
        SimParams(**{**TOU, "demand_charges": [{"name": "x", "usd_mw": 1.0, "periods": ["peak"]}]})
    with pytest.raises(ValidationError, match="IANA"):
        SimParams(**{**TOU, "tz": "Eastern"})
    with pytest.raises(ValidationError, match="months"):
        SimParams(**{**TOU, "periods": [{"name": "p", "months": [13], "energy_usd_mwh": 1.0}]})
    with pytest.raises(ValidationError, match="lower case"):
        SimParams(**{**TOU, "periods": [{"name": "On Peak", "energy_usd_mwh": 1.0}], "demand_charges": []})


def test_meta_lists_one_rate_per_demand_charge():
    meta = TariffSim.meta_for(SimParams(**TOU))
    assert meta["models"]["Tariff"]["outputs"] == ["price_usd_mwh", "export_price_usd_mwh",
                                                   "dc_facility_usd_mw", "dc_on_peak_usd_mw"]


# -- the price-file route and the grid-signal data ------------------------------------------
from pathlib import Path  # noqa: E402

from cosim.adapters.signals import ColumnSpec, DataError, SeriesOptions, TimeSeries  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "scenarios" / "data"


def test_example_price_file_reads_through_signals_with_unit_conversion():
    series = TimeSeries(DATA / "tariffs/example_hourly_prices_usd_kwh.csv",
                        {"price_usd_mwh": ColumnSpec(column="price_usd_kwh", from_unit="usd/kWh")},
                        SeriesOptions(repeat=True))
    assert series.at(_utc("2024-07-20T21:30:00"))["price_usd_mwh"] == pytest.approx(155.0)  # 17:30 EDT


@pytest.mark.parametrize("body, message", [
    ("time_utc,price_usd_mwh\n2024-07-15T00:00Z,50\n2024-07-15T01:00Z,abc\n",
     r"prices.csv: column 'price_usd_mwh' is not numeric \('abc' in data row 2 \(line 3 of a CSV\)\)"),
    ("time_utc,price_usd_mwh\n2024-07-15T00:00Z,50\nnoon,60\n", r"prices.csv: timestamp 'noon' in data row 2 \(line 3 of a CSV\) is not ISO 8601"),
    ("time_utc,price_usd_mwh\n2024-07-15T01:00Z,50\n2024-07-15T00:00Z,60\n", r"prices.csv: timestamps must increase strictly; data row 2 \(line 3 of a CSV\)"),
    ("when,price_usd_mwh\n2024-07-15T00:00Z,50\n2024-07-15T01:00Z,60\n", "prices.csv: no time column 'time_utc'"),
    ("time_utc,usd\n2024-07-15T00:00Z,50\n2024-07-15T01:00Z,60\n", "prices.csv: no column 'price_usd_mwh'; available: usd"),
])
def test_malformed_price_files_name_file_row_and_column(tmp_path, body, message):
    """The signals adapter's errors for a bad price file (rows count from 0 after the header)."""
    path = tmp_path / "prices.csv"
    path.write_text(body)
    with pytest.raises(DataError, match=message):
        TimeSeries(path, {"price_usd_mwh": "price_usd_mwh"}, SeriesOptions())


@pytest.mark.parametrize("ba, mean_ci", [("CISO", 256), ("PJM", 363), ("ERCO", 347), ("BPAT", 55)])
def test_eia930_extract_keeps_the_source_average(ba, mean_ci):
    """Annual mean of the average intensity equals the source README's table (SustainDC/EIA-930);
    shares are fractions; the marginal estimate stays within the fuel-factor range."""
    series = TimeSeries(DATA / f"eia930/{ba}_2022.csv.gz",
                        {"ci_g_kwh": "ci_lifecycle_g_kwh", "mef_g_kwh": "mef_lifecycle_g_kwh", "cfe_frac": "cfe_frac"},
                        SeriesOptions())
    ci, mef, cfe = series.values.T
    assert ci.mean() == pytest.approx(mean_ci, abs=0.5)
    assert ((cfe >= 0) & (cfe <= 1)).all()
    assert ((mef >= 11) & (mef <= 820)).all()


def test_forecast_reads_each_output_ahead_as_outputs_does():
    """``TariffSim.forecast`` of every output (and of an unknown name: None) equals ``outputs``
    looked up at each lead, across DST's end, a weekend and the on-peak and night edges (the
    same hours of a Monday, then of a Saturday: what the sim remembers per local hour)."""
    sim = TariffSim()
    sim.init("tariff", time_resolution=1.0, start_utc="2024-07-15T04:00:00+00:00", step_s=3600,
             duration_s=86_400, seed=0, **SimParams(**TOU).model_dump(mode="json"))
    sim.create(1, "Tariff", eid="tou")
    attrs = sim.meta["models"]["Tariff"]["outputs"]
    assert set(attrs) == set(sim.tariff.outputs(_utc("2024-07-15T18:00:00")))
    prices: set[float] = set()
    for start, n, step_s in [("2024-07-15T17:00:00", 8, 1800), ("2024-07-13T17:00:00", 8, 1800),
                             ("2024-11-02T20:00:00", 30, 3600),
                             ("2024-07-12T21:45:00", 12, 900), ("2024-07-15T01:59:59", 3, 1),
                             ("2024-11-03T05:59:58.250", 9, 0.75),  # a fractional step, at DST's end
                             ("2024-07-15T00:00:00", 0, 60)]:
        for attr in attrs:
            got = sim.forecast(attr, _utc(start), n, step_s)
            expected = [float(sim.tariff.outputs(_utc(start) + timedelta(seconds=k * step_s))[attr]) for k in range(n)]
            assert got == expected and all(type(v) is float for v in got), (attr, start)
        prices.update(sim.forecast("price_usd_mwh", _utc(start), n, step_s))
    assert prices == {40.0, 60.0, 140.0}  # the windows meet every period
    assert sim.forecast("p_mw", _utc("2024-07-15T17:00:00"), 6, 3600) is None


@pytest.mark.parametrize("tz, start, step_s, tick_s, hours", [
    ("America/New_York", "2024-11-03T03:17:00+00:00", 300, 1.0, 6),   # DST ends: 01:00-02:00 twice
    ("America/New_York", "2024-03-10T05:00:00+00:00", 420, 1.0, 5),   # DST starts: no 02:00 hour
    ("Australia/Lord_Howe", "2024-04-06T13:00:00+00:00", 450, 1.0, 3),  # a 30-minute shift, at 01:30 local
    ("Australia/Lord_Howe", "2024-10-05T14:00:00+00:00", 600, 1.0, 3),
    ("Asia/Kolkata", "2024-07-15T00:00:07+00:00", 900, 1.0, 4),        # +05:30: hours start at :30 UTC
    ("Europe/London", "2024-10-27T00:00:00+00:00", 7.5, 0.5, 3),       # sub-second ticks
    ("UTC", "2024-07-15T13:59:59.250000+00:00", 0.25, 0.25, 0.01),     # a start off the whole second
])
def test_steps_give_the_outputs_of_their_own_time(tz, start, step_s, tick_s, hours):
    """Each step's outputs are ``Tariff.outputs`` of its own time, although the sim looks them up
    once per local hour: across DST's start and end, a 30-minute shift (Lord Howe Island) and a
    30-minute zone, at sub-second ticks and from a start off the second (a period per hour: the
    price changes at every local hour). Control: it looks up once per local hour it steps in (a
    repeated hour at DST's end twice), so the steps between are served from the cache."""
    periods = [{"name": f"h{h}", "start_h": h, "end_h": h + 1, "energy_usd_mwh": 100.0 + h} for h in range(24)]
    params = SimParams(tz=tz, default_usd_mwh=1.0, periods=periods,
                       demand_charges=[{"name": "noon", "usd_mw": 7.0, "periods": ["h12"]}])
    sim = TariffSim()
    ticks = round(1 / tick_s)
    duration_s = hours * 3600
    sim.init("tariff", time_resolution=tick_s, start_utc=start, step_s=step_s, duration_s=duration_s, seed=0,
             **params.model_dump(mode="json"))
    sim.create(1, "Tariff", eid="tou")
    lookups = []
    found = sim._outputs_at
    sim._outputs_at = lambda when: lookups.append(when) or found(when)
    tariff, local_hours = Tariff(params), set()
    for k in range(int(duration_s / step_s)):
        t = round(k * step_s * ticks)
        sim.step(t, {}, duration_s * ticks)
        when = _utc(start[:-6]) + timedelta(seconds=t / ticks)
        expected = tariff.outputs(when)
        assert sim.get_data({"tou": list(expected)})["tou"] == expected, (k, t)
        local = when.astimezone(tariff.zone)
        local_hours.add((local.date(), local.hour, local.utcoffset()))
    assert len(lookups) == len(local_hours) < int(duration_s / step_s)


class _ShiftMidHour(tzinfo):
    """UTC until 12:10 UTC on 15 July 2024, +00:20 after: an offset change inside a local hour."""

    AT = datetime(2024, 7, 15, 12, 10, tzinfo=timezone.utc)

    def utcoffset(self, dt):
        return timedelta(minutes=20) if dt.replace(tzinfo=None) >= self.AT.replace(tzinfo=None) + (
            timedelta(minutes=20) if dt.tzinfo is self else timedelta()) else timedelta()

    def fromutc(self, dt):
        return dt + (timedelta(minutes=20) if dt.replace(tzinfo=None) >= self.AT.replace(tzinfo=None) else timedelta())

    def dst(self, dt):
        return timedelta()


def test_an_hour_whose_offset_changes_inside_it_is_looked_up_step_by_step():
    """A zone whose offset changes inside a local hour (none in today's database does; older
    rules and a future one may): that hour is looked up at every step, and each step still gets
    the outputs of its own time. Control: the steps of the other hours are served from the
    cache."""
    periods = [{"name": f"h{h}", "start_h": h, "end_h": h + 1, "energy_usd_mwh": 100.0 + h} for h in range(24)]
    params = SimParams(default_usd_mwh=1.0, periods=periods)
    sim = TariffSim()
    sim.init("tariff", time_resolution=1.0, start_utc="2024-07-15T11:00:00+00:00", step_s=300, duration_s=3 * 3600,
             seed=0, **params.model_dump(mode="json"))
    sim.create(1, "Tariff", eid="tou")
    tariff = Tariff(params)
    sim.tariff.zone = tariff.zone = _ShiftMidHour()
    lookups = []
    found = sim._outputs_at
    sim._outputs_at = lambda when: lookups.append(when) or found(when)
    for t in range(0, 3 * 3600, 300):
        sim.step(t, {}, 3 * 3600)
        expected = tariff.outputs(_utc("2024-07-15T11:00:00") + timedelta(seconds=t))
        assert sim.get_data({"tou": ["price_usd_mwh"]})["tou"]["price_usd_mwh"] == expected["price_usd_mwh"], t
    # 11:00-12:00 once; 12:00-12:10 UTC (12:xx local, offset changing at 12:10) step by step: 2 steps;
    # from 12:10 UTC (12:30 local) once per local hour: 12:30-13:00, 13:00-14:00 (12:40-13:40 UTC), 13:40-14:00
    assert [w.strftime("%H:%M") for w in lookups] == ["11:00", "12:00", "12:05", "12:10", "12:40", "13:40"]


@pytest.mark.parametrize("tz", ["America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu", "America/St_Johns"])
def test_forecasts_are_outputs_of_each_lead_in_any_zone(tz):
    """Forecasts equal ``Tariff.outputs`` at each lead in zones whose offsets are whole hours, half
    and three-quarter hours (Kathmandu +05:45), with DST shifts of an hour and of 30 minutes, over
    days drawn across 2024 and 1880 (local mean time, offsets with seconds), whole-second and odd
    steps, a start off the second. Control: the leads meet more than one price."""
    periods = [{"name": f"h{h}", "start_h": h, "end_h": h + 1, "energy_usd_mwh": 100.0 + h} for h in range(24)]
    params = SimParams(tz=tz, default_usd_mwh=1.0, periods=periods,
                       demand_charges=[{"name": "noon", "usd_mw": 7.0, "periods": ["h12"]}])
    sim = TariffSim()
    sim.init("tariff", time_resolution=1.0, start_utc="2024-01-01T00:00:00Z", step_s=60, duration_s=86_400, seed=0,
             **params.model_dump(mode="json"))
    sim.create(1, "Tariff", eid="tou")
    tariff = Tariff(params)
    rng = np.random.default_rng(5)
    prices: set[float] = set()
    for year in (2024, 1880):
        starts = [datetime(year, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=int(s))
                  for s in rng.integers(0, 365 * 86_400, 60)]
        starts += [datetime(year, 3, 10, 6, 59, 59, 250_000, tzinfo=timezone.utc)]  # off the second
        for start in starts:
            for n, step_s in ((8, 900), (6, 3600), (4, 7), (3, 0.75)):
                for attr in ("price_usd_mwh", "dc_noon_usd_mw"):
                    expected = [float(tariff.outputs(start + timedelta(seconds=k * step_s))[attr]) for k in range(n)]
                    assert sim.forecast(attr, start, n, step_s) == expected, (start, n, step_s, attr)
                    prices.update(expected)
    assert len(prices) > 10
