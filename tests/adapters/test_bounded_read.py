"""Tables a user brings are read within stated bounds (adapters/_bounded_read.py), by every reader of
user tables: signals, job traces, gym forecasts. A 26 MB gzipped 10-million-row trace took 2.2 GB to
validate without a word; here the same class of file, scaled down (limits lowered through the
environment), is refused with the file, the limit and the fix, and a CSV is never read past the limit."""

from __future__ import annotations

import gzip

import pandas as pd
import pytest

from cosim.adapters._bounded_read import MAX_ROWS, TableTooLarge, read_table_bounded
from cosim.adapters.datacenter.training import TraceError, read_job_trace
from cosim.adapters.signals import DataError, read_table
from cosim.gym.forecasts import ArchiveError, _frame


def _signal(path):
    read_table(path)


def _jobs(path):
    read_job_trace(path)


def _forecast(path):
    _frame(str(path), path.name)


READERS = [(_signal, DataError), (_jobs, TraceError), (_forecast, ArchiveError)]


def _rows(n: int) -> pd.DataFrame:
    return pd.DataFrame({"time_utc": pd.date_range("2024-01-01", periods=n, freq="min", tz="UTC").astype(str),
                         "submit_s": range(n), "runtime_s": 60, "num_gpus": 1, "p_mw": 1.0})


@pytest.mark.parametrize("reader, error", READERS, ids=lambda r: getattr(r, "__name__", ""))
@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".parquet"])
def test_a_table_over_the_row_limit_is_refused_with_the_fix(reader, error, suffix, tmp_path, monkeypatch):
    monkeypatch.setenv("COSIM_TABLE_MAX_ROWS", "1000")
    path = tmp_path / f"trace{suffix}"
    frame = _rows(5000)
    frame.to_parquet(path) if suffix == ".parquet" else frame.to_csv(path, index=False)
    with pytest.raises(error) as err:
        reader(path)
    text = str(err.value)
    assert f"trace{suffix}: " in text and "1,000" in text and "COSIM_TABLE_MAX_ROWS" in text


@pytest.mark.parametrize("reader, error", READERS, ids=lambda r: getattr(r, "__name__", ""))
def test_a_file_over_the_size_limit_is_refused_before_reading(reader, error, tmp_path, monkeypatch):
    monkeypatch.setenv("COSIM_TABLE_MAX_MB", "0.01")
    path = tmp_path / "big.csv"
    _rows(2000).to_csv(path, index=False)
    with pytest.raises(error) as err:
        reader(path)
    assert "big.csv: " in str(err.value) and "over the limit of" in str(err.value)


def test_a_csv_is_not_read_past_the_limit(tmp_path, monkeypatch):
    """The reader stops at limit + 1 rows: a line after them that pandas cannot parse is never reached."""
    monkeypatch.setenv("COSIM_TABLE_MAX_ROWS", "10")
    path = tmp_path / "t.csv.gz"
    with gzip.open(path, "wt") as handle:
        handle.write("time_utc,p_mw\n" + "".join(f"2024-01-01T00:{i:02d}:00Z,1\n" for i in range(20)) + '"unclosed\n')
    with pytest.raises(TableTooLarge, match="more than the limit of 10 rows"):
        read_table_bounded(path)


def test_a_table_at_the_limit_reads_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("COSIM_TABLE_MAX_ROWS", "100")
    path = tmp_path / "t.csv"
    _rows(100).to_csv(path, index=False)
    assert len(read_table_bounded(path)) == 100
    assert MAX_ROWS >= 525_600 * 2  # two years of one-minute rows pass by default


def _faults(path):
    from cosim.adapters._event_csv import read_events

    read_events(path, "vm_pu", float, "numbers")


def _dr(path):
    from cosim.adapters.dr_events import read_events

    read_events(path)


@pytest.mark.parametrize("reader", [_faults, _dr])
def test_an_event_file_over_its_size_limit_is_refused_before_reading(reader, tmp_path, monkeypatch):
    """Event files are read whole as text: over 64 MiB (here lowered to 0.01 MiB) they are refused unread."""
    monkeypatch.setenv("COSIM_TABLE_MAX_MB", "0.01")
    path = tmp_path / "events.csv"
    path.write_text("t_s,duration_s,vm_pu\n" + "0,1,0.5\n" * 5000)
    with pytest.raises(ValueError) as err:
        reader(path)
    assert "events.csv: " in str(err.value) and "over the limit of" in str(err.value)
