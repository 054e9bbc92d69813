"""A scenario as a HELICS value federate: ``cosim run SCENARIO --helics CONFIG``.

The run goes one scenario time at a time on either engine. At each time ``t`` [s] the federate
requests ``t`` from the federation, sets every subscribed input that received a new value (held until
the next one, as :meth:`Session.set`), steps the scenario, and publishes the named outputs at ``t``. A
value another federate publishes at ``t`` therefore reaches the scenario at its next step (one step
late, as a ``time_shifted`` connection). :class:`Exchange` does the federate's part of each step; on
the direct engine a :class:`~cosim.run.session.Session` is stepped between its calls, on the mosaik
engine two bridge simulators (:class:`BridgeSim`) make them from inside the world, so both engines give
the same run.

The config (TOML or JSON; docs/guides/helics.md)::

    [federate]
    name = "cosim"                     # this federate's name in the federation
    broker = "127.0.0.1:23500"         # the broker's address (host or host:port)
    core_type = "zmq"                  # HELICS core: zmq (default), tcp, ...
    timeout_s = 30                     # longest wait for the broker or a time grant [s]

    [[publish]]
    key = "cosim/campus_p_mw"          # the publication's global name
    attr = "campus.p_mw"               # the scenario output it carries

    [[subscribe]]
    key = "feeder/bus_22_vm_pu"        # another federate's publication
    attr = "vctl.vm_min_pu"            # the scenario input it sets
"""

from __future__ import annotations

import json
import math
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# pyarrow before helics: with helics's library loaded first, pyarrow segfaults converting a time zone
# (pd.read_parquet of a run's time_utc, as its KPIs do; seen with helics 3.6.1 and pyarrow 26.0.1)
import pyarrow  # noqa: F401, I001
import helics as h  # noqa: I001

from cosim.errors import Problem, ScenarioError, few
from cosim.run import blas, graph
from cosim.run.runner import finish_run, open_run_folder
from cosim.run.session import Session, input_bounds, refused_inputs
from cosim.run.settable import value_problem
from cosim.run.stopping import STOP, RunStopped
from cosim.sdk import CosimSim, Params, meta, model_meta
from cosim.scenario import Scenario

#: HELICS core types a config may name
CORE_TYPES = ("zmq", "zmq_ss", "tcp", "tcp_ss", "udp", "ipc", "inproc")


class FederationError(RunStopped):
    """The federation did not answer in time: the message says what and how to fix it.

    ``result`` is the run folder written before it was raised (None when the broker never answered);
    ``stuck`` is true when a time request was left pending, after which this process's HELICS
    objects cannot be freed and its exit waits on HELICS's clean-up (end it with ``os._exit``).
    """

    result = None
    stuck = False


@dataclass
class Link:
    """One publication or subscription: its HELICS key and the scenario's ``entity.attr``."""

    key: str
    entity: str
    attr: str


@dataclass
class FederateConfig:
    """A checked ``--helics`` config."""

    file: str
    name: str = "cosim"
    broker: str = "127.0.0.1"
    core_type: str = "zmq"
    timeout_s: float = 30.0
    publish: list[Link] = field(default_factory=list)
    subscribe: list[Link] = field(default_factory=list)

    @property
    def broker_address(self) -> str:
        """The broker as HELICS's ``--broker_address`` takes it (``tcp://host:port``)."""
        return self.broker if "://" in self.broker else f"tcp://{self.broker}"


def read_config(path: str | Path) -> dict[str, Any]:
    """The raw config: TOML, or JSON when the file ends in ``.json``.

    Raises:
        ScenarioError: the file is missing or does not parse.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScenarioError(path, [Problem("--helics", f"cannot read the HELICS config ({exc.strerror}); "
                                                       "give the path of a TOML or JSON file")]) from None
    try:
        return json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise ScenarioError(path, [Problem("(file)", f"does not parse ({exc}); fix the syntax")]) from None


def load_config(path: str | Path, scn: Scenario) -> FederateConfig:
    """The config at ``path`` checked against the scenario: every problem at once.

    Raises:
        ScenarioError: each unknown key, entity, attribute or out-of-range value, with its place.
    """
    raw = read_config(path)
    problems: list[Problem] = []
    cfg = FederateConfig(file=str(path))
    for key in sorted(set(raw) - {"federate", "publish", "subscribe"}):
        problems.append(Problem(key, "unknown section; sections: federate, publish, subscribe"))
    fed = raw.get("federate", {})
    if not isinstance(fed, dict):
        problems.append(Problem("federate", "give a table (name, broker, core_type, timeout_s)", fed))
        fed = {}
    for key in sorted(set(fed) - {"name", "broker", "core_type", "timeout_s"}):
        problems.append(Problem(f"federate.{key}", "unknown key; keys: name, broker, core_type, timeout_s"))
    for key in ("name", "broker"):
        value = fed.get(key, getattr(cfg, key))
        if not isinstance(value, str) or not value.strip():
            problems.append(Problem(f"federate.{key}", "give a non-empty string", value))
        else:
            setattr(cfg, key, value)
    core = fed.get("core_type", cfg.core_type)
    if core not in CORE_TYPES:
        problems.append(Problem("federate.core_type", f"unknown HELICS core; one of {', '.join(CORE_TYPES)}", core))
    else:
        cfg.core_type = core
    timeout = fed.get("timeout_s", cfg.timeout_s)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
        problems.append(Problem("federate.timeout_s", "give a number of seconds > 0, e.g. 30", timeout))
    else:
        cfg.timeout_s = float(timeout)
    cfg.publish = _links(raw.get("publish", []), "publish", "output", scn.outputs, scn, problems)
    cfg.subscribe = _links(raw.get("subscribe", []), "subscribe", "input", scn.inputs, scn, problems)
    if not cfg.publish and not cfg.subscribe and not problems:
        problems.append(Problem("publish", "nothing to exchange; add a [[publish]] or [[subscribe]] table "
                                           "with key and attr = \"entity.attr\""))
    if problems:
        raise ScenarioError(path, problems)
    return cfg


def _links(items: Any, section: str, kind: str, known, scn: Scenario, problems: list[Problem]) -> list[Link]:
    if not isinstance(items, list):
        problems.append(Problem(section, f"give a list of tables [[{section}]] with key and attr", items))
        return []
    links, seen = [], set()
    for i, item in enumerate(items):
        at = f"{section}[{i}]"
        if not isinstance(item, dict):
            problems.append(Problem(at, "give a table with key and attr", item))
            continue
        for extra in sorted(set(item) - {"key", "attr"}):
            problems.append(Problem(f"{at}.{extra}", "unknown key; keys: key, attr"))
        key, name = item.get("key"), item.get("attr")
        if not isinstance(key, str) or not key:
            problems.append(Problem(f"{at}.key", "give the HELICS publication's name, e.g. \"feeder/bus_22_vm_pu\"", key))
        if not isinstance(name, str) or "." not in name:
            problems.append(Problem(f"{at}.attr", f"give the scenario's {kind} as \"entity.attr\", e.g. \"campus.p_mw\"",
                                    name))
            continue
        eid, _, attr = name.partition(".")
        if eid not in scn.entities:
            problems.append(Problem(f"{at}.attr", f"no entity {eid!r} in {scn.file}; entities: "
                                                  f"{few(list(scn.entities))}", name))
            continue
        names = known(eid)
        if attr not in names:
            problems.append(Problem(f"{at}.attr", f"{eid} has no {kind} {attr!r}; its {kind}s: "
                                                  f"{few(list(names)) or 'none'}", name))
            continue
        refused = refused_inputs(scn, eid).get(attr) if section == "subscribe" else None
        if refused:
            problems.append(Problem(f"{at}.attr", f"{eid} takes no {attr} from outside: {refused}; subscribe to "
                                                  f"another input", name))
            continue
        if section == "subscribe" and name in seen:
            problems.append(Problem(f"{at}.attr", "set by two subscriptions; keep one", name))
        seen.add(name)
        if isinstance(key, str) and key:
            links.append(Link(key, eid, attr))
    return links


def _wait(fed, done, what: str, cfg: FederateConfig) -> None:
    """Poll an asynchronous HELICS call until it completes, at most ``cfg.timeout_s``, or until a stop is
    asked for (:data:`cosim.run.stopping.STOP`: a run on either engine takes the first SIGTERM or Ctrl-C so)."""
    deadline = time.monotonic() + cfg.timeout_s
    while not h.helicsFederateIsAsyncOperationCompleted(fed):
        if STOP.reason is not None:
            raise FederationError(f"{cfg.file}: {what} was given up: {STOP.reason}")
        if time.monotonic() > deadline:
            raise FederationError(f"{cfg.file}: {what} took longer than federate.timeout_s = {cfg.timeout_s:g} s; "
                                  f"check that every federate of the federation at {cfg.broker} has started "
                                  "and is stepping, or raise federate.timeout_s")
        time.sleep(0.002)
    done(fed)


def _connect(cfg: FederateConfig, period_s: float):
    """The value federate, joined to the broker (a bounded wait)."""
    info = h.helicsCreateFederateInfo()
    # a core of its own: by default HELICS joins a new federate to any core of the same type this process
    # holds that is still open, so beside another federate of the process (a notebook's, a test's feeder)
    # both would share one core registered for one federate, and the federation would never start
    h.helicsFederateInfoLoadFromString(info, "--force_new_core")
    # HELICS tries the broker about six times (its default retries), each waiting --networktimeout
    per_try_ms = max(100, int(cfg.timeout_s * 1000 / 6))
    h.helicsFederateInfoSetCoreInitString(info, f"--federates=1 --broker_address={cfg.broker_address} "
                                                f"--networktimeout={per_try_ms}ms")
    h.helicsFederateInfoSetCoreTypeFromString(info, cfg.core_type)
    h.helicsFederateInfoSetTimeProperty(info, h.HELICS_PROPERTY_TIME_PERIOD, period_s)
    try:
        return h.helicsCreateValueFederate(cfg.name, info)
    except h.HelicsException as exc:
        raise FederationError(f"{cfg.file}: federate.broker = {cfg.broker!r}: this federate could not join ({exc}); "
                              "start the broker (helics_broker --federates=N) or fix the address; if HELICS's log "
                              "says 'Unable to bind zmq pull socket', the port the broker handed this federate "
                              "is taken: start the broker on another port") from None


class Exchange:
    """The federate's side of each step, shared by both engines: request the step's time, read the
    subscriptions that were updated, publish the outputs of the step just taken.

    Every HELICS wait is bounded by ``cfg.timeout_s`` (:class:`FederationError`); after one, a call
    is left pending (``stuck``) and the federate is not freed. A received value that is not a finite
    number within the bounds of the input it sets (those :meth:`Session.set` checks) is a
    :class:`FederationError` too, naming the publication: the run stops there, keeping its record.
    """

    def __init__(self, fed, cfg: FederateConfig, scn: Scenario):
        self.fed = fed
        self.cfg = cfg
        self.scn = scn
        self._bounds: dict[str, dict[str, tuple[float, float]]] = {}
        self.pubs = [(h.helicsFederateRegisterGlobalPublication(fed, link.key, h.HELICS_DATA_TYPE_DOUBLE, ""), link)
                     for link in cfg.publish]
        self.subs = [(h.helicsFederateRegisterSubscription(fed, link.key, ""), link) for link in cfg.subscribe]
        self.entered = False
        self.granted_s = 0.0
        self.stuck = False
        self.error: FederationError | None = None  # the wait that ran out, or the value refused, if one was

    def receive(self, t_s: float) -> list[tuple[Link, float]]:
        """Enter executing mode (the first time), request ``t_s`` unless it is granted already, and
        the subscriptions updated since: ``[(link, value)]`` in the config's order. [s]"""
        try:
            if not self.entered:
                h.helicsFederateEnterExecutingModeAsync(self.fed)
                self._wait(h.helicsFederateEnterExecutingModeComplete, "entering the federation's executing mode")
                self.entered = True
            while self.granted_s < t_s:
                h.helicsFederateRequestTimeAsync(self.fed, t_s)
                self._wait(lambda f: None, f"the time grant for t = {t_s:g} s")
                self.granted_s = h.helicsFederateRequestTimeComplete(self.fed)
        except BaseException as exc:  # a wait that ran out or was given up, a second Ctrl-C inside one
            if isinstance(exc, FederationError):
                self.error = exc
            self.stuck = True  # a call is pending: every later HELICS call, even helics's clean-up, waits on it
            raise
        return [(link, self._checked(link, h.helicsInputGetDouble(sub), t_s))
                for sub, link in self.subs if h.helicsInputIsUpdated(sub)]

    def _checked(self, link: Link, value: float, t_s: float) -> float:
        if link.entity not in self._bounds:
            self._bounds[link.entity] = input_bounds(self.scn, link.entity)
        problem = value_problem(link.entity, link.attr, value, self._bounds[link.entity].get(link.attr))
        if problem is None:
            return float(value)
        self.error = FederationError(f"{self.cfg.file}: subscription {link.key!r} (attr = \"{link.entity}.{link.attr}\") "
                                     f"received {value!r} at t = {t_s:g} s, {problem} (the federate that publishes "
                                     "it sends it)")
        raise self.error

    def publish(self, value_of) -> None:
        """Publish each configured output; ``value_of(entity, attr)`` is its value after the step (None: not
        produced yet, nothing is sent)."""
        for pub, link in self.pubs:
            value = value_of(link.entity, link.attr)
            if value is not None:
                h.helicsPublicationPublishDouble(pub, float(value))

    def _wait(self, done, what: str) -> None:
        _wait(self.fed, done, what, self.cfg)

    def close(self) -> None:
        """Leave the federation and free the federate (not when a call is pending: see ``stuck``).

        pyhelics also frees a federate when its Python object is collected, which may be much later (a
        FederationError's traceback keeps it): freed twice, the second free destroys whichever federate of
        this process has reused the address since. So its own free is disarmed here, and the federate is
        freed once, now (or never, with a call pending: that free would wait on the call)."""
        finalizer = getattr(self.fed, "_finalizer", None)
        if finalizer is not None:
            finalizer.detach()
        if self.stuck:
            return
        try:
            h.helicsFederateDisconnect(self.fed)
        except h.HelicsException:
            pass  # the federation is gone already
        h.helicsFederateFree(self.fed)


def run_federate(scn: Scenario, cfg: FederateConfig, out_dir: str | Path = "runs", report: bool = True):
    """Run ``scn`` as a HELICS value federate on its engine (direct or mosaik); the
    :class:`~cosim.run.runner.RunResult`.

    The run folder is written whatever happens (``ok``, or ``interrupted`` with what was recorded).

    Raises:
        ScenarioError: on the mosaik engine, a subscription sets an input a ``[[connect]]`` feeds.
        FederationError: the broker did not answer, or a time grant did not come, within the timeout
            (raised after the run folder is written; ``.result`` holds it).
    """
    if scn.engine == "mosaik":
        _check_for_mosaik(scn, cfg)
    exchange = Exchange(_connect(cfg, scn.scenario.step_s), cfg, scn)
    run = _run_mosaik if scn.engine == "mosaik" else _run_direct
    try:
        result = run(scn, exchange, out_dir, report)
    finally:
        exchange.close()
    error = exchange.error
    if error is not None:
        error.result = result
        error.stuck = exchange.stuck
        raise error
    return result


def _run_direct(scn: Scenario, exchange: Exchange, out_dir, report: bool):
    """The direct engine: a :class:`Session` stepped one time at a time. The first SIGTERM or Ctrl-C asks
    for a stop (:data:`STOP`), as a run on either engine takes it: a HELICS wait gives up, a step stops at
    the recorder, and the run ends ``interrupted`` with what it recorded."""
    STOP.install()
    try:
        session = Session(scn, out_dir=out_dir, report=report)
        try:
            while not session.done:
                for link, value in exchange.receive(float(session.time_s)):
                    session.set(link.entity, link.attr, value)
                session.step()
                exchange.publish(lambda eid, attr: session.get(f"{eid}.{attr}"))
        except RunStopped as exc:  # a wait that ran out or was given up, a stop asked for at a step
            session.interrupt(str(exc))  # the run folder says "interrupted", with why
        except BaseException as exc:  # a second Ctrl-C (KeyboardInterrupt), a value Session.set refuses...
            session.interrupt(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
            raise
        finally:
            result = session.close()
    finally:
        STOP.restore()
    return result


def _check_for_mosaik(scn: Scenario, cfg: FederateConfig) -> None:
    """On mosaik a subscribed value is one more input (summed with a connection's), not a held value
    that replaces it, as on the direct engine: refuse the subscriptions that would differ."""
    fed = {(edge.dst, dst): edge.src for edge in graph.build(scn).edges for _, dst in edge.pairs}
    problems = [Problem(f"subscribe[{i}].attr", f"{link.entity}.{link.attr} is fed by {fed[link.entity, link.attr]} "
                                                "(a [[connect]]) and the mosaik engine cannot replace that value; "
                                                "give --engine direct, or drop the connection or the subscription",
                        f"{link.entity}.{link.attr}")
                for i, link in enumerate(cfg.subscribe) if (link.entity, link.attr) in fed]
    if problems:
        raise ScenarioError(cfg.file, problems)


#: the exchanges of the mosaik runs in progress, by token (the bridge simulators find theirs here)
_EXCHANGES: dict[str, Exchange] = {}


def _run_mosaik(scn: Scenario, exchange: Exchange, out_dir, report: bool):
    """The mosaik engine: two bridge simulators (:class:`BridgeSim`) in the world, stepped with it."""
    from cosim.run.mosaik_engine import Bridge, run_world  # mosaik is heavy: imported for mosaik runs only

    graph.check_record(scn)
    folder, started = open_run_folder(scn, out_dir)
    token = str(folder.path)
    _EXCHANGES[token] = exchange
    reads = list(dict.fromkeys((link.entity, link.attr) for link in exchange.cfg.publish))
    writes = [(link.entity, link.attr) for link in exchange.cfg.subscribe]
    try:
        with blas.one_thread():  # as every run (cosim.run.blas)
            outcome = run_world(scn, folder.path, progress=False,
                                bridge=Bridge("cosim.run.federate:BridgeSim", {"token": token}, reads, writes))
    finally:
        _EXCHANGES.pop(token, None)
    return finish_run(scn, folder, outcome, started, report)


class BridgeParams(Params):
    token: str  # the run's key in _EXCHANGES


class BridgeSim(CosimSim):
    """The federate inside a mosaik world (:class:`cosim.run.mosaik_engine.Bridge`), as two simulators.

    ``Receive`` steps first at each time: it requests the time and outputs each subscribed value as
    ``"<entity>.<attr>"``, held from its first update on (None before: the input keeps the scenario's own
    value), as :meth:`Session.set` holds it. ``Send`` steps after the scenario's entities and publishes
    the outputs it gets, named the same way. The next ``Receive`` waits for ``Send``.
    """

    META = meta({"Receive": model_meta(outputs=["t_granted_s"], any_inputs=True, role="other"),
                 "Send": model_meta(outputs=["n_sent"], any_inputs=True, role="other")})
    SimParams = BridgeParams

    @classmethod
    def meta_for(cls, sim_params: BridgeParams) -> dict[str, Any]:
        exchange = _EXCHANGES[sim_params.token]
        writes = list(dict.fromkeys(f"{link.entity}.{link.attr}" for link in exchange.cfg.subscribe))
        return meta({"Receive": model_meta(outputs=[*writes, "t_granted_s"], any_inputs=True, role="other"),
                     "Send": model_meta(outputs=["n_sent"], any_inputs=True, role="other")})

    def setup(self) -> None:
        self.exchange = _EXCHANGES[self.params.token]
        self.held: dict[str, float] = {}

    def create_entity(self, eid: str, model: str, params) -> None:
        self.model = model

    def step_entities(self, time_s: float, inputs: dict[str, dict[str, Any]]) -> None:
        if self.model == "Receive":
            for link, value in self.exchange.receive(float(time_s)):
                self.held[f"{link.entity}.{link.attr}"] = value
            self.out["receive"] = {**{f"{link.entity}.{link.attr}": self.held.get(f"{link.entity}.{link.attr}")
                                      for link in self.exchange.cfg.subscribe}, "t_granted_s": self.exchange.granted_s}
        else:
            values = inputs.get("send", {})
            self.exchange.publish(lambda eid, attr: values.get(f"{eid}.{attr}"))
            self.out["send"] = {"n_sent": len(values)}
