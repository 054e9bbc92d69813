"""Run one adapter as a separate mosaik process: ``python -m cosim.run.remote ADAPTER HOST:PORT``.

ADAPTER is a registry name (``grid``) or a ``module:Class`` target.

mosaik starts it for ``process = "subprocess"`` (or a user's own ``cmd``); the same command
on another host, with ``connect = "host:port"`` in the scenario, serves a remote simulator.
"""

from __future__ import annotations

import importlib
import sys

import mosaik_api_v3

from cosim import registry
from cosim.sdk import EndRun


def _ending_as_endrun(sim):
    """Wrap ``sim.step`` so any :class:`EndRun` (an FMU's ``FmuEnded`` too) reaches mosaik under
    the name ``EndRun``: the engine then ends the run ``ok`` with its message, not ``failed``."""
    step = sim.step

    def wrapped(*args, **kwargs):
        try:
            return step(*args, **kwargs)
        except EndRun as exc:
            if type(exc) is EndRun:
                raise
            raise EndRun(str(exc)) from None

    sim.step = wrapped
    return sim


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2:
        print("usage: python -m cosim.run.remote ADAPTER HOST:PORT [--remote]", file=sys.stderr)
        return 2
    adapter, rest = argv[0], argv[1:]
    if ":" in adapter:
        module_name, _, class_name = adapter.partition(":")
        cls = getattr(importlib.import_module(module_name), class_name)
    else:
        cls = registry.adapter_class(adapter)
    sys.argv = [sys.argv[0], *rest]
    return mosaik_api_v3.start_simulation(_ending_as_endrun(cls()), f"cosim adapter {adapter}") or 0


if __name__ == "__main__":
    raise SystemExit(main())
