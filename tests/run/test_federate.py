"""``cosim run --helics``: the scenario as a HELICS value federate beside a second Python federate,
on a real broker on loopback (a free port per test). Federation (examples/helics/)::

    cosim (campus, vctl) --campus.p_mw-->  feeder.py  (vm_pu = 1 - 0.08 * p_mw)
    cosim vctl.vm_min_pu, vm_max_pu <--feeder/bus_vm_pu--  feeder.py

The coupled run must equal the same coupling done inside the test with a Session (the voltage
computed from the campus's P of the step before, as the federation delivers it).
"""

from __future__ import annotations

import gc
import importlib.util
import json
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest

h = pytest.importorskip("helics")

from cosim.cli import main  # noqa: E402
from cosim.errors import ScenarioError  # noqa: E402
from cosim.run.federate import Exchange, FederationError, _connect, load_config, run_federate  # noqa: E402
from cosim.run.session import Session  # noqa: E402
from cosim.scenario import load_scenario  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "helics"
DURATION = {"scenario.duration_s": 900}


def _feeder_module():
    spec = importlib.util.spec_from_file_location("helics_feeder", EXAMPLE / "feeder.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _loopback():
    spec = importlib.util.spec_from_file_location("helics_loopback_broker", EXAMPLE / "loopback.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LOOPBACK = _loopback()


@pytest.fixture
def broker():
    """A HELICS broker for two federates on a free loopback port; its ``host:port``."""
    brk, address = LOOPBACK.start_broker(2)
    yield address
    h.helicsBrokerDisconnect(brk)  # freed by pyhelics with `brk` (freeing it here too would free it twice)


def _config(tmp_path: Path, broker: str, timeout_s: float = 20.0, suffix: str = ".toml") -> Path:
    text = (EXAMPLE / "federate.toml").read_text().replace('"127.0.0.1:23500"', f'"{broker}"')
    text = text.replace("timeout_s = 30", f"timeout_s = {timeout_s}")
    path = tmp_path / f"federate{suffix}"
    path.write_text(text)
    return path


def _series(result) -> pd.DataFrame:
    return pd.read_parquet(result.run_dir / "timeseries.parquet")


@pytest.mark.parametrize("engine", ["direct", "mosaik"])
def test_coupled_run_equals_the_coupling_inside_cosim(broker, tmp_path, engine):
    feeder = _feeder_module()
    scn = load_scenario(EXAMPLE / "campus.toml", {**DURATION, "scenario.engine": engine})
    cfg = load_config(_config(tmp_path, broker), scn)
    received: list[tuple[float, float]] = []
    thread = threading.Thread(target=lambda: received.extend(feeder.run(broker, 900.0)))
    thread.start()
    coupled = run_federate(scn, cfg, tmp_path / "helics", report=False)
    thread.join(timeout=30)
    assert coupled.ok and coupled.metadata["engine"] == engine

    with Session(EXAMPLE / "campus.toml", DURATION, out_dir=tmp_path / "inside", report=False) as s:
        p_before = None
        while not s.done:
            if p_before is not None and s.time_s >= 120:  # the feeder's first grant is t = 60 s
                for attr in ("vm_min_pu", "vm_max_pu"):
                    s.set("vctl", attr, feeder.vm_pu(p_before))
            s.step()
            p_before = s.get("campus.p_mw")
    inside = _series(s.result)
    series = _series(coupled)
    pd.testing.assert_frame_equal(series, inside)
    assert series["vctl.throttle_frac"].max() > 0.1  # the voltage it got back did throttle the campus
    times = series["time_utc"].map(lambda t: (t - series["time_utc"][0]).total_seconds())
    sent = dict(zip(times, series["campus.p_mw"]))
    assert received and all(sent[t] == p_mw for t, p_mw in received)
    assert [t for t, _ in received] == list(times[1:])  # every step's P after the first grant, the last one too


@pytest.mark.parametrize("engine", ["direct", "mosaik"])
def test_a_value_outside_the_inputs_bounds_stops_the_run_and_keeps_its_record(broker, tmp_path, engine):
    """The feeder sends 1 + 10 * P pu (a sign error: ~4 pu), outside vm_min_pu's [0, 2]: the run stops before
    the step that would take it, saying which publication sent what, and keeps the steps before."""
    feeder = _feeder_module()
    scn = load_scenario(EXAMPLE / "campus.toml", {**DURATION, "scenario.engine": engine})
    cfg = load_config(_config(tmp_path, broker), scn)
    thread = threading.Thread(target=lambda: feeder.run(broker, 900.0, sens_pu_mw=-10.0))
    thread.start()
    with pytest.raises(FederationError) as info:
        run_federate(scn, cfg, tmp_path / "helics", report=False)
    thread.join(timeout=30)
    result = info.value.result
    assert not info.value.stuck and result.status == "interrupted"
    assert "subscription 'feeder/bus_vm_pu' (attr = \"vctl.vm_min_pu\") received" in result.reason
    assert "at t = 120 s, outside the bounds [0, 2] pu of vctl's adapter" in result.reason
    assert len(_series(result)) == 2  # t = 0 and 60 s: the feeder's first answer (to P at 60 s) arrives at 120 s


def _inproc_federate(name: str):
    info = h.helicsCreateFederateInfo()
    h.helicsFederateInfoSetCoreTypeFromString(info, "inproc")
    # a broker of its own: a federate made right after another's close would otherwise find that one's
    # inproc broker still shutting down under the default name and time out registering with it
    h.helicsFederateInfoSetCoreInitString(info, f"--autobroker --federates=1 --broker=broker_{name}_{uuid.uuid4().hex[:8]}")
    return h.helicsCreateValueFederate(name, info)


def test_a_closed_federate_is_freed_once(tmp_path):
    """pyhelics frees a federate again when its Python object is collected; after cosim's own free that
    destroyed the next federate of the process that reused the address (here: made right after)."""
    scn = load_scenario(EXAMPLE / "campus.toml", DURATION)
    exchange = Exchange(_inproc_federate("closed"), load_config(_config(tmp_path, "127.0.0.1:1"), scn), scn)
    exchange.close()
    fresh = _inproc_federate("fresh")
    del exchange  # the closed federate's Python object goes: it must not take the fresh one with it
    gc.collect()
    assert h.helicsFederateIsValid(fresh)
    h.helicsFederateDisconnect(fresh)


def test_cosims_federate_has_a_core_of_its_own_beside_another_federate_of_the_process(broker, tmp_path):
    """HELICS joins a new federate to any open core of its type in the process; cosim's federate, made
    while another federate of the process (a feeder in a thread, as in the tests above) holds one, must
    not: sharing a core registered for one federate, the federation never started (both waited)."""
    info = h.helicsCreateFederateInfo()
    h.helicsFederateInfoSetCoreInitString(info, f"--federates=1 --broker_address=tcp://{broker}")
    h.helicsFederateInfoSetCoreTypeFromString(info, "zmq")
    other = h.helicsCreateValueFederate(f"other_{uuid.uuid4().hex[:8]}", info)  # HELICS's defaults: no own core asked
    scn = load_scenario(EXAMPLE / "campus.toml", DURATION)
    cfg = load_config(_config(tmp_path, broker, timeout_s=10.0), scn)
    ours = _connect(cfg, scn.scenario.step_s)
    cores = {h.helicsCoreGetIdentifier(h.helicsFederateGetCore(f)) for f in (other, ours)}
    assert len(cores) == 2, cores
    for fed in (other, ours):  # the federation of two starts, as it could not with one core
        h.helicsFederateEnterExecutingModeAsync(fed)
    deadline = time.monotonic() + 20
    while not all(h.helicsFederateIsAsyncOperationCompleted(f) for f in (other, ours)):
        assert time.monotonic() < deadline, "the two federates did not enter executing mode"
        time.sleep(0.01)
    for fed in (other, ours):
        h.helicsFederateEnterExecutingModeComplete(fed)
        h.helicsFederateDisconnect(fed)


def test_unknown_entity_and_attribute_are_named(tmp_path, capsys):
    path = _config(tmp_path, "127.0.0.1:1", suffix=".json")
    raw = {"federate": {"broker": "127.0.0.1:1"},
           "publish": [{"key": "cosim/p", "attr": "campus.p_kw"}],
           "subscribe": [{"key": "feeder/v", "attr": "hall.vm_pu"}]}
    path.write_text(json.dumps(raw))
    code = main(["run", str(EXAMPLE / "campus.toml"), "--helics", str(path), "--out", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code != 0
    assert str(path) in err and "Traceback" not in err
    assert "publish[0].attr = 'campus.p_kw': campus has no output 'p_kw'" in err and "p_mw" in err
    assert "subscribe[1].attr" not in err and "subscribe[0].attr = 'hall.vm_pu': no entity 'hall'" in err
    assert not (tmp_path / "runs").exists()  # refused before anything ran


def test_a_broker_that_never_answers_is_a_bounded_wait(tmp_path, capsys):
    path = _config(tmp_path, f"127.0.0.1:{LOOPBACK.free_port()}", timeout_s=0.5)
    code = main(["run", str(EXAMPLE / "campus.toml"), "--helics", str(path), "--out", str(tmp_path / "runs"),
                 "--set", "scenario.duration_s=300", "--no-report"])
    err = capsys.readouterr().err
    assert code == 1
    assert "federate.broker" in err and "this federate could not join" in err and "Traceback" not in err


#: A federate that joins, enters executing mode (saying so on stdout) and then never asks for time, until
#: its stdin closes. It runs in a process of its own, as a real peer does: HELICS's state is per process
SILENT_PEER = """
import sys, time
import helics as h
info = h.helicsCreateFederateInfo()
h.helicsFederateInfoSetCoreInitString(info, f"--federates=1 --broker_address=tcp://{sys.argv[1]}")
h.helicsFederateInfoSetCoreTypeFromString(info, "zmq")
fed = h.helicsCreateValueFederate("silent", info)
h.helicsFederateRegisterGlobalPublication(fed, "feeder/bus_vm_pu", h.HELICS_DATA_TYPE_DOUBLE, "")
h.helicsFederateRegisterSubscription(fed, "cosim/campus_p_mw", "")
h.helicsFederateEnterExecutingModeAsync(fed)
deadline = time.monotonic() + 120
while not h.helicsFederateIsAsyncOperationCompleted(fed) and time.monotonic() < deadline:
    time.sleep(0.01)
if h.helicsFederateIsAsyncOperationCompleted(fed):
    h.helicsFederateEnterExecutingModeComplete(fed)
    print("entered", flush=True)
else:
    print("not entered", flush=True)
sys.stdin.read()  # until the test closes it; then the process ends without a word to the federation
"""


class _Peer:
    """SILENT_PEER in a process of its own on the broker at ``address``; what it says is read as it says it."""

    def __init__(self, address: str):
        self.proc = subprocess.Popen([sys.executable, "-c", SILENT_PEER, address], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self.decided = threading.Event()  # it said whether it entered, or ended
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.strip() in ("entered", "not entered"):
                self.decided.set()
        self.decided.set()

    def entered(self, unless: subprocess.Popen) -> bool:
        """Whether it entered executing mode (HELICS's console log may share its stdout); False at once when
        ``unless`` (cosim's process, which it waits for) ends first."""
        while not self.decided.wait(0.1):
            if unless.poll() is not None:
                return False
        return "entered" in (line.strip() for line in self.lines)

    def close(self) -> str:
        """Close its stdin (it ends without a word to the federation); all it said."""
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # still waiting to enter (cosim never joined)
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=10)
        return "".join(self.lines)


PORT_TAKEN = "Unable to bind zmq pull socket"  # HELICS's ZeroMQ core: a port near the broker's was taken


def _on_a_broker_of_its_own(tmp_path: Path, one_try):
    """``one_try(address, folder)`` on a broker of its own; it returns ``(what its processes said, result)``, and
    this gives the result. HELICS's ZeroMQ core binds ports a few above the broker's without checking them
    (docs/guides/helics.md); when another program (say, the other test worker's federation) holds one, a core
    cannot join. That is the machine's, not cosim's: such a try is made again on another broker, at most three
    times."""
    for attempt in range(3):
        brk, address = LOOPBACK.start_broker(2)
        folder = tmp_path / f"try{attempt}"
        folder.mkdir()
        try:
            said, result = one_try(address, folder)
        finally:
            h.helicsBrokerDisconnect(brk)
        if PORT_TAKEN not in said:
            break
    return result


def _cosim_federate(folder: Path, engine: str) -> list[str]:
    """``cosim run --helics`` of the example campus for 300 s into ``folder/runs`` (config ``folder/federate.toml``)."""
    return [sys.executable, "-m", "cosim", "run", str(EXAMPLE / "campus.toml"), "--helics",
            str(folder / "federate.toml"), "--out", str(folder / "runs"), "--set", "scenario.duration_s=300",
            "--no-report", "--quiet", "--engine", engine]


@pytest.mark.parametrize("engine", ["direct", "mosaik"])
def test_a_federate_that_stops_answering_keeps_what_was_recorded(tmp_path, engine):
    """The second federate joins, enters executing mode with cosim and then never asks for time: cosim's
    first time grant (t = 60 s) never comes, and the run keeps its first step."""
    def one_try(address: str, folder: Path):
        peer = _Peer(address)
        _config(folder, address, timeout_s=10.0)
        try:
            done = subprocess.run(_cosim_federate(folder, engine), capture_output=True, text=True, timeout=120)
        finally:
            said = peer.close()
        return said + done.stdout + done.stderr, (said, done, folder / "runs")

    said, done, runs = _on_a_broker_of_its_own(tmp_path, one_try)
    # the peer did join (HELICS's console log may share its stdout): what stalled is the time grant it never allowed
    assert "entered" in said.splitlines()
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "the time grant for t = 60 s took longer than federate.timeout_s = 10 s" in done.stderr, done.stderr
    (run_dir,) = runs.iterdir()
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["status"] == "interrupted" and "time grant for t = 60 s" in meta["reason"]
    assert len(pd.read_parquet(run_dir / "timeseries.parquet")) == 1  # t = 0, the step before the stalled grant


@pytest.mark.parametrize("engine,rows", [("direct", 1), ("mosaik", 0)])
def test_sigterm_gives_up_a_helics_wait(tmp_path, engine, rows):
    """Either engine's run takes the first SIGTERM as a stop request; a run waiting for a time grant
    (timeout_s = 120) gives the wait up there and ends interrupted, with its record, instead of waiting the
    timeout out (or, on the direct engine, being killed by the signal with its folder saying "running")."""
    def one_try(address: str, folder: Path):
        peer = _Peer(address)
        _config(folder, address, timeout_s=120.0)
        cosim = subprocess.Popen(_cosim_federate(folder, engine), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        try:
            entered = peer.entered(unless=cosim)  # both federates are in: cosim now waits for t = 60 s
            if entered:
                time.sleep(1.0)  # (a SIGTERM sent before cosim's handlers are set would end it unannounced)
            cosim.terminate()  # (a try where a core could not join: ends it too)
            out, err = cosim.communicate(timeout=60)
        finally:
            cosim.kill()
            said = peer.close()
        return said + out + err, (entered, cosim.returncode, err, folder / "runs")

    entered, code, err, runs = _on_a_broker_of_its_own(tmp_path, one_try)
    assert entered
    assert code == 1 and "Traceback" not in err, err
    (run_dir,) = runs.iterdir()
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["status"] == "interrupted"
    assert "the time grant for t = 60 s was given up: interrupted (SIGTERM)" in meta["reason"]
    # the direct engine keeps t = 0, stepped before the request for t = 60 s; mosaik steps the bridge's request
    # for t = 60 s before the recorder's row of t = 0, and a recorder asked to stop takes no further row
    assert len(pd.read_parquet(run_dir / "timeseries.parquet")) == rows


def test_mosaik_refuses_a_subscription_to_a_connected_input(tmp_path, capsys):
    """On mosaik a subscribed value would be summed with the connection's (the direct engine's held value
    replaces it): refused before anything runs, naming the connection and the fix."""
    path = tmp_path / "federate.toml"
    path.write_text('[federate]\nbroker = "127.0.0.1:1"\n[[subscribe]]\nkey = "feeder/limit"\n'
                    'attr = "campus.p_limit_mw"\n')
    code = main(["run", str(EXAMPLE / "campus.toml"), "--helics", str(path), "--engine", "mosaik",
                 "--out", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    assert str(path) in err and "subscribe[0].attr = 'campus.p_limit_mw': campus.p_limit_mw is fed by vctl" in err
    assert "--engine direct" in err
    assert not (tmp_path / "runs").exists()


def test_a_subscription_to_an_input_the_entity_refuses_is_named_before_the_run(tmp_path):
    """A RideThrough with its own perc1 takes no PERC1 share from outside (CosimSim.refused_inputs): a
    subscription to one is refused when the configuration is read, with why, not deep inside the run."""
    scn = load_scenario(EXAMPLE.parents[1] / "scenarios" / "ieee13_fault_ride_through.toml", {})
    path = tmp_path / "federate.toml"
    path.write_text('[federate]\nbroker = "127.0.0.1:1"\n[[subscribe]]\nkey = "grid/share"\n'
                    'attr = "ups.p_grid_connected_frac"\n')
    with pytest.raises(ScenarioError) as caught:
        load_config(path, scn)
    assert "subscribe[0].attr" in str(caught.value) and "its own perc1" in str(caught.value)
