"""The ``cosim`` command: ``run``, ``validate``, ``list`` (:mod:`.run`); ``sweep``,
``hosting-capacity``, ``report``, ``compare`` (:mod:`.studies`); ``battery``, ``bundle``
(:mod:`.submittal`); ``reproduce`` (:mod:`.reproduce`); ``model-record`` (:mod:`.model_record`).

A user mistake prints one message naming the file, key, value and fix, and exits 1 —
never a traceback (set ``COSIM_DEBUG=1`` to see one for a bug report).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from cosim.cli import model_record as model_record_commands
from cosim.cli import reproduce as reproduce_commands
from cosim.cli import run as run_commands
from cosim.cli import serve as serve_commands
from cosim.cli import studies as study_commands
from cosim.cli import submittal as submittal_commands
from cosim.errors import ScenarioError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cosim", description="Co-simulation of AI datacenters with the grids, cooling plants and sources around them.")
    sub = parser.add_subparsers(dest="command", required=True)
    run_commands.add_parsers(sub)
    study_commands.add_parsers(sub)
    submittal_commands.add_parsers(sub)
    reproduce_commands.add_parsers(sub)
    serve_commands.add_parsers(sub)
    model_record_commands.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ScenarioError, FileNotFoundError) as exc:
        print(str(exc), file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        print(str(exc) or "interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug, not a user mistake: one line unless asked for more
        if os.environ.get("COSIM_DEBUG"):
            traceback.print_exc()
        print(f"cosim: internal error: {type(exc).__name__}: {exc} (set COSIM_DEBUG=1 for the traceback)",
              file=sys.stderr)
        return 2
