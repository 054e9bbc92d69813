"""What a value set on an input from outside the scenario must be, wherever it comes from:
:meth:`cosim.Session.set`, a HELICS subscription (:mod:`cosim.run.federate`) and a live run's
``PUT /entities/<id>/inputs`` (:mod:`cosim.live`) ask :func:`value_problem`, so that one value is
taken or refused alike by all three, with the same words."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from cosim.units import is_flag, unit_of

__all__ = ["finite_number", "real_number", "value_problem"]


def real_number(value: Any) -> bool:
    """A real number: int, float, bool or numpy's scalars (not text, not an array)."""
    return isinstance(value, numbers.Real)


def finite_number(value: Any) -> bool:
    """A real number that is finite as a float (an int too large for a float is not)."""
    try:
        return real_number(value) and math.isfinite(value)
    except OverflowError:
        return False


def value_problem(eid: str, attr: str, value: Any, bounds: tuple[float, float] | None, refused: str | None = None,
                  release: str | None = None) -> str | None:
    """What is wrong with ``value`` for input ``attr`` of entity ``eid`` (None: nothing).

    Args:
        bounds: the range the entity's adapter takes (``CosimSim.settable_bounds``); None: any
            finite number. [unit of attr]
        refused: why the entity takes this input from no one outside (``CosimSim.refused_inputs``);
            None: it may be set.
        release: the caller's word for "release the input" (``None``, ``null``), named in the fix
            for a value that is not a number; None where a value cannot be released.
    """
    if refused:
        return f"not settable from outside on this entity: {refused}"
    if isinstance(value, np.bool_):  # numpy's true/false as Python's
        value = bool(value)
    if isinstance(value, bool) and not is_flag(attr):  # a flag takes true/false; a quantity does not
        return f"give a number in {unit_of(attr) or 'the input unit'}, not true/false"
    if not finite_number(value):
        again = f", or {release} to release it (back to the scenario's own value)" if release else ""
        return f"give a finite number in {unit_of(attr) or 'the input unit'}{again}"
    if bounds is not None and not bounds[0] <= value <= bounds[1]:
        return (f"outside the bounds [{bounds[0]:g}, {bounds[1]:g}] {unit_of(attr) or '(no unit)'} of {eid}'s "
                "adapter; give a value inside them")
    return None
