"""``cosim serve scenarios/default.toml --rt-factor 0.01`` end to end: a real server process on
127.0.0.1, a real HTTP client (httpx), /metrics read by prometheus_client's own parser; a cap set
through the API shows in the recorded time series from the next step; SIGTERM leaves a ``stopped``
run folder with everything recorded so far."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cosim.cli import main
from cosim.folder import RunFolder
from cosim.live import load_live
from cosim.live.metrics import FAMILIES

ROOT = Path(__file__).resolve().parents[2]


class Served:
    """``cosim serve`` in a child process; its stdout lines arrive on a queue (read without blocking the test)."""

    def __init__(self, args: list[str], cwd: Path):
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "cosim", "serve", *args], cwd=cwd, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)

    def line_matching(self, pattern: str, timeout_s: float = 60.0) -> re.Match:
        seen = []
        while True:
            try:
                line = self.lines.get(timeout=timeout_s)
            except queue.Empty:
                pytest.fail(f"cosim serve printed no line matching {pattern!r} within {timeout_s:g} s; "
                            f"stdout: {seen}; stderr: {self._stderr()}")
            seen.append(line)
            if m := re.search(pattern, line):
                return m

    def _stderr(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        return self.proc.stderr.read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)


@pytest.fixture
def served(tmp_path):
    started: list[Served] = []

    def start(*args: str) -> Served:
        s = Served([*args, "--out", str(tmp_path / "runs")], ROOT)
        started.append(s)
        return s

    yield start
    for s in started:
        s.close()


def test_serve_default_scenario_api_metrics_cap_and_sigterm(served, until):
    """The issue's "done when": the endpoints answer, bad input is a 4xx with the key path, and a cap
    set through the API is in the recorded series at the next step."""
    s = served("scenarios/default.toml", "--rt-factor", "0.01", "--port", "0", "--no-report",
               "--set", "scenario.duration_s=3600")
    url = s.line_matching(r"on (http://127\.0\.0\.1:\d+)").group(1)
    run_dir = Path(s.line_matching(r"run folder: (\S+)").group(1))
    with httpx.Client(base_url=url, timeout=10.0) as client:
        state = until(lambda: (st := client.get("/state").json())["n_steps"] >= 2 and st, "two steps")
        assert state["status"] == "running" and state["rt_factor"] == 0.01 and state["scenario"] == "default"
        assert Path(state["run_dir"]) == run_dir.resolve() and (run_dir / "metadata.json").is_file()
        assert state["time_s"] > state["last_step_s"] >= 60

        entities = {e["id"]: e for e in client.get("/entities").json()}
        assert entities["campus"]["role"] == "it" and entities["campus"]["model"] == "Cluster"
        cap = next(i for i in entities["campus"]["inputs"] if i["name"] == "p_cap_w")
        assert (cap["low"], cap["high"]) == (200.0, 700.0)  # the H100's settable range
        assert entities["tmy"]["inputs"] == []

        outputs = client.get("/entities/campus").json()["outputs"]
        assert outputs["p_mw"] > 1.0

        families = {f.name: f for f in text_string_to_metric_families(client.get("/metrics").text)}
        p_mw = [x.value for x in families["cosim_output"].samples if x.labels == {"entity": "campus", "attr": "p_mw"}]
        assert len(p_mw) == 1 and p_mw[0] > 1.0
        assert families["cosim_sim_time_seconds"].samples[0].value >= 120
        assert families["cosim_steps"].samples[0].value >= 2
        assert families["cosim_rt_factor_ratio"].samples[0].value == 0.01
        assert set(FAMILIES) <= families.keys()  # the documented families are served (their names only)

        bad = client.put("/entities/hall_z/inputs", json={"p_cap_w": 500})
        assert bad.status_code == 404 and "hall_z" in bad.json()["detail"] and "campus" in bad.json()["detail"]
        bad = client.put("/entities/campus/inputs", json={"p_cap_w": 500, "p_kap_w": 500})
        assert bad.status_code == 422
        [problem] = bad.json()["detail"]
        assert problem["path"] == "entities.campus.p_kap_w" and "p_cap_w" in problem["problem"]
        bad = client.post("/entities/campus/inputs", json={"p_cap_w": 1200})
        assert bad.status_code == 422
        assert bad.json()["detail"] == [{"path": "entities.campus.p_cap_w", "value": 1200, "bounds": [200.0, 700.0],
                                         "problem": bad.json()["detail"][0]["problem"]}]
        assert "[200, 700]" in bad.json()["detail"][0]["problem"]
        bad = client.post("/entities/campus/inputs", json={"p_cap_w": "low"})
        assert bad.status_code == 422 and bad.json()["detail"][0]["path"] == "entities.campus.p_cap_w"
        assert client.post("/entities/campus/inputs", content=b"{nope").status_code == 400
        assert client.get("/entities/campus").json()["held"] == {}  # nothing of a refused request was applied

        answer = client.put("/entities/campus/inputs", json={"p_cap_w": 200})
        assert answer.status_code == 200, answer.text
        applies_s = answer.json()["applies_from_s"]
        assert answer.json()["held"] == {"p_cap_w": 200.0}
        until(lambda: client.get("/state").json()["last_step_s"] >= applies_s + 60, "two steps after the cap")
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(timeout=60) == 128 + signal.SIGTERM

    meta = RunFolder(run_dir).metadata()
    assert meta["status"] == "stopped" and "SIGTERM" in meta["reason"]
    ts = RunFolder(run_dir).timeseries(["campus.p_mw"])["campus.p_mw"]
    seconds = [(t - ts.index[0]).total_seconds() for t in ts.index]
    before = ts[[x < applies_s for x in seconds]]
    after = ts[[x >= applies_s for x in seconds]]
    assert len(before) >= 2 and len(after) >= 2
    assert after.iloc[0] < 0.9 * before.iloc[-1]  # the cap bites at the very next step ...
    assert after.max() < before.min()  # ... and holds


def test_serve_names_a_bad_scenario_without_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text((ROOT / "scenarios" / "default.toml").read_text().replace('n_gpus = 3_072', 'n_gpus = "many"'))
    assert main(["serve", str(bad), "--port", "0", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "entities.campus.n_gpus" in err and "Traceback" not in err
    assert not list(tmp_path.glob("default-*"))  # nothing was started


def test_serve_refuses_a_port_in_use(tmp_path, capsys):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        port = taken.getsockname()[1]
        code = main(["serve", str(ROOT / "scenarios" / "default.toml"), "--port", str(port), "--out", str(tmp_path)])
    finally:
        taken.close()
    err = capsys.readouterr().err
    assert code == 1 and f"127.0.0.1:{port}" in err and "--port" in err and "Traceback" not in err


def test_a_live_run_keeps_real_time_unless_told_otherwise(tmp_path):
    """No --rt-factor and none in the file: real time (1.0); the file's own when it has one."""
    default = ROOT / "scenarios" / "default.toml"
    assert load_live(default, {}, None).scenario.rt_factor == 1.0
    assert load_live(default, {}, 0.25).scenario.rt_factor == 0.25
    assert load_live(default, {"scenario.rt_factor": 0.1}, None).scenario.rt_factor == 0.1
    own = tmp_path / "own.toml"
    own.write_text('[scenario]\nname = "own"\nstart = 2024-07-15T00:00:00Z\nduration_s = 60\nstep_s = 1\n'
                   'rt_factor = 0.5\n\n[sims.feed]\nadapter = "live_signal"\nurl = "http://127.0.0.1:9/"\n'
                   'fallback = { ci_g_kwh = 1.0 }\n\n[entities.sig]\nsim = "feed"\nmodel = "LiveSignal"\n')
    scn = load_live(own, {}, None)
    assert scn.scenario.rt_factor == 0.5 and scn.engine == "direct"


def _raw_put(url: str, head: bytes, body: bytes, read: bool = True) -> bytes:
    """A PUT written by hand on a socket (a client that lies about or leaves its body); the answer's
    bytes, or b"" when ``read`` is False (the client leaves at once)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"PUT /entities/campus/inputs HTTP/1.1\r\nHost: cosim\r\n" + head + b"\r\n" + body)
        if not read:
            return b""
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < int(
                re.search(rb"content-length: (\d+)", answer, re.I).group(1)):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        return answer


def test_the_servers_edges_deep_json_size_limit_and_clients_that_leave(served, until):
    """A JSON body nested 100k deep answered 500 with a traceback; a 30 MB body was parsed; each client
    that left mid-body printed a 60-line traceback. Now: 400 past 64 levels, 413 past the limit (here
    ``--max-body-bytes 300000``, declared or read), one log line per client that leaves."""
    s = served("scenarios/default.toml", "--rt-factor", "0.05", "--port", "0", "--no-report",
               "--set", "scenario.duration_s=3600", "--max-body-bytes", "300000")
    url = s.line_matching(r"on (http://127\.0\.0\.1:\d+)").group(1)
    with httpx.Client(base_url=url, timeout=30.0) as client:
        until(lambda: client.get("/state").json()["n_steps"] >= 1, "the first step")
        for depth, status in ((100_000, 400), (2_000, 400), (65, 400), (64, 422)):  # 64: parsed, not an object
            answer = client.put("/entities/campus/inputs", content=b"[" * depth + b"]" * depth)
            assert answer.status_code == status, (depth, answer.text)
            if status == 400:
                assert "nested deeper than 64 levels" in answer.json()["detail"]
        # a client that sends its whole body after a 413 may see the connection reset (the server closes
        # with bytes unread), as from any server that refuses early: these clients send part, then read
        big = _raw_put(url, b"Content-Length: 30000000\r\n", b'{"p_cap_w": 500' + b" " * 1000)
        assert big.startswith(b"HTTP/1.1 413 ") and b"limit of 300000 bytes (30000000 bytes declared)" in big
        chunk = b" " * 10_000
        streamed = _raw_put(url, b"Transfer-Encoding: chunked\r\n",  # no Content-Length: counted as read
                            b"%x\r\n%s\r\n" % (len(chunk), chunk) * 31)
        assert streamed.startswith(b"HTTP/1.1 413 ") and b"limit of 300000 bytes;" in streamed
        for _ in range(3):  # promises 1000 bytes, sends 7, leaves
            _raw_put(url, b"Content-Length: 1000\r\n", b'{"p_cap', read=False)
        until(lambda: client.get("/state").json()["n_steps"] >= 3, "steps after the clients left")
        assert client.get("/entities/campus").json()["held"] == {}  # nothing of any of them was set
        assert client.put("/entities/campus/inputs", json={"p_cap_w": 500}).status_code == 200
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(timeout=60) == 128 + signal.SIGTERM
    err = s.proc.stderr.read()
    assert "Traceback" not in err, err
    left = [line for line in err.splitlines() if "left before its request body" in line]
    assert len(left) == 3, err


def test_an_out_of_bounds_fmu_input_is_refused_and_a_released_line_closes_again(served, until):
    """``{"q_it_mw": -1e9}`` on ``hall`` was taken (200) and the next step killed the run; an opened
    line released with ``null`` stayed open (the grid keeps the last state it was given)."""
    s = served("scenarios/default.toml", "--rt-factor", "0.05", "--port", "0", "--no-report",
               "--set", "scenario.duration_s=3600")
    url = s.line_matching(r"on (http://127\.0\.0\.1:\d+)").group(1)
    with httpx.Client(base_url=url, timeout=30.0) as client:
        until(lambda: client.get("/state").json()["n_steps"] >= 1, "the first step")
        hall = next(e for e in client.get("/entities").json() if e["id"] == "hall")
        assert {i["name"]: [i["low"], i["high"]] for i in hall["inputs"]}["q_it_mw"] == [0.0, 1000.0]
        refused = client.put("/entities/hall/inputs", json={"q_it_mw": -1e9})
        assert refused.status_code == 422 and refused.json()["detail"][0]["bounds"] == [0.0, 1000.0]

        def bus_18_after(answer):  # the feeder's far-end voltage at a step after the answer's
            applies = answer.json()["applies_from_s"]
            until(lambda: client.get("/state").json()["last_step_s"] >= applies, "the step it applies to")
            return client.get("/entities/feeder").json()["outputs"]["bus_18_vm_pu"]

        opened = client.put("/entities/feeder/inputs", json={"line_1_2_in_service": 0})
        assert opened.status_code == 200, opened.text
        assert bus_18_after(opened) is None  # NaN: cut off from the source
        released = client.put("/entities/feeder/inputs", json={"line_1_2_in_service": None})
        assert released.status_code == 200 and released.json()["held"] == {}
        assert bus_18_after(released) > 0.8  # the line is back in service
        # the steps with buses cut off made the run degraded, and it stays so once they are supplied again
        assert client.get("/state").json()["status"] == "degraded"
