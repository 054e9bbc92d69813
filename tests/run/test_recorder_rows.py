"""A row goes into the recorder's float64 buffer in one numpy conversion when numpy makes a
numeric array of its cells, else cell by cell; either way each cell must be what ``float()``
makes of it (flags: ``bool()`` of that), null where that fails or gives NaN.

The reference is built with pyarrow from :func:`cosim.run.recorder._cell` cell by cell, over
rows mixing every pair of cell types a simulator may hand out (Python numbers, numpy scalars of
every numeric width, values numpy would promote or parse differently: huge ints, strings,
datetimes, arrays, None), given as cells (the mosaik engine's rows) and as source dicts (the
direct engine's). A segment (the crash-safe copy of a flush) holds one list column whatever the
number of recorded columns.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cosim.run.recorder import COLUMNS_KEY, ParquetRecorder, _cell, segment_files

KINDS = [1.5, -0.0, float("nan"), 7, 2**53 + 1, 2**70, 2**64 - 1, True, None,
         np.float16(0.1), np.float32(1.1), np.float64(0.3), np.longdouble("0.1"),
         np.int8(-3), np.int16(30000), np.int32(2**31 - 1), np.int64(2**62 + 1),
         np.uint8(255), np.uint64(2**63 + 1), np.bool_(False), np.array(4.5),
         "1.5", "word", b"2.5", np.datetime64("2024-01-01"), np.timedelta64(5, "s"), np.array([2.5]), [1.0], 3 + 0j]
COLUMNS = ["x.p_mw", "x.converged", "y.q_mvar"]
START = datetime(2024, 7, 15, tzinfo=timezone.utc)


def _rows():
    """Every pair of kinds in a row (the third cell a plain float), both ways round."""
    for a, b in itertools.product(KINDS, repeat=2):
        yield [a, b, 0.25]


def _reference(rows) -> pa.Table:
    stamps = [START + timedelta(minutes=k) for k in range(len(rows))]
    arrays = [pa.array(stamps, type=pa.timestamp("ms", tz="UTC"))]
    for j, column in enumerate(COLUMNS):
        flag = column.endswith("converged")
        arrays.append(pa.array([_cell(row[j], flag) for row in rows], type=pa.bool_() if flag else pa.float64(),
                               from_pandas=True))
    return pa.Table.from_arrays(arrays, names=["time_utc", *COLUMNS])


def test_every_pair_of_cell_types_is_recorded_as_float_and_bool_convert_it(tmp_path):
    rows = list(_rows())
    by_cells = ParquetRecorder(tmp_path / "cells.parquet", COLUMNS, chunk_rows=64)
    by_refs = ParquetRecorder(tmp_path / "refs.parquet", COLUMNS, chunk_rows=64, background=True)
    by_refs.set_plan([(0, "p_mw"), (0, "converged"), (1, "q_mvar")], START, 1)
    for k, row in enumerate(rows):
        by_cells.append_cells(START + timedelta(minutes=k), row)
        by_refs.append_refs(60 * k, [{"p_mw": row[0], "converged": row[1]}, {"q_mvar": row[2]}])
    by_cells.close(), by_refs.close()
    want = _reference(rows)
    for name in ("cells", "refs"):
        got = pq.read_table(tmp_path / f"{name}.parquet")
        assert got.schema.names == want.schema.names
        mismatched = [(c, k, rows[k]) for c in COLUMNS for k in range(len(rows))
                      if got[c][k].as_py() != want[c][k].as_py() and not (got[c][k].is_valid is False is want[c][k].is_valid)]
        assert got.equals(want.cast(got.schema)), mismatched[:5]
    assert pq.read_table(tmp_path / "cells.parquet")["x.p_mw"].null_count > 0  # the odd kinds are in there


def test_a_segment_is_one_list_column_whatever_the_columns(tmp_path):
    """A flush of 3 rows x 500 columns: ``time_utc`` and ``values`` (500 floats a row, NaN for
    null), the column names in its metadata."""
    columns = [f"e{k}.p_mw" for k in range(500)]
    path = tmp_path / "timeseries.parquet"
    recorder = ParquetRecorder(path, columns, chunk_rows=3)
    for k in range(4):
        recorder.append_cells(START + timedelta(minutes=k), [float(k)] * 499 + [None])
    (segment,) = segment_files(path)  # the first three rows, flushed by rows
    table = pq.read_table(segment)
    assert table.column_names == ["time_utc", "values"] and table.num_rows == 3
    values = np.array(table["values"].to_pylist())
    assert values.shape == (3, 500) and np.isnan(values[:, -1]).all() and (values[:, 0] == [0.0, 1.0, 2.0]).all()
    assert pq.read_schema(segment).metadata[COLUMNS_KEY].decode().count(".p_mw") == 500
    recorder.close()
    assert not segment_files(path) and pq.read_table(path).num_rows == 4


class _GatedWriter:
    """Segment writes that wait for the test's go-ahead, one at a time: the writer thread falls
    behind exactly as far as the test says. ``writing`` counts the writes begun."""

    def __init__(self, monkeypatch):
        import threading

        from cosim.run import recorder as rec

        self.allowed = threading.Semaphore(0)
        self.begun = threading.Condition()
        self.writing = 0
        write = rec.ParquetRecorder._write_segment

        def gated(recorder, *args):
            with self.begun:
                self.writing += 1
                self.begun.notify_all()
            self.allowed.acquire()
            write(recorder, *args)

        monkeypatch.setattr(rec.ParquetRecorder, "_write_segment", gated)

    def wait_writing(self, n: int) -> bool:
        """Whether the writer begins its ``n``-th segment (within 30 s: it never does when it waits for itself)."""
        with self.begun:
            return self.begun.wait_for(lambda: self.writing >= n, timeout=30)


def _fall_behind(tmp_path, monkeypatch, check_full: bool = True):
    """A background recorder (2 rows a block, 4 blocks queued at most) whose writer is held in its
    first segment while the run's thread hands over 5 blocks: the queue is full and the run's
    thread waits in the 6th hand-over. The writer is let through one segment; then, with the
    queue full again, a row waiting and its flush by time due, the lock free, it is let through
    another: it must not flush that row (it would wait for itself in a full queue). Returns the
    recorder, the gate and whether the run's thread waited. ``check_full=False``: the writer does
    not see that the queue is full (the control)."""
    import threading

    from cosim.run import recorder as rec

    now = [0.0]
    monkeypatch.setattr(rec, "_REAL_CLOCK", lambda: now[0])  # the writer's clock, driven by hand
    gate = _GatedWriter(monkeypatch)
    recorder = ParquetRecorder(tmp_path / "timeseries.parquet", COLUMNS, chunk_rows=2, flush_s=1.0, background=True)
    queue = recorder._thread.queue

    def row(k):
        recorder.append_cells(START + timedelta(minutes=k), [float(k), k % 2 == 0, None])

    for k in range(2):
        row(k)
    assert gate.wait_writing(1)  # the writer holds block 1
    for k in range(2, 10):
        row(k)
    assert queue.full()  # blocks 2-5 wait
    sixth = threading.Thread(target=lambda: [row(k) for k in (10, 11)], daemon=True)
    sixth.start()
    while recorder.rows_written < 12:  # counted before the hand-over's put, which the full queue holds
        sixth.join(0.01)
    held = sixth.is_alive() and queue.full()
    gate.allowed.release()  # block 1 written; the writer takes block 2, and the run's thread puts block 6
    sixth.join()
    assert gate.wait_writing(2)
    row(12)  # waits in the buffer
    now[0] = 5.0  # its flush by time is due
    assert queue.full() and recorder._n == 1
    if not check_full:
        queue.full = lambda: False
    gate.allowed.release()  # block 2 written: the writer looks for rows waiting, with the queue full
    return recorder, gate, held


def test_a_writer_that_falls_behind_holds_the_run_and_loses_nothing(tmp_path, monkeypatch):
    """The run's thread waits for a writer 5 blocks behind (memory stays bounded); the writer
    never waits for itself; every row is in the file, in order, in row groups of 2."""
    recorder, gate, held = _fall_behind(tmp_path, monkeypatch)
    assert held, "the run's thread did not wait for the writer"
    assert gate.wait_writing(3), "the writer waits for itself"
    assert recorder._n == 1  # the waiting row was left for later
    gate.allowed.release(1000)
    for k in range(13, 300):
        recorder.append_cells(START + timedelta(minutes=k), [float(k), k % 2 == 0, None])
    recorder.close()
    path = tmp_path / "timeseries.parquet"
    table = pq.read_table(path)
    assert table["x.p_mw"].to_pylist() == [float(k) for k in range(300)]
    assert pq.ParquetFile(path).num_row_groups == 150 and not segment_files(path)


def test_the_control_a_writer_blind_to_a_full_queue_waits_for_itself(tmp_path, monkeypatch):
    """The control of the test above: a writer that flushes the waiting row although the queue
    is full blocks in its own queue and never writes another segment."""
    import time

    recorder, gate, held = _fall_behind(tmp_path, monkeypatch, check_full=False)
    deadline = time.monotonic() + 30
    while recorder._n and time.monotonic() < deadline:  # the writer takes the waiting row...
        time.sleep(0.01)
    queue = recorder._thread.queue
    # ... and waits to queue it: its queue is full, no segment after the second begun
    assert held and recorder._n == 0 and queue.qsize() == queue.maxsize and gate.writing == 2
    queue.get_nowait()  # make room: the writer goes on (one block lost), and can be closed
    gate.allowed.release(1000)
    recorder.close()
