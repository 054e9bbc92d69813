"""Signals: time series from CSV/Parquet files (weather, carbon, prices), held or interpolated.

One simulator reads one data file. Its model ``Series`` (no params) reports the mapped
columns as output attributes, each named with its unit suffix (``t_dry_c``,
``ci_direct_g_kwh``). Units are converted once, when the file is read.

The reading, alignment and interpolation live in :class:`TimeSeries`, usable without
mosaik; :class:`SignalsSim` only translates mosaik calls.

Example ``[sims]`` entry::

    weather = { adapter = "signals", file = "data/weather/greensboro_nc_tmy3.csv",
                align_year = true, interpolation = "linear",
                columns = { t_dry_c = "t_dry_c", t_wet_c = "t_wet_c" } }

Time conventions: a row's timestamp is the instant its value starts to apply. With
``hold`` the value applies until the next row; with ``linear`` values are interpolated
between rows. The last row applies for one more sampling interval (the last row of an
hourly file covers its whole hour). Naive timestamps are UTC unless ``tz`` says otherwise.
"""

from __future__ import annotations

import bisect
import calendar
import copy
import functools
import math
import warnings
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, field_validator, model_validator

from cosim.sdk import Params, ScenarioContext, SingleModelSim, TimeZone, parse_utc
from cosim.sdk import DataFile
from cosim.sdk import has_unit_suffix, unit_of
from cosim.adapters._bounded_read import TableTooLarge, read_table_bounded

#: ``(from_unit, target unit suffix) -> (scale, offset)``: ``out = value * scale + offset``.
UNIT_CONVERSIONS: dict[tuple[str, str], tuple[float, float]] = {
    ("degF", "c"): (5.0 / 9.0, -32.0 * 5.0 / 9.0),
    ("K", "c"): (1.0, -273.15),
    ("W", "mw"): (1e-6, 0.0),
    ("kW", "mw"): (1e-3, 0.0),
    ("W", "kw"): (1e-3, 0.0),
    ("MW", "kw"): (1e3, 0.0),
    ("Wh", "mwh"): (1e-6, 0.0),
    ("kWh", "mwh"): (1e-3, 0.0),
    ("lbs/MWh", "g_kwh"): (0.45359237, 0.0),  # 1 lb = 453.59237 g; 1 MWh = 1000 kWh
    ("kg/MWh", "g_kwh"): (1.0, 0.0),
    ("pct", "frac"): (0.01, 0.0),
    ("frac", "pct"): (100.0, 0.0),
    ("hPa", "pa"): (100.0, 0.0),
    ("mbar", "pa"): (100.0, 0.0),
    ("kPa", "pa"): (1000.0, 0.0),
    ("inHg", "pa"): (3386.389, 0.0),
    ("mph", "m_s"): (0.44704, 0.0),
    ("km/h", "m_s"): (1.0 / 3.6, 0.0),
    ("usd/kWh", "usd_mwh"): (1000.0, 0.0),
}

_YEAR_S = 365 * 86_400


class DataError(ValueError):
    """A data file that cannot serve as a time series (unreadable, bad times, no column)."""


# -- parameters ---------------------------------------------------------------------------
class ColumnSpec(Params):
    """One source column with its conversion: ``out = convert(value) * scale + offset``."""

    column: str
    from_unit: str | None = None
    scale: float = 1.0
    offset: float = 0.0


class SeriesOptions(Params):
    """How a file's time axis is read and mapped onto the scenario (shared with ``load``)."""

    time_column: str = "time_utc"
    tz: TimeZone | None = None
    interpolation: Literal["hold", "linear"] = "hold"
    align_year: bool = False
    repeat: bool = False

    @model_validator(mode="after")
    def _one_mapping(self):
        if self.align_year and self.repeat:
            raise ValueError("align_year and repeat exclude each other; choose one")
        return self


class SimParams(SeriesOptions):
    """Params of one signals simulator (the ``[sims.<id>]`` keys besides ``adapter``).

    Attributes:
        file: CSV, CSV.gz or Parquet file; relative paths resolve from the scenario folder.
        columns: output attribute name -> source column name or :class:`ColumnSpec`.
        time_column: column of ISO 8601 timestamps.
        tz: time zone of naive timestamps (an IANA name or ``Etc/GMT+5``); default UTC.
        interpolation: ``hold`` (step function) or ``linear``.
        align_year: map the scenario's dates onto the data's year by month, day and time
            of day (typical-year files; 29 February reads 28 February in a common year).
        repeat: treat the file as periodic with its own span (a one-day trace repeats
            every day, by time of day in UTC).
    """

    file: DataFile
    columns: dict[str, str | ColumnSpec]

    @field_validator("columns")
    @classmethod
    def _attrs_have_units(cls, columns: dict[str, str | ColumnSpec]):
        if not columns:
            raise ValueError("columns is empty; map at least one attribute, e.g. {t_dry_c = 'temp'}")
        for attr, spec in columns.items():
            if not has_unit_suffix(attr):
                raise ValueError(
                    f"columns.{attr}: output attribute {attr!r} has no unit suffix; every attribute "
                    "name must end with its unit (e.g. t_dry_c, ghi_w_m2, ci_g_kwh; see "
                    "cosim.units.UNIT_SUFFIXES)"
                )
            conversion(attr, spec)
        return columns


def conversion(attr: str, spec: str | ColumnSpec) -> tuple[float, float]:
    """The ``(scale, offset)`` turning source values into ``attr``'s unit."""
    if isinstance(spec, str):
        return 1.0, 0.0
    scale, offset = 1.0, 0.0
    if spec.from_unit is not None:
        target = unit_of(attr)
        if (spec.from_unit, target) not in UNIT_CONVERSIONS:
            known = sorted(f for f, t in UNIT_CONVERSIONS if t == target)
            raise ValueError(
                f"columns.{attr}: no conversion from {spec.from_unit!r} to {target!r}; known "
                f"for {target!r}: {', '.join(known) or 'none'} (or use scale/offset)"
            )
        scale, offset = UNIT_CONVERSIONS[(spec.from_unit, target)]
    return scale * spec.scale, offset * spec.scale + spec.offset


def source_column(spec: str | ColumnSpec) -> str:
    return spec if isinstance(spec, str) else spec.column


# -- reading --------------------------------------------------------------------------------
def read_table(path: Path, time_column: str = "time_utc", tz: str | None = None):
    """Read a data file once (cached by path, size and mtime).

    Returns:
        ``(times_s, frame)``: strictly increasing UTC epoch seconds [s] and the other columns.
    """
    path = Path(path).resolve()
    stat = path.stat()
    return _read_table_cached(str(path), stat.st_mtime_ns, stat.st_size, time_column, tz)


@functools.lru_cache(maxsize=32)
def _read_table_cached(path: str, mtime_ns: int, size: int, time_column: str, tz: str | None):
    name = Path(path).name
    try:
        frame = read_table_bounded(path)  # the file's size and rows within stated limits
    except TableTooLarge as exc:
        raise DataError(str(exc)) from None
    except Exception as exc:  # pandas raises many types for a bad file
        raise DataError(f"{name}: cannot read as CSV/Parquet: {_quote(exc, 150)}") from exc
    if time_column not in frame.columns:
        other = next((sep for sep in ";\t|" if len(frame.columns) == 1 and sep in str(frame.columns[0])), None)
        hint = (f"the file is separated by {other!r}, not commas: write it comma-separated" if other else
                "set time_column; is this the data file you meant?")
        raise DataError(f"{name}: no time column {time_column!r}; columns: {_quote_names(frame.columns)} ({hint})")
    if len(frame) < 2:
        raise DataError(f"{name}: needs at least two rows, has {len(frame)}")
    times = _parse_times(frame[time_column], name, tz)
    steps = np.diff(times)
    if (steps <= 0).any():
        row = int(np.argmax(steps <= 0)) + 1
        raise DataError(
            f"{name}: timestamps must increase strictly; {_row(row)} "
            f"({_quote(frame[time_column].iloc[row])}) does not follow {_row(row - 1)} "
            f"({_quote(frame[time_column].iloc[row - 1])}); sort the file and drop duplicates"
        )
    frame = frame.drop(columns=[time_column]).reset_index(drop=True)
    frame.attrs["name"] = name
    return times, frame


def read_columns(path: Path, columns: dict[str, str | ColumnSpec], options: SeriesOptions):
    """The mapped columns of a data file, converted (cached, as :func:`read_table`).

    The arrays (times, values and each gap list) are shared by every series of the same file and
    mapping (a gym's resets build one per episode) and are read-only; copy the ``gaps`` mapping
    before changing it.

    Returns:
        ``(times_s, values, gaps)``: UTC epoch seconds [s], one column per output in the units
        of its name, and per source column the data rows with no value.

    Raises:
        DataError: the file cannot be read, or lacks a column.
    """
    path = Path(path).resolve()
    stat = path.stat()
    mapping = tuple((attr, source_column(spec), *conversion(attr, spec)) for attr, spec in columns.items())
    return _read_columns_cached(str(path), stat.st_mtime_ns, stat.st_size, options.time_column, options.tz,
                                options.interpolation, mapping)


@functools.lru_cache(maxsize=32)
def _read_columns_cached(path: str, mtime_ns: int, size: int, time_column: str, tz: str | None,
                         interpolation: str, mapping: tuple[tuple[str, str, float, float], ...]):
    times, frame = _read_table_cached(path, mtime_ns, size, time_column, tz)
    missing = [source for _, source, _, _ in mapping if source not in frame.columns]
    if missing:
        raise DataError(f"{Path(path).name}: no column {', '.join(map(repr, missing))}; available: "
                        f"{_quote_names(frame.columns, 20)}")
    gaps = {source: np.flatnonzero(pd.to_numeric(frame[source], errors="coerce").isna())
            for _, source, _, _ in mapping}
    values = np.column_stack([_numeric(frame, source, interpolation, times) * scale + offset
                              for _, source, scale, offset in mapping])
    times = times.view()  # read_table's array, read-only here (read_table's own callers keep theirs as it was)
    for array in (times, values, *gaps.values()):
        array.setflags(write=False)
    return times, values, gaps


def _quote(value: object, limit: int = 40) -> str:
    """At most ``limit`` characters of something read from a file (which may not be data at all)."""
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _quote_names(names, limit: int = 8) -> str:
    shown = ", ".join(_quote(n) for n in list(names)[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def _row(index: int) -> str:
    """A data row as a person finds it: counted from 1 after the header (line ``index + 2`` of a CSV)."""
    return f"data row {index + 1} (line {index + 2} of a CSV)"


def _parse_times(raw: pd.Series, name: str, tz: str | None) -> np.ndarray:
    if pd.api.types.is_datetime64_any_dtype(raw):
        parsed = raw
    else:
        text = raw.astype("string")
        try:
            with warnings.catch_warnings():  # mixed offsets warn here; they are handled just below
                warnings.simplefilter("ignore", FutureWarning)
                parsed = pd.to_datetime(text, format="ISO8601", errors="coerce")
        except (ValueError, TypeError):  # mixed offsets
            parsed = pd.to_datetime(text, format="ISO8601", errors="coerce", utc=True)
        if not pd.api.types.is_datetime64_any_dtype(parsed):  # mixed UTC offsets (a DST change)
            parsed = pd.to_datetime(text, format="ISO8601", errors="coerce", utc=True)
        bad = parsed.isna()
        if bad.any():
            row = int(np.argmax(bad.to_numpy()))
            hint = ("; numbers are not read as times (epoch seconds?): write them as ISO 8601 UTC times, e.g. "
                    "pandas.to_datetime(seconds, unit='s', utc=True)" if pd.api.types.is_numeric_dtype(raw) else "")
            raise DataError(
                f"{name}: timestamp {_quote(repr(str(raw.iloc[row])))} in {_row(row)} is not ISO 8601 "
                f"(e.g. 2024-07-15T13:00:00Z){hint}"
            )
    if parsed.dt.tz is None:
        try:
            parsed = parsed.dt.tz_localize(tz or "UTC", ambiguous="raise", nonexistent="raise")
        except Exception as exc:
            raise DataError(f"{name}: cannot place naive timestamps in tz {tz!r}: {_quote(exc, 150)}") from exc
    utc = parsed.dt.tz_convert("UTC").dt.tz_localize(None)
    return utc.to_numpy(dtype="datetime64[ns]").astype(np.int64) / 1e9


def _numeric(frame: pd.DataFrame, column: str, interpolation: str, times_s: np.ndarray) -> np.ndarray:
    name = frame.attrs.get("name", "data")
    raw = frame[column]
    values = pd.to_numeric(raw, errors="coerce")
    broken = values.isna() & raw.notna()
    if broken.any():
        row = int(np.argmax(broken.to_numpy()))
        raise DataError(f"{name}: column {column!r} is not numeric ({raw.iloc[row]!r} in {_row(row)})")
    if values.isna().all():
        raise DataError(f"{name}: column {column!r} has no values")
    infinite = np.isinf(values.to_numpy(dtype=float))
    if infinite.any():
        row = int(np.argmax(infinite))
        raise DataError(f"{name}: column {column!r} has a non-finite value ({raw.iloc[row]!r} in {_row(row)})")
    # Gaps: held over (hold) or bridged (linear); the edges take the nearest value.
    values = pd.Series(values.to_numpy(dtype=float), index=times_s)
    values = values.ffill() if interpolation == "hold" else values.interpolate("index")
    return values.ffill().bfill().to_numpy()


# -- the model ----------------------------------------------------------------------------
def _epoch(value: datetime) -> float:
    return parse_utc(value).timestamp()


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _with_year(value: datetime, year: int) -> datetime:
    day = value.day
    if value.month == 2 and day == 29 and not calendar.isleap(year):
        day = 28  # a common year has no 29 February: read the 28th again
    return value.replace(year=year, day=day)


AHEAD_STEPS = 1440  # steps a signals sim reads ahead at most (one day at 1 minute)


#: A repeated trace whose loop (last row back to the first) jumps by more than this many times its
#: largest step between rows is not a whole number of its period (:meth:`TimeSeries._wrap_jumps`). [-]
WRAP_JUMP_FACTOR = 3.0


class TimeSeries:
    """Columns of one data file as functions of UTC time.

    Args:
        path: CSV, CSV.gz or Parquet file.
        columns: output name -> source column name or :class:`ColumnSpec`.
        options: time column, time zone, interpolation and alignment (:class:`SeriesOptions`).
    """

    def __init__(self, path: Path, columns: dict[str, str | ColumnSpec], options: SeriesOptions):
        self.path = Path(path)
        self.options = options
        times, values, gaps = read_columns(self.path, columns, options)
        self.names = list(columns)
        #: source column -> data rows with no value (filled by _numeric: held or bridged)
        self.gaps = dict(gaps)  # the arrays shared read-only, the mapping this series' own
        self.times_s = times
        self.values = values
        self._day_shifts: dict[float, float | None] = {}  # UTC day -> data time offset (_day_shift)
        #: the times and columns as Python floats, for forecasts (column_ahead; made on first use, read-only)
        self._times_floats: list[float] | None = None
        self._column_floats: dict[int, list[float]] = {}
        self.start_s = float(times[0])
        self.end_s = float(times[-1] + (times[-1] - times[-2]))  # the last row lasts one interval
        if options.repeat:  # close the period so linear wraps back to the first row
            self.times_s = np.append(times, self.end_s)
            self.values = np.vstack([self.values, self.values[:1]])

    def __deepcopy__(self, memo: dict) -> "TimeSeries":
        """A copy sharing the data (the arrays are not written after ``__init__``): a gym's set-up
        copies of a signals simulator (:mod:`cosim.gym.snapshot`) do not copy a year of rows each."""
        clone = copy.copy(self)
        clone._day_shifts, clone.gaps = dict(self._day_shifts), dict(self.gaps)
        clone._column_floats = dict(self._column_floats)  # (the lists shared, read-only)
        memo[id(self)] = clone
        return clone

    # -- time mapping ---------------------------------------------------------------------
    def source_s(self, when: datetime) -> float:
        """The time in the data [UTC epoch s] that scenario time ``when`` reads."""
        if self.options.repeat:
            period = self.end_s - self.start_s
            return self.start_s + (_epoch(when) - self.start_s) % period
        if self.options.align_year:
            return self._aligned_s(parse_utc(when))
        return _epoch(when)

    def _aligned_s(self, when: datetime) -> float:
        first_year = datetime.fromtimestamp(self.start_s, timezone.utc).year
        for year in (first_year, first_year + 1):  # a year starting after 1 Jan wraps into the next
            seconds = _with_year(when, year).timestamp()
            if self.start_s <= seconds < self.end_s:
                return seconds
        return _with_year(when, first_year).timestamp()

    # -- checks -----------------------------------------------------------------------------
    def problems(self, start: datetime, end: datetime) -> list[str]:
        """What keeps this series from covering the run ``[start, end)``; empty when fine (and a
        warning for empty values in the rows the run reads)."""
        found = self._coverage_problems(start, end)
        return found if any(not p.startswith("warning: ") for p in found) else [*found, *self._gap_warnings(start, end)]

    def _read_windows(self, start: datetime, end: datetime) -> list[tuple[float, float]]:
        """The spans of data time ``[lo, hi)`` the run ``[start, end)`` reads. [UTC epoch s]"""
        span_s = self.end_s - self.start_s
        if not (self.options.repeat or self.options.align_year):
            return [(_epoch(start), _epoch(end))]
        if (end - start).total_seconds() >= (span_s if self.options.repeat else _YEAR_S):
            return [(self.start_s, self.end_s)]
        lo, hi = self.source_s(start), self.source_s(end - timedelta(seconds=1)) + 1.0
        return [(lo, hi)] if lo < hi else [(lo, self.end_s), (self.start_s, hi)]

    def _gap_warnings(self, start: datetime, end: datetime) -> list[str]:
        """A warning per column with empty values (NaN, blank, ``n/a``) in the rows the run reads."""
        found = []
        starts, ends = self.times_s, np.append(self.times_s[1:], self.end_s)
        how = "held from the row before" if self.options.interpolation == "hold" else "bridged linearly"
        for column, rows in self.gaps.items():
            rows = rows[rows < len(starts)]
            read = [r for r in rows if any(starts[r] < hi and ends[r] > lo for lo, hi in self._read_windows(start, end))]
            if read:
                found.append(f"warning: {self.path.name}: column {column!r} has {len(read)} empty value(s) in the "
                             f"rows this run reads (first in {_row(read[0])}, {_iso(starts[read[0]])}): they are {how} "
                             f"(interpolation = {self.options.interpolation!r}); fill them in the file if that is "
                             "not what they mean")
        return found

    def _coverage_problems(self, start: datetime, end: datetime) -> list[str]:
        if self.options.repeat:
            return self._period_problems()
        span = f"{self.path.name} covers {_iso(self.start_s)} to {_iso(self.end_s)}"
        need = f"the run needs {_iso(_epoch(start))} to {_iso(_epoch(end))}"
        if self.options.align_year:
            probes = [start + timedelta(days=d) for d in range(max(0, (end - start).days) + 1)]
            probes = [p for p in probes if p < end] + [end - timedelta(seconds=1)]
            outside = [p for p in probes if not self._covers(self._aligned_s(parse_utc(p)))]
            if outside:
                return [
                    f"{span}, not a full year, so align_year = true cannot map "
                    f"{outside[0]:%m-%d %H:%M} onto it; use a file spanning a whole year, "
                    "repeat = true, or a run inside the data"
                ]
            return []
        if self.start_s <= _epoch(start) and _epoch(end) <= self.end_s:
            return []
        hint = (
            "set align_year = true (typical-year data) or shorten the run to fit"
            if self.end_s - self.start_s >= _YEAR_S
            else "shorten or move the run to fit, or set repeat = true to loop the data"
        )
        return [f"{span} but {need}; {hint}"]

    def _period_problems(self) -> list[str]:
        """``repeat`` loops the file with its own span: a span that is neither whole days nor an
        even part of one (a truncated day, 23.5 h) shifts the time of day at every loop: a
        warning (a short trace without a daily shape is looped on purpose)."""
        period_s = self.end_s - self.start_s
        whole_days = period_s % 86_400 == 0
        part_of_day = period_s <= 86_400 and 86_400 % period_s == 0
        if part_of_day and not whole_days and self._wrap_jumps():  # a daily trace cut short (a third of a day)
            return [f"warning: repeat = true loops {self.path.name} every {period_s / 3600:.4g} h (its span), but "
                    "its end does not join its start: the loop jumps by more than any step inside the file, so the "
                    "file is not a whole number of its own period (a day's trace cut short?); give whole periods"]
        if whole_days or part_of_day:
            return []
        return [f"warning: repeat = true loops {self.path.name} every {period_s / 3600:.4g} h (its span), which is "
                "neither whole days nor an even part of a day: the time of day shifts at every loop (fine for a "
                "trace without a daily shape; for a daily one give a file spanning whole days)"]

    def _wrap_jumps(self) -> bool:
        """Whether, for some column, the loop from the last row back to the first is a step over
        :data:`WRAP_JUMP_FACTOR` times the largest between two rows of the file (a periodic trace
        joins its end to its start; a few rows are too few to tell)."""
        values = self.values[:-1] if self.options.repeat else self.values  # repeat appends the first row
        if len(values) < 6:
            return False
        inside = np.nanmax(np.abs(np.diff(values, axis=0)), axis=0)
        wrap = np.abs(values[0] - values[-1])
        return bool(np.any(wrap > WRAP_JUMP_FACTOR * inside + 1e-12))

    def _covers(self, seconds: float) -> bool:
        return self.start_s <= seconds < self.end_s

    # -- lookup ---------------------------------------------------------------------------------
    def values_at(self, when: datetime) -> np.ndarray:
        """Values of every column at scenario time ``when``. [column units]"""
        seconds = self.source_s(when)
        if not self._covers(seconds):
            raise ValueError(f"{_iso(_epoch(when))} is outside {self.path.name} "
                             f"({_iso(self.start_s)} to {_iso(self.end_s)})")
        i = int(np.searchsorted(self.times_s, seconds, side="right")) - 1
        if self.options.interpolation == "hold" or i + 1 >= len(self.times_s):
            return self.values[i]
        t0, t1 = self.times_s[i], self.times_s[i + 1]
        weight = (seconds - t0) / (t1 - t0)
        return self.values[i] + weight * (self.values[i + 1] - self.values[i])

    def at(self, when: datetime) -> dict[str, float]:
        """``{output name: value}`` at scenario time ``when``."""
        return dict(zip(self.names, map(float, self.values_at(when))))

    def rows_ahead(self, first: datetime, step_s: float, n: int) -> list[list[float]]:
        """The values at ``first``, ``first + step_s``, … (up to ``n`` times, fewer where the
        data ends): :meth:`values_at` of each, as lists of floats, computed in one pass.

        The same numbers as :meth:`values_at` time by time: the data times come from
        :meth:`source_s` of each time (or, for whole seconds within one UTC day, from the first
        and last time's, when their offsets agree: the mapping is then the same shift for the
        whole day), and the interpolation is the same float operations, element by element.
        """
        if n <= 0:
            return []
        seconds = self._sources_ahead(first, step_s, n)
        covered = (self.start_s <= seconds) & (seconds < self.end_s)
        if not covered.all():
            seconds = seconds[:int(np.argmin(covered))]  # up to the first time outside the data
        if not len(seconds):
            return []
        times = self.times_s
        i = np.searchsorted(times, seconds, side="right") - 1
        rows = self.values[i]
        if self.options.interpolation != "hold":
            inner = i + 1 < len(times)
            j = np.where(inner, i + 1, i)
            weight = (seconds - times[i]) / np.where(inner, times[j] - times[i], 1.0)
            interpolated = rows + weight[:, None] * (self.values[j] - rows)
            rows = np.where(inner[:, None], interpolated, rows)
        return rows.tolist()

    def column_ahead(self, column: int, first: datetime, step_s: float, n: int) -> list[float]:
        """Column ``column`` at ``first``, ``first + step_s``, … (``n`` times): a time outside the
        data repeats the value before it (the column's last row for the first).

        Element for element the float operations of :meth:`values_at` on the data times of
        :meth:`source_s` (:meth:`_forecast_sources`), so the same numbers, to the bit, as looking
        each time up alone: the rows found by bisection in the times as Python floats (where
        ``searchsorted(side="right")`` puts them), the interpolation in Python floats (each
        operation the one IEEE operation numpy's float64 makes).
        """
        seconds = self._forecast_sources(first, step_s, n)
        times, values = self._times_list(), self._column_list(column)
        hold, last_row = self.options.interpolation == "hold", len(times) - 1
        start_s, end_s = self.start_s, self.end_s
        found: list[float] = []
        for at_s in seconds:
            if not start_s <= at_s < end_s:  # outside the data: the value before
                found.append(found[-1] if found else values[-1])
                continue
            i = bisect.bisect_right(times, at_s) - 1
            if hold or i >= last_row:
                found.append(values[i])
            else:
                t0, v0 = times[i], values[i]
                weight = (at_s - t0) / (times[i + 1] - t0)
                found.append(v0 + weight * (values[i + 1] - v0))
        return found

    def _times_list(self) -> list[float]:
        """The data times as Python floats (made on the first forecast, kept). [UTC epoch s]"""
        if self._times_floats is None:
            self._times_floats = self.times_s.tolist()
        return self._times_floats

    def _column_list(self, column: int) -> list[float]:
        """Column ``column``'s values as Python floats (made on its first forecast, kept)."""
        found = self._column_floats.get(column)
        if found is None:
            found = self._column_floats[column] = self.values[:, column].tolist()
        return found

    def _forecast_sources(self, first: datetime, step_s: float, n: int) -> list[float]:
        """:meth:`source_s` of ``first + k * step_s``, ``k < n``, each the same float. For whole
        seconds the scenario times' epochs are exact sums (whole numbers of seconds), so a plain or
        repeated series maps them by arithmetic, and an aligned one shifts a UTC day's times by the
        day's one offset (:meth:`_day_shift`), or maps them one by one where it has none."""
        if not (float(step_s).is_integer() and first.microsecond == 0):
            return [self.source_s(first + timedelta(seconds=k * step_s)) for k in range(n)]
        epoch0, step = _epoch(first), float(step_s)
        epochs = [epoch0 + k * step for k in range(n)]
        if self.options.repeat:
            start_s, period = self.start_s, self.end_s - self.start_s
            return [start_s + (at_s - start_s) % period for at_s in epochs]
        if not self.options.align_year:
            return epochs
        found: list[float] = []
        a = 0
        while a < n:  # a run of times in one UTC day
            day, b = epochs[a] // 86_400, a
            while b + 1 < n and epochs[b + 1] // 86_400 == day:
                b += 1
            shift = self._day_shift(day)
            if shift is not None:
                found += [at_s + shift for at_s in epochs[a:b + 1]]
            else:  # the offset changes within the day (a file's start or end)
                found += [self.source_s(first + timedelta(seconds=k * step_s)) for k in range(a, b + 1)]
            a = b + 1
        return found

    def _day_shift(self, day: float) -> float | None:
        """The offset [s] :meth:`source_s` adds to every whole second of UTC day ``day`` (days
        since 1970), when its first and last second's agree (as :meth:`_sources_ahead` reads a
        day); None when they differ. Remembered per day."""
        if day not in self._day_shifts:
            first_s, last_s = day * 86_400, day * 86_400 + 86_399
            shifts = [self.source_s(datetime.fromtimestamp(t, timezone.utc)) - t for t in (first_s, last_s)]
            self._day_shifts[day] = shifts[0] if shifts[0] == shifts[1] else None
        return self._day_shifts[day]

    def _sources_ahead(self, first: datetime, step_s: float, n: int) -> np.ndarray:
        last = first + timedelta(seconds=(n - 1) * step_s)  # (the times between only where they are mapped one by one)
        whole = float(step_s).is_integer() and first.microsecond == 0
        if whole and last.date() == first.date() and not self.options.repeat:
            epoch0, epoch1 = _epoch(first), _epoch(last)
            shift0, shift1 = self.source_s(first) - epoch0, self.source_s(last) - epoch1
            if shift0 == shift1:
                return epoch0 + shift0 + np.arange(n, dtype=float) * float(step_s)
        return np.array([self.source_s(first + timedelta(seconds=k * step_s)) for k in range(n)], dtype=float)

    def column_max(self, name: str) -> float:
        """Largest value of column ``name`` over the whole file."""
        return float(np.max(self.values[:, self.names.index(name)]))


def series_problems(make_series, ctx: ScenarioContext) -> tuple[Any, list[str]]:
    """Build a series with ``make_series()`` and check it covers the scenario window (texts
    starting with ``"warning: "`` are warnings, the rest problems)."""
    try:
        series = make_series()
    except DataError as exc:
        return None, [str(exc)]
    return series, series.problems(ctx.start_utc, ctx.end_utc)


def errors_only(problems: list[str]) -> list[str]:
    """The problems that stop a run (warnings were shown at validation)."""
    return [p for p in problems if not p.startswith("warning: ")]


# -- mosaik adapter ---------------------------------------------------------------------------
class SignalsSim(SingleModelSim):
    """Reports the mapped columns of one data file at every step (model ``Series``).

    Its role is ``signal``; a column that is a power of the site (a PV or load trace) gets a
    role of its own in the scenario: ``[entities.pv] ... roles = { p_mw = "clean_gen" }``.
    """

    MODEL, ROLE = "Series", "signal"
    SimParams = SimParams
    EXAMPLE = {
        "sim": {
            "file": "data/carbon/DE_2024.csv.gz",
            "columns": {"ci_g_kwh": "ci_lifecycle_g_kwh", "cfe_frac": "cfe_frac"},
        },
        "models": {"Series": {}},
    }

    @classmethod
    def meta_for(cls, sim_params: SimParams) -> dict[str, Any]:
        return cls.single_meta(outputs=list(sim_params.columns))

    @classmethod
    def make_series(cls, sim_params: SimParams) -> TimeSeries:
        return TimeSeries(sim_params.file, sim_params.columns, sim_params)

    @classmethod
    def check(cls, sim_params: SimParams, ctx: ScenarioContext) -> list[str]:
        return series_problems(lambda: cls.make_series(sim_params), ctx)[1]

    def built_from(self) -> frozenset[str] | None:
        """The series is read whatever the seed; its check covers the run's window: the start's."""
        return frozenset({"start_utc", "duration_s"}) if type(self) is SignalsSim else None

    def setup(self) -> None:
        super().setup()
        ctx = ScenarioContext(self.start_utc, self.duration_s, self.step_s, self.seed, self.tick_s)
        self.series, problems = series_problems(lambda: self.make_series(self.params), ctx)
        self._ahead: dict[int, dict[str, float]] = {}  # step time [s] -> values (_read_ahead)
        problems = errors_only(problems)
        if problems:
            raise ValueError("; ".join(problems))

    def forecast(self, attr: str, start_utc: datetime, n: int, step_s: float) -> list[float] | None:
        """The next ``n`` values of column ``attr`` from ``start_utc``, ``step_s`` apart (a perfect
        forecast read ahead from the file); times past the data repeat the last value it covers."""
        if attr not in self.series.names:
            return None
        return self.series.column_ahead(self.series.names.index(attr), start_utc, step_s, n)

    def step_entities(self, time_s: float, inputs: dict[str, dict[str, Any]]) -> None:
        values = self._ahead.pop(time_s, None)  # (taken out: out[eid] is the only holder of the dict)
        if values is None:
            whole = isinstance(time_s, int) and float(self.step_s).is_integer()
            values = self._read_ahead(time_s) if whole else self.series.at(self.utc(time_s))
        out, taken = self.out, False
        for eid in self.entities:  # one file, the same values, but each entity its own dict
            out[eid] = dict(values) if taken else values
            taken = True

    def _read_ahead(self, time_s: float) -> dict[str, float]:
        """The values at this step, and at the next steps up to the end of this UTC day (at most
        :data:`AHEAD_STEPS`), read from the file in one pass (:func:`rows_to_day_end`); whole-second
        steps only (a sub-second time is a float sum: it reads time by time)."""
        when = self.utc(time_s)
        rows = rows_to_day_end(self.series, when, time_s, int(self.step_s), self.duration_s)
        if not rows:
            return self.series.at(when)  # outside the data: values_at says where
        names = self.series.names
        self._ahead = {t: dict(zip(names, row)) for t, row in rows.items()}
        return self._ahead.pop(time_s)


def rows_to_day_end(series: TimeSeries, when: datetime, time_s: int, step_s: int,
                    duration_s: int) -> dict[int, list[float]]:
    """``{step time [s]: row}`` of the step at ``time_s`` (scenario time ``when``) and the next
    ones up to the end of its UTC day and of the run (at most :data:`AHEAD_STEPS`), as
    :meth:`TimeSeries.rows_ahead` reads them in one pass; empty where the data does not cover
    ``when``. Whole seconds only (``time_s`` and ``step_s`` ints). [s]"""
    midnight = datetime.combine(when.date() + timedelta(days=1), datetime.min.time(), timezone.utc)
    left_s = (midnight - when).total_seconds()
    n = max(1, min(AHEAD_STEPS, math.ceil(left_s / step_s), math.ceil((duration_s - time_s) / step_s)))
    return {time_s + k * step_s: row for k, row in enumerate(series.rows_ahead(when, step_s, n))}
