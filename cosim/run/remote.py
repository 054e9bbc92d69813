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
    return mosaik_api_v3.start_simulation(cls(), f"cosim adapter {adapter}") or 0


if __name__ == "__main__":
    raise SystemExit(main())
