"""Recorder: streams every recorded output to ``timeseries.parquet`` in row groups.

Part of the run, not a user-visible adapter: the engine connects each recorded
``<entity>.<attr>`` to the one ``Recorder`` entity.
Rows are buffered and written every ``chunk_rows`` steps, so memory stays flat over a
year-long run; ``close()`` writes what is buffered and the Parquet footer, and is called
on ``finalize`` and by the engines when a run fails, so a failed run stays readable.

Crash safety: a Parquet file is readable only once its footer is written, so a run killed
by SIGKILL or the out-of-memory killer used to leave a 4-byte file. Rows are written into
*segments* (``.timeseries.part-00001.parquet``, ... in the run folder), and every flush is a
segment of its own, closed (footer and all) as soon as it is written: buffered rows are flushed
every ``chunk_rows`` rows and at least every ``flush_s`` seconds of wall time (1 s by default,
the first flush included), also while a slow step keeps the next row from coming (the engines'
background writer checks the clock). A segment cut before its footer therefore holds only the
one flush that was being written when the kill came, and a killed run loses at most about
``2 * flush_s`` of wall time of rows (what was buffered, and the flush being written).
Segments rather than one append-only file: each is a complete Parquet file any tool reads, and
what is kept between flushes is compressed as the final file is (an Arrow IPC stream, readable
when cut, would hold a year's rows uncompressed, ~0.8 GB for the default scenario's columns).
``close()`` assembles the segments into ``timeseries.parquet`` (:func:`assemble`), and
``cosim repair RUN`` does it for a killed one.
The schema is fixed up front from the column list: flags (``converged``, ``*_in_service``)
are booleans, everything else float64; the index column ``time_utc`` is a UTC timestamp.

The buffer is columnar: one preallocated float64 block of ``columns x chunk_rows`` that a
row fills in one numpy assignment, NaN standing for null (flags are stored as numbers and
become booleans, NaN as the null mask, when a row group is written).

The engines' recorders encode and write in a thread of their own (``background``): the row
groups go into the segments as above and, once there is a second segment, joined as
:func:`assemble` joins them, into ``timeseries.parquet`` itself, so a finished run needs no
second pass over its segments (a year's took ~7 s); a run of one segment renames it, as
before; a kill still leaves the segments, and ``cosim repair`` assembles them.

The direct engine fills rows another way (:meth:`ParquetRecorder.append_refs`): per step it
hands over the source entities' output dicts themselves (the ones ``get_data`` returned,
which no one changes afterwards), and each column is read out of them when the row group is
written: one list per column instead of a Python pass over every cell of every step. The
values are converted exactly as a row of cells would be (:meth:`ParquetRecorder.set_plan`).
"""

from __future__ import annotations

import itertools
import math
import operator
import queue
import threading
import time as time_module
import weakref
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
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
        path: the final file (segments are written beside it, see the module docstring).
        columns: ``<entity>.<attr>`` names, in order.
        chunk_rows: rows per row group (what is held in memory at most).
        flush_s: write what is buffered, and close the segment, at least this often. [s]
        background: encode and write the row groups in a thread of their own (the engines' runs),
            which also writes ``timeseries.parquet`` as it goes (the segments joined as
            :func:`assemble` joins them), so closing needs no second pass over the segments.
            The rows are the same; the segments are written as they would be.
    """

    def __init__(self, path: Path, columns: list[str], chunk_rows: int = 1440, flush_s: float = 1.0,
                 background: bool = False):
        self.path = Path(path)
        self.columns = list(columns)
        self.chunk_rows = chunk_rows
        self.flush_s = flush_s
        fields = [pa.field("time_utc", pa.timestamp("ms", tz="UTC"))]
        fields += [pa.field(c, pa.bool_() if _is_flag(c) else pa.float64()) for c in self.columns]
        self.schema = pa.schema(fields)
        self._writer: pq.ParquetWriter | None = None  # the segment being written
        self._n_segments = 0
        self._closed = False
        self._last_flush = time_module.monotonic()
        self._due_real_s = _REAL_CLOCK() + flush_s  # when the background writer flushes rows left waiting
        # rows are added by the run's thread and, when a slow step keeps the next row from coming,
        # flushed by the background writer: one at a time
        self._lock = threading.RLock()
        self._flag = [_is_flag(c) for c in self.columns]
        # time stamps stay Python objects until written: pyarrow converts them as it always did
        self._stamps: list[Any] = []
        self._values = np.empty((len(self.columns), chunk_rows))  # NaN = null
        self.rows_written = 0
        # the direct engine's rows (append_refs): per row the source dicts, per column where it is read
        self._plan: tuple[list[tuple[int, str] | None], int, int | None, datetime] | None = None
        self._ref_rows: list[list[dict[str, Any]]] = []
        self._ticks: list[int] = []
        self._background = background
        self._thread: _WriterThread | None = None
        self._joined: pq.ParquetWriter | None = None  # background: timeseries.parquet being written
        self._joined_pending: list[pa.Table] = []
        _OPEN.add(self)
        if background:  # started at once: it also flushes rows a slow step leaves waiting
            self._thread = _WriterThread(self)
            self._thread.start()

    def set_plan(self, fills: list[tuple[int, str] | None], start_utc: datetime, ticks_per_s: int) -> None:
        """Rows will come as :meth:`append_refs`: column ``j`` is attribute ``fills[j][1]`` of the
        row's dict number ``fills[j][0]`` (None: a column no source fills, all null). A row's time
        stamp is ``start_utc`` plus its mosaik time in ticks of ``1 / ticks_per_s`` s (whole
        milliseconds, as :meth:`RecorderSim.record_cells` computes it)."""
        if len(fills) != len(self.columns):
            raise ValueError(f"a plan of {len(fills)} columns for a recorder of {len(self.columns)}")
        epoch = datetime(1970, 1, 1, tzinfo=timezone.utc if start_utc.tzinfo is not None else None)
        whole_ms = start_utc.microsecond % 1000 == 0  # else the stamps go through datetimes, as per cell
        start_ms = (start_utc - epoch) // timedelta(milliseconds=1) if whole_ms else None
        self._plan = (list(fills), ticks_per_s, start_ms, start_utc)

    def append_refs(self, ticks: int, refs: list[dict[str, Any]]) -> None:
        """Add one row as the output dicts of :meth:`set_plan` (kept, read when written) at mosaik time ``ticks``."""
        with self._lock:
            self._check_open()
            if self._stamps:  # rows of cells before (not done by the engines): written first, in order
                self.flush()
            self._ref_rows.append(refs)
            self._ticks.append(ticks)
            if len(self._ticks) >= self.chunk_rows or time_module.monotonic() - self._last_flush >= self.flush_s:
                self.flush()

    def append(self, time_utc, values: dict[str, Any]) -> None:
        """Add one row; columns missing from ``values`` are null."""
        self.append_cells(time_utc, [values.get(column) for column in self.columns])

    def append_cells(self, time_utc, cells: list[Any]) -> None:
        """Add one row given as one value per column, in column order (``None`` = null)."""
        with self._lock:
            self._check_open()
            if self._ticks:  # rows of dicts before (not done by the engines): written first, in order
                self.flush()
            row = len(self._stamps)
            if _PLAIN_TYPES.issuperset(map(type, cells)):
                # numpy converts these types as float() does (None becomes NaN, i.e. null), so
                # the row goes in as one assignment instead of a Python call per cell
                self._values[:, row] = cells
            else:
                self._values[:, row] = [_number(value, flag) for value, flag in zip(cells, self._flag)]
            self._stamps.append(time_utc)
            if row + 1 >= self.chunk_rows or time_module.monotonic() - self._last_flush >= self.flush_s:
                self.flush()

    def _check_open(self) -> None:
        """A row after :meth:`close` would be dropped without a word: refuse it."""
        if self._closed:
            raise RuntimeError(f"the recorder of {self.path} is closed; this row would be lost")

    def flush(self) -> None:
        """Write the buffered rows as a segment of their own (closed: readable after a kill)."""
        with self._lock:
            if self._closed:
                return
            if self._stamps or self._ticks:
                self._write_row_group()
                self._close_segment()
            self._last_flush = time_module.monotonic()
            self._due_real_s = _REAL_CLOCK() + self.flush_s

    def flush_if_waiting(self) -> None:
        """Flush rows that have waited ``flush_s`` of wall time for the next row (the background
        writer calls this between its work: a slow step must not hold rows back from the disk).
        Skipped while the run's thread is adding a row (it flushes itself when due)."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            if not self._closed and (self._stamps or self._ticks) and _REAL_CLOCK() >= self._due_real_s:
                self.flush()
        finally:
            self._lock.release()

    def _write_row_group(self) -> None:
        if self._ticks:
            n_rows, stamps, columns = len(self._ticks), self._ref_stamps(), self._ref_columns()
        else:
            n_rows, stamps, columns = len(self._stamps), self._stamps, self._values[:, :len(self._stamps)]
            if self._background:  # the buffer is refilled while the thread encodes: hand it a copy
                columns = columns.copy()
        arrays = [pa.array(stamps, type=self.schema.field(0).type, from_pandas=True)]
        for values, flag in zip(columns, self._flag):
            if flag:
                arrays.append(pa.array(values != 0.0, mask=np.isnan(values), type=pa.bool_()))
            else:
                arrays.append(pa.array(values, type=pa.float64(), from_pandas=True))  # NaN -> null
        table = pa.Table.from_arrays(arrays, schema=self.schema)
        if self._background:
            self._submit("table", table)
        else:
            self._write_table(table)
        self.rows_written += n_rows
        self._stamps.clear()
        self._ticks.clear()
        self._ref_rows.clear()

    def _ref_stamps(self):
        """The buffered rows' time stamps (ms since the epoch, or datetimes for a start with sub-ms)."""
        _, tps, start_ms, start_utc = self._plan
        if start_ms is None:
            return [start_utc + timedelta(seconds=t // tps, milliseconds=(t % tps) * 1000 // tps)
                    for t in self._ticks]
        ticks = np.array(self._ticks, dtype=np.int64)
        return start_ms + (ticks // tps) * 1000 + (ticks % tps) * 1000 // tps

    def _ref_columns(self):
        """Each column of the buffered rows as float64 (NaN = null), converted as :meth:`append_cells` would.

        A column's cells are plain numbers (numpy converts them as ``float()`` does, None to
        NaN) or go through :func:`_number` one by one; a row of cells with one odd cell
        converts every cell that way, which gives the same numbers for the plain ones.

        A source dict's columns are read together: its values row after row through one C-level
        ``itemgetter`` per dict, converted at once and cut into columns (a Python loop per cell took
        ~40 % longer on the default scenario's 196 columns). A source with some odd cell, or an
        output missing at some step (null there), is read column by column.
        """
        fills = self._plan[0]
        n_rows = len(self._ref_rows)
        by_source: dict[int, dict[str, int]] = {}  # the attributes read from each dict, in column order
        for fill in fills:
            if fill is not None:
                attrs = by_source.setdefault(fill[0], {})
                attrs.setdefault(fill[1], len(attrs))
        blocks: dict[int, np.ndarray | list[list[Any]]] = {}
        for index, attrs in by_source.items():
            dicts = [row[index] for row in self._ref_rows]
            names = tuple(attrs)
            getter = operator.itemgetter(*names) if len(names) > 1 else (lambda d, only=names[0]: (d[only],))
            try:
                flat = list(itertools.chain.from_iterable(map(getter, dicts)))
            except KeyError:  # an entity that did not give this output at some step: null there
                blocks[index] = [[d.get(attr) for d in dicts] for attr in names]
                continue
            if _PLAIN_TYPES.issuperset(map(type, flat)):
                blocks[index] = np.array(flat, dtype=float).reshape(n_rows, len(names)).T.copy()
            else:
                blocks[index] = [flat[k::len(names)] for k in range(len(names))]
        for fill, flag in zip(fills, self._flag):
            if fill is None:
                yield np.full(n_rows, np.nan)
                continue
            cells = blocks[fill[0]][by_source[fill[0]][fill[1]]]
            if isinstance(cells, np.ndarray):
                yield cells
            elif _PLAIN_TYPES.issuperset(map(type, cells)):
                yield np.array(cells, dtype=float)
            else:
                yield np.array([_number(value, flag) for value in cells], dtype=float)

    def _write_table(self, table: pa.Table) -> None:
        """One row group into the current segment (opened here); in the background, from the
        second segment on, also into ``timeseries.parquet``, joined up to ``chunk_rows`` rows as
        :func:`assemble` joins them (a run of one segment is that segment, renamed at close)."""
        if self._writer is None:
            self._n_segments += 1
            if self._background and self._n_segments == 2:  # more than one segment: join as we go
                self._joined = pq.ParquetWriter(_joined_path(self.path), self.schema, compression="zstd",
                                                use_dictionary=False)
                first = pq.ParquetFile(segment_path(self.path, 1))
                for group in range(first.num_row_groups):
                    self._join(first.read_row_group(group, use_threads=False))
            # No dictionary pages: float time series rarely repeat, so they took half the write time
            # and made the file larger (default day: 1.42 -> 1.18 MB); values are the same.
            self._writer = pq.ParquetWriter(segment_path(self.path, self._n_segments), self.schema,
                                            compression="zstd", use_dictionary=False)
        self._writer.write_table(table)
        if self._joined is not None:
            self._join(table)

    def _join(self, table: pa.Table) -> None:
        self._joined_pending.append(table)
        if sum(t.num_rows for t in self._joined_pending) >= self.chunk_rows:
            _write_joined(self._joined, self._joined_pending)

    def _close_segment(self) -> None:
        if self._background:
            if self._thread is not None:
                self._submit("close", None)
            return
        self._close_segment_now()

    def _close_segment_now(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _finish_joined(self) -> None:
        """The background's last part: what is pending into ``timeseries.parquet``, closed."""
        self._close_segment_now()
        if self._joined is not None:
            _write_joined(self._joined, self._joined_pending)
            self._joined.close()

    def _submit(self, op: str, arg: Any) -> None:
        if self._thread is None:
            self._thread = _WriterThread(self)
            self._thread.start()
        if self._thread.error is not None and threading.current_thread() is not self._thread:
            raise RuntimeError(f"writing {self.path.name} failed: {self._thread.error}") from self._thread.error
        self._thread.queue.put((op, arg))

    def close(self) -> None:
        """Write what is buffered, close the segment and assemble ``timeseries.parquet``; safe to call twice."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._closed:
            return
        try:
            if self._stamps or self._ticks:
                self._write_row_group()
        finally:
            if not self._background:
                self._close_segment_now()
            self._closed = True
            _OPEN.discard(self)
            error = None
            if self._thread is not None:  # "stop" closes the segment too
                self._thread.queue.put(("stop", None))
                self._thread.join()
                error = self._thread.error
            if error is not None:  # close what the thread left open, then join what the segments hold
                for done in (self._close_segment_now, getattr(self._joined, "close", None)):
                    try:
                        if done is not None:
                            done()
                    except Exception:  # noqa: BLE001 — the first error is the one to report
                        pass
            if self._joined is not None and error is None:
                _joined_path(self.path).replace(self.path)  # joined as it went: the segments are done
                for part in segment_files(self.path):
                    part.unlink(missing_ok=True)
            else:
                assemble(self.path, self.schema, self.chunk_rows)  # what the segments hold
            if error is not None:
                raise RuntimeError(f"writing {self.path.name} failed: {error}") from error


class _WriterThread(threading.Thread):
    """Encodes and writes a background recorder's row groups in order; keeps the first error
    (the recorder raises it at its next write and at close; later work is skipped)."""

    def __init__(self, recorder: ParquetRecorder):
        super().__init__(name=f"recorder {recorder.path.name}", daemon=True)
        self.recorder = recorder
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.error: BaseException | None = None

    def run(self) -> None:
        rec = self.recorder
        tick_s = max(min(rec.flush_s / 4, 0.25), 0.01)
        while True:
            try:
                op, arg = self.queue.get(timeout=tick_s)
            except queue.Empty:
                if self.error is None:
                    try:
                        rec.flush_if_waiting()
                    except BaseException as exc:  # noqa: BLE001 — handed to the run's thread
                        self.error = exc
                continue
            if self.error is None:
                try:
                    if op == "table":
                        rec._write_table(arg)
                    elif op == "close":
                        rec._close_segment_now()
                    elif op == "stop":
                        rec._finish_joined()
                except BaseException as exc:  # noqa: BLE001 — handed to the run's thread
                    self.error = exc
            if op == "stop":
                return


#: The clock of :meth:`ParquetRecorder.flush_if_waiting` (the monotonic clock as imported: tests that
#: drive the recorder's own clock by hand do not move it). [s]
_REAL_CLOCK = time_module.monotonic


def _joined_path(path: Path) -> Path:
    """Where a background recorder writes ``path`` before it is complete (as :func:`assemble` does)."""
    return path.with_name(f".{path.name}.assembling")


def _write_joined(writer: pq.ParquetWriter, tables: list[pa.Table]) -> int:
    if not tables:
        return 0
    table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
    writer.write_table(table)
    tables.clear()
    return table.num_rows


def segment_path(path: Path, n: int) -> Path:
    """The ``n``-th segment of ``path`` (hidden beside it)."""
    return path.with_name(f".{path.stem}.part-{n:05d}{path.suffix}")


def segment_files(path: Path) -> list[Path]:
    """The segments of ``path`` on disk, in order."""
    return sorted(path.parent.glob(f".{path.stem}.part-[0-9][0-9][0-9][0-9][0-9]{path.suffix}"))


def assemble(path: Path, schema: pa.Schema | None = None, group_rows: int = 1440) -> tuple[int, list[str]]:
    """Join the segments of ``path`` into ``path`` (in order, row groups as they are) and remove
    them. Unreadable segments (the one a killed run was writing) are skipped and named.

    Row groups smaller than ``group_rows`` (time-based flushes of a slow run) are joined up to
    that size.

    Returns:
        ``(rows in path, problems)``; with no segment at all, ``path`` is left as it is (or,
        given ``schema``, written with no rows).
    """
    parts = segment_files(path)
    problems: list[str] = []
    readable = []
    for part in parts:
        try:
            readable.append((part, pq.ParquetFile(part)))
        except (OSError, pa.ArrowException) as exc:
            problems.append(f"{part.name} is unreadable (the run stopped while writing it): {exc}")
    if not parts:
        if schema is not None and not path.exists():
            pq.write_table(schema.empty_table(), path, compression="zstd")
        return (pq.ParquetFile(path).metadata.num_rows if path.exists() else 0), problems
    if len(readable) == 1 and not problems:
        readable[0][0].replace(path)
        return readable[0][1].metadata.num_rows, problems
    target_schema = schema or (readable[0][1].schema_arrow if readable else None)
    if target_schema is None:  # nothing readable at all
        return 0, problems
    tmp = _joined_path(path)
    rows, pending = 0, []
    with pq.ParquetWriter(tmp, target_schema, compression="zstd", use_dictionary=False) as writer:
        for _, parquet in readable:
            for group in range(parquet.num_row_groups):  # one row group at a time: memory stays flat
                pending.append(parquet.read_row_group(group, use_threads=False))
                if sum(t.num_rows for t in pending) >= group_rows:
                    rows += _write_joined(writer, pending)
        rows += _write_joined(writer, pending)
    tmp.replace(path)
    for part in parts:
        part.unlink(missing_ok=True)
    return rows, problems


#: Wall time between two updates of the progress bar's time label. [s]
LABEL_EVERY_S = 0.25
#: Cell types numpy turns into float64 exactly as ``float()`` does (and ``None`` into NaN).
#: Anything else (strings, arrays, datetimes, ...) takes the per-cell path of :func:`_cell`.
_PLAIN_TYPES = frozenset({float, int, bool, type(None), np.float64, np.float32, np.int64, np.int32, np.bool_})


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


def _number(value: Any, flag: bool) -> float:
    """:func:`_cell` as the float64 buffer holds it: a flag as 0/1, null as NaN."""
    cell = _cell(value, flag)
    return math.nan if cell is None else float(cell)


def close_all(path: str | Path | None = None) -> None:
    """Close the open recorders writing ``path`` (a run's ``timeseries.parquet``; None: every open
    recorder of this process). An engine closes its own run's only: another run of this process
    (a notebook's Session beside a ``cosim.run``) keeps recording."""
    for recorder in list(_OPEN):
        if path is None or recorder.path == Path(path):
            recorder.close()


class SimParams(Params):
    path: str
    columns: list[str]
    chunk_rows: int = 1440
    flush_s: float = 1.0
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
        self.recorder = ParquetRecorder(Path(p.path), p.columns, p.chunk_rows, p.flush_s, background=True)
        # column of each (attr, source) pair, learnt on first sight: the name is built once per pair
        self._column_pos = {column: pos for pos, column in enumerate(self.recorder.columns)}
        self._slots: defaultdict[str, dict[str, int]] = defaultdict(dict)
        n_steps = self.duration_s * self.ticks_per_s // self.step_ticks
        self.bar = tqdm(total=n_steps, unit="step", desc=p.label or "run", disable=not p.progress,
                        dynamic_ncols=True, mininterval=0.5, smoothing=0.1)
        self._wall0: float | None = None
        self._label_due_s = -math.inf  # monotonic time when the bar's label is next set (_show_time) [s]
        self._label_ticks: int | None = None
        if p.rt_factor is not None:
            RT_BEHIND_MAX_S[p.path] = 0.0

    def create_entity(self, eid, model, params) -> None:
        pass

    def step(self, time, inputs, max_advance):
        cells: list[Any] = [None] * len(self.recorder.columns)
        for attrs in inputs.values():
            for attr, sources in attrs.items():
                slots = self._slots[attr]
                for full_id, value in sources.items():
                    slot = slots.get(full_id)
                    if slot is None:
                        slot = slots[full_id] = self._slot_of(full_id, attr)
                    if slot >= 0:
                        cells[slot] = value
        return self.record_cells(int(time), cells)

    def record_cells(self, time: int, cells: list[Any]) -> int:
        """Write one row, one value per recorded column in column order, at mosaik time ``time``
        (in ticks); the next step time. The direct engine calls this with the cells it read from
        the caches, skipping mosaik's input format."""
        STOP.check()  # SIGTERM / Ctrl-C stop the run here, at a step boundary (cosim.run.stopping)
        LAST_STEP_MONOTONIC[0] = time_module.monotonic()
        ticks = int(time)
        # whole seconds and whole milliseconds of the tick: timedelta(seconds=0.1 * k) rounds to µs
        stamp = self.start_utc + timedelta(seconds=ticks // self.ticks_per_s,
                                           milliseconds=(ticks % self.ticks_per_s) * 1000 // self.ticks_per_s)
        self.recorder.append_cells(stamp, cells)
        if self.params.rt_factor is not None:
            self._track_lag(self.seconds(ticks))
        self.bar.update(1)
        if not self.bar.disable:  # the label is only ever shown on an enabled bar
            self._show_time(ticks, LAST_STEP_MONOTONIC[0])
        return ticks + self.step_ticks

    def record_refs(self, time: int, refs: list[dict[str, Any]]) -> int:
        """:meth:`record_cells` with the row given as the source dicts of the recorder's plan
        (:meth:`ParquetRecorder.set_plan`, set by the direct engine); the next step time."""
        STOP.check()
        LAST_STEP_MONOTONIC[0] = time_module.monotonic()
        ticks = int(time)
        self.recorder.append_refs(ticks, refs)
        if self.params.rt_factor is not None:
            self._track_lag(self.seconds(ticks))
        if not self.bar.disable:
            self.bar.update(1)
            self._show_time(ticks, LAST_STEP_MONOTONIC[0])
        return ticks + self.step_ticks

    def _show_time(self, ticks: int, now_s: float) -> None:
        """The bar's label: the simulation time of the step, set at most every :data:`LABEL_EVERY_S`
        of wall time (the bar redraws every 0.5 s; formatting it every step cost ~5 µs a step) and
        at the last step (:meth:`finalize`). ``now_s``: the monotonic clock. [s]"""
        self._label_ticks = ticks
        if now_s < self._label_due_s:
            return
        self._label_due_s = now_s + LABEL_EVERY_S
        self._set_label(ticks)

    def _set_label(self, ticks: int) -> None:
        stamp = self.start_utc + timedelta(seconds=ticks // self.ticks_per_s,
                                           milliseconds=(ticks % self.ticks_per_s) * 1000 // self.ticks_per_s)
        self.bar.set_postfix_str(stamp.strftime("%Y-%m-%d %H:%M:%S UTC" if self.step_ticks < self.ticks_per_s
                                                else "%Y-%m-%d %H:%M UTC"), refresh=False)

    def _slot_of(self, full_id: str, attr: str) -> int:
        """Column position of ``<eid>.<attr>`` (``full_id`` is ``<sid>.<eid>``); -1 if not recorded."""
        return self._column_pos.get(f"{full_id.split('.', 1)[1]}.{attr}", -1)

    def _track_lag(self, time_s: float) -> None:
        """How far the wall clock is past ``rt_factor * time_s`` once this step's data is in. [s]"""
        now = time_module.perf_counter()
        if self._wall0 is None:
            self._wall0 = now
        behind_s = (now - self._wall0) - self.params.rt_factor * time_s
        RT_BEHIND_MAX_S[self.params.path] = max(RT_BEHIND_MAX_S[self.params.path], behind_s)

    def finalize(self) -> None:
        try:
            if not self.bar.disable and self._label_ticks is not None:  # the label ends at the last step
                self._set_label(self._label_ticks)
            self.bar.close()
        finally:  # the file is closed whatever the bar does
            self.recorder.close()
