"""Tables a user brings (traces, signals, forecasts, job lists) read within stated bounds.

A CSV or Parquet file is read whole into memory; a small compressed file can hold tens of
millions of rows (a 26 MB gzipped CSV of 10 million rows took 2.2 GB to read). Before reading,
:func:`read_table_bounded` checks the file's size on disk (:data:`MAX_FILE_BYTES`) and a
Parquet file's row count from its footer; a CSV is read up to :data:`MAX_ROWS` + 1 rows, so memory
stays bounded whatever the file holds. Over either limit the message names the file, the limit,
and how to raise it (``COSIM_TABLE_MAX_ROWS``, ``COSIM_TABLE_MAX_MB``) or to resample the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.fs as pafs
import pyarrow.parquet as pq

#: Rows of one table: a year at 15-second steps (a year at one-minute steps is 525,600). [-]
MAX_ROWS = 2_000_000
#: A table file's size on disk. [bytes]
MAX_FILE_BYTES = 1024 * 1024 * 1024


#: An event file (faults, line trips, demand-response events): a few thousand rows at most. [bytes]
MAX_EVENT_FILE_BYTES = 64 * 1024 * 1024


class TableTooLarge(ValueError):
    """A table over a stated limit (the message names the file, the limit and the fix)."""


def _env_int(name: str, default: int, scale: int = 1) -> int:
    text = os.environ.get(name, "").strip()
    try:
        return int(float(text) * scale) if text else default
    except ValueError:
        return default


def max_rows() -> int:
    return _env_int("COSIM_TABLE_MAX_ROWS", MAX_ROWS)


def max_file_bytes() -> int:
    return _env_int("COSIM_TABLE_MAX_MB", MAX_FILE_BYTES, 1024 * 1024)


def _fix() -> str:
    return ("resample it to the step the study needs (one-minute rows for a year are 525,600), or set "
            "COSIM_TABLE_MAX_ROWS / COSIM_TABLE_MAX_MB to raise the limit")


def read_table_bounded(path: str | Path, **csv_options: Any) -> pd.DataFrame:
    """The CSV (plain or compressed, as pandas reads it) or Parquet file ``path``; raises
    :class:`TableTooLarge` over :func:`max_file_bytes` on disk or :func:`max_rows` rows."""
    path = Path(path)
    size, limit_bytes, limit_rows = path.stat().st_size, max_file_bytes(), max_rows()
    if size > limit_bytes:
        raise TableTooLarge(f"{path.name}: {size / 2**20:,.0f} MiB on disk, over the limit of "
                            f"{limit_bytes / 2**20:,.0f} MiB; {_fix()}")
    if path.name.lower().endswith((".parquet", ".pq")):
        rows = pq.ParquetFile(path).metadata.num_rows  # from the footer, before reading
        if rows > limit_rows:
            raise TableTooLarge(f"{path.name}: {rows:,} rows, over the limit of {limit_rows:,}; {_fix()}")
        # opened by pyarrow, not as a Python file object whose last reference pyarrow's threads may drop while
        # the interpreter exits (an abort at exit, apache/arrow#34314; cosim.folder.read_parquet)
        return pd.read_parquet(str(path), filesystem=pafs.LocalFileSystem())
    frame = pd.read_csv(path, nrows=limit_rows + 1, **csv_options)
    if len(frame) > limit_rows:
        raise TableTooLarge(f"{path.name}: more than the limit of {limit_rows:,} rows; {_fix()}")
    return frame


def check_event_file_size(path: str | Path) -> None:
    """Raise :class:`TableTooLarge` when an event file (read whole as text) is over
    :data:`MAX_EVENT_FILE_BYTES` (``COSIM_TABLE_MAX_MB`` raises it too)."""
    path = Path(path)
    size = path.stat().st_size
    limit = _env_int("COSIM_TABLE_MAX_MB", MAX_EVENT_FILE_BYTES, 1024 * 1024)
    if size > limit:
        raise TableTooLarge(f"{path.name}: {size / 2**20:,.0f} MiB, over the limit of {limit / 2**20:,.0f} MiB for an "
                            "event file (one row an event); set COSIM_TABLE_MAX_MB to raise it")
