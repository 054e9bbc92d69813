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


def test_a_writer_that_falls_behind_holds_the_run_and_loses_nothing(tmp_path, monkeypatch):
    """Rows handed over in pairs (chunk_rows = 2) to a writer slower than the rows come, with
    flushes by time due all along: the queue fills, the run's thread waits for the writer (memory
    stays bounded), the writer never waits for itself (a flush by time while the queue is full
    would), and every row is in the file in order."""
    import threading
    import time

    from cosim.run import recorder as rec

    slow = rec.ParquetRecorder._write_segment
    monkeypatch.setattr(rec.ParquetRecorder, "_write_segment", lambda self, *a: (time.sleep(0.005), slow(self, *a)))
    path = tmp_path / "timeseries.parquet"
    recorder = ParquetRecorder(path, COLUMNS, chunk_rows=2, flush_s=0.01, background=True)
    done = threading.Event()

    def feed():
        for k in range(300):
            recorder.append_cells(START + timedelta(minutes=k), [float(k), k % 2 == 0, None])
            time.sleep(0.001)  # the lock is free between rows: the writer's flushes by time get it
        recorder.close()
        done.set()

    threading.Thread(target=feed, daemon=True).start()
    assert done.wait(60), "the recorder did not finish: the writer waits for itself"
    table = pq.read_table(path)
    assert table["x.p_mw"].to_pylist() == [float(k) for k in range(300)]
    assert pq.ParquetFile(path).num_row_groups == 150 and not segment_files(path)
