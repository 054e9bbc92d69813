"""World building end to end with toy adapters: recording, feedback, failure mid-run, determinism."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import cosim
from cosim.folder import read_timeseries
from toy_scenarios import FEEDBACK

TOY = """
[scenario]
name = "toy"
start = 2024-07-15T00:00:00Z
duration_s = 3600
step_s = 60
seed = 1

[sims]
src = { adapter = "toy_ramp" }
sink = { adapter = "toy_sink" }

[entities]
a = { sim = "src", model = "Ramp", p0_mw = 1.0 }
b = { sim = "src", model = "Ramp", p0_mw = 2.0, slope_mw_h = 0.0 }
s = { sim = "sink", model = "Sink" }

[[connect]]
src = "a"
dst = "s"
attrs = ["p_mw"]

[[connect]]
src = "b"
dst = "s"
attrs = ["p_mw"]
"""



def test_run_records_every_output_and_sums_inputs(toy_adapters, write_scenario, tmp_path):
    result = cosim.run(write_scenario(TOY), out_dir=tmp_path / "runs")
    assert result.ok, result.reason
    ts = result.timeseries()
    assert len(ts) == 60 and str(ts.index.tz) == "UTC"
    assert ts.index[0] == pd.Timestamp("2024-07-15T00:00Z") and ts.index[-1] == pd.Timestamp("2024-07-15T00:59Z")
    assert set(ts.columns) == {"a.p_mw", "a.p_cap_mw", "b.p_mw", "b.p_cap_mw", "s.p_sum_mw", "s.p_cap_mw", "s.t_sink_c"}
    # two sources into one input are summed, in the same step (no delay on the forward edge)
    np.testing.assert_allclose(ts["s.p_sum_mw"], ts["a.p_mw"] + ts["b.p_mw"], rtol=0, atol=1e-12)
    # the ramp: p = 1 + t_h
    np.testing.assert_allclose(ts["a.p_mw"], 1.0 + np.arange(60) / 60.0, atol=1e-12)
    folder = sorted(p.name for p in result.run_dir.iterdir())
    assert folder == ["kpis.json", "metadata.json", "scenario.toml", "timeseries.parquet"]
    meta = json.loads((result.run_dir / "metadata.json").read_text())
    assert meta["status"] == "ok" and meta["seed"] == 1 and meta["versions"]["mosaik"].startswith("3.6")
    assert meta["overrides"] == {} and meta["kpi_error"] is None
    assert json.loads((result.run_dir / "kpis.json").read_text())["entities"]["b"]["energy_mwh"] == pytest.approx(2.0)


def test_time_shifted_feedback_uses_previous_step(toy_adapters, write_scenario, tmp_path):
    result = cosim.run(write_scenario(TOY + FEEDBACK), out_dir=tmp_path)
    ts = result.timeseries()
    assert ts["a.p_cap_mw"].iloc[0] == 100.0  # initial data
    # the cap at step k is the sink's offer from step k-1
    np.testing.assert_allclose(ts["a.p_cap_mw"].iloc[1:].to_numpy(), ts["s.p_cap_mw"].iloc[:-1].to_numpy())
    assert (ts["a.p_mw"] <= ts["a.p_cap_mw"] + 1e-12).all()


def test_weak_connection_runs_in_a_group(toy_adapters, write_scenario, tmp_path):
    weak = FEEDBACK.replace("time_shifted = true", "weak = true")
    result = cosim.run(write_scenario(TOY + weak), out_dir=tmp_path)
    assert result.ok, result.reason
    assert len(result.timeseries()) == 60


def test_failure_mid_run_keeps_what_was_recorded(toy_adapters, write_scenario, tmp_path):
    text = TOY + '\n[sims.bad]\nadapter = "toy_faulty"\nfail_at_s = 600\n\n[entities.f]\nsim = "bad"\nmodel = "Faulty"\n'
    result = cosim.run(write_scenario(text), out_dir=tmp_path)
    assert result.status == "failed"
    assert "injected failure at t = 600 s" in result.reason
    ts = read_timeseries(result.run_dir / "timeseries.parquet")  # footer written: readable
    assert 1 <= len(ts) <= 10 and ts.index[0] == pd.Timestamp("2024-07-15T00:00Z")
    meta = json.loads((result.run_dir / "metadata.json").read_text())
    assert meta["status"] == "failed" and "injected failure" in meta["reason"]


def test_overrides_are_in_metadata(toy_adapters, write_scenario, tmp_path):
    result = cosim.run(write_scenario(TOY), out_dir=tmp_path, overrides={"entities.a.p0_mw": 3.0})
    assert json.loads((result.run_dir / "metadata.json").read_text())["overrides"] == {"entities.a.p0_mw": 3.0}
    assert result.timeseries()["a.p_mw"].iloc[0] == 3.0


NOISE = """
[sims.noise]
adapter = "toy_noise"

[entities.n1]
sim = "noise"
model = "Noise"

[entities.n2]
sim = "noise"
model = "Noise"

[[connect]]
src = "n1"
dst = "s"
attrs = ["p_mw"]
"""


def test_same_seed_same_results_and_the_seed_reaches_the_simulators(toy_adapters, write_scenario, tmp_path):
    """Simulators that draw random numbers: the same seed gives identical series, another seed
    other draws, and two entities of one sim draw from streams of their own."""
    path = write_scenario(TOY + FEEDBACK + NOISE)
    first = cosim.run(path, out_dir=tmp_path / "1").timeseries()
    second = cosim.run(path, out_dir=tmp_path / "2").timeseries()
    pd.testing.assert_frame_equal(first, second, check_exact=True)
    other = cosim.run(path, out_dir=tmp_path / "3", overrides={"scenario.seed": 2}).timeseries()
    assert not np.allclose(first["n1.p_mw"], other["n1.p_mw"])
    assert not np.allclose(first["n1.p_mw"], first["n2.p_mw"])
    assert first["n1.p_mw"].std() == pytest.approx(1.0, rel=0.35)  # 60 draws of N(0, 1)
    np.testing.assert_allclose(first["s.p_sum_mw"], first["a.p_mw"] + first["b.p_mw"] + first["n1.p_mw"])


# -- the scenario as a graph (mosaik's scenario tests draw it and assert it) -------------------
def test_graph_of_sources_summed_and_a_delayed_feedback(toy_adapters, write_scenario):
    """::

        a (Ramp) --p_mw--+
                         +--> s (Sink)          two sources into one input: summed
        b (Ramp) --p_mw--+      |
        ^                       |
        +--p_cap_mw-------------+               delayed (time-shifted) feedback to a

    The sims order src before sink (direct edges point forward; the feedback is delayed).
    """
    from cosim.run.graph import Edge, build

    graph = build(cosim.load_scenario(write_scenario(TOY + FEEDBACK)))
    assert graph.edges == [Edge("a", "s", (("p_mw", "p_mw"),)), Edge("b", "s", (("p_mw", "p_mw"),)),
                           Edge("s", "a", (("p_cap_mw", "p_cap_mw"),), "time_shifted", {"p_cap_mw": 100.0})]
    assert graph.sim_order == ["src", "sink"] and graph.weak_groups == []
    assert graph.recorded == {"a": ["p_mw", "p_cap_mw"], "b": ["p_mw", "p_cap_mw"],
                              "s": ["p_sum_mw", "p_cap_mw", "t_sink_c"]}


def test_graph_orders_sims_against_their_declaration(toy_adapters, write_scenario):
    """The sink is declared first, yet steps after its sources::

        sink:s <--p_mw-- src:a        (declared: sink, src)

    and a weak feedback puts both sims in one group::

        sink:s --p_cap_mw (weak)--> src:a
    """
    from cosim.run.graph import build

    text = TOY.replace('src = { adapter = "toy_ramp" }\nsink = { adapter = "toy_sink" }',
                       'sink = { adapter = "toy_sink" }\nsrc = { adapter = "toy_ramp" }')
    graph = build(cosim.load_scenario(write_scenario(text + FEEDBACK.replace("time_shifted", "weak"))))
    assert graph.sim_order == ["src", "sink"]
    assert graph.weak_groups == [{"src", "sink"}]
    assert [e.kind for e in graph.edges] == ["direct", "direct", "weak"]


def test_record_include_exclude_and_chunks(toy_adapters, write_scenario, tmp_path):
    text = TOY + '\n[record]\ninclude = ["a.*", "s.p_sum_mw"]\nexclude = ["a.p_cap_mw"]\nchunk_rows = 7\nstep_s = 120\n'
    result = cosim.run(write_scenario(text), out_dir=tmp_path)
    ts = result.timeseries()
    assert list(ts.columns) == ["a.p_mw", "s.p_sum_mw"] and len(ts) == 30
    assert pq.ParquetFile(result.run_dir / "timeseries.parquet").num_row_groups == 5  # 30 rows in chunks of 7


def test_subprocess_simulator(toy_adapters, write_scenario, tmp_path, monkeypatch):
    """A sim in its own process (mosaik's remote mechanism) gives the same series as inline."""
    inline = cosim.run(write_scenario(TOY, "inline.toml"), out_dir=tmp_path).timeseries()
    # the child process imports the toy module by its module:Class target
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parents[1] / "helpers"))
    remote_text = TOY.replace('src = { adapter = "toy_ramp" }', 'src = { adapter = "toy_ramp", process = "subprocess" }')
    remote = cosim.run(write_scenario(remote_text, "remote.toml"), out_dir=tmp_path)
    assert remote.ok, remote.reason
    pd.testing.assert_frame_equal(inline, remote.timeseries())


def _listening(port: int) -> bool:
    """True once a socket listens on 127.0.0.1:port (read from /proc, so no connection is used up)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        if int(local.split(":")[1], 16) == port and state == "0A":
            return True
    return False


def test_connect_to_a_running_simulator(toy_adapters, write_scenario, tmp_path):
    """``connect = "host:port"``: the adapter already serves on loopback, as it would on another host."""
    import os
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "helpers")}
    server = subprocess.Popen([sys.executable, "-m", "cosim.run.remote", "toy_sims:RampSim", f"127.0.0.1:{port}",
                               "--remote", "--timeout", "60"], env=env)
    try:
        deadline = time.monotonic() + 30
        while not _listening(port) and time.monotonic() < deadline and server.poll() is None:
            time.sleep(0.05)
        assert _listening(port), "the simulator server did not start listening"
        text = TOY.replace('src = { adapter = "toy_ramp" }', f'src = {{ adapter = "toy_ramp", connect = "127.0.0.1:{port}" }}')
        remote = cosim.run(write_scenario(text, "connect.toml"), out_dir=tmp_path)
        assert remote.ok, remote.reason
        inline = cosim.run(write_scenario(TOY, "inline.toml"), out_dir=tmp_path).timeseries()
        pd.testing.assert_frame_equal(inline, remote.timeseries())
    finally:
        if server.poll() is None:
            server.kill()
        server.wait(timeout=10)


@pytest.mark.parametrize("attempt", range(3))  # the old handler lost metadata.json in about 1 of 9 tries
def test_sigterm_keeps_what_was_recorded(tmp_path, attempt):
    """A batch system's walltime or `timeout` sends SIGTERM: the run stops like Ctrl-C, the Parquet
    file gets its footer (readable), metadata and KPIs are written, and the command exits 130."""
    import os
    import signal
    import subprocess
    import sys
    import time

    scenario = tmp_path / "long.toml"
    scenario.write_text(TOY.replace("duration_s = 3600", "duration_s = 5_184_000") + "\n[record]\nchunk_rows = 50\nflush_s = 0.1\n")
    driver = tmp_path / "drive.py"
    driver.write_text(
        "import sys\nfrom cosim import registry\n"
        "registry.register('toy_ramp', 'toy_sims:RampSim'); registry.register('toy_sink', 'toy_sims:SinkSim')\n"
        "from cosim.cli import main\nraise SystemExit(main(sys.argv[1:]))\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "helpers")}
    proc = subprocess.Popen([sys.executable, str(driver), "run", str(scenario), "--out", str(tmp_path / "runs"),
                             "--quiet", "--no-report"], env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    runs = tmp_path / "runs"
    while time.monotonic() < deadline:  # wait until a few chunks are on disk
        parts = list(runs.glob("*/.timeseries.part-*.parquet")) if runs.exists() else []
        if len(parts) >= 3:  # segments flushed by the recorder while the run goes on
            break
        assert proc.poll() is None, "the run ended before it could be interrupted: make it longer"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    run_dir = next(runs.iterdir())
    ts = read_timeseries(run_dir / "timeseries.parquet")
    assert 50 <= len(ts) < 86_400
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["status"] == "interrupted" and "SIGTERM" in meta["reason"]
    assert json.loads((run_dir / "kpis.json").read_text())["duration_h"] > 0  # the KPIs of what ran
    assert "what was recorded is in" in err and "Traceback" not in err


def test_numbers_in_flag_columns_are_recorded_not_dropped(tmp_path):
    """A flag column (``*_in_service``, ``converged``, ``event_active``) fed 0/1 numbers used to
    make the whole chunk fail to write; values are converted per cell now."""
    from cosim.run.recorder import ParquetRecorder

    path = tmp_path / "ts.parquet"
    rec = ParquetRecorder(path, ["g.converged", "x.p_mw"], chunk_rows=2)
    for k, (flag, p) in enumerate([(1.0, 1), (0, "bad"), (True, 2.5), (None, None)]):
        rec.append(pd.Timestamp("2024-07-15", tz="UTC") + pd.Timedelta(minutes=k), {"g.converged": flag, "x.p_mw": p})
    rec.close()
    ts = read_timeseries(path)
    assert ts["g.converged"].tolist()[:3] == [True, False, True] and pd.isna(ts["g.converged"].iloc[3])
    assert ts["x.p_mw"].iloc[0] == 1.0 and np.isnan(ts["x.p_mw"].iloc[1]) and ts["x.p_mw"].iloc[2] == 2.5


def test_every_cell_type_is_recorded_as_float_and_bool_convert_it(tmp_path):
    """Rows of plain numbers go into the buffer in one numpy assignment, other rows cell by
    cell; either way each cell is what ``float()`` (flags: ``bool()``) makes of it, null when
    that fails or gives NaN. The reference is built with pyarrow from :func:`_cell` directly,
    with a row group boundary inside the rows (chunk_rows = 3)."""
    import pyarrow as pa

    from cosim.run.recorder import ParquetRecorder, _cell

    columns = ["g.converged", "x.p_mw", "y.q_mvar"]
    rows = [(1.0, 1, np.float32(0.1)), (0, None, np.int64(-3)), (np.bool_(True), float("nan"), 2**70),
            (2.0, "1.5", np.datetime64("2024-01-01")), (float("nan"), [1.0], np.timedelta64(5, "s")),
            (None, -0.0, True), ("0", b"2.5", np.array(4.0))]
    stamps = pd.date_range("2024-07-15", periods=len(rows), freq="60s", tz="UTC")
    rec = ParquetRecorder(tmp_path / "ts.parquet", columns, chunk_rows=3)
    for stamp, row in zip(stamps, rows):
        rec.append(stamp, dict(zip(columns, row)))
    rec.close()
    got = pq.read_table(tmp_path / "ts.parquet")
    want = [pa.array(list(stamps), type=pa.timestamp("ms", tz="UTC"))]
    for j, column in enumerate(columns):
        flag = column == "g.converged"
        want.append(pa.array([_cell(row[j], flag) for row in rows], type=pa.bool_() if flag else pa.float64(),
                             from_pandas=True))
    assert got.equals(pa.Table.from_arrays(want, schema=got.schema))
    assert [got.to_batches()[0].num_rows, pq.ParquetFile(tmp_path / "ts.parquet").num_row_groups] == [3, 3]
