"""Sweep variants: dicts of dotted overrides from a grid of values, seeded Monte Carlo draws, or both.

A *variant* is a dict of dotted overrides (``{"entities.pcc.bus": "6", "scenario.seed": 3}``)
applied to the scenario before validation. Each grid point gets the same draws (common random
numbers make variants comparable).

Sweep file (TOML; the scenario file itself stays a plain scenario)::

    [sweep]
    scenario = "default.toml"          # relative to this file
    [sweep.set]                        # fixed overrides for every variant (optional)
    "scenario.duration_s" = 3600
    [sweep.grid]                       # every combination of these values
    "entities.pcc.bus" = ["3", "6", "18"]
    "entities.campus.peak_mw" = [1.0, 2.0]
    [sweep.variants]                   # named variants (optional): name -> dotted overrides
    none = {}
    floor = { "entities.campus.smoothing" = { power_floor_frac = 0.9 } }
    [sweep.montecarlo]                 # n seeded draws (optional)
    n = 20
    seed = 42
    [sweep.montecarlo.draws]
    "entities.campus.peak_mw" = { uniform = [1.0, 3.0] }
    "scenario.seed" = { integers = [0, 1_000_000] }    # high end exclusive
    # also: { normal = [mean, sd] }, { choice = [v1, v2, ...] }

Named variants, grid points and draws multiply (every named variant gets every grid point and
draw); a variant's name is its ``[sweep.variants]`` key, followed by ``/<n>`` when grid points
or draws multiply it. ``cosim compare <sweep folder>`` labels the runs with these names.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cosim.errors import Problem, ScenarioError
from cosim.scenario import parse_set, read_toml

DISTRIBUTIONS = ("uniform", "normal", "integers", "choice")


@dataclass
class SweepSpec:
    """A sweep: the scenario file and the variants to run from it."""

    scenario: Path
    fixed: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list[Any]] = field(default_factory=dict)
    montecarlo_n: int = 0
    montecarlo_seed: int = 0
    draws: dict[str, dict[str, Any]] = field(default_factory=dict)
    named: dict[str, dict[str, Any]] = field(default_factory=dict)

    def variants(self) -> list[dict[str, Any]]:
        """Every variant's overrides, named variants times grid points times draws, fixed keys included."""
        points = grid_variants(self.grid)
        draws = montecarlo_variants(self.draws, self.montecarlo_n, self.montecarlo_seed) if self.draws else [{}]
        named = list(self.named.values()) or [{}]
        return [{**self.fixed, **base, **point, **draw} for base in named for point in points for draw in draws]

    def names(self) -> list[str] | None:
        """The variants' names, in :meth:`variants` order; None without ``[sweep.variants]``."""
        if not self.named:
            return None
        per = len(grid_variants(self.grid)) * (self.montecarlo_n if self.draws else 1)
        return [name if per == 1 else f"{name}/{k}" for name in self.named for k in range(per)]


def grid_variants(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the values, first key varying slowest; ``[{}]`` for no keys."""
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


def montecarlo_variants(draws: dict[str, dict[str, Any]], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` seeded draws of the keys in ``draws`` (see the module docstring for the forms).

    Each key gets its own stream (seeded from ``seed`` and the key's position), so adding a
    key does not change the draws of the others listed before it.
    """
    problems = [p for key, spec in draws.items() for p in _draw_problems(key, spec)]
    if n <= 0:
        problems.append(Problem("sweep.montecarlo.n", "give the number of draws, a positive integer", n))
    if problems:
        raise ScenarioError("sweep", problems)
    rows: list[dict[str, Any]] = [{} for _ in range(n)]
    for position, (key, spec) in enumerate(draws.items()):
        rng = np.random.default_rng([seed, position])
        for row, value in zip(rows, _draw(rng, spec, n)):
            row[key] = value
    return rows


def _draw_problems(key: str, spec: Any) -> list[Problem]:
    where = f"sweep.montecarlo.draws.{key}"
    if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in DISTRIBUTIONS:
        return [Problem(where, f"give one of {', '.join(DISTRIBUTIONS)}, e.g. {{ uniform = [1.0, 3.0] }}", spec)]
    kind, args = next(iter(spec.items()))
    if not isinstance(args, list) or (kind != "choice" and len(args) != 2) or not args:
        form = "a non-empty list of values" if kind == "choice" else "two numbers [a, b]"
        return [Problem(where, f"{kind} takes {form}", args)]
    if kind == "integers" and not all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        return [Problem(where, "integers = [low, high] takes two whole numbers", args)]
    if kind in ("uniform", "normal") and not all(_is_number(a) for a in args):
        return [Problem(where, f"{kind} = [a, b] takes two numbers", args)]
    if kind == "integers" and not args[0] < args[1]:
        return [Problem(where, "integers = [low, high] needs low < high (high is exclusive)", args)]
    if kind == "normal" and args[1] < 0:
        return [Problem(where, "normal = [mean, sd] needs sd >= 0", args)]
    return []


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _draw(rng: np.random.Generator, spec: dict[str, Any], n: int) -> list[Any]:
    kind, args = next(iter(spec.items()))
    if kind == "uniform":
        values = rng.uniform(args[0], args[1], n)
    elif kind == "normal":
        values = rng.normal(args[0], args[1], n)
    elif kind == "integers":
        return [int(v) for v in rng.integers(args[0], args[1], n)]
    else:
        return [args[int(i)] for i in rng.integers(0, len(args), n)]
    return [float(v) for v in values]


def parse_set_grid(items: list[str]) -> dict[str, list[Any]]:
    """``--set`` items for a sweep: ``key=v1,v2,...`` -> ``{key: [v1, v2, ...]}``.

    Each value is a TOML literal (``3``, ``2.5``, ``true``, ``"6"``), else a bare string; a
    single value is a key fixed for every variant. Quote a string that looks like a number
    (``--set 'entities.pcc.bus="6","18"'``) or it is read as one.

    Raises:
        ScenarioError: an item is not ``KEY=VALUES``.
    """
    return parse_set(items, many=True)


def load_sweep_file(path: str | Path) -> SweepSpec:
    """Read a sweep file (see the module docstring).

    Raises:
        ScenarioError: with every problem found.
    """
    path = Path(path)
    raw = read_toml(path)
    problems: list[Problem] = []
    for key in raw:
        if key != "sweep":
            problems.append(Problem(key, "unknown section; a sweep file has one [sweep] section"))
    body = raw.get("sweep")
    if not isinstance(body, dict):
        raise ScenarioError(path, problems + [Problem("sweep", "section [sweep] is missing")])
    allowed = ("scenario", "set", "grid", "variants", "montecarlo")
    problems += [Problem(f"sweep.{k}", f"unknown key; allowed: {', '.join(allowed)}") for k in body if k not in allowed]
    scenario = body.get("scenario")
    if not isinstance(scenario, str):
        problems.append(Problem("sweep.scenario", "give the scenario file, relative to this file", scenario))
    fixed = _table_or_problem(body, "set", "a table of dotted keys, e.g. [sweep.set] \"scenario.seed\" = 3",
                              problems)
    grid = _table_or_problem(body, "grid", "a table of lists, e.g. [sweep.grid] \"entities.pcc.bus\" = [\"3\", \"6\"]",
                             problems)
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            problems.append(Problem(f"sweep.grid.{key}", "give a non-empty list of values, e.g. [1.0, 2.0]", values))
    named = _table_or_problem(body, "variants", "a table of named variants, e.g. [sweep.variants] "
                              "floor = { \"entities.campus.smoothing\" = { power_floor_frac = 0.9 } }", problems)
    for name, overrides in named.items():
        if not isinstance(overrides, dict):
            problems.append(Problem(f"sweep.variants.{name}", "give a table of dotted overrides, e.g. "
                                    "{ \"scenario.seed\" = 3 }, or {} for the scenario as it is", overrides))
    mc = _table_or_problem(body, "montecarlo", "a table with n, seed and [sweep.montecarlo.draws]", problems)
    problems += [Problem(f"sweep.montecarlo.{k}", "unknown key; allowed: n, seed, draws") for k in mc
                 if k not in ("n", "seed", "draws")]
    n = mc.get("n")
    if mc and (isinstance(n, bool) or not isinstance(n, int) or n <= 0):
        problems.append(Problem("sweep.montecarlo.n", "give the number of draws, a positive integer", n))
    seed = mc.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        problems.append(Problem("sweep.montecarlo.seed", "give a whole number >= 0", seed))
    draws = _table_or_problem(mc, "draws", "a table of distributions, e.g. \"scenario.seed\" = { integers = [0, 100] }",
                              problems, where="sweep.montecarlo.draws")
    for key, spec in draws.items():
        problems += _draw_problems(key, spec)
    if problems:
        raise ScenarioError(path, problems)
    return SweepSpec(scenario=(path.resolve().parent / scenario), fixed=dict(fixed), grid=dict(grid),
                     montecarlo_n=int(mc.get("n", 0)), montecarlo_seed=int(seed), draws=dict(draws),
                     named={k: dict(v) for k, v in named.items()})


def _table_or_problem(body: dict[str, Any], key: str, form: str, problems: list[Problem],
                      where: str | None = None) -> dict[str, Any]:
    """``body[key]`` when it is a table (absent: empty); else a problem is added and ``{}`` returned."""
    value = body.get(key, {})
    if isinstance(value, dict):
        return value
    problems.append(Problem(where or f"sweep.{key}", f"give {form}", value))
    return {}


def variant_id(scenario_text: str, overrides: dict[str, Any]) -> str:
    """A stable id from the scenario's text and the overrides: ``v-<12 hex>``."""
    blob = json.dumps(overrides, sort_keys=True, default=str) + "\n" + scenario_text
    return "v-" + hashlib.sha1(blob.encode()).hexdigest()[:12]
