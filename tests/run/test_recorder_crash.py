"""A killed run keeps what it recorded (the reliability issue, problem 3).

SIGKILL (or the out-of-memory killer) used to leave a 4-byte timeseries.parquet and no
metadata.json: the first row group was never flushed and nothing marked the run as started.
Now metadata.json says "running" before the first step, the recorder closes a crash-safe
segment at least every ``flush_s`` of wall time, and ``cosim repair`` assembles the segments.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import cosim
from cosim.cli import main
from cosim.run.recorder import ParquetRecorder, assemble, segment_files
from toy_scenarios import ramp_sink

ROOT = Path(__file__).resolve().parents[2]
# 10,000 days of 1 min steps: long enough on either engine to be killed mid-run (the direct engine steps the toys
# at ~15 us, 100 days in ~2 s; the run is killed once two segments are closed, so its length costs nothing)
TOY = ramp_sink(duration_s=864_000_000, name="long", extra="\n[record]\nchunk_rows = 1_000_000\nflush_s = 0.5\n")
DRIVER = ("import sys\nfrom cosim import registry\n"
          "registry.register('toy_ramp', 'toy_sims:RampSim'); registry.register('toy_sink', 'toy_sims:SinkSim')\n"
          "from cosim.cli import main\nraise SystemExit(main(sys.argv[1:]))\n")


def _rows_in_closed_segments(series: Path) -> int:
    rows = 0
    for part in segment_files(series):
        try:
            rows += pq.ParquetFile(part).metadata.num_rows
        except Exception:  # noqa: BLE001 — the segment being written has no footer yet
            pass
    return rows


@pytest.mark.parametrize("engine", ["mosaik", "direct"])
def test_sigkill_keeps_the_rows_older_than_the_flush_interval(engine, tmp_path):
    (tmp_path / "long.toml").write_text(TOY)
    (tmp_path / "drive.py").write_text(DRIVER)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "helpers")}
    proc = subprocess.Popen([sys.executable, str(tmp_path / "drive.py"), "run", str(tmp_path / "long.toml"), "--out",
                             str(tmp_path / "runs"), "--quiet", "--no-report", "--engine", engine], env=env,
                            stderr=subprocess.PIPE, text=True)
    runs = tmp_path / "runs"
    deadline = time.monotonic() + 60
    seen = 0
    while time.monotonic() < deadline and seen < 2:  # two segments closed: rows older than 0.5 s are on disk
        folders = list(runs.glob("*")) if runs.exists() else []
        seen = len(segment_files(folders[0] / "timeseries.parquet")) if folders else 0
        assert proc.poll() is None, "the run ended before it could be killed: make it longer"
        time.sleep(0.1)
    run_dir = next(runs.iterdir())
    kept_before_kill = _rows_in_closed_segments(run_dir / "timeseries.parquet")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert kept_before_kill > 0
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["status"] == "running"  # the run is marked as started, and never finished
    assert not (run_dir / "timeseries.parquet").exists()

    assert main(["repair", str(run_dir)]) == 0
    ts = pd.read_parquet(run_dir / "timeseries.parquet").set_index("time_utc")
    assert len(ts) >= kept_before_kill
    assert (ts.index == pd.date_range("2024-07-15", periods=len(ts), freq="60s", tz="UTC")).all()  # from the start
    np.testing.assert_allclose(ts["a.p_mw"], 1.0 + np.arange(len(ts)) * 60 / 3600)
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["status"] == "failed" and "killed before it finished" in meta["reason"]
    assert json.loads((run_dir / "kpis.json").read_text())["entities"]["a"]["energy_mwh"] > 0
    assert (run_dir / "report.html").is_file() and not segment_files(run_dir / "timeseries.parquet")


def test_segments_close_by_wall_time_and_assemble_in_order(tmp_path, monkeypatch):
    """A slow run (one row per wall-time flush) leaves many small segments; assembling joins them
    into row groups of chunk_rows again, skips one cut off mid-write, and keeps every row."""
    from cosim.run import recorder as rec

    clock = [0.0]
    monkeypatch.setattr(rec.time_module, "monotonic", lambda: clock[0])
    path = tmp_path / "timeseries.parquet"
    recorder = ParquetRecorder(path, ["x.p_mw", "g.converged"], chunk_rows=4, flush_s=10.0)
    index = pd.date_range("2024-07-15", periods=9, freq="60s", tz="UTC")
    for k, t in enumerate(index):
        clock[0] += 11.0  # every row comes after more than flush_s: each closes a segment
        recorder.append(t, {"x.p_mw": float(k), "g.converged": k % 2 == 0})
    assert len(segment_files(path)) == 9 and not path.exists()
    broken = rec.segment_path(path, 10)
    broken.write_bytes(b"PAR1" + b"\0" * 20)  # what a kill mid-write leaves
    recorder._closed = True  # as if killed: assemble by hand, as `cosim repair` does
    rows, notes = assemble(path, recorder.schema, group_rows=4)
    assert rows == 9 and len(notes) == 1 and broken.name in notes[0]
    table = pq.ParquetFile(path)
    assert [table.metadata.row_group(i).num_rows for i in range(table.num_row_groups)] == [4, 4, 1]
    ts = pd.read_parquet(path)
    assert ts["x.p_mw"].tolist() == list(map(float, range(9)))
    assert ts["g.converged"].tolist() == [k % 2 == 0 for k in range(9)]


def test_repair_on_a_whole_folder_changes_nothing(tmp_path, toy_adapters, write_scenario, capsys):
    short = ramp_sink(duration_s=600, name="short", extra="\n[record]\nchunk_rows = 1_000_000\nflush_s = 0.5\n")
    result = cosim.run(write_scenario(short), out_dir=tmp_path)
    assert len(result.timeseries()) == 10  # ten 60 s steps: the short run, not TOY's 10,000 days
    before = (result.run_dir / "timeseries.parquet").read_bytes()
    assert main(["repair", str(result.run_dir)]) == 0
    assert "nothing to repair" in capsys.readouterr().out
    assert (result.run_dir / "timeseries.parquet").read_bytes() == before


def _slow_rows(recorder, clock, n):
    index = pd.date_range("2024-07-15", periods=n, freq="60s", tz="UTC")
    for k, t in enumerate(index):
        clock[0] += 11.0 if k % 3 == 0 else 1.0  # some rows close a segment (flush_s = 10), some do not
        recorder.append(t, {"x.p_mw": float(k) if k % 5 else None, "g.converged": k % 2 == 0})


def test_background_writing_gives_the_file_the_segments_give(tmp_path, monkeypatch):
    """The engines' recorder writes in a thread: the file it leaves equals the one written in the
    caller's thread (rows, nulls, flags), in row groups of chunk_rows whatever the flushes were, and
    equals what assembling the segments gives (what ``cosim repair`` makes of a killed run)."""
    from cosim.run import recorder as rec

    clock = [0.0]
    monkeypatch.setattr(rec.time_module, "monotonic", lambda: clock[0])
    files = {}
    for background in (False, True):
        path = tmp_path / str(background) / "timeseries.parquet"
        path.parent.mkdir()
        recorder = ParquetRecorder(path, ["x.p_mw", "g.converged"], chunk_rows=4, flush_s=10.0, background=background)
        _slow_rows(recorder, clock, 23)
        if not background:  # the segments a kill would have left, all rows flushed
            recorder.flush()
            kept = tmp_path / "kept" / "timeseries.parquet"
            kept.parent.mkdir()
            for part in segment_files(path):
                (kept.parent / part.name).write_bytes(part.read_bytes())
            # the stubbed monotonic clock (11 s on every third row, flush_s 10) and chunk_rows 4 close the segments,
            # so their number is fixed: 9 for these 23 rows, not a measure of this machine's speed
            assert len(segment_files(kept)) == 9
        recorder.close()
        assert not segment_files(path) and not rec._writing_path(path).exists()
        files[background] = pq.ParquetFile(path)
    assert assemble(kept)[0] == 23
    files["assembled"] = pq.ParquetFile(kept)
    plain = files[False]
    for other in (files[True], files["assembled"]):
        assert other.read().equals(plain.read())
        assert other.schema_arrow.equals(plain.schema_arrow, check_metadata=True)
        assert [other.metadata.row_group(i).num_rows for i in range(other.num_row_groups)] == [4, 4, 4, 4, 4, 3]


def test_a_run_that_ends_before_its_first_flush_writes_no_segment(tmp_path):
    """Rows still buffered at close go to the file directly: a short run writes its rows once, the
    same file in either mode."""
    files = {}
    for background in (False, True):
        path = tmp_path / str(background) / "timeseries.parquet"
        path.parent.mkdir()
        recorder = ParquetRecorder(path, ["x.p_mw", "g.converged"], chunk_rows=100, flush_s=2.0, background=background)
        for k, t in enumerate(pd.date_range("2024-07-15", periods=10, freq="60s", tz="UTC")):
            recorder.append(t, {"x.p_mw": float(k), "g.converged": k % 2 == 0})
        recorder.close()
        assert recorder._n_segments == 0 and not segment_files(path)
        files[background] = path.read_bytes()
    assert files[True] == files[False]


def test_background_write_failure_is_raised_and_the_rest_kept(tmp_path, monkeypatch):
    """A write that fails in the thread (a full disk, say) is raised by the recorder at its next
    write, naming the file; close still leaves what the closed segments hold."""
    from cosim.run import recorder as rec

    clock = [0.0]
    monkeypatch.setattr(rec.time_module, "monotonic", lambda: clock[0])
    path = tmp_path / "timeseries.parquet"
    recorder = ParquetRecorder(path, ["x.p_mw", "g.converged"], chunk_rows=4, flush_s=10.0, background=True)
    _slow_rows(recorder, clock, 8)
    handed_over = recorder.rows_written
    recorder._thread.queue.put(("rows", "not rows"))  # what a failing write looks like to the thread
    with pytest.raises(RuntimeError, match="writing timeseries.parquet failed"):
        for _ in range(100):  # the thread fails soon after: one of the next writes says so
            _slow_rows(recorder, clock, 4)
            time.sleep(0.01)
    with pytest.raises(RuntimeError, match="writing timeseries.parquet failed"):
        recorder.close()
    ts = pd.read_parquet(path)  # every row handed to the thread before the failure, in order
    assert len(ts) == handed_over >= 4 and ts["g.converged"].tolist() == [k % 2 == 0 for k in range(len(ts))]


def test_every_flush_is_a_complete_segment(tmp_path):
    """Each flush (by rows or by wall time) is a Parquet file of its own, closed at once: a kill can
    cut only the flush being written."""
    path = tmp_path / "timeseries.parquet"
    recorder = ParquetRecorder(path, ["x.p_mw", "g.converged"], chunk_rows=3, flush_s=2.0)
    for k, t in enumerate(pd.date_range("2024-07-15", periods=7, freq="60s", tz="UTC")):
        recorder.append(t, {"x.p_mw": float(k), "g.converged": True})
    parts = segment_files(path)
    assert [pq.ParquetFile(part).metadata.num_rows for part in parts] == [3, 3]  # both readable, footer and all
    recorder.close()
    assert pd.read_parquet(path)["x.p_mw"].tolist() == list(map(float, range(7)))


def test_rows_a_slow_step_leaves_waiting_reach_the_disk(tmp_path):
    """The background writer flushes rows that have waited flush_s for the next row: a run whose
    next step takes minutes does not hold the rows before it in memory, where a kill loses them."""
    path = tmp_path / "timeseries.parquet"
    recorder = ParquetRecorder(path, ["x.p_mw", "g.converged"], chunk_rows=1440, flush_s=0.1, background=True)
    for k, t in enumerate(pd.date_range("2024-07-15", periods=3, freq="60s", tz="UTC")):
        recorder.append(t, {"x.p_mw": float(k), "g.converged": True})
    deadline = time.monotonic() + 60  # no row comes after these three: only the writer can flush them
    while time.monotonic() < deadline and _rows_in_closed_segments(path) < 3:
        time.sleep(0.05)
    assert _rows_in_closed_segments(path) == 3
    recorder.close()
    assert pd.read_parquet(path)["x.p_mw"].tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("background", [False, True])
@pytest.mark.parametrize("fail_at", ["a block", "the close"])
def test_a_file_that_cannot_be_written_loses_no_row(tmp_path, monkeypatch, background, fail_at):
    """Writing timeseries.parquet fails (a full disk) on a block mid-run or when the file is closed: the
    run learns it, and the file close assembles from the segments holds every row added, the closing
    rows (handed over without a segment) among them."""
    calls = []
    write_table, close = pq.ParquetWriter.write_table, pq.ParquetWriter.close

    def full(writer) -> bool:  # only timeseries.parquet's writer meets the full disk, not the segments'
        return str(writer.where).endswith(".writing")

    def failing_write(writer, *args, **kwargs):
        calls.append(full(writer))
        if fail_at == "a block" and full(writer) and sum(calls) == 2:
            raise OSError(28, "No space left on device")
        return write_table(writer, *args, **kwargs)

    def failing_close(writer):
        close(writer)
        if fail_at == "the close" and full(writer):
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", failing_write)
    monkeypatch.setattr(pq.ParquetWriter, "close", failing_close)
    path = tmp_path / "timeseries.parquet"
    recorder = ParquetRecorder(path, ["x.p_mw"], chunk_rows=4, flush_s=1e9, background=background)
    errors, added = [], 0
    try:
        for t in pd.date_range("2024-07-15", periods=23, freq="60s", tz="UTC"):
            added += 1  # a row is the recorder's once append is called, also when append reports the failure
            recorder.append(t, {"x.p_mw": float(added - 1)})
    except RuntimeError as exc:  # the run ends here, as an engine's would
        errors.append(exc)
    try:
        recorder.close()
    except RuntimeError as exc:
        errors.append(exc)
    assert errors and all("No space left" in str(exc) for exc in errors)
    table = pq.read_table(path)
    assert table["x.p_mw"].to_pylist() == [float(k) for k in range(added)] and added >= 8


def test_a_short_row_is_refused(tmp_path):
    recorder = ParquetRecorder(tmp_path / "timeseries.parquet", ["a.p_mw", "b.p_mw"], chunk_rows=4)
    with pytest.raises(ValueError, match="a row of 1 values for the 2 columns"):
        recorder.append_cells(pd.Timestamp("2024-07-15", tz="UTC"), [3.0])
    recorder.close()
