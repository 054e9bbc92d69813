"""Forecast windows of an agent (``forecasts = [...]`` of ``[agent]``): parsed, validated, archives read.

A forecast is the next ``n`` values of a signal output, ``step_s`` apart from the decision
time, seen through an error model (``error = {...}``, :class:`ForecastError`): ``none`` (an
oracle), ``persistence``, ``gaussian`` (seeded noise; :mod:`cosim.gym.observations` applies
them) or ``archive``: forecasts a user issued or collected, read from a file
(:class:`ForecastArchive`). No archive ships with cosim (``scenarios/data/`` holds observed
series only); the file format is that of :func:`read_archive`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pydantic

from cosim import registry
from cosim.errors import Problem, few
from cosim.gym._check import is_table, number
from cosim.scenario import Scenario
from cosim.sdk import CosimSim, DataFile
from cosim.adapters._bounded_read import TableTooLarge, read_table_bounded

FORECAST_KEYS = ("signal", "n", "step_s", "error")
#: Forecast error models and the keys each takes besides ``model``.
ERROR_MODELS: dict[str, tuple[str, ...]] = {"none": (), "persistence": (), "gaussian": ("sigma_frac", "seed_offset"),
                                            "archive": ("file", "column", "interpolation")}
ERROR_EXAMPLE = ('error = { model = "gaussian", sigma_frac = 0.1 } or error = { model = "persistence" } or '
                 'error = { model = "archive", file = "forecasts.csv", column = "ci_g_kwh" }')
#: The columns of an archive file besides the forecast's own.
TIME_COLUMN, ISSUED_COLUMN = "time_utc", "issued_utc"
#: Issues an archive lookup compares at once (a day-ahead year has 365; most leads hit the latest few).
_CHUNK = 32


@dataclass(frozen=True, eq=False)
class ForecastArchive:
    """Issued forecasts read from a file (:func:`read_archive`), grouped by issue.

    Attributes:
        name: the file's name (for messages).
        interpolation: ``"hold"`` or ``"linear"`` between an issue's target times.
        issued_s: each issue's issue time, ascending; ``-inf`` for a file without ``issued_utc``
            (one issue, known from the start). [UTC epoch s]
        bounds: each issue's first row in ``targets_s`` and ``values``, then their length.
        targets_s: target times, increasing within an issue. [UTC epoch s]
        values: the forecast values. [the signal's unit]
        lo_s, hi_s: the targets ``[lo, hi)`` each issue covers; its last target lasts one more
            interval (that between its last two targets, or the file's smallest). [UTC epoch s]
    """

    name: str
    interpolation: str
    issued_s: np.ndarray
    bounds: np.ndarray
    targets_s: np.ndarray
    values: np.ndarray
    lo_s: np.ndarray
    hi_s: np.ndarray

    @property
    def has_issues(self) -> bool:
        return bool(np.isfinite(self.issued_s).any())

    def issue_for(self, t_s: float, targets_s: np.ndarray) -> np.ndarray:
        """For each target, the latest issue made at or before ``t_s`` that covers it (-1: none)."""
        found = np.full(len(targets_s), -1)
        todo = np.arange(len(targets_s))
        stop = int(np.searchsorted(self.issued_s, t_s, side="right"))  # issues after t_s are unknown at t_s
        while todo.size and stop > 0:
            first = max(0, stop - _CHUNK)
            taus = targets_s[todo]
            cover = (self.lo_s[first:stop, None] <= taus) & (taus < self.hi_s[first:stop, None])
            hit = cover.any(axis=0)
            latest = stop - 1 - np.argmax(cover[::-1], axis=0)
            found[todo[hit]] = latest[hit]
            todo, stop = todo[~hit], first
        return found

    def leads(self, utc: datetime, n: int, step_s: int) -> list[float]:
        """The archived values for targets ``utc + k·step_s``, ``k = 1 … n − 1``. [the signal's unit]

        Raises:
            ValueError: a target no issue made by ``utc`` covers (validation checked every
                decision time of the section's episodes; another start can fall outside).
        """
        t_s = utc.timestamp()
        targets = t_s + np.arange(1, n, dtype=float) * step_s
        found = self.issue_for(t_s, targets)
        if (found < 0).any():
            k = int(np.argmax(found < 0))
            raise ValueError(f"{self.name}: no forecast issued at or before {_iso(t_s)} covers "
                             f"{_iso(targets[k])}; give an archive covering the episode")
        return [self._value(int(i), float(tau)) for i, tau in zip(found, targets)]

    def _value(self, issue: int, tau: float) -> float:
        first, end = self.bounds[issue], self.bounds[issue + 1]
        times, values = self.targets_s[first:end], self.values[first:end]
        j = int(np.searchsorted(times, tau, side="right")) - 1
        if self.interpolation == "hold" or j + 1 >= len(times):
            return float(values[j])
        weight = (tau - times[j]) / (times[j + 1] - times[j])
        return float(values[j] + weight * (values[j + 1] - values[j]))


@dataclass(frozen=True)
class ForecastError:
    """How a forecast window departs from the data (``error = {...}`` of a forecast).

    Attributes:
        model: ``"none"`` (the default: an oracle, the signal's future values read from its data
            file or tariff, exactly), ``"persistence"`` (every lead is the last observed value of
            the signal), ``"gaussian"`` (the data times ``1 + e``, with ``e`` a Gaussian random
            walk over the lead: its standard deviation is ``sigma_frac · sqrt(lead_s / 3600)``,
            i.e. ``sigma_frac`` at one hour ahead, growing like the square root of the lead, and
            0 at lead 0) or ``"archive"`` (leads >= 1 read from ``file``, lead 0 the signal's
            value as for ``none``). See :mod:`cosim.gym.observations`.
        sigma_frac: the relative error's standard deviation one hour ahead. [-]
        seed_offset: added to the episode's scenario seed for this forecast's noise, so that two
            forecasts of one signal can have independent errors. [-]
        file: the archive file (resolved from the scenario's folder), or None. [path]
        column: the archive's forecast column. [the signal's unit]
        interpolation: ``"hold"`` (default) or ``"linear"`` between an issue's target times.
        archive: the archive, read at spec build.
    """

    model: str = "none"
    sigma_frac: float = 0.0
    seed_offset: int = 0
    file: Path | None = None
    column: str = ""
    interpolation: str = "hold"
    archive: ForecastArchive | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ForecastSpec:
    """The next ``n`` values of a signal output, ``step_s`` apart from the decision time, with
    their error model (default none: an oracle)."""

    entity: str
    attr: str
    n: int
    step_s: int
    error: ForecastError = ForecastError()

    @property
    def names(self) -> list[str]:
        return [f"{self.entity}.{self.attr}@+{k * self.step_s}s" for k in range(self.n)]


# -- parsing ---------------------------------------------------------------------------------
def parse_forecasts(scn: Scenario, value: Any, where: str, problems: list[Problem],
                    decisions_s: np.ndarray) -> list[ForecastSpec]:
    """The ``forecasts`` list of an agent (problems appended; what is wrong is left out).

    Args:
        decisions_s: every decision time the section's episodes can have (an archive must cover
            the leads of each). [UTC epoch s]
    """
    if not isinstance(value, list):
        problems.append(Problem(where, 'give a list of tables, e.g. [{ signal = "grid_ci.ci_g_kwh", n = 6, '
                                       'step_s = 3600 }]', value))
        return []
    found = []
    for i, body in enumerate(value):
        spec = _forecast(scn, body, f"{where}[{i}]", problems, decisions_s)
        if spec is not None:
            found.append(spec)
    return found


def _forecast(scn: Scenario, body: Any, where: str, problems: list[Problem],
              decisions_s: np.ndarray) -> ForecastSpec | None:
    before = len(problems)
    if not is_table(body, where, FORECAST_KEYS, '{ signal = "grid_ci.ci_g_kwh", n = 6 }', problems):
        return None
    n, step_s = body.get("n", 1), body.get("step_s", 3600)
    for key, count in (("n", n), ("step_s", step_s)):
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            problems.append(Problem(f"{where}.{key}", "give a whole number >= 1", count))
    name = body.get("signal")
    eid, _, attr = name.partition(".") if isinstance(name, str) else ("", "", "")
    if eid not in scn.entities or attr not in scn.outputs(eid):
        problems.append(Problem(f"{where}.signal", 'give "<entity>.<output>" of a signal, e.g. "grid_ci.ci_g_kwh"',
                                name))
    else:
        cls = registry.adapter_class(scn.sims[scn.entities[eid].sim].adapter)
        if getattr(cls, "forecast", CosimSim.forecast) is CosimSim.forecast:
            problems.append(Problem(f"{where}.signal", f"{eid}'s adapter ({scn.sims[scn.entities[eid].sim].adapter}) "
                                                       "cannot look ahead; forecast a signals or tariff output", name))
    error = _forecast_error(body.get("error", {"model": "none"}), f"{where}.error", problems)
    if len(problems) > before:
        return None
    if error.model == "archive":
        error = _with_archive(scn, body["error"], error, f"{where}.error", problems, (n, step_s, decisions_s))
    return None if len(problems) > before else ForecastSpec(eid, attr, n, step_s, error)


def _forecast_error(body: Any, where: str, problems: list[Problem]) -> ForecastError:
    """A forecast's ``error`` table (problems appended; no error where it is wrong)."""
    if not isinstance(body, dict):
        problems.append(Problem(where, f"must be a table, e.g. {ERROR_EXAMPLE}", body))
        return ForecastError()
    model = body.get("model")
    if model not in ERROR_MODELS:
        problems.append(Problem(f"{where}.model", f"unknown forecast error model; give one of "
                                                  f"{', '.join(ERROR_MODELS)}, e.g. {ERROR_EXAMPLE}", model))
        return ForecastError()
    allowed = ERROR_MODELS[model]
    for key in body:
        if key != "model" and key not in allowed:
            problems.append(Problem(f"{where}.{key}", f"not a key of the {model!r} error model, which takes "
                                                      f"{', '.join(('model', *allowed))}", body[key]))
    if model == "gaussian":
        return _gaussian(body, where, problems)
    if model == "archive":
        return _archive_keys(body, where, problems)
    return ForecastError(model)


def _gaussian(body: dict[str, Any], where: str, problems: list[Problem]) -> ForecastError:
    sigma = body.get("sigma_frac")
    if sigma is None:
        problems.append(Problem(f"{where}.sigma_frac", "required by the gaussian model: the relative error one "
                                                       "hour ahead, e.g. sigma_frac = 0.1 for 10 %"))
        sigma = 0.0
    elif not number(sigma) or not 0.0 < sigma <= 10.0:
        problems.append(Problem(f"{where}.sigma_frac", "give the relative error one hour ahead, a number in "
                                                       "(0, 10], e.g. 0.1 for 10 %", sigma))
        sigma = 0.0
    offset = body.get("seed_offset", 0)
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        problems.append(Problem(f"{where}.seed_offset", "give a whole number >= 0 (added to the scenario seed)",
                                offset))
        offset = 0
    return ForecastError("gaussian", float(sigma), offset)


def _archive_keys(body: dict[str, Any], where: str, problems: list[Problem]) -> ForecastError:
    """The keys of an ``archive`` error table (the file is read by :func:`_with_archive`)."""
    for key, text in (("file", 'the CSV or Parquet of issued forecasts, relative to the scenario file, e.g. '
                               'file = "data/forecasts/ci_day_ahead.csv"'),
                      ("column", 'the forecast column, in the signal\'s unit, e.g. column = "ci_g_kwh"')):
        if key not in body:
            problems.append(Problem(f"{where}.{key}", f"required by the archive model: {text}"))
        elif not isinstance(body[key], str) or not body[key]:
            problems.append(Problem(f"{where}.{key}", f"give {text}", body[key]))
    interpolation = body.get("interpolation", "hold")
    if interpolation not in ("hold", "linear"):
        problems.append(Problem(f"{where}.interpolation", 'give "hold" (a value applies until the next target '
                                                          'time) or "linear"', interpolation))
    return ForecastError("archive", column=str(body.get("column", "")), interpolation=str(interpolation))


def _with_archive(scn: Scenario, body: dict[str, Any], error: ForecastError, where: str, problems: list[Problem],
                  window: tuple[int, int, np.ndarray]) -> ForecastError:
    """``error`` with its archive read and checked against every lead of ``window`` (``n``,
    ``step_s``, the decision times [UTC epoch s]); problems appended, each naming its key."""
    try:
        path = pydantic.TypeAdapter(DataFile).validate_python(body["file"], context={"base_dir": scn.base_dir})
    except pydantic.ValidationError as exc:
        reason = exc.errors()[0]["msg"].removeprefix("Value error, ")
        problems.append(Problem(f"{where}.file", f"{reason}; a relative path resolves from the scenario's "
                                                 f"folder ({scn.base_dir})", body["file"]))
        return error
    try:
        archive = read_archive(path, error.column, error.interpolation)
    except ArchiveError as exc:
        problems.append(Problem(f"{where}.{exc.key}", str(exc), body[exc.key]))
        return error
    gap = coverage_gap(archive, *window)
    if gap:
        problems.append(Problem(f"{where}.file", gap, body["file"]))
    return ForecastError("archive", file=path, column=error.column, interpolation=error.interpolation,
                         archive=archive)


def coverage_gap(archive: ForecastArchive, n: int, step_s: int, decisions_s: np.ndarray) -> str:
    """Why ``archive`` cannot give leads ``1 … n − 1`` at every decision time; empty when it can."""
    leads_s = np.arange(1, n, dtype=float) * step_s
    for t_s in decisions_s if n > 1 else ():
        found = archive.issue_for(float(t_s), t_s + leads_s)
        if (found >= 0).all():
            continue
        k = int(np.argmax(found < 0)) + 1
        need = (f"the episodes (the scenario's start, start_window and eval_starts days) decide from "
                f"{_iso(decisions_s[0])} to {_iso(decisions_s[-1])}, each needing leads 1 to {n - 1} × {step_s} s")
        if not archive.has_issues:
            return (f"{archive.name} covers {_iso(archive.lo_s[0])} to {_iso(archive.hi_s[0])}, but the decision at "
                    f"{_iso(t_s)} needs {_iso(t_s + k * step_s)} (lead {k}); {need}: extend the file, or shorten "
                    "n, step_s or the episodes")
        return (f"no forecast in {archive.name} issued at or before {_iso(t_s)} covers {_iso(t_s + k * step_s)} "
                f"(lead {k}); {need}, from a forecast issued by then: add the issues, or shorten n, step_s or "
                "the episodes")
    return ""


# -- reading an archive ------------------------------------------------------------------------
class ArchiveError(ValueError):
    """An archive file that cannot serve, with the ``error`` key to blame (``file`` or ``column``)."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


def read_archive(path: Path, column: str, interpolation: str = "hold") -> ForecastArchive:
    """Read an archive of issued forecasts (cached by path, size and modification time).

    The file (CSV, CSV.gz or Parquet) has one row per forecast value: ``time_utc`` (its target
    time), ``column`` (the value, in the signal's unit) and optionally ``issued_utc`` (when it
    was issued; without it the file is one forecast, known from the start). Times are ISO 8601
    marked UTC (``Z`` or ``+00:00``); rows are sorted by ``issued_utc``, then ``time_utc``,
    target times increasing within an issue.

    Raises:
        ArchiveError: what is wrong, naming the row and the fix.
    """
    stat = Path(path).stat()
    return _read_cached(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size, column, interpolation)


@functools.lru_cache(maxsize=16)
def _read_cached(path: str, mtime_ns: int, size: int, column: str, interpolation: str) -> ForecastArchive:
    name = Path(path).name
    frame = _frame(path, name)
    missing = [c for c in (TIME_COLUMN, column) if c not in frame.columns]
    if missing:
        raise ArchiveError("column" if column in missing else "file",
                           f"{name} has no column {', '.join(map(repr, missing))}; columns: "
                           f"{few([str(c) for c in frame.columns])} (the file needs {TIME_COLUMN} and the "
                           "forecast column, in the signal's unit)")
    if len(frame) < 1:
        raise ArchiveError("file", f"{name} has no rows; give one row per forecast value")
    targets = _utc_s(frame[TIME_COLUMN], TIME_COLUMN, name)
    issued = _utc_s(frame[ISSUED_COLUMN], ISSUED_COLUMN, name) if ISSUED_COLUMN in frame.columns \
        else np.full(len(frame), -np.inf)
    values = _values(frame[column], column, name)
    _check_sorted(issued, targets, ISSUED_COLUMN in frame.columns, name)
    return _grouped(name, interpolation, issued, targets, values)


def _frame(path: str, name: str) -> pd.DataFrame:
    try:  # within stated size and row limits; a blank or "n/a" is quoted as written, not as nan
        return read_table_bounded(path, keep_default_na=False)
    except TableTooLarge as exc:
        raise ArchiveError("file", str(exc)) from None
    except Exception as exc:  # pandas raises many types for a bad file
        raise ArchiveError("file", f"{name} cannot be read as CSV or Parquet ({str(exc)[:120]}); give a CSV "
                                   f"with {TIME_COLUMN}, the forecast column and optionally {ISSUED_COLUMN}") from None


def _utc_s(raw: pd.Series, column: str, name: str) -> np.ndarray:
    """ISO 8601 times marked UTC as epoch seconds; a naive or offset time is refused (a forecast
    archive in local market time would shift every lead by its offset)."""
    if pd.api.types.is_datetime64_any_dtype(raw):
        if raw.dt.tz is None or str(raw.dt.tz) not in ("UTC", "utc"):
            raise ArchiveError("file", f"{name}: {column} has no UTC time zone ({raw.dt.tz}); store UTC times")
        return raw.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy("datetime64[ns]").astype(np.int64) / 1e9
    text = raw.astype("string").str.strip()
    parsed = pd.to_datetime(text, format="ISO8601", errors="coerce", utc=True)
    bad = parsed.isna().to_numpy()
    marked = text.str.contains(r"(?:Z|[+-]00:?00)$", case=False, regex=True).fillna(False).to_numpy(dtype=bool)
    for broken, why in ((bad, "is not an ISO 8601 time"), (~marked, "is not marked UTC")):
        if broken.any():
            row = int(np.argmax(broken))
            raise ArchiveError("file", f"{name}: {column} {str(raw.iloc[row])[:40]!r} in data row {row + 1} {why}; "
                                       "give UTC times ending in Z or +00:00, e.g. 2024-07-15T13:00:00Z")
    return parsed.dt.tz_localize(None).to_numpy("datetime64[ns]").astype(np.int64) / 1e9


def _values(raw: pd.Series, column: str, name: str) -> np.ndarray:
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    broken = ~np.isfinite(values)
    if broken.any():
        row = int(np.argmax(broken))
        raise ArchiveError("column", f"{name}: {column} has no finite number in data row {row + 1} "
                                     f"({str(raw.iloc[row])[:40]!r}); give a value in the signal's unit in every row")
    return values


def _check_sorted(issued: np.ndarray, targets: np.ndarray, has_issued: bool, name: str) -> None:
    same_issue = issued[1:] == issued[:-1] if has_issued else np.ones(len(targets) - 1, dtype=bool)
    out_of_order = (issued[1:] < issued[:-1]) | (same_issue & (targets[1:] <= targets[:-1]))
    if out_of_order.any():
        row = int(np.argmax(out_of_order)) + 1
        order = f"{ISSUED_COLUMN}, then {TIME_COLUMN}" if has_issued else TIME_COLUMN
        later, earlier = (_row_times(issued, targets, r, has_issued) for r in (row, row - 1))
        raise ArchiveError("file", f"{name}: data row {row + 1} ({later}) does not follow data row {row} "
                                   f"({earlier}); sort the file by {order} and drop duplicates")


def _row_times(issued: np.ndarray, targets: np.ndarray, row: int, has_issued: bool) -> str:
    target = f"{TIME_COLUMN} {_iso(targets[row])}"
    return f"{ISSUED_COLUMN} {_iso(issued[row])}, {target}" if has_issued else target


def _grouped(name: str, interpolation: str, issued: np.ndarray, targets: np.ndarray,
             values: np.ndarray) -> ForecastArchive:
    """The rows as issues, each covering its first target to its last plus one interval."""
    firsts = np.flatnonzero(np.r_[True, issued[1:] != issued[:-1]]) if len(issued) > 1 else np.array([0])
    bounds = np.r_[firsts, len(targets)]
    distinct = np.diff(np.unique(targets))
    if not len(distinct):
        raise ArchiveError("file", f"{name} has one target time only ({_iso(targets[0])}); give at least two, "
                                   "so that the last one's interval is known")
    smallest = float(distinct.min())
    lo, hi = [], []
    for first, end in zip(bounds[:-1], bounds[1:]):
        last_interval = targets[end - 1] - targets[end - 2] if end - first > 1 else smallest
        lo.append(targets[first])
        hi.append(targets[end - 1] + last_interval)
    return ForecastArchive(name, interpolation, issued[firsts], bounds, targets, values, np.array(lo), np.array(hi))


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(float(seconds), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
