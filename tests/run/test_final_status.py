"""Every way a run ends leaves a final status in ``metadata.json``: never ``running`` once the
process that ran it is gone (a SIGKILL excepted: ``cosim repair`` finishes that folder, see
tests/run/test_recorder_crash.py).

Each way of ending is tried on every engine it applies to: a remote simulator whose connection
closes during ``init`` (mosaik raises ``SystemExit`` there), a simulator that fails while the run
is set up, an exception, Ctrl-C or ``SystemExit`` escaping an engine, SIGTERM at any moment of the
start-up, and a second SIGTERM while the KPIs are written.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import cosim
from cosim.cli import main
from cosim.run import runner
from toy_scenarios import ramp_sink

ROOT = Path(__file__).resolve().parents[2]
HELPERS = ROOT / "tests" / "helpers"


def _meta(out: Path) -> dict:
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    return json.loads((folder / "metadata.json").read_text())


class _Closer(threading.Thread):
    """A loopback listener that accepts each connection and closes it (after reading what comes
    first, or at once): what a remote simulator that dies during ``init`` looks like to mosaik."""

    def __init__(self, read_first: bool):
        super().__init__(daemon=True)
        self.read_first = read_first
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                if self.read_first:
                    conn.settimeout(5)
                    try:
                        conn.recv(65536)
                    except OSError:
                        pass

    def stop(self) -> None:
        self.done.set()
        self.join(5)
        self.sock.close()


@pytest.mark.parametrize("read_first", [True, False], ids=["closes-after-init-request", "closes-at-once"])
def test_a_remote_simulator_that_closes_during_init_fails_the_run_with_the_reason(read_first, tmp_path,
                                                                                 toy_adapters, write_scenario, capsys):
    closer = _Closer(read_first)
    closer.start()
    try:
        text = ramp_sink(duration_s=600).replace('src = { adapter = "toy_ramp" }',
                                                 f'src = {{ adapter = "toy_ramp", connect = "127.0.0.1:{closer.port}" }}')
        assert "connect" in text
        code = main(["run", str(write_scenario(text)), "--out", str(tmp_path / "runs"), "--quiet", "--no-report"])
    finally:
        closer.stop()
    meta = _meta(tmp_path / "runs")
    assert code == 1
    assert meta["status"] == "failed" and meta["reason"]
    assert "src" in meta["reason"] and ("connection" in meta["reason"].lower() or "Connection" in meta["reason"])
    assert meta["reason"] in capsys.readouterr().err


@pytest.mark.parametrize("engine", ["mosaik", "direct"])
def test_a_simulator_that_fails_while_the_run_is_set_up_fails_it(engine, tmp_path, toy_adapters, write_scenario):
    text = ramp_sink(duration_s=600).replace('adapter = "toy_ramp"', 'adapter = "toy_init_fail"')
    result = cosim.run(write_scenario(text), out_dir=tmp_path,
                       overrides={"scenario.engine": engine})
    assert result.status == "failed" and "injected failure while creating" in result.reason
    assert _meta(tmp_path)["status"] == "failed"


@pytest.mark.parametrize("escaping,status", [(RuntimeError("a bug in an engine"), "failed"),
                                             (SystemExit("a library called sys.exit"), "failed"),
                                             (KeyboardInterrupt("interrupted (Ctrl-C)"), "interrupted"),
                                             (MemoryError(), "failed")])
def test_whatever_escapes_an_engine_leaves_a_final_status(escaping, status, tmp_path, toy_adapters, write_scenario,
                                                         monkeypatch):
    def broken_engine(scn, run_dir, progress):
        raise escaping

    monkeypatch.setattr(runner, "run_engine", broken_engine)
    with pytest.raises(type(escaping)):
        cosim.run(write_scenario(ramp_sink(duration_s=600)), out_dir=tmp_path)
    meta = _meta(tmp_path)
    assert meta["status"] == status and meta["reason"]
    assert type(escaping).__name__ in meta["reason"] or str(escaping) in meta["reason"]


def test_a_second_signal_while_kpis_are_written_leaves_a_final_status(tmp_path, toy_adapters, write_scenario,
                                                                     monkeypatch):
    def interrupted_kpis(scn, folder):
        raise KeyboardInterrupt("interrupted (SIGTERM, twice)")

    monkeypatch.setattr(runner, "compute_kpis", interrupted_kpis)
    with pytest.raises(KeyboardInterrupt):
        cosim.run(write_scenario(ramp_sink(duration_s=600)), out_dir=tmp_path)
    meta = _meta(tmp_path)
    assert meta["status"] == "interrupted" and "while its KPIs were written" in meta["reason"]


DRIVER = ("import sys\nfrom cosim import registry\n"
          "registry.register('toy_ramp', 'toy_sims:RampSim'); registry.register('toy_sink', 'toy_sims:SinkSim')\n"
          "from cosim.cli import main\nraise SystemExit(main(sys.argv[1:]))\n")


@pytest.mark.parametrize("engine", ["mosaik", "direct"])
@pytest.mark.parametrize("after_s", [0.0, 0.5])
def test_sigterm_at_any_moment_of_the_start_leaves_a_final_status(engine, after_s, tmp_path):
    """SIGTERM right when the run folder appears, and a little later (engine start-up, first steps):
    the folder ends ``interrupted`` (or ``ok`` had it finished), never ``running``."""
    (tmp_path / "long.toml").write_text(ramp_sink(duration_s=86_400 * 400, name="long"))
    (tmp_path / "drive.py").write_text(DRIVER)
    env = {**os.environ, "PYTHONPATH": str(HELPERS)}
    proc = subprocess.Popen([sys.executable, str(tmp_path / "drive.py"), "run", str(tmp_path / "long.toml"), "--out",
                             str(tmp_path / "runs"), "--quiet", "--no-report", "--engine", engine], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    runs = tmp_path / "runs"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (runs.exists() and any(runs.glob("*/metadata.json"))):
        time.sleep(0.01)
    time.sleep(after_s)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    meta = _meta(runs)
    assert meta["status"] == "interrupted", (meta["status"], err)
    assert "SIGTERM" in meta["reason"]
    assert proc.returncode == 130
