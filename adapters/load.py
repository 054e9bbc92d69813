"""Load: a facility whose demand follows a measured power trace (CSV/Parquet).

Model ``FacilityLoad`` reads one column of a trace through the signals adapter's
:class:`~adapters.signals.TimeSeries` (same time handling: ``hold``/``linear``,
``align_year``, ``repeat``) and reports active and reactive power in the consumer
convention: ``p_mw > 0`` draws from the grid; a lagging power factor gives ``q_mvar > 0``.

Example ``[entities]`` entry::

    campus = { sim = "facility", model = "FacilityLoad",
               file = "data/loads/helios_earth_day_2020-05-20.csv", repeat = true }
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from cosim.sdk import DataFile, ScenarioContext, SingleModelSim
from cosim.adapters.signals import DataError, SeriesOptions, TimeSeries, errors_only, rows_to_day_end, series_problems


class FacilityLoadParams(SeriesOptions):
    """Params of one ``FacilityLoad`` entity.

    Attributes:
        file: the trace, CSV, CSV.gz or Parquet; relative paths resolve from the scenario.
        column: the trace's active power column. [MW]
        peak_mw: rescale the trace so its maximum over the whole file equals this; ``None``
            keeps the trace's own MW values. [MW]
        power_factor: lagging displacement power factor, ``0 < pf <= 1``. [-]
        time_column, tz, interpolation, align_year, repeat: as in the signals adapter.
    """

    file: DataFile
    column: str = "p_mw"
    peak_mw: float | None = Field(default=None, gt=0)
    power_factor: float = Field(default=0.98, gt=0, le=1)


def reactive_power_mvar(p_mw: float, power_factor: float) -> float:
    """Reactive power of a lagging load: ``q = p * tan(acos(pf))``. [Mvar]

    Args:
        p_mw: active power, consumer sign. [MW]
        power_factor: displacement power factor, ``0 < pf <= 1``. [-]
    """
    if not 0 < power_factor <= 1:
        raise ValueError(f"power_factor must be in (0, 1], got {power_factor}")
    return p_mw * math.tan(math.acos(power_factor))


class FacilityLoad:
    """A facility drawing the power of a measured trace, scaled to a peak if asked.

    Args:
        series: a one-column :class:`TimeSeries` of active power. [MW]
        peak_mw: the trace's maximum after scaling; ``None`` keeps it as is. [MW]
        power_factor: lagging displacement power factor. [-]
    """

    def __init__(self, series: TimeSeries, peak_mw: float | None = None, power_factor: float = 0.98):
        self.series = series
        self.power_factor = power_factor
        self.scale = 1.0
        if peak_mw is not None:
            trace_peak_mw = series.column_max(series.names[0])
            if trace_peak_mw <= 0:
                raise DataError(f"{series.path.name}: the trace never draws power, cannot scale to peak_mw")
            self.scale = peak_mw / trace_peak_mw
        self.q_per_p = reactive_power_mvar(1.0, power_factor)
        #: the trace's values of the steps read ahead (LoadSim), by step time [s] [MW]
        self.ahead_mw: dict[int, float] = {}

    def problems(self, start: datetime, end: datetime) -> list[str]:
        """What keeps the trace from covering ``[start, end)``; empty when fine."""
        return self.series.problems(start, end)

    def power_at(self, when: datetime) -> tuple[float, float]:
        """``(p_mw, q_mvar)`` at ``when``. [MW, Mvar]"""
        p_mw = float(self.series.values_at(when)[0]) * self.scale
        return p_mw, p_mw * self.q_per_p


def facility_from_params(params: FacilityLoadParams) -> FacilityLoad:
    """Build a :class:`FacilityLoad` (raises :class:`DataError` for an unusable file)."""
    series = TimeSeries(params.file, {"p_mw": params.column}, params)
    return FacilityLoad(series, params.peak_mw, params.power_factor)


class LoadSim(SingleModelSim):
    """Facility loads following measured traces (model ``FacilityLoad``)."""

    MODEL, PARAMS, ROLE = "FacilityLoad", FacilityLoadParams, "it"
    OUTPUTS = ("p_mw", "q_mvar", "p_it_mw")
    EXAMPLE = {
        "models": {"FacilityLoad": {"file": "data/loads/helios_earth_day_2020-05-20.csv", "repeat": True}},
    }

    @classmethod
    def check_entity(cls, model: str, params: FacilityLoadParams, ctx: ScenarioContext,
                     sim_params: BaseModel | None = None) -> list[str]:
        """Problems of one entity's trace for the scenario window (coverage, columns)."""
        return series_problems(lambda: facility_from_params(params), ctx)[1]

    def build(self, eid: str, params: FacilityLoadParams) -> FacilityLoad:
        ctx = ScenarioContext(self.start_utc, self.duration_s, self.step_s, self.seed, self.tick_s)
        facility, problems = series_problems(lambda: facility_from_params(params), ctx)
        problems = errors_only(problems)
        if problems:
            raise ValueError(f"{eid}: " + "; ".join(problems))
        return facility

    def advance(self, facility: FacilityLoad, time_s: float, inputs: dict[str, Any]) -> dict[str, float]:
        p_trace_mw = facility.ahead_mw.pop(time_s, None)
        if p_trace_mw is None and isinstance(time_s, int) and float(self.step_s).is_integer():
            self._read_ahead(facility, time_s)
            p_trace_mw = facility.ahead_mw.pop(time_s, None)
        if p_trace_mw is None:  # a sub-second time (a float sum: read time by time), or outside the data
            p_mw, q_mvar = facility.power_at(self.utc(time_s))
        else:  # power_at's arithmetic on the same trace value
            p_mw = p_trace_mw * facility.scale
            q_mvar = p_mw * facility.q_per_p
        return {"p_mw": p_mw, "q_mvar": q_mvar, "p_it_mw": p_mw}  # the trace is IT power: all of it

    def _read_ahead(self, facility: FacilityLoad, time_s: int) -> None:
        """The trace at this step and the next ones to the end of its UTC day, read in one pass
        (:func:`~cosim.adapters.signals.rows_to_day_end`: the numbers ``values_at`` gives time by time)."""
        rows = rows_to_day_end(facility.series, self.utc(time_s), time_s, int(self.step_s), self.duration_s)
        facility.ahead_mw = {t: row[0] for t, row in rows.items()}
