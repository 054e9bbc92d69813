"""Recorder: streams every recorded output to ``timeseries.parquet`` in row groups.

Part of the run, not a user-visible adapter: the engine connects each recorded
``<entity>.<attr>`` to the one ``Recorder`` entity.

Rows: each row is read into a preallocated float64 buffer as it comes, converted in one C-level
pass (:func:`_put_row`; NaN stands for null, flags are kept as numbers and become booleans when
written), so the run's thread does no per-column work in Python. The buffer holds at most
``chunk_rows`` rows and at most :data:`HANDOVER_BYTES`; when it is full, or when ``flush_s`` of
wall time has passed since the last hand-over, its rows are handed to the writer as one block (a
flush). The engines' run thread never reads the clock for this: the writer thread does.

The writer (a thread of its own for the engines' recorders, ``background``; else the caller's
thread) does two things with each block:

* crash safety: a Parquet file is readable only once its footer is written, so a run killed by
  SIGKILL or the out-of-memory killer would leave nothing. Every flush is written as a *segment*
  of its own (``.timeseries.part-00001.parquet``, ... in the run folder), closed (footer and all)
  at once: a complete Parquet file of two columns, ``time_utc`` and ``values`` (each row's
  cells in column order, a fixed-size list of float64, NaN for null; the column names are in
  the file's metadata). One column whatever the number of recorded columns: a segment costs in
  proportion to its cells, so flushing every second stays cheap with thousands of columns (a
  segment with one Parquet column per recorded column cost ~25 µs per column and flush). A
  segment cut before its footer holds only the flush that was being written when the kill came,
  so a killed run loses at most about ``2 * flush_s`` of wall time of rows; ``cosim repair RUN``
  assembles the segments into ``timeseries.parquet`` (:func:`assemble`);
* the result: the block's columns, typed (flags as booleans, NaN as null), go into
  ``timeseries.parquet`` itself (written as ``.timeseries.parquet.writing`` and renamed at
  close), in row groups of exactly ``chunk_rows`` rows (the last one shorter), whatever the
  flushes were: encoded once, and the same layout on any machine.

At ``close()`` the rows still buffered go to the file directly (no segment: the file is complete
a moment later), the file is closed and renamed and the segments are removed; so a run that ends
before its first flush writes no segment at all. A write that fails in the thread is raised at
the next flush and at close, which then assembles what the segments hold.
``close()`` is called on ``finalize`` and by the engines when a run fails, so a failed run stays
readable. The schema is fixed up front from the column list: flags (``converged``,
``*_in_service``) are booleans, everything else float64; the index column ``time_utc`` is a
UTC timestamp.

The direct engine hands a row as the source entities' output dicts
(:meth:`ParquetRecorder.append_refs`, after :meth:`ParquetRecorder.set_plan`): the row is read
out of them at once (a dict's values in its own order when it holds exactly the recorded
outputs, else one C-level ``itemgetter`` per dict) and converted as a row of cells is.
"""

from __future__ import annotations

import json
import math
import queue
import struct
import threading
import time as time_module
import weakref
from array import array
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from cosim.run.stopping import STOP
from cosim.sdk import ENGINE_C, CosimSim, Params, meta, model_meta, tuple_getter
from cosim.units import is_flag

_OPEN: "weakref.WeakSet[ParquetRecorder]" = weakref.WeakSet()

#: Most bytes of rows the run's thread buffers before it hands them to the writer (fewer rows
#: than ``chunk_rows`` when there are many columns). [B]
HANDOVER_BYTES = 8 * 2**20
#: Blocks handed over and not yet written, at most: a writer that falls behind holds the run. [-]
QUEUED_BLOCKS_MAX = 4
#: Codec of the segments: they only have to survive a kill, and are read back once by repair.
SEGMENT_COMPRESSION = "lz4"
#: Keys of a segment's Parquet metadata: the recorded columns (JSON list) and the row-group size.
COLUMNS_KEY, CHUNK_ROWS_KEY = b"cosim.columns", b"cosim.chunk_rows"


def _is_flag(column: str) -> bool:
    return is_flag(column.rsplit(".", 1)[-1])


def series_schema(columns: list[str]) -> pa.Schema:
    """``timeseries.parquet``'s schema: ``time_utc``, then flags as booleans and the rest as float64."""
    fields = [pa.field("time_utc", pa.timestamp("ms", tz="UTC"))]
    fields += [pa.field(c, pa.bool_() if _is_flag(c) else pa.float64()) for c in columns]
    return pa.schema(fields)


class ParquetRecorder:
    """Buffers rows of fixed columns and writes them to a Parquet file in row groups.

    Args:
        path: the final file (segments are written beside it, see the module docstring).
        columns: ``<entity>.<attr>`` names, in order.
        chunk_rows: rows per row group of the file (and at most in the buffer).
        flush_s: hand what is buffered to the writer, as a segment of its own, at least this
            often. [s]
        background: write in a thread of its own (the engines' runs), which also keeps the time
            of the flushes (the run's thread never reads the clock for them); else the caller's
            thread writes and checks the clock at each row. The file is the same.
    """

    def __init__(self, path: Path, columns: list[str], chunk_rows: int = 1440, flush_s: float = 1.0,
                 background: bool = False):
        self.path = Path(path)
        self.columns = list(columns)
        self.chunk_rows = chunk_rows
        self.flush_s = flush_s
        self.schema = series_schema(self.columns)
        self._flag = [_is_flag(c) for c in self.columns]
        self._background = background
        self._closed = False
        self.rows_written = 0  # rows handed to the writer
        # rows are added by the run's thread and, when a slow step keeps the next row from coming,
        # handed over by the background writer: one at a time
        self._lock = threading.Lock()
        self._due_s = self._clock() + flush_s  # when the rows buffered are handed over at the latest
        # the buffer: rows of cells (append_cells) or of dicts read through the plan (append_refs)
        self._mode: str | None = None
        self._rows: np.ndarray | None = None
        self._n = 0
        self._stamps: list[Any] = []  # datetimes (cells) or mosaik times in ticks (refs)
        self._plan: _Plan | None = None
        # the writer's side
        self._n_segments = 0
        self._file: pq.ParquetWriter | None = None  # timeseries.parquet being written
        #: why writing timeseries.parquet failed (a full disk...): from then on every block goes to a segment,
        #: so that what the segments assemble at close holds every row
        self._file_error: BaseException | None = None
        self._unjournaled: tuple[pa.Array, np.ndarray] | None = None  # the closing block, in no segment
        self._pending: list[pa.Table] = []  # rows of the file's next row group
        self._pending_rows = 0
        self._thread: _WriterThread | None = None
        _OPEN.add(self)
        if background:  # started at once: it also hands over rows a slow step leaves waiting
            self._thread = _WriterThread(self)
            self._thread.start()

    def _clock(self) -> float:
        """The clock of the flushes: the background writer's is the real monotonic clock; the caller's
        is ``time.monotonic`` as it is at each row (tests drive it by hand). [s]"""
        return _REAL_CLOCK() if self._background else time_module.monotonic()

    # -- rows ----------------------------------------------------------------------------------
    def set_plan(self, fills: list[tuple[int, str] | None], start_utc: datetime, ticks_per_s: int) -> None:
        """Rows will come as :meth:`append_refs`: column ``j`` is attribute ``fills[j][1]`` of the
        row's dict number ``fills[j][0]`` (None: a column no source fills, all null). A row's time
        stamp is ``start_utc`` plus its mosaik time in ticks of ``1 / ticks_per_s`` s (whole
        milliseconds, as :meth:`RecorderSim.record_cells` computes it)."""
        if len(fills) != len(self.columns):
            raise ValueError(f"a plan of {len(fills)} columns for a recorder of {len(self.columns)}")
        self._plan = _Plan(fills, start_utc, ticks_per_s)

    def append_refs(self, ticks: int, refs: list[dict[str, Any]]) -> None:
        """Add one row as the output dicts of :meth:`set_plan`, read now, at mosaik time ``ticks``."""
        plan = self._plan
        if plan.reads is None:
            plan.learn(refs)
        if _PUT_REFS is not None and self._add("refs", ticks, None, refs):
            return  # (written in C; False: an output missing, read cell by cell below)
        cells: list[Any] = []
        extend = cells.extend
        try:
            for index, names, getter in plan.reads:
                values = refs[index]
                # a dict of exactly these outputs in this order (as a source's dicts usually are):
                # its values in order are the ones the names look up, without a lookup each
                extend(values.values() if list(values) == names else getter(values))
        except KeyError:  # an entity that did not give this output at this step: null there
            cells = [refs[index].get(attr) for index, attr in plan.cells]
        self._add("refs", ticks, cells)

    def append(self, time_utc, values: dict[str, Any]) -> None:
        """Add one row; columns missing from ``values`` are null."""
        self.append_cells(time_utc, [values.get(column) for column in self.columns])

    def append_cells(self, time_utc, cells: list[Any]) -> None:
        """Add one row given as one value per column, in column order (``None`` = null)."""
        if len(cells) != len(self.columns):  # a short row would leave the buffer's old values in its last columns
            raise ValueError(f"a row of {len(cells)} values for the {len(self.columns)} columns of {self.path}")
        self._add("cells", time_utc, cells)

    def _add(self, mode: str, stamp: Any, cells: list[Any] | None, refs: list[dict[str, Any]] | None = None) -> bool:
        """Add a row of ``cells``, or of the source dicts ``refs`` read by the plan in C (:data:`_PUT_REFS`); False
        (nothing added) when one of those lacks an attribute the plan reads."""
        with self._lock:
            if self._closed:  # a row after close would be dropped without a word: refuse it
                raise RuntimeError(f"the recorder of {self.path} is closed; this row would be lost")
            if mode != self._mode:
                self._hand_over(journal=True)  # rows of the other kind first, in order
                self._start_buffer(mode)
            if refs is not None:  # (a refs row is the plan's width: it fits)
                if not _PUT_REFS(self._view, self._n * self._row_bytes, self._plan.reads, refs, _float):
                    return False
            else:
                if 8 * len(cells) > self._row_bytes:  # it would run into the next row
                    raise ValueError(f"a row of {len(cells)} values for a buffer of {self._row_bytes // 8}")
                _put_row(self._view, self._n * self._row_bytes, cells)
            self._n += 1
            self._stamps.append(stamp)
            if self._n == self._capacity or (not self._background and self._clock() >= self._due_s):
                self._hand_over(journal=True)
            return True

    def _start_buffer(self, mode: str) -> None:
        """An empty buffer for rows of ``mode``: width one per cell read (the plan's reads, and a
        column of NaN for the columns no source fills)."""
        self._mode = mode
        width = len(self.columns) if mode == "cells" else self._plan.width
        capacity = max(1, min(self.chunk_rows, HANDOVER_BYTES // (8 * max(width, 1))))
        self._rows = np.empty((capacity, width))
        if mode == "refs" and self._plan.nan_slot is not None:
            self._rows[:, self._plan.nan_slot] = math.nan
        self._view, self._row_bytes, self._capacity = memoryview(self._rows), 8 * width, capacity

    def flush(self) -> None:
        """Hand the buffered rows to the writer, as a segment of their own (closed: readable after a kill)."""
        with self._lock:
            if not self._closed:
                self._hand_over(journal=True)

    def flush_if_waiting(self) -> None:
        """Hand over rows that have waited ``flush_s`` of wall time (the background writer calls this
        between its work: a slow step must not hold rows back from the disk). Skipped while the run's
        thread is adding a row, and while the queue is full (the writer is its only reader: it would
        wait for itself; with the lock held no one else can fill it); the writer looks again a moment later."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            if (not self._closed and self._n and self._clock() >= self._due_s
                    and (self._thread is None or not self._thread.queue.full())):
                self._hand_over(journal=True)
        finally:
            self._lock.release()

    def _hand_over(self, journal: bool) -> None:
        """The buffered rows to the writer as one block (lock held), with the plan's order of its
        columns (the writer puts them in column order, off the run's thread); ``journal``: as a
        segment too."""
        n = self._n
        if not n:
            return
        if journal:
            self._due_s = self._clock() + self.flush_s
        block, order = self._rows[:n], (self._plan.order if self._mode == "refs" else None)
        self._start_buffer(self._mode)  # the writer keeps the old one (and puts its columns in order)
        stamps, self._stamps, self._n = self._stamps, [], 0
        self.rows_written += n
        self._submit(("rows", (self._mode, stamps, block, order, journal)))

    def _submit(self, item: tuple[str, Any]) -> None:
        writer = self._thread is not None and threading.current_thread() is self._thread
        if not self._background:
            self._do(item)
        else:
            if self._thread.error is not None and not writer:
                raise RuntimeError(f"writing {self.path.name} failed: {self._thread.error}") from self._thread.error
            self._thread.queue.put(item)
        if self._file_error is not None and not writer:  # the block went to a segment: the run learns it now
            raise RuntimeError(f"writing {self.path.name} failed: {self._file_error}") from self._file_error

    # -- the writer ----------------------------------------------------------------------------
    def _do(self, item: tuple[str, Any]) -> None:
        op, arg = item
        if op == "rows":
            mode, stamps, block, order, journal = arg
            if order is not None:  # the plan's reading order -> column order
                block = block[:, order]
            stamps = self._stamp_array(mode, stamps)
            if journal or self._file_error is not None:
                self._write_segment(stamps, block)
            if self._file_error is None:
                if not journal:
                    self._unjournaled = (stamps, block)
                try:
                    self._add_to_file(self._typed_table(stamps, block))
                except Exception as exc:  # noqa: BLE001 — the file is lost; the segments keep the record
                    self._lost_file(exc)
        elif op == "stop" and self._file_error is None:
            try:
                self._finish_file()
            except Exception as exc:  # noqa: BLE001 — as above
                self._lost_file(exc)

    def _lost_file(self, exc: BaseException) -> None:
        """Writing timeseries.parquet failed: the block no segment holds goes to one (close assembles the
        segments instead of the file), and every later block goes to a segment too."""
        self._file_error = exc
        if self._unjournaled is not None:
            self._write_segment(*self._unjournaled)
            self._unjournaled = None

    def _stamp_array(self, mode: str, stamps: list[Any]) -> pa.Array:
        """A block's time stamps as ``time_utc`` takes them (cells: as pyarrow converts them)."""
        if mode == "refs":
            stamps = self._plan.stamps(stamps)
        return pa.array(stamps, type=self.schema.field(0).type, from_pandas=True)

    def _write_segment(self, stamps: pa.Array, block: np.ndarray) -> None:
        """The block as a complete Parquet file of its own (see the module docstring)."""
        self._n_segments += 1
        values = pa.FixedSizeListArray.from_arrays(pa.array(block.reshape(-1), type=pa.float64()),
                                                   len(self.columns))
        table = pa.Table.from_arrays([stamps, values], schema=_segment_schema(self.columns, self.chunk_rows))
        pq.write_table(table, segment_path(self.path, self._n_segments), compression=SEGMENT_COMPRESSION,
                       use_dictionary=False, write_statistics=False)

    def _typed_table(self, stamps: pa.Array, block: np.ndarray) -> pa.Table:
        """A block of rows (float64, NaN = null) as the file's columns."""
        return _typed_table(self.schema, stamps, np.ascontiguousarray(block.T), self._flag)

    def _add_to_file(self, table: pa.Table) -> None:
        self._pending.append(table)
        self._pending_rows += table.num_rows
        if self._pending_rows >= self.chunk_rows:
            self._pending_rows -= _write_groups(self._writer(), self._pending, self.chunk_rows, last=False)

    def _writer(self) -> pq.ParquetWriter:
        """The writer of ``timeseries.parquet``, opened with the first rows it is given."""
        if self._file is None:
            self._file = _series_writer(_writing_path(self.path), self.schema)
        return self._file

    def _finish_file(self) -> None:
        if self._pending:
            self._pending_rows -= _write_groups(self._writer(), self._pending, self.chunk_rows, last=True)
        if self._file is not None:
            self._file.close()

    # -- closing -------------------------------------------------------------------------------
    def close(self) -> None:
        """Write what is buffered, close ``timeseries.parquet`` and remove the segments; safe to call twice."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        failure = None
        try:
            self._hand_over(journal=False)  # the file is complete a moment later: no segment needed
            self._submit(("stop", None))
        except Exception as exc:  # noqa: BLE001 — a write that failed: the segments are the record
            failure = exc
        finally:
            if self._thread is not None and self._thread.is_alive():  # it ends at its first "stop"
                self._thread.queue.put(("stop", None))
                self._thread.join()
        error = (self._thread.error if self._thread is not None else None) or self._file_error or failure
        writing = _writing_path(self.path)
        if error is None and self._file is not None:
            writing.replace(self.path)
            for part in segment_files(self.path):
                part.unlink(missing_ok=True)
            return
        if self._file is not None:
            try:  # what the writer left open
                self._file.close()
            except Exception:  # noqa: BLE001 — the first error is the one to report
                pass
        writing.unlink(missing_ok=True)
        assemble(self.path, self.schema, self.chunk_rows)  # what the segments hold (no row: an empty file)
        if error is not None:
            raise RuntimeError(f"writing {self.path.name} failed: {error}") from error


class _Plan:
    """How a row is read out of the source dicts of :meth:`ParquetRecorder.append_refs`.

    Each dict's attributes are read together, dict after dict, into the buffer's columns
    (``reads``: the dict's index, the attribute names in reading order and their ``itemgetter``;
    ``cells``: the same one cell at a time); ``order`` puts them back in the recorder's column
    order when a block is handed over, a column no source fills reading the buffer's column of
    NaN (``nan_slot``). A dict that holds exactly the attributes read is read in its own key
    order, learnt from the first row (:meth:`learn`), so that its values can be taken in order.
    Two columns read from one dict and attribute read it once.
    """

    def __init__(self, fills: list[tuple[int, str] | None], start_utc: datetime, ticks_per_s: int):
        self.fills = fills
        self.by_source: dict[int, list[str]] = {}  # the attributes read from each dict, in column order
        for fill in fills:
            if fill is not None and fill[1] not in self.by_source.setdefault(fill[0], []):
                self.by_source[fill[0]].append(fill[1])
        self.reads: list[tuple[int, list[str], Any]] | None = None  # set by learn()
        self.cells: list[tuple[int, str]] = []
        self.nan_slot = sum(map(len, self.by_source.values())) if any(fill is None for fill in fills) else None
        self.width = sum(map(len, self.by_source.values())) + (self.nan_slot is not None)
        self.order = np.empty(0, dtype=np.intp)
        epoch = datetime(1970, 1, 1, tzinfo=timezone.utc if start_utc.tzinfo is not None else None)
        whole_ms = start_utc.microsecond % 1000 == 0  # else the stamps go through datetimes, as per cell
        self.start_ms = (start_utc - epoch) // timedelta(milliseconds=1) if whole_ms else None
        self.start_utc, self.ticks_per_s = start_utc, ticks_per_s

    def learn(self, refs: list[dict[str, Any]]) -> None:
        """The reading order from the first row's dicts (any order reads the same values)."""
        self.reads, self.cells, slot = [], [], {}
        for index, attrs in self.by_source.items():
            first = refs[index] if index < len(refs) else {}
            names = list(first) if isinstance(first, dict) and sorted(first) == sorted(attrs) else list(attrs)
            self.reads.append((index, names, tuple_getter(tuple(names))))
            for attr in names:
                slot[(index, attr)] = len(self.cells)
                self.cells.append((index, attr))
        self.order = np.array([self.nan_slot if fill is None else slot[tuple(fill)] for fill in self.fills],
                              dtype=np.intp)

    def stamps(self, ticks: list[int]):
        """Time stamps of rows at mosaik times ``ticks`` (ms since the epoch, or datetimes for a start with sub-ms)."""
        tps = self.ticks_per_s
        if self.start_ms is None:
            return [self.start_utc + timedelta(seconds=t // tps, milliseconds=(t % tps) * 1000 // tps) for t in ticks]
        ticks = np.array(ticks, dtype=np.int64)
        return self.start_ms + (ticks // tps) * 1000 + (ticks % tps) * 1000 // tps


def _typed_table(schema: pa.Schema, stamps: pa.Array, columns: np.ndarray, flags: list[bool]) -> pa.Table:
    """Rows of ``columns`` (one float64 row per column, NaN = null) as a table of ``schema``."""
    arrays = [stamps]
    for values, flag in zip(columns, flags):
        if flag:
            arrays.append(pa.array(values != 0.0, mask=np.isnan(values), type=pa.bool_()))
        else:
            arrays.append(pa.array(values, type=pa.float64(), from_pandas=True))  # NaN -> null
    return pa.Table.from_arrays(arrays, schema=schema)


def _segment_schema(columns: list[str], chunk_rows: int) -> pa.Schema:
    return pa.schema([pa.field("time_utc", pa.timestamp("ms", tz="UTC")),
                      pa.field("values", pa.list_(pa.float64(), len(columns)))],
                     metadata={COLUMNS_KEY: json.dumps(columns), CHUNK_ROWS_KEY: str(chunk_rows)})


class _WriterThread(threading.Thread):
    """Writes a background recorder's blocks in order and hands over rows left waiting; keeps the
    first error (the recorder raises it at its next flush and at close; later work is skipped)."""

    def __init__(self, recorder: ParquetRecorder):
        super().__init__(name=f"recorder {recorder.path.name}", daemon=True)
        self.recorder = recorder
        self.queue: queue.Queue = queue.Queue(maxsize=QUEUED_BLOCKS_MAX)
        self.error: BaseException | None = None

    def run(self) -> None:
        rec = self.recorder
        tick_s = max(min(rec.flush_s / 4, 0.25), 0.01)
        while True:
            try:
                item = self.queue.get(timeout=tick_s)
            except queue.Empty:
                item = None
            if self.error is None:
                try:
                    if item is not None:
                        rec._do(item)
                    if item is None or item[0] != "stop":
                        rec.flush_if_waiting()
                except BaseException as exc:  # noqa: BLE001 — handed to the run's thread
                    self.error = exc
            if item is not None and item[0] == "stop":
                return


#: The clock of the background writer's flushes (the monotonic clock as imported: tests that drive
#: the recorder's own clock by hand do not move it). [s]
_REAL_CLOCK = time_module.monotonic


def _writing_path(path: Path) -> Path:
    """Where a recorder writes ``path`` before it is complete."""
    return path.with_name(f".{path.name}.writing")


def _assembling_path(path: Path) -> Path:
    """Where :func:`assemble` writes ``path`` before it is complete."""
    return path.with_name(f".{path.name}.assembling")


def segment_path(path: Path, n: int) -> Path:
    """The ``n``-th segment of ``path`` (hidden beside it)."""
    return path.with_name(f".{path.stem}.part-{n:05d}{path.suffix}")


def segment_files(path: Path) -> list[Path]:
    """The segments of ``path`` on disk, in order."""
    return sorted(path.parent.glob(f".{path.stem}.part-[0-9][0-9][0-9][0-9][0-9]{path.suffix}"))


def assemble(path: Path, schema: pa.Schema | None = None, group_rows: int | None = None) -> tuple[int, list[str]]:
    """Join the segments of ``path`` into ``path`` (in order) and remove them, with what a recorder
    writing it was left with. Unreadable segments (the one a killed run was writing) are skipped
    and named.

    The rows go into row groups of ``group_rows`` (None: the recorder's ``chunk_rows``, kept in the
    segments; 1440 for segments without it), as the recorder writes them. Segments of typed
    columns (written by earlier versions) are read as they are.

    Returns:
        ``(rows in path, problems)``; with no segment at all, ``path`` is left as it is (or,
        given ``schema``, written with no rows).
    """
    parts = segment_files(path)
    _writing_path(path).unlink(missing_ok=True)  # a killed recorder's file, without its footer
    problems: list[str] = []
    readable = []
    for part in parts:
        try:
            readable.append(pq.ParquetFile(part))
        except (OSError, pa.ArrowException) as exc:
            problems.append(f"{part.name} is unreadable (the run stopped while writing it): {exc}")
    if not parts:
        if schema is not None and not path.exists():
            pq.write_table(schema.empty_table(), path, compression="zstd")
        return (pq.ParquetFile(path).metadata.num_rows if path.exists() else 0), problems
    meta = (readable[0].schema_arrow.metadata or {}) if readable else {}
    if schema is None and readable:
        schema = series_schema(json.loads(meta[COLUMNS_KEY])) if COLUMNS_KEY in meta else readable[0].schema_arrow
    if schema is None:  # nothing readable at all
        return 0, problems
    group_rows = group_rows or int(meta.get(CHUNK_ROWS_KEY, 1440))
    flags = [pa.types.is_boolean(field.type) for field in schema][1:]
    tmp = _assembling_path(path)
    rows, pending = 0, []
    with _series_writer(tmp, schema) as writer:
        for parquet in readable:
            for group in range(parquet.num_row_groups):  # one row group at a time: memory stays flat
                table = parquet.read_row_group(group, use_threads=False)
                if "values" in table.column_names and COLUMNS_KEY in (parquet.schema_arrow.metadata or {}):
                    n_columns = len(schema) - 1
                    values = table["values"].combine_chunks().flatten().to_numpy(zero_copy_only=False)
                    table = _typed_table(schema, table["time_utc"].combine_chunks(),
                                         np.ascontiguousarray(values.reshape(-1, n_columns).T), flags)
                pending.append(table)
                if sum(t.num_rows for t in pending) >= group_rows:
                    rows += _write_groups(writer, pending, group_rows, last=False)
        rows += _write_groups(writer, pending, group_rows, last=True)
    tmp.replace(path)
    for part in parts:
        part.unlink(missing_ok=True)
    return rows, problems


def _series_writer(path: Path, schema: pa.Schema) -> pq.ParquetWriter:
    # No dictionary pages: float time series rarely repeat, so they took half the write time and
    # made the file larger (default day: 1.42 -> 1.18 MB); values are the same.
    return pq.ParquetWriter(path, schema, compression="zstd", use_dictionary=False)


def _write_groups(writer: pq.ParquetWriter, pending: list[pa.Table], group_rows: int, last: bool) -> int:
    """Write ``pending`` in row groups of ``group_rows`` (the rows of an incomplete group stay in
    ``pending`` unless ``last``); the rows written."""
    if not pending:
        return 0
    table = pending[0] if len(pending) == 1 else pa.concat_tables(pending)
    whole = table.num_rows if last else table.num_rows - table.num_rows % group_rows
    if whole:
        writer.write_table(table.slice(0, whole), row_group_size=group_rows)
    rest = table.slice(whole)
    pending[:] = [rest] if rest.num_rows else []
    return whole


#: Wall time between two updates of the progress bar's time label. [s]
LABEL_EVERY_S = 0.25


def _put_row(view: memoryview, offset: int, cells: list[Any]) -> None:
    """A row's cells into the float64 buffer ``view`` from byte ``offset`` on, as :func:`_floats`
    converts them: in one C-level pass when every cell is a number (``struct``'s native ``d``
    converts each with ``PyFloat_AsDouble``, the function ``array("d")`` calls, and copies the
    double as it is; ~30x faster than ``array("d")``, which parses a format string per cell),
    else through :func:`_floats`."""
    packer = _PACKERS.get(len(cells))
    if packer is None:
        packer = _PACKERS[len(cells)] = struct.Struct(f"@{len(cells)}d")
    try:
        packer.pack_into(view, offset, *cells)
    except struct.error:  # a cell that is not a number (None, a string...): the cells already written are overwritten
        packer.pack_into(view, offset, *_floats(cells))


#: :meth:`ParquetRecorder.append_refs`'s row written into its buffer in C (``cosim/run/_engine.c``), or None
#: (not built): the cells are gathered and packed by :func:`_put_row`, the same numbers
_PUT_REFS = ENGINE_C.put_refs if ENGINE_C is not None else None

#: ``struct.Struct`` of a row of n float64, by n (native byte order and size: the buffer's).
_PACKERS: dict[int, struct.Struct] = {}


def _floats(cells: list[Any]) -> array | list[float]:
    """A row's cells as the float64 buffer holds them (:func:`_float` of each), in one C-level pass
    when it can: ``array("d")`` converts each cell with the C function ``float()`` uses for a
    number (``PyFloat_AsDouble``: floats, ints, bools, numpy numbers, anything with ``__float__``,
    the same value to the bit) and refuses the rest (None, strings, arrays, datetimes), which
    then go cell by cell: None is NaN, a string is parsed as ``float()`` does."""
    try:
        return array("d", cells)
    except (TypeError, ValueError):
        pass
    try:  # only None refused (a column with nothing yet): still one pass
        return array("d", [math.nan if value is None else value for value in cells])
    except (TypeError, ValueError):
        return [_float(value) for value in cells]


def _float(value: Any) -> float:
    """A cell as the float64 buffer holds it: ``float(value)``, NaN (null) for None and for what
    cannot be converted (a string, a list), rather than losing the whole chunk. Flags need no
    conversion of their own: a flag column is ``value != 0`` of this, null where NaN, which is
    what :func:`_cell` gives."""
    if value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


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
