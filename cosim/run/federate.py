"""A scenario as a HELICS value federate: ``cosim run SCENARIO --helics CONFIG``.

The run is a :class:`~cosim.run.session.Session` (the direct engine) stepped one scenario time at a
time. At each time ``t`` [s] the federate requests ``t`` from the federation, sets every subscribed
input that received a new value (held until the next one, as :meth:`Session.set`), steps the
scenario, and publishes the named outputs at ``t``. A value another federate publishes at ``t``
therefore reaches the scenario at its next step (one step late, as a ``time_shifted`` connection).

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

from cosim.errors import Problem, ScenarioError
from cosim.scenario import Scenario

#: HELICS core types a config may name
CORE_TYPES = ("zmq", "zmq_ss", "tcp", "tcp_ss", "udp", "ipc", "inproc")


class FederationError(RuntimeError):
    """The federation did not answer in time, or left: the message says what and how to fix it."""


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
                                                  f"{', '.join(scn.entities)}", name))
            continue
        names = known(eid)
        if attr not in names:
            problems.append(Problem(f"{at}.attr", f"{eid} has no {kind} {attr!r}; its {kind}s: "
                                                  f"{', '.join(names) or 'none'}", name))
            continue
        if section == "subscribe" and name in seen:
            problems.append(Problem(f"{at}.attr", "set by two subscriptions; keep one", name))
        seen.add(name)
        if isinstance(key, str) and key:
            links.append(Link(key, eid, attr))
    return links


def _wait(fed, done, what: str, cfg: FederateConfig) -> None:
    """Poll an asynchronous HELICS call until it completes, at most ``cfg.timeout_s``."""
    import helics as h

    deadline = time.monotonic() + cfg.timeout_s
    while not h.helicsFederateIsAsyncOperationCompleted(fed):
        if time.monotonic() > deadline:
            raise FederationError(f"{cfg.file}: {what} took longer than federate.timeout_s = {cfg.timeout_s:g} s; "
                                  f"check that every federate of the federation at {cfg.broker} has started "
                                  "and is stepping, or raise federate.timeout_s")
        time.sleep(0.002)
    done(fed)


def _connect(cfg: FederateConfig, period_s: float):
    """The value federate, joined to the broker (a bounded wait)."""
    import helics as h

    info = h.helicsCreateFederateInfo()
    # HELICS retries the broker several times; each try waits a fifth of the budget
    per_try_ms = max(100, int(cfg.timeout_s * 1000 / 5))
    h.helicsFederateInfoSetCoreInitString(info, f"--federates=1 --broker_address={cfg.broker_address} "
                                                f"--timeout={per_try_ms}ms")
    h.helicsFederateInfoSetCoreTypeFromString(info, cfg.core_type)
    h.helicsFederateInfoSetTimeProperty(info, h.HELICS_PROPERTY_TIME_PERIOD, period_s)
    try:
        return h.helicsCreateValueFederate(cfg.name, info)
    except h.HelicsException as exc:
        raise FederationError(f"{cfg.file}: federate.broker = {cfg.broker!r}: no HELICS broker answered ({exc}); "
                              "start the broker (helics_broker --federates=N) or fix the address") from None


def run_federate(scn: Scenario, cfg: FederateConfig, out_dir: str | Path = "runs", report: bool = True):
    """Run ``scn`` as a HELICS value federate; the :class:`~cosim.run.runner.RunResult`.

    The run folder is written whatever happens (``ok``, or ``interrupted`` with what was recorded).

    Raises:
        FederationError: the broker did not answer, or a time grant did not come, within the timeout
            (raised after the run folder is written; ``.result`` holds it).
    """
    import helics as h

    from cosim.run.session import Session

    fed = _connect(cfg, scn.scenario.step_s)
    pubs = [(h.helicsFederateRegisterGlobalPublication(fed, link.key, h.HELICS_DATA_TYPE_DOUBLE, ""), link)
            for link in cfg.publish]
    subs = [(h.helicsFederateRegisterSubscription(fed, link.key, ""), link) for link in cfg.subscribe]
    session = Session(scn, out_dir=out_dir, report=report)
    error: FederationError | None = None
    try:
        h.helicsFederateEnterExecutingModeAsync(fed)
        _wait(fed, h.helicsFederateEnterExecutingModeComplete, "entering the federation's executing mode", cfg)
        granted = 0.0
        while not session.done:
            t_s = float(session.time_s)
            while granted < t_s:
                h.helicsFederateRequestTimeAsync(fed, t_s)
                _wait(fed, lambda f: None, f"the time grant for t = {t_s:g} s", cfg)
                granted = h.helicsFederateRequestTimeComplete(fed)
            for sub, link in subs:
                if h.helicsInputIsUpdated(sub):
                    session.set(link.entity, link.attr, h.helicsInputGetDouble(sub))
            session.step()
            for pub, link in pubs:
                value = session.get(f"{link.entity}.{link.attr}")
                if value is not None:
                    h.helicsPublicationPublishDouble(pub, float(value))
    except FederationError as exc:
        error = exc
        session._interrupted = str(exc)  # the run folder says "interrupted", with why
    except BaseException as exc:
        session._interrupted = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        result = session.close()
        try:
            h.helicsFederateDisconnect(fed)
        except h.HelicsException:
            pass  # the federation is gone already
        h.helicsFederateFree(fed)
    if error is not None:
        error.result = result
        raise error
    return result
