"""Reading a scenario file and applying ``--set`` overrides before validation.

``--set`` items are ``KEY=VALUE`` with a dotted key (``scenario.seed``, ``connect.0.src``)
and a TOML literal as the value (``3``, ``2.5``, ``true``, ``"6"``); a value that is not
TOML is taken as a string. A sweep's ``--set`` takes several values, ``KEY=V1,V2,...``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from cosim.errors import Problem, ScenarioError


def read_toml(path: Path) -> dict[str, Any]:
    """Read a TOML file or raise ScenarioError naming the file, line and column."""
    if not path.is_file():
        raise ScenarioError(path, [Problem("(file)", f"no such file: {path}")])
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(path, [Problem("(file)", f"not valid TOML: {exc}")]) from None
    except UnicodeDecodeError:
        raise ScenarioError(path, [Problem("(file)", "not a UTF-8 text file")]) from None
    except RecursionError:
        raise ScenarioError(path, [Problem("(file)", "nested too deeply to read (arrays or tables inside "
                                                     "each other hundreds of levels deep)")]) from None


def toml_value(text: str) -> Any:
    """One TOML literal (``3``, ``"6"``, ``[1, 2]``), else the text as a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def toml_values(text: str) -> list[Any]:
    """``V1,V2,...`` as a list of TOML literals (each part a string when it is not TOML)."""
    try:
        return list(tomllib.loads(f"v = [{text}]")["v"])
    except tomllib.TOMLDecodeError:
        return [toml_value(part.strip()) for part in text.split(",")]


def parse_set(items: list[str], many: bool = False) -> dict[str, Any]:
    """``--set`` items as ``{key: value}`` (``many``: ``{key: [values]}`` for a sweep).

    Raises:
        ScenarioError: an item is not ``KEY=VALUE``.
    """
    parsed: dict[str, Any] = {}
    problems = []
    example = "entities.campus.peak_mw=1,2,4" if many else "scenario.seed=3"
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip() or (many and not text):
            form = "KEY=V1,V2,..." if many else "KEY=VALUE"
            problems.append(Problem("--set", f"expected {form}, e.g. {example}", item))
            continue
        parsed[key.strip()] = toml_values(text) if many else toml_value(text)
    if problems:
        raise ScenarioError("--set", problems)
    return parsed


def set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    """Apply ``--set a.b.c=v``; a list is indexed by number (``connect.0.src``)."""
    *parents, last = key.split(".")
    where = []
    for part in parents:
        where.append(part)
        if isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        elif isinstance(data, dict):
            data = data.setdefault(part, {})
        else:
            raise ScenarioError("--set", [Problem(".".join(where), "cannot set a key inside this value; "
                                                  "give the path of a table (or a list index)", key)])
    if isinstance(data, list) and last.isdigit() and int(last) < len(data):
        data[int(last)] = value
    elif isinstance(data, dict):
        data[last] = value
    else:
        raise ScenarioError("--set", [Problem(key, "cannot set a key inside this value", value)])


def apply_overrides(raw: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """``raw`` with every dotted override applied (in place; returned for chaining)."""
    for key, value in (overrides or {}).items():
        set_dotted(raw, key, value)
    return raw
