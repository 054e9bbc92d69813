"""cosim reads Parquet files through pyarrow's own file system, never as a Python file object: pyarrow's scan
threads may drop their last reference to such an object while the interpreter exits, which aborts the
process at its end (exit code 134, "terminate called without an active exception"; apache/arrow#34314,
reproduced here: ~1 script in 4 that ran and read several IEEE 8500 runs)."""

from __future__ import annotations

import pandas as pd
import pandas.io.parquet
import pytest

from cosim.adapters import _bounded_read
from cosim.folder import read_parquet, read_timeseries


def refuse(*args, **kwargs):
    raise AssertionError("a Parquet file opened as a Python file object")


def test_read_without_a_python_file_object(tmp_path, monkeypatch):
    frame = pd.DataFrame({"time_utc": pd.date_range("2024-01-01", periods=3, freq="h", tz="UTC"),
                          "p_mw": [1.0, -0.0, float("nan")]})
    path = tmp_path / "timeseries.parquet"
    frame.to_parquet(path)
    monkeypatch.setattr(pandas.io.parquet, "get_handle", refuse)  # pandas' way of opening a local file in Python
    with pytest.raises(AssertionError):  # the control: pandas alone opens it as a Python object
        pd.read_parquet(path)
    pd.testing.assert_frame_equal(read_parquet(path), frame)
    pd.testing.assert_frame_equal(read_parquet(path, columns=["p_mw"]), frame[["p_mw"]])
    pd.testing.assert_frame_equal(read_timeseries(path, ["p_mw"]), frame.set_index("time_utc"))
    pd.testing.assert_frame_equal(_bounded_read.read_table_bounded(path), frame)
