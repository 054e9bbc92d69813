"""Small checks shared by the parsers of the ``[agent]`` section (:mod:`.spec`, :mod:`.forecasts`)."""

from __future__ import annotations

import math
from typing import Any

from cosim.errors import Problem


def number(value: Any) -> bool:
    """True for a finite int or float (a bool is not a number here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def unknown(table: dict[str, Any], where: str, allowed: tuple[str, ...], problems: list[Problem]) -> None:
    """One problem per key of ``table`` not in ``allowed``."""
    for key in table:
        if key not in allowed:
            problems.append(Problem(f"{where}.{key}", f"unknown key; allowed: {', '.join(allowed)}", table[key]))


def is_table(body: Any, where: str, keys: tuple[str, ...], example: str, problems: list[Problem]) -> bool:
    """True for a table (its unknown keys reported); False, with a problem, for anything else."""
    if not isinstance(body, dict):
        problems.append(Problem(where, f"must be a table, e.g. {example}", body))
        return False
    unknown(body, where, keys, problems)
    return True
