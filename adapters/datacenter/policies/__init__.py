"""Training scheduling policies as plug-ins: one module each, found by scanning this package.

A policy is a module ``policies/<name>.py`` defining one subclass of :class:`Policy`; its
name in a scenario is the module's name (``training.policy = "<name>"``) and its params
(``training.policy_params = { ... }``) are the fields of its ``PARAMS`` model, each with its
unit in its name. Modules starting with ``_`` are helpers. No list is kept by hand: a new
file is picked up by :func:`available`, ``cosim list`` and the policy tests.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from functools import lru_cache
from typing import Any

import numpy as np
from pydantic import ValidationError

from cosim.adapters.datacenter.policies._base import Policy, PolicyParams

__all__ = ["Policy", "PolicyParams", "available", "describe", "make_policy", "param_problems", "policy_class"]


@lru_cache(maxsize=1)
def available() -> dict[str, type[Policy]]:
    """Every policy by name (its module's name), sorted."""
    found = {}
    for info in pkgutil.iter_modules(__path__, __name__ + "."):
        short = info.name.rsplit(".", 1)[-1]
        if short.startswith("_"):
            continue
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, Policy) and obj.__module__ == module.__name__:
                found[short] = obj
    return dict(sorted(found.items()))


def policy_class(name: str) -> type[Policy]:
    """The policy class of ``name`` (``ValueError`` naming the known ones)."""
    known = available()
    if name not in known:
        raise ValueError(f"training.policy = {name!r}: unknown policy; known: {', '.join(known)}")
    return known[name]


def param_problems(name: str, params: dict[str, Any]) -> list[str]:
    """What is wrong with policy ``name`` and its ``params`` (empty: fine), one message each."""
    try:
        cls = policy_class(name)
    except ValueError as exc:
        return [str(exc)]
    try:
        cls.PARAMS.model_validate(params)
    except ValidationError as exc:
        known = ", ".join(cls.PARAMS.model_fields) or "none"
        return [f"training.policy_params.{'.'.join(map(str, e['loc']))} = {e.get('input')!r}: "
                f"{'unknown param' if e['type'] == 'extra_forbidden' else e['msg']} of policy {name!r}; "
                f"its params: {known}" for e in exc.errors()]
    return []


def make_policy(name: str, params: dict[str, Any], rng: np.random.Generator | None = None) -> Policy:
    """A policy object from its name and params (``ValueError`` when either is wrong)."""
    problems = param_problems(name, params)
    if problems:
        raise ValueError("; ".join(problems))
    cls = policy_class(name)
    policy = cls(cls.PARAMS.model_validate(params), rng)
    policy.name = name
    return policy


def describe() -> dict[str, tuple[str, list[str]]]:
    """``name -> (first docstring line, ["param = default", ...])`` for listings."""
    out = {}
    for name, cls in available().items():
        summary = (inspect.getdoc(cls) or "").splitlines()[0] if cls.__doc__ else ""
        params = [f"{k} = {f.default!r}" for k, f in cls.PARAMS.model_fields.items()]
        out[name] = (summary, params)
    return out
