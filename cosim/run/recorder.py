"""Recorder: streams every recorded output to ``timeseries.parquet`` in row groups.

Part of the run, not a user-visible adapter: the engine connects each recorded
``<entity>.<attr>`` to the one ``Recorder`` entity.
Rows are buffered and written every ``chunk_rows`` steps, so memory stays flat over a
year-long run; ``close()`` writes what is buffered and the Parquet footer, and is called
on ``finalize`` and by the world when a run fails, so a failed run stays readable.
The schema is fixed up front from the column list: flags (``converged``, ``*_in_service``)
are booleans, everything else float64; the index column ``time_utc`` is a UTC timestamp.
"""

from __future__ import annotations

import math
import time as time_module
import weakref
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from cosim.run.stopping import STOP
from cosim.sdk import DIMENSIONLESS, CosimSim, Params, meta, model_meta

_OPEN: "weakref.WeakSet[ParquetRecorder]" = weakref.WeakSet()


def _is_flag(column: str) -> bool:
    attr = column.rsplit(".", 1)[-1]
    return any(attr == d or attr.endswith("_" + d) for d in DIMENSIONLESS)


class ParquetRecorder:
    """Buffers rows of fixed columns and appends them to a Parquet file as row groups.

    Args:
        path: output file.
        columns: ``<entity>.<attr>`` names, in order.
        chunk_rows: rows per row group (what is held in memory at most).
    """

    def __init__(self, path: Path, columns: list[str], chunk_rows: int = 1440):
        self.path = Path(path)
        self.columns = list(columns)
        self.chunk_rows = chunk_rows
        fields = [pa.field("time_utc", pa.timestamp("ms", tz="UTC"))]
        fields += [pa.field(c, pa.bool_() if _is_flag(c) else pa.float64()) for c in self.columns]
        self.schema = pa.schema(fields)
        self._writer = pq.ParquetWriter(self.path, self.schema, compression="zstd")
        self._buffer: dict[str, list[Any]] = {f.name: [] for f in fields}
        self._flag = {c: _is_flag(c) for c in self.columns}
        self.rows_written = 0
        _OPEN.add(self)

    def append(self, time_utc, values: dict[str, Any]) -> None:
        """Add one row; columns missing from ``values`` are null."""
        self._buffer["time_utc"].append(time_utc)
        for column in self.columns:
            self._buffer[column].append(_cell(values.get(column), self._flag[column]))
        if len(self._buffer["time_utc"]) >= self.chunk_rows:
            self.flush()

    def flush(self) -> None:
        if self._writer is None or not self._buffer["time_utc"]:
            return
        arrays = [pa.array(self._buffer[f.name], type=f.type, from_pandas=True) for f in self.schema]
        self._writer.write_table(pa.Table.from_arrays(arrays, schema=self.schema))
        self.rows_written += len(self._buffer["time_utc"])
        for column in self._buffer.values():
            column.clear()

    def close(self) -> None:
        """Write what is buffered and the footer; safe to call twice."""
        if self._writer is None:
            return
        try:
            self.flush()
        finally:
            self._writer.close()
            self._writer = None
            _OPEN.discard(self)


def _cell(value: Any, flag: bool) -> Any:
    """A value the column's type takes: flags as bool, the rest as float; what cannot be
    converted (a string, a list) is recorded as null rather than losing the whole chunk."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if flag:
        return None if math.isnan(number) else bool(number)
    return number


def close_all() -> None:
    """Close every open recorder of this process (the world calls it when a run fails)."""
    for recorder in list(_OPEN):
        recorder.close()


class SimParams(Params):
    path: str
    columns: list[str]
    chunk_rows: int = 1440
    progress: bool = False
    label: str = ""
    rt_factor: float | None = None  # wall seconds per simulated second: the lag is measured when set


#: Worst real-time lag per recorder file of this process (read by the engines after a run). [s]
RT_BEHIND_MAX_S: dict[str, float] = {}
#: Monotonic time of the last recorded step (the watchdog's heartbeat of a run's progress). [s]
LAST_STEP_MONOTONIC: list[float] = [0.0]


class RecorderSim(CosimSim):
    """mosaik face of :class:`ParquetRecorder`, with the run's progress bar."""

    META = meta({"Recorder": model_meta(any_inputs=True, role="other")})
    SimParams = SimParams
    EXAMPLE = {"sim": {"path": "{tmp}/timeseries.parquet", "columns": ["x.p_mw"]}, "models": {"Recorder": {}}}

    def setup(self) -> None:
        p = self.params
        self.recorder = ParquetRecorder(Path(p.path), p.columns, p.chunk_rows)
        n_steps = self.duration_s // self.step_s
        self.bar = tqdm(total=n_steps, unit="step", desc=p.label or "run", disable=not p.progress,
                        dynamic_ncols=True, mininterval=0.5, smoothing=0.1)
        self._wall0: float | None = None
        if p.rt_factor is not None:
            RT_BEHIND_MAX_S[p.path] = 0.0

    def create_entity(self, eid, model, params) -> None:
        pass

    def step(self, time, inputs, max_advance):
        row: dict[str, Any] = {}
        for attrs in inputs.values():
            for attr, sources in attrs.items():
                for full_id, value in sources.items():
                    row[f"{full_id.split('.', 1)[1]}.{attr}"] = value
        return self.record(int(time), row)

    def record(self, time: int, row: dict[str, Any]) -> int:
        """Write one row ``{"<entity>.<attr>": value}`` at ``time``; the next step time.

        The direct engine calls this with the row it read from the caches, skipping mosaik's
        input format (and its flattening here), which cost ~half its per-step time."""
        STOP.check()  # SIGTERM / Ctrl-C stop the run here, at a step boundary (cosim.run.stopping)
        LAST_STEP_MONOTONIC[0] = time_module.monotonic()
        stamp = self.start_utc + timedelta(seconds=int(time))
        self.recorder.append(stamp, row)
        if self.params.rt_factor is not None:
            self._track_lag(int(time))
        self.bar.update(1)
        self.bar.set_postfix_str(stamp.strftime("%Y-%m-%d %H:%M UTC"), refresh=False)
        return int(time) + self.step_s

    def _track_lag(self, time_s: int) -> None:
        """How far the wall clock is past ``rt_factor * time_s`` once this step's data is in. [s]"""
        now = time_module.perf_counter()
        if self._wall0 is None:
            self._wall0 = now
        behind_s = (now - self._wall0) - self.params.rt_factor * time_s
        RT_BEHIND_MAX_S[self.params.path] = max(RT_BEHIND_MAX_S[self.params.path], behind_s)

    def finalize(self) -> None:
        self.bar.close()
        self.recorder.close()
