"""Scenario files: TOML read with ``tomllib``, validated into typed models, every problem named.

``load_scenario(path)`` returns a :class:`Scenario` or raises :class:`ScenarioError` with
*all* the problems found, each as ``key.path = value: what is wrong; what is allowed``.
Nothing in a scenario is evaluated as code; relative paths resolve from its folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cosim.errors import Problem, ScenarioError
from cosim.scenario.load import apply_overrides, parse_set, read_toml, set_dotted
from cosim.scenario.schema import ENTITY_KEYS, SIM_KEYS, Scenario
from cosim.scenario.validate import validate

__all__ = ["ENTITY_KEYS", "Problem", "SIM_KEYS", "Scenario", "ScenarioError", "load_scenario", "parse_set",
           "read_toml", "set_dotted", "validate"]


def load_scenario(path: str | Path, overrides: dict[str, Any] | None = None, allow_commands: bool = False
                  ) -> Scenario:
    """Read, validate and resolve a scenario file.

    Args:
        path: the scenario's TOML file.
        overrides: dotted keys to replace before validation, e.g. ``{"scenario.seed": 3}``.
        allow_commands: let the scenario start programs (a sim's ``cmd``); off unless the user
            says so on the command line (``--allow-commands``): nothing in a scenario runs code.

    Raises:
        ScenarioError: with every problem found.
    """
    path = Path(path)
    raw = apply_overrides(read_toml(path), overrides)
    scn = validate(raw, path, allow_commands)
    scn.overrides = dict(overrides or {})
    return scn
