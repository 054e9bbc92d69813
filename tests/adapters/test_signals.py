"""Tests of the signals adapter and of the weather and carbon extracts it ships with."""

from __future__ import annotations

import importlib.util
import math
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from cosim.sdk import ScenarioContext
from cosim.adapters.signals import ColumnSpec, SignalsSim, SimParams, TimeSeries, read_table

DATA = Path(__file__).resolve().parents[2] / "scenarios" / "data"
SHARED = Path("/work/shared/data")
UTC = timezone.utc


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def write(tmp_path: Path, text: str, name: str = "s.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def series(path: Path, columns: dict, **options) -> TimeSeries:
    params = SimParams.model_validate({"file": str(path), "columns": columns, **options})
    return SignalsSim.make_series(params)


def ctx(start: datetime, duration_s: int, step_s: int = 60) -> ScenarioContext:
    return ScenarioContext(start_utc=start, duration_s=duration_s, step_s=step_s, seed=0)


def make_extracts():
    spec = importlib.util.spec_from_file_location("make_extracts", DATA / "make_extracts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOURLY = "time_utc,x\n2024-01-01T00:00:00Z,0\n2024-01-01T01:00:00Z,10\n2024-01-01T02:00:00Z,40\n"


# -- interpolation ---------------------------------------------------------------------------
def test_hold_keeps_the_last_row_until_the_next(tmp_path):
    ts = series(write(tmp_path, HOURLY), {"x_mw": "x"})
    assert ts.at(utc(2024, 1, 1, 0, 0))["x_mw"] == 0
    assert ts.at(utc(2024, 1, 1, 0, 59))["x_mw"] == 0
    assert ts.at(utc(2024, 1, 1, 1, 30))["x_mw"] == 10
    assert ts.at(utc(2024, 1, 1, 2, 59))["x_mw"] == 40  # the last row lasts its hour


def test_linear_interpolates_between_rows(tmp_path):
    ts = series(write(tmp_path, HOURLY), {"x_mw": "x"}, interpolation="linear")
    assert ts.at(utc(2024, 1, 1, 0, 30))["x_mw"] == pytest.approx(5.0)
    assert ts.at(utc(2024, 1, 1, 1, 15))["x_mw"] == pytest.approx(17.5)
    assert ts.at(utc(2024, 1, 1, 2, 30))["x_mw"] == 40  # no row after the last: held


@settings(max_examples=50, deadline=None)
@given(values=st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=20), frac=st.floats(0, 1))
def test_linear_stays_between_its_neighbours(tmp_path_factory, values, frac):
    rows = "".join(f"2024-01-01T{h:02d}:00:00Z,{v!r}\n" for h, v in enumerate(values))
    path = write(tmp_path_factory.mktemp("lin"), "time_utc,x\n" + rows)
    ts = series(path, {"x_mw": "x"}, interpolation="linear")
    hour = min(int(frac * (len(values) - 1)), len(values) - 2)
    value = ts.at(utc(2024, 1, 1, hour) + timedelta(seconds=3600 * frac))["x_mw"]
    low, high = sorted(values[hour : hour + 2])
    assert low - 1e-6 <= value <= high + 1e-6


def test_gaps_are_held_or_bridged(tmp_path):
    path = write(tmp_path, "time_utc,x\n2024-01-01T00:00Z,2\n2024-01-01T01:00Z,\n2024-01-01T02:00Z,6\n")
    assert series(path, {"x_mw": "x"}).at(utc(2024, 1, 1, 1))["x_mw"] == 2
    assert series(path, {"x_mw": "x"}, interpolation="linear").at(utc(2024, 1, 1, 1))["x_mw"] == 4



GAPPY = ("time_utc,x\n2024-01-01T00:00Z,2\n2024-01-01T01:00Z,{}\n2024-01-01T02:00Z,6\n"
         "2024-01-01T03:00Z,7\n2024-01-01T04:00Z,8\n")


@pytest.mark.parametrize("empty", ["", "NaN", "n/a", "NA", "null"])
@pytest.mark.parametrize("interpolation, how", [("hold", "held from the row before"), ("linear", "bridged linearly")])
def test_empty_values_the_run_reads_are_a_warning(tmp_path, empty, interpolation, how):
    """An empty value (blank, NaN, n/a, ...) in the rows a run reads is filled, and validation says so
    with the column, row and time (before: filled silently); a run that does not read it hears nothing."""
    path = write(tmp_path, GAPPY.format(empty))
    params = SimParams(file=path, columns={"x_mw": "x"}, interpolation=interpolation)
    (warning,) = SignalsSim.check(params, ctx(utc(2024, 1, 1), 4 * 3600))
    assert warning.startswith("warning: s.csv: column 'x' has 1 empty value(s)")
    assert "data row 2 (line 3 of a CSV), 2024-01-01T01:00:00Z" in warning and how in warning
    assert SignalsSim.check(params, ctx(utc(2024, 1, 1, 2), 3600)) == []  # reads rows 2 and 3 only


@pytest.mark.parametrize("options, start, duration_s, warned", [
    # the file loops every 5 h from 2024-01-01 00:00, so 2024-01-02 01:00 reads its 00:00
    ({"repeat": True}, utc(2024, 1, 2, 1), 3600, False),  # 00:00-01:00 of the loop: row 0 only
    ({"repeat": True}, utc(2024, 1, 2, 2), 3600, True),  # 01:00-02:00: the empty row
    ({"repeat": True}, utc(2024, 1, 2, 5, 30), 3 * 3600, True),  # wraps: 04:30-05:00, then 00:00-02:30
    ({"repeat": True}, utc(2024, 1, 2, 5, 30), 5400, False),  # wraps: 04:30-05:00, then 00:00-01:00
    ({}, utc(2024, 1, 1, 0, 30), 1800, False),
])
def test_empty_values_are_found_through_the_time_mapping(tmp_path, options, start, duration_s, warned):
    path = write(tmp_path, GAPPY.format(""))
    params = SimParams(file=path, columns={"x_mw": "x"}, **options)
    found = [p for p in SignalsSim.check(params, ctx(start, duration_s)) if "empty value" in p]
    assert bool(found) == warned, found


@pytest.mark.parametrize("text, expected", [
    ("time_utc,x\n1704067200,1\n1704070800,2\n", "numbers are not read as times"),
    ("time_utc;x\n2024-01-01T00:00Z;1\n2024-01-01T01:00Z;2\n", "separated by ';', not commas"),
    ("time_utc\tx\n2024-01-01T00:00Z\t1\n2024-01-01T01:00Z\t2\n", "separated by '\\t', not commas"),
])
def test_a_misformatted_file_gets_its_fix(tmp_path, text, expected):
    """Epoch numbers as times, or another separator: the message says what to change (before: a
    numpy repr, ``np.int64(1704067200)``, or a bare list of one odd column name)."""
    problems = SignalsSim.check(SimParams(file=write(tmp_path, text), columns={"x_mw": "x"}), ctx(utc(2024, 1, 1), 60))
    assert len(problems) == 1 and expected in problems[0] and "np.int64" not in problems[0]


# -- units ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("attr", "from_unit", "raw", "expected"),
    [
        ("t_c", "degF", 212.0, 100.0),
        ("t_c", "degF", -40.0, -40.0),
        ("t_c", "K", 273.15, 0.0),
        ("p_mw", "kW", 2500.0, 2.5),
        ("p_mw", "W", 3.0e6, 3.0),
        ("e_mwh", "kWh", 1500.0, 1.5),
        ("ci_g_kwh", "lbs/MWh", 1000.0, 453.59237),  # 1 lb = 0.45359237 kg (exact, by definition)
        ("cfe_frac", "pct", 85.0, 0.85),
    ],
)
def test_unit_conversion_at_the_boundary(tmp_path, attr, from_unit, raw, expected):
    path = write(tmp_path, f"time_utc,v\n2024-01-01T00:00Z,{raw}\n2024-01-01T01:00Z,{raw}\n")
    ts = series(path, {attr: {"column": "v", "from_unit": from_unit}})
    assert ts.at(utc(2024, 1, 1))[attr] == pytest.approx(expected)


def test_scale_and_offset_apply_after_the_unit(tmp_path):
    path = write(tmp_path, "time_utc,v\n2024-01-01T00:00Z,50\n2024-01-01T01:00Z,50\n")
    ts = series(path, {"t_c": {"column": "v", "from_unit": "degF", "scale": 2.0, "offset": 1.0}})
    assert ts.at(utc(2024, 1, 1))["t_c"] == pytest.approx(10.0 * 2.0 + 1.0)


def test_unknown_conversion_names_the_known_ones(tmp_path):
    path = write(tmp_path, HOURLY)
    with pytest.raises(ValidationError, match=r"no conversion from 'degF' to 'mw'.*kW"):
        series(path, {"p_mw": {"column": "x", "from_unit": "degF"}})


def test_attribute_without_unit_suffix_is_rejected(tmp_path):
    with pytest.raises(ValidationError) as err:
        series(write(tmp_path, HOURLY), {"temperature": "x"})
    assert "columns.temperature" in str(err.value) and "unit suffix" in str(err.value)


# -- time axis --------------------------------------------------------------------------------
def test_naive_times_are_utc_unless_tz_says_otherwise(tmp_path):
    path = write(tmp_path, "time_utc,x\n2024-01-01 00:00,1\n2024-01-01 01:00,2\n")
    assert series(path, {"x_mw": "x"}).start_s == utc(2024, 1, 1).timestamp()
    assert series(path, {"x_mw": "x"}, tz="Etc/GMT+5").start_s == utc(2024, 1, 1, 5).timestamp()


def test_unparsable_and_unsorted_times_are_reported(tmp_path):
    bad = write(tmp_path, "time_utc,x\n2024-01-01T00:00Z,1\nyesterday,2\n", "bad.csv")
    problems = SignalsSim.check(SimParams(file=bad, columns={"x_mw": "x"}), ctx(utc(2024, 1, 1), 60))
    assert problems and "'yesterday'" in problems[0] and "ISO 8601" in problems[0]
    unsorted = write(tmp_path, "time_utc,x\n2024-01-01T01:00Z,1\n2024-01-01T00:00Z,2\n", "u.csv")
    problems = SignalsSim.check(SimParams(file=unsorted, columns={"x_mw": "x"}), ctx(utc(2024, 1, 1), 60))
    assert problems and "increase strictly" in problems[0]


def test_missing_column_lists_the_available_ones(tmp_path):
    path = write(tmp_path, "time_utc,temp,ghi\n2024-01-01T00:00Z,1,2\n2024-01-01T01:00Z,1,2\n")
    params = SimParams(file=path, columns={"t_c": "tmp"})
    (problem,) = SignalsSim.check(params, ctx(utc(2024, 1, 1), 3600))
    assert "'tmp'" in problem and "available: temp, ghi" in problem


def test_coverage_error_names_the_span_and_the_fix(tmp_path):
    params = SimParams(file=DATA / "carbon" / "DE_2024.csv.gz", columns={"ci_g_kwh": "ci_lifecycle_g_kwh"})
    assert SignalsSim.check(params, ctx(utc(2024, 7, 15), 86_400)) == []
    assert SignalsSim.check(params, ctx(utc(2024, 1, 1), 366 * 86_400)) == []  # the whole year
    (problem,) = SignalsSim.check(params, ctx(utc(2025, 7, 15), 86_400))
    assert "DE_2024.csv.gz covers 2024-01-01T00:00:00Z to 2025-01-01T00:00:00Z" in problem
    assert "2025-07-15T00:00:00Z to 2025-07-16T00:00:00Z" in problem
    assert "align_year = true" in problem
    sim = SignalsSim()
    with pytest.raises(ValueError) as err:  # the same text at init, for API users
        sim.init("s", start_utc="2025-07-15T00:00:00Z", step_s=60, duration_s=86_400, seed=0,
                 file=str(params.file), columns={"ci_g_kwh": "ci_lifecycle_g_kwh"})
    assert str(err.value) == problem


def test_short_data_suggests_repeat(tmp_path):
    params = SimParams(file=write(tmp_path, HOURLY), columns={"x_mw": "x"})
    (problem,) = SignalsSim.check(params, ctx(utc(2024, 1, 1), 86_400))
    assert "covers 2024-01-01T00:00:00Z to 2024-01-01T03:00:00Z" in problem and "repeat = true" in problem


# -- alignment --------------------------------------------------------------------------------
def leap_2024(tmp_path) -> Path:
    """Hourly 2024 (leap year): the value is the day of the year, 1..366."""
    times = pd.date_range("2024-01-01", "2024-12-31 23:00", freq="h")
    frame = pd.DataFrame({"time_utc": times.strftime("%Y-%m-%dT%H:%M:%SZ"), "doy": times.dayofyear})
    path = tmp_path / "leap.parquet"
    frame.to_parquet(path)
    return path


def test_align_year_maps_by_month_and_day_across_a_leap_year(tmp_path):
    ts = series(leap_2024(tmp_path), {"doy_count": "doy"}, align_year=True)
    assert ts.at(utc(2025, 3, 1, 12))["doy_count"] == 61  # 1 March 2024, not 29 February
    assert ts.at(utc(2025, 12, 31, 23, 30))["doy_count"] == 366
    assert ts.at(utc(2023, 7, 15))["doy_count"] == 197
    assert ts.problems(utc(2025, 1, 1), utc(2026, 1, 1)) == []


def test_leap_day_reads_28_february_of_a_common_year(tmp_path):
    times = pd.date_range("2023-01-01", "2023-12-31 23:00", freq="h")
    frame = pd.DataFrame({"time_utc": times.strftime("%Y-%m-%dT%H:%M:%SZ"), "doy": times.dayofyear})
    path = tmp_path / "common.csv.gz"
    frame.to_csv(path, index=False)
    ts = series(path, {"doy_count": "doy"}, align_year=True)
    assert ts.at(utc(2024, 2, 29, 6))["doy_count"] == 59  # 28 February 2023
    assert ts.at(utc(2024, 3, 1, 6))["doy_count"] == 60
    assert ts.problems(utc(2024, 1, 1), utc(2025, 1, 1)) == []


def test_align_year_wraps_a_year_that_starts_after_new_year(tmp_path):
    """A typical year stamped in local time spills into 1 January of the next year in UTC."""
    times = pd.date_range("2023-01-01 05:00", periods=8760, freq="h")
    frame = pd.DataFrame({"time_utc": times.strftime("%Y-%m-%dT%H:%M:%SZ"), "h": np.arange(8760)})
    ts = series(write(tmp_path, frame.to_csv(index=False)), {"h_count": "h"}, align_year=True)
    assert ts.at(utc(2024, 1, 1, 2))["h_count"] == 8757  # 2024-01-01 02:00 of the file
    assert ts.at(utc(2024, 1, 1, 5))["h_count"] == 0


def test_align_year_needs_a_whole_year(tmp_path):
    params = SimParams(file=write(tmp_path, HOURLY), columns={"x_mw": "x"}, align_year=True)
    (problem,) = SignalsSim.check(params, ctx(utc(2025, 7, 15), 86_400))
    assert "not a full year" in problem and "07-15 00:00" in problem


def test_repeat_loops_the_data(tmp_path):
    ts = series(write(tmp_path, HOURLY), {"x_mw": "x"}, repeat=True, interpolation="linear")
    assert ts.at(utc(2024, 7, 15, 1))["x_mw"] == 10  # 3-hour period from 2024-01-01 00:00
    assert ts.at(utc(2024, 7, 15, 2, 30))["x_mw"] == pytest.approx(20.0)  # back towards row 0
    assert ts.problems(utc(2030, 1, 1), utc(2031, 1, 1)) == []
    with pytest.raises(ValidationError, match="exclude each other"):
        series(write(tmp_path, HOURLY), {"x_mw": "x"}, repeat=True, align_year=True)


def test_a_file_is_read_once(tmp_path):
    path = write(tmp_path, HOURLY)
    first = read_table(path)
    assert read_table(path) is first
    path.write_text(HOURLY.replace(",40", ",41"))  # a new file (size changes): read again
    assert read_table(path) is not first


# -- the adapter, driven without a mosaik world -----------------------------------------------
def test_signals_sim_steps_the_carbon_file():
    """Round trip of the carbon extract: values at a known hour equal the Electricity Maps
    source (DE_2024_hourly.csv.gz, row 2024-07-15 12:00: 94.56, 145.79, 88.0 %, 85.34 %)."""
    sim = SignalsSim()
    columns = {"ci_g_kwh": "ci_lifecycle_g_kwh", "ci_direct_g_kwh": "ci_direct_g_kwh",
               "cfe_frac": "cfe_frac", "re_frac": "re_frac"}
    meta = sim.init("carbon", start_utc="2024-07-15T00:00:00Z", step_s=60, duration_s=86_400, seed=7,
                    file=str(DATA / "carbon" / "DE_2024.csv.gz"), columns=columns)
    assert meta["models"]["Series"]["outputs"] == list(columns)
    assert sim.create(1, "Series", eid="de") == [{"eid": "de", "type": "Series"}]
    assert sim.step(12 * 3600 + 59 * 60, {}, 86_400) == 12 * 3600 + 60 * 60
    data = sim.get_data({"de": ["ci_g_kwh", "ci_direct_g_kwh", "cfe_frac", "re_frac"]})
    assert data["de"] == {"ci_g_kwh": 145.79, "ci_direct_g_kwh": 94.56, "cfe_frac": 0.88, "re_frac": 0.8534}


@pytest.mark.skipif(not SHARED.is_dir(), reason="needs the shared source data")
@pytest.mark.parametrize("zone", ["US-CAL-CISO", "US-TEX-ERCO", "DE", "CA-ON", "AU-SA", "AU-VIC", "AU-WA", "KR"])
def test_carbon_extract_equals_its_source(zone):
    source = pd.read_csv(SHARED / "electricitymaps-2024-hourly" / f"{zone}_2024_hourly.csv.gz")
    extract = pd.read_csv(DATA / "carbon" / f"{zone}_2024.csv.gz")
    assert len(extract) == len(source) == 8784
    assert (pd.to_datetime(extract.time_utc) == pd.to_datetime(source.datetime_utc).dt.tz_localize("UTC")).all()
    np.testing.assert_array_equal(extract.ci_lifecycle_g_kwh, source.ci_lifecycle_gco2eq_per_kwh)
    np.testing.assert_array_equal(extract.ci_direct_g_kwh, source.ci_direct_gco2eq_per_kwh)
    np.testing.assert_allclose(extract.cfe_frac * 100, source.cfe_pct, atol=1e-9)


def test_signals_meta_lists_the_mapped_outputs():
    params = SimParams(file=DATA / "weather" / "greensboro_nc_tmy3.csv",
                       columns={"t_wet_c": "t_wet_c", "ghi_w_m2": "ghi_w_m2"}, align_year=True)
    meta = SignalsSim.meta_for(params)
    assert meta["models"]["Series"]["outputs"] == ["t_wet_c", "ghi_w_m2"]
    assert "file" not in meta["models"]["Series"]["params"]  # a sim param, not an entity param


# -- the weather extract ------------------------------------------------------------------------
def test_weather_is_tmy3_restamped_to_utc_hour_start():
    """Every row of pvlib's 723170TYA.CSV (hour-ending LST, UTC-5) is at stamp - 1 h + 5 h.

    E.g. TMY3 ``07/15 13:00`` (GHI 919 W/m2, dry-bulb 29.4 C) is 2023-07-15T17:00Z."""
    import pvlib

    raw, _ = pvlib.iotools.read_tmy3(Path(pvlib.__file__).parent / "data" / "723170TYA.CSV",
                                     map_variables=True, coerce_year=2023)
    ts = series(DATA / "weather" / "greensboro_nc_tmy3.csv",
                {"ghi_w_m2": "ghi_w_m2", "t_dry_c": "t_dry_c"}, align_year=True)
    for label, row in raw.iloc[::97].iterrows():
        start = (label - pd.Timedelta(hours=1)).tz_convert("UTC").to_pydatetime()
        got = ts.at(start.replace(year=2023))  # the wrapped last hours land on 1 Jan 2023
        assert (got["ghi_w_m2"], got["t_dry_c"]) == (row["ghi"], row["temp_air"]), label
    assert ts.at(utc(2023, 7, 15, 17)) == {"ghi_w_m2": 919.0, "t_dry_c": 29.4}
    assert ts.problems(utc(2024, 1, 1), utc(2025, 1, 1)) == []


def test_shipped_wet_bulb_is_the_validated_method():
    frame = pd.read_csv(DATA / "weather" / "greensboro_nc_tmy3.csv")
    again = make_extracts().wet_bulb_c(frame.t_dry_c, frame.t_dew_c, frame.p_air_pa)
    np.testing.assert_allclose(frame.t_wet_c, again, atol=0.006)
    assert (frame.t_dew_c <= frame.t_wet_c + 0.006).all() and (frame.t_wet_c <= frame.t_dry_c + 0.006).all()


@pytest.mark.parametrize(
    ("name", "mean_abs_c", "max_abs_c"),
    # Atlanta is reported in whole degF (inputs and wet-bulb each +-0.28 C of rounding),
    # Lincoln in 0.1 C.
    [("atlanta_katl_2020-01_2020-02_hourly.csv", 0.25, 0.7), ("lincoln_klnk_2023-01_2023-02_hourly.csv", 0.1, 0.3)],
)
def test_wet_bulb_matches_noaa_measurements(name, mean_abs_c, max_abs_c):
    """Computed wet-bulb vs the wet-bulb NOAA LCD reports (NCEI Local Climatological Data,
    stations 72219013874 Atlanta and USW00014939 Lincoln; scenarios/data/noaa_lcd/)."""
    obs = pd.read_csv(DATA / "noaa_lcd" / name).dropna(
        subset=["dry_bulb_c", "dew_point_c", "wet_bulb_c", "station_pressure_kpa"])
    assert len(obs) > 1000
    computed = make_extracts().wet_bulb_c(obs.dry_bulb_c, obs.dew_point_c, obs.station_pressure_kpa * 1000)
    error = computed - obs.wet_bulb_c.to_numpy()
    assert np.abs(error).mean() < mean_abs_c
    assert np.abs(error).max() < max_abs_c


def test_wet_bulb_limits():
    wet_bulb_c = make_extracts().wet_bulb_c
    assert wet_bulb_c(25.0, 25.0, 101_325.0) == pytest.approx(25.0, abs=1e-6)  # saturated air
    dry = wet_bulb_c(35.0, -20.0, 101_325.0)
    assert -20.0 < dry < 35.0 and math.isfinite(dry)
    with pytest.raises(ValueError):
        wet_bulb_c(20.0, 21.0, 101_325.0)


# -- reading ahead (the signals sim's step) ----------------------------------------------------
@pytest.fixture(scope="module")
def series_kinds(tmp_path_factory):
    """One series of each kind a scenario can give: plain, hold, repeat, align_year (a file
    starting 05:00 UTC, so the year wraps mid-day), a leap file read in a common year and back."""
    tmp_path = tmp_path_factory.mktemp("kinds")
    local = pd.date_range("2023-01-01 05:00", periods=8760, freq="h")
    wrap = write(tmp_path, pd.DataFrame({"time_utc": local.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                         "h": np.sin(np.arange(8760) / 7.0)}).to_csv(index=False), "wrap.csv")
    common = pd.date_range("2023-01-01", "2023-12-31 23:00", freq="h")
    plain = write(tmp_path, pd.DataFrame({"time_utc": common.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                          "h": np.cos(np.arange(8760) / 3.0)}).to_csv(index=False), "plain.csv")
    return {
        "plain linear": series(plain, {"h_count": "h"}, interpolation="linear"),
        "plain hold": series(plain, {"h_count": "h"}, interpolation="hold"),
        "repeat": series(write(tmp_path, HOURLY), {"x_mw": "x"}, repeat=True, interpolation="linear"),
        "align_year wrap": series(wrap, {"h_count": "h"}, align_year=True, interpolation="linear"),
        "align_year leap": series(leap_2024(tmp_path), {"doy_count": "doy"}, align_year=True, interpolation="linear"),
        "align_year common": series(plain, {"h_count": "h"}, align_year=True, interpolation="linear"),
    }


@pytest.mark.parametrize("first, step_s, n", [
    (utc(2023, 7, 15, 0, 0), 60, 1440),         # a whole day at 1 minute
    (utc(2024, 2, 29, 23, 0), 60, 90),           # across a leap day into March
    (utc(2024, 12, 31, 22, 0), 300, 40),         # across new year (align_year wraps at 05:00)
    (utc(2025, 1, 1, 3, 0), 60, 180),            # the wrapping file's 05:00 start inside the block
    (utc(2023, 12, 31, 23, 0), 60, 120),         # past the plain file's end: the block stops there
    (utc(2023, 3, 5, 10, 0, 0), 7, 500),         # an odd step
])
def test_reading_ahead_equals_reading_each_time(series_kinds, first, step_s, n):
    """``rows_ahead`` is the signals sim's per-step read done for a day at once: it must give
    ``values_at``'s numbers exactly, for every kind of series, and stop where the data does."""
    for name, ts in series_kinds.items():
        rows = ts.rows_ahead(first, step_s, n)
        expected = []
        for k in range(n):
            try:
                expected.append([float(v) for v in ts.values_at(first + timedelta(seconds=k * step_s))])
            except ValueError:
                break
        assert rows == expected, name


def test_signals_sim_reads_ahead_as_it_would_step_by_step():
    """The sim's outputs over a day and a half (the block restarts at midnight) equal
    ``TimeSeries.at`` of each step's time."""
    sim = SignalsSim()
    columns = {"t_dry_c": "t_dry_c", "ghi_w_m2": "ghi_w_m2", "wind_m_s": "wind_m_s"}
    sim.init("weather", start_utc="2024-07-15T13:00:00Z", step_s=60, duration_s=36 * 3600, seed=7,
             file=str(DATA / "weather" / "greensboro_nc_tmy3.csv"), columns=columns, align_year=True,
             interpolation="linear")
    sim.create(1, "Series", eid="w")
    for t in range(0, 36 * 3600, 60):
        sim.step(t, {}, 36 * 3600)
        assert sim.get_data({"w": list(columns)})["w"] == sim.series.at(sim.utc(t)), t


# -- forecasts (a gym agent's look-ahead) -------------------------------------------------------
def forecast_lead_by_lead(ts: TimeSeries, attr: str, start: datetime, n: int, step_s: float) -> list[float]:
    """A forecast read one lead at a time with ``values_at`` (a time outside the data repeats the
    lead before it, or the column's last row): the reference the one-pass read must equal."""
    column = ts.names.index(attr)
    values: list[float] = []
    for k in range(n):
        try:
            values.append(float(ts.values_at(start + timedelta(seconds=k * step_s))[column]))
        except ValueError:
            values.append(values[-1] if values else float(ts.values[-1, column]))
    return values


def bits(values: list[float]) -> list[int]:
    return np.asarray(values, dtype=float).view(np.int64).tolist()  # NaN payloads and -0.0 too


def forecast_cases():
    """Starts and leads at the edges (before the first row, across and after the last, on rows,
    between rows, new year, a leap day, odd and fractional steps), then many drawn at random."""
    cases = [
        (utc(2022, 12, 31, 20, 0), 10, 3600),      # before the plain file's first row, then into it
        (utc(2022, 12, 31, 23, 59, 59), 3, 1),     # one second before the first row
        (utc(2023, 12, 31, 20, 0), 10, 3600),      # across the plain file's end
        (utc(2024, 1, 3, 0, 0), 6, 3600),          # after its end: every lead outside
        (utc(2023, 7, 15, 13, 0), 6, 3600),        # exactly on rows
        (utc(2023, 7, 15, 13, 17, 3), 6, 900),     # between rows
        (utc(2024, 2, 28, 22, 0), 8, 3600),        # across a leap day
        (utc(2024, 12, 31, 21, 30), 12, 1800),     # across new year (the wrapping file at 05:00)
        (utc(2024, 12, 31, 22, 0), 10, 3600),      # ... and past its 05:00 start (the offset changes in a day)
        (utc(2023, 3, 5, 10, 0, 0, 250_000), 5, 7),  # a start with microseconds
        (utc(2023, 3, 5, 10, 0), 9, 1799.5),       # a fractional step
        (utc(2023, 3, 5, 10, 0), 1, 3600),         # one lead
        (utc(2023, 3, 5, 10, 0), 0, 3600),         # none
    ]
    rng = np.random.default_rng(43)
    first = utc(2022, 12, 30).timestamp()
    for _ in range(150):
        start = datetime.fromtimestamp(first + float(rng.integers(0, 3 * 366 * 86400 // 60)) * 60, UTC)
        cases.append((start, int(rng.integers(1, 30)), int(rng.choice([60, 300, 900, 3600, 7200, 86400]))))
    return cases


def test_forecast_in_one_pass_equals_lead_by_lead(series_kinds, tmp_path):
    """``SignalsSim.forecast`` (one vectorized read) gives the lead-by-lead numbers, to the bit,
    for every kind of series, including a column with NaNs (a value no fill could supply)."""
    kinds = dict(series_kinds)
    common = pd.date_range("2023-01-01", "2023-12-31 23:00", freq="h")
    path = write(tmp_path, pd.DataFrame({"time_utc": common.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                         "h": np.cos(np.arange(8760) / 3.0)}).to_csv(index=False), "nan.csv")
    for interpolation in ("linear", "hold"):
        with_nans = series(path, {"h_count": "h"}, interpolation=interpolation)
        with_nans.values = with_nans.values.copy()  # (the file's are shared, read-only)
        with_nans.values[::5, 0] = np.nan  # every fifth row, and the last one, unknown
        with_nans.values[-1, 0] = np.nan
        kinds[f"nans {interpolation}"] = with_nans
    sim = SignalsSim()
    checked = 0
    for name, ts in kinds.items():
        sim.series = ts
        attr = ts.names[0]
        for start, n, step_s in forecast_cases():
            expected = forecast_lead_by_lead(ts, attr, start, n, step_s)
            got = sim.forecast(attr, start, n, step_s)
            assert all(type(v) is float for v in got), name
            assert bits(got) == bits(expected), (name, start, n, step_s)
            checked += n
    assert checked > 10_000
    assert sim.forecast("no_such_attr", utc(2023, 7, 15), 6, 3600) is None


def test_series_of_one_file_share_its_read_only_rows(tmp_path):
    """Two series of the same file and mapping (a gym's resets) share the converted rows, which no
    one may write; a deep copy (a gym's set-up copy) shares them too; another mapping has its own."""
    import copy

    path = write(tmp_path, "time_utc,t\n2024-01-01T00:00:00Z,1.0\n2024-01-01T01:00:00Z,2.0\n")
    first, again = series(path, {"t_dry_c": "t"}), series(path, {"t_dry_c": "t"})
    assert again.values is first.values and copy.deepcopy(first).values is first.values
    with pytest.raises(ValueError):
        first.values[0, 0] = 5.0
    with pytest.raises(ValueError):  # the times too
        first.times_s[0] = 0.0
    first.gaps["t"] = np.arange(1)  # the mapping of gaps is each series' own (its arrays are shared)
    assert len(again.gaps["t"]) == 0 and len(copy.deepcopy(again).gaps["t"]) == 0
    scaled = series(path, {"t_dry_c": ColumnSpec(column="t", from_unit="K")})
    assert scaled.values is not first.values and scaled.values[0, 0] == 1.0 - 273.15


def test_each_entity_gets_a_dict_of_its_own():
    """Two entities of one file get equal outputs in dicts of their own, and no step's dict is
    kept by the sim: a reader writing into one entity's outputs changes neither the other's nor a
    later step's. Control: the entities' values are equal and change from step to step."""
    sim = SignalsSim()
    sim.init("weather", start_utc="2024-07-15T13:00:00Z", step_s=600, duration_s=86_400, seed=7,
             file=str(DATA / "weather" / "greensboro_nc_tmy3.csv"), columns={"t_dry_c": "t_dry_c"},
             align_year=True, interpolation="linear")
    sim.create(1, "Series", eid="a")
    sim.create(1, "Series", eid="b")
    seen = set()
    for t in range(0, 86_400, 600):
        sim.step(t, {}, 86_400)
        expected = sim.series.at(sim.utc(t))
        assert sim.out["a"] == sim.out["b"] == expected and sim.out["a"] is not sim.out["b"], t
        assert all(values is not sim.out["a"] for values in sim._ahead.values())
        sim.out["a"]["t_dry_c"] = -999.0  # a careless reader
        assert sim.out["b"] == expected
        seen.add(expected["t_dry_c"])
    assert len(seen) > 100
