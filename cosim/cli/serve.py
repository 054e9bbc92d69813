"""``cosim serve``: run a scenario in real time and serve its state, outputs, inputs and metrics over HTTP."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from urllib.parse import urlsplit

from cosim.cli.run import engine_overrides, positive_float, print_warnings
from cosim.errors import Problem, ScenarioError
from cosim.live import LiveRun, load_live
from cosim.live import server as live_server
from cosim.live.app import MAX_BODY_BYTES
from cosim.live.ven import LiveVen, VenError, find_ven

LOOPBACK = ("127.0.0.1", "::1", "localhost")


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        live_server.check_extra()
    except live_server.LiveExtraMissing as exc:
        print(str(exc), file=sys.stderr)
        return 1
    overrides = engine_overrides(args)
    overrides.pop("scenario.rt_factor", None)  # load_live sets it (with its default)
    flag_problems = _vtn_flag_problems(args)
    if flag_problems:
        raise ScenarioError(str(args.scenario), flag_problems)
    scn = load_live(args.scenario, overrides, args.rt_factor)
    print_warnings(scn)
    try:
        sock = live_server.bind(args.host, args.port)
    except OSError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    if args.host not in LOOPBACK:
        print(f"warning: serving on {args.host}: anyone who reaches this host can set the run's inputs "
              "(no authentication)", file=sys.stderr)
    try:
        run = LiveRun(scn, args.out, report=not args.no_report)
    except BaseException:
        sock.close()
        raise
    try:
        ven = _join_vtn(args, run)
    except BaseException as exc:
        sock.close()
        run.stop(f"the VEN did not join its VTN: {exc}" if isinstance(exc, VenError) else "not started")
        if isinstance(exc, VenError):
            print(str(exc), file=sys.stderr)
            return 1
        raise
    server = live_server.LiveServer(run, sock, exit_at_end=args.exit_at_end, say=lambda text: print(text, flush=True),
                                    max_body_bytes=args.max_body_bytes, ven=ven)
    url, s = server.url, scn.scenario
    print(f"cosim serve: {s.name} ({s.duration_s} s at rt_factor {run.rt_factor:g}) on {url}  "
          f"(API: {url}/docs, metrics: {url}/metrics; Ctrl-C stops)\nrun folder: {run.run_dir}", flush=True)
    return server.serve()


EXAMPLE_VTN_URL = "http://127.0.0.1:8080/OpenADR2/Simple/2.0b"


def vtn_url_problem(url: str) -> str | None:
    """What is wrong with a VTN URL before any network is tried (scheme, host, port), else None."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return f"give the VTN's http(s) URL, e.g. {EXAMPLE_VTN_URL}"
    try:
        parts.port  # noqa: B018 — raises on a port that is not a number 0..65535
    except ValueError:
        return f"the port is not a number 0..65535; give host:port, e.g. {EXAMPLE_VTN_URL}"
    if not parts.hostname:
        return f"no host in the URL; give host:port, e.g. {EXAMPLE_VTN_URL}"
    return None


def _vtn_flag_problems(args: argparse.Namespace) -> list[Problem]:
    """``--vtn`` that is no URL, or ``--ven-entity`` / ``--ven-name`` without ``--vtn`` (they would do nothing)."""
    if getattr(args, "vtn", None) is None:
        return [Problem(flag, "acts only with --vtn (the run joins no VTN without it); add --vtn [URL] or drop it",
                        value) for flag, value in (("--ven-entity", getattr(args, "ven_entity", None)),
                                                   ("--ven-name", getattr(args, "ven_name", None))) if value]
    problem = vtn_url_problem(args.vtn) if args.vtn else None
    return [Problem("--vtn", problem, args.vtn)] if problem else []


def _join_vtn(args: argparse.Namespace, run: LiveRun) -> LiveVen | None:
    """``--vtn [URL]``: the run's ``openadr_events`` entity registered as a VEN (None without the flag:
    nothing contacts a network unless the command line says so).

    Raises:
        ScenarioError: no such entity, no URL, a bad ``telemetry``.
        VenError: the VTN did not register the VEN.
    """
    if args.vtn is None:
        for eid, params in run.scn.entity_params.items():
            if isinstance(params, dict) and params.get("vtn_url") and run.scn.sims[run.scn.entities[eid].sim].adapter \
                    == "openadr_events":
                print(f"note: entities.{eid}.vtn_url is set; the run joins it only with --vtn", flush=True)
        return None
    eid, _, params = find_ven(run, args.ven_entity)
    url = args.vtn or params.vtn_url
    if not url:
        raise ScenarioError(str(args.scenario), [Problem(f"entities.{eid}.vtn_url", "no VTN named: give --vtn URL, or "
                                                         "set vtn_url in the scenario and pass --vtn alone")])
    if not args.vtn and vtn_url_problem(url):
        raise ScenarioError(str(args.scenario), [Problem(f"entities.{eid}.vtn_url", vtn_url_problem(url), url)])
    ven = LiveVen(run, url, eid, args.ven_name, say=lambda text: print(text, flush=True))
    print(f"OpenADR: registering VEN {ven.ven_name!r} with {url} ...", flush=True)
    ven.start()
    print(f"OpenADR: registered as {ven.ven_id} (registration {ven.registration_id}); received events go to "
          f"{ven.log}", flush=True)
    return ven


def _port(text: str) -> int:
    """argparse type: a TCP port, 0 for a free one."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number 0..65535, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0..65535 (0: a free one), got {port}")
    return port


def _body_bytes(text: str) -> int:
    """argparse type: a request-size limit in bytes, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of bytes, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 byte, got {value}")
    return value


def add_parsers(sub) -> None:
    """``serve``."""
    p = sub.add_parser("serve", help="run a scenario in real time and serve it over HTTP (REST API, /metrics)",
                       description="Run a scenario paced in real time (direct engine) and serve GET /state, "
                                   "GET /entities, GET /entities/{id}, PUT/POST /entities/{id}/inputs, "
                                   "GET /metrics, and per datacenter site PUT/DELETE /site/{id}/load-target, "
                                   "GET /site/{id}/power-status and GET /site/{id}/events (server-sent events) "
                                   "(OpenAPI at /docs). With --vtn the run also acts as an OpenADR 2.0b VEN "
                                   "(docs/guides/openadr.md). Needs the live extra.")
    p.add_argument("scenario", type=Path)
    p.add_argument("--rt-factor", type=positive_float, metavar="F",
                   help="wall seconds per simulated second (scenario.rt_factor; default the file's, else 1)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on [127.0.0.1]")
    p.add_argument("--port", type=_port, default=8000, help="TCP port, 0 for a free one [8000]")
    p.add_argument("--out", type=Path, default=Path("runs"), help="where run folders go [runs]")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scenario key, e.g. --set scenario.duration_s=3600")
    p.add_argument("--exit-at-end", action="store_true",
                   help="stop serving once the scenario ends (default: serve the final state until Ctrl-C)")
    p.add_argument("--no-report", action="store_true", help="skip report.html")
    p.add_argument("--max-body-bytes", type=_body_bytes, default=MAX_BODY_BYTES, metavar="N",
                   help=f"largest request body read; a larger one is answered 413 [{MAX_BODY_BYTES}]")
    p.add_argument("--vtn", nargs="?", const="", default=None, metavar="URL",
                   help="act as an OpenADR 2.0b VEN registered with this VTN (alone: the scenario's vtn_url); "
                        "without it nothing contacts a network. Needs the protocols extra")
    p.add_argument("--ven-entity", metavar="ID", help="the openadr_events entity that is the VEN (default: the only one)")
    p.add_argument("--ven-name", metavar="NAME", help="the name the VEN registers under (default: the entity's "
                                                      "ven_name, else its id)")
    p.set_defaults(func=cmd_serve)
