"""Reward guards: a weighted reward term no action can move, an action whose cost no term prices.

Run when an env is built (:class:`~cosim.gym.CosimEnv`, :class:`~cosim.gym.CosimParallelEnv`)
and by ``cosim validate`` (:func:`cosim.gym.spec.check_scenario`). A finding is a warning,
not an error (the env still runs): :func:`warn` adds it to the scenario's ``warnings``
(printed by the CLI, kept in ``metadata.json`` of a recorded episode) and, when an env is
built, gives it as a :class:`RewardGuardWarning`.

1. **A weighted term no action can move** (structural, no simulation). An action sets an
   input of one entity; what it can change is what its simulator computes and what flows
   from there through ``[[connect]]`` (time-shifted or not), simulator to simulator. Every
   entity of a reached simulator counts as reached (a grid's buses are solved together). A
   term with a weight != 0 none of whose columns (:func:`cosim.gym.rewards.term_reads`) is
   computed by a reached simulator is warned about: the agent cannot change it, so it only
   adds noise (weather, traffic) to the return. The criterion is sound (it never warns on a
   term a modelled coupling can move) and cheap, so validation runs it too; it cannot see a
   term that is reachable but never moves (a limit that never binds): the baselines of
   :mod:`cosim.gym.evaluate` show that. A probe rollout was not used for this check: a short
   one misses a term that moves only later in the day (a line at the afternoon peak), and a
   long one per env build is slow.
2. **An action no weighted term prices**, in two parts:

   a. structural, as in 1: an action that reaches none of the weighted terms' columns (the
      reward cannot see it at all);
   b. its service cost (a probe): an action on an IT entity (role ``it``) buys power with
      that entity's work, counted by ``slo_loss_h`` (latency), ``n_tokens`` (throughput) and
      ``delay_gpu_h`` (training deferred). The structure cannot tell which of them an input
      gives up (all are columns of the same entity), so a probe tells: the first
      :data:`PROBE_S` of the scenario (its own start and seed) is run with every action at
      its ``idle`` value, then once per IT action with that action at the end of its range
      farthest from idle. A service term the action makes worse (by more than
      :data:`ABS_TOL` + :data:`REL_TOL` of its size) must be priced: a weight of the sign
      that makes the loss cost, and not negligible. **Negligible** is either of: (i) per
      term, with a USD reward (``energy_cost_usd`` weighted: its weight is the reward per
      USD), a rate below :data:`USD_FLOOR` (10 % of the stated reference rate
      :data:`USD_REFERENCE`: a deferred GPU-hour priced under 0.20 $ is nearly free next to
      the ~2 $/h the GPU rents for); (ii) in any unit, the action's whole service cost in
      the probe (the weighted losses added up) under :data:`REL_FLOOR` (1 %) of its largest
      weighted gain (one service may be cheap next to another, e.g. tokens next to SLO).

The probe costs ``1 + #IT actions`` short episodes (about 0.1-0.3 s each on the shipped
environments); ``CosimEnv(..., guards=False)`` skips both checks (e.g. in the workers of a
vector env, once the scenario was checked).
"""

from __future__ import annotations

import math
import warnings

from cosim.gym.episode import Episode
from cosim.gym.rewards import term_columns, term_reads
from cosim.gym import spec as specs
from cosim.gym.spec import ActionSpec, AgentSpec, EpisodeSpec
from cosim.scenario import Scenario


class RewardGuardWarning(UserWarning):
    """A weighted reward term no action can move, or an action whose cost the reward does not price."""


#: How much of the scenario the service probe runs, from its start. [s]
PROBE_S = 7200
#: A term moved in the probe when it changed by more than ABS_TOL + REL_TOL · its size.
ABS_TOL, REL_TOL = 1e-9, 1e-6
#: Service terms and the sign of a loss of service (more SLO loss or delay, fewer tokens).
SERVICE_LOSS_SIGN = {"slo_loss_h": 1.0, "n_tokens": -1.0, "delay_gpu_h": 1.0}
#: Reference values of a unit of service, USD per unit (order of magnitude, our pick, stated):
#: an H100-hour rented on demand (2024-25 cloud list prices ~2-4 $/h), a token of a 70B model
#: served by an API (2024-25 list prices ~0.3-0.9 $ per million tokens). [USD/GPU-h, USD/token]
USD_REFERENCE = {"delay_gpu_h": 2.0, "n_tokens": 0.5e-6}
#: Below this share of the reference, a rate is negligible. [-]
USD_FLOOR_FRAC = 0.10
USD_FLOOR = {term: USD_FLOOR_FRAC * rate for term, rate in USD_REFERENCE.items()}
UNIT = {"delay_gpu_h": "$/GPU-h", "n_tokens": "$/token"}
#: A priced loss under this share of the action's largest weighted effect is negligible. [-]
REL_FLOOR = 0.01


def warn(scn: Scenario, texts: list[str], emit: bool = True) -> None:
    """Keep each finding in ``scn.warnings`` (once) and, with ``emit``, give it as a
    :class:`RewardGuardWarning` (validation does not: ``cosim validate`` prints ``scn.warnings``)."""
    for text in texts:
        if text not in scn.warnings:
            scn.warnings.append(text)
        if emit:
            warnings.warn(text, RewardGuardWarning, stacklevel=3)


def check_scenario(scn: Scenario) -> None:
    """``cosim validate``'s check of the agent sections: :func:`cosim.gym.spec.check_scenario`, then
    the reward guards of every agent, kept in ``scn.warnings`` (the CLI prints them).

    Raises:
        ScenarioError: every problem of the sections (the guards only warn).
    """
    specs.check_scenario(scn)
    table = scn.raw.get("agent")
    if isinstance(table, dict) and "actions" in table:
        episode, agent = specs.single_agent(scn)
        warn(scn, reward_guards(scn, episode, {"agent": agent}), emit=False)
    if "agents" in scn.raw:
        episode, agents = specs.parallel_agents(scn)
        warn(scn, reward_guards(scn, episode, {f"agents.{n}": a for n, a in agents.items()}), emit=False)


def reward_guards(scn: Scenario, episode: EpisodeSpec, agents: dict[str, AgentSpec]) -> list[str]:
    """Every finding of both checks for the agents ``{where: spec}`` (``"agent"``, ``"agents.<name>"``)."""
    reads = term_reads(term_columns(scn))
    found = []
    for where, spec in agents.items():
        found += unmovable_terms(scn, where, spec, reads) + unreached_actions(scn, where, spec, reads)
    return found + service_warnings(scn, episode, agents)


# -- 1 and 2a: what an action reaches ------------------------------------------------------------
def reached_sims(scn: Scenario, eid: str) -> set[str]:
    """The simulators an input of entity ``eid`` can change: its own and those fed from it."""
    edges: dict[str, set[str]] = {}
    for conn in scn.connect:
        edges.setdefault(scn.entities[conn.src].sim, set()).add(scn.entities[conn.dst].sim)
    seen = {scn.entities[eid].sim}
    todo = list(seen)
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def reached_terms(scn: Scenario, action: ActionSpec, reads: dict[str, list[str]]) -> set[str]:
    """The terms with a column computed by a simulator the action reaches."""
    sims = reached_sims(scn, action.entity)
    return {term for term, columns in reads.items()
            if any(scn.entities[c.split(".", 1)[0]].sim in sims for c in columns if c.split(".", 1)[0] in scn.entities)}


def unmovable_terms(scn: Scenario, where: str, spec: AgentSpec, reads: dict[str, list[str]]) -> list[str]:
    """Check 1: weighted terms none of the agent's actions reaches."""
    moved = set().union(*(reached_terms(scn, a, reads) for a in spec.actions)) if spec.actions else set()
    names = ", ".join(a.name for a in spec.actions)
    return [f"{where}.reward.{term} = {weight:g}: no action can move this term (its columns "
            f"{', '.join(reads[term]) or 'none'} come from simulators that no action's input reaches through "
            f"[[connect]]; actions: {names}); it only adds noise to the return: drop the weight or add an action "
            "that acts on it"
            for term, weight in spec.reward.items() if weight != 0 and term not in moved]


def unreached_actions(scn: Scenario, where: str, spec: AgentSpec, reads: dict[str, list[str]]) -> list[str]:
    """Check 2a: actions that reach none of the weighted terms."""
    weighted = {t for t, w in spec.reward.items() if w != 0}
    found = []
    for i, action in enumerate(spec.actions):
        reached = reached_terms(scn, action, reads)
        if not reached & weighted:
            could = ", ".join(sorted(t for t in reached if reads[t])) or "none recorded"
            found.append(f"{where}.actions[{i}] ({action.name}): no weighted reward term reads anything this action "
                         f"reaches, so the reward cannot price it; weight a term it can move ({could}) or drop it")
    return found


# -- 2b: the service an IT action gives up (a probe) -----------------------------------------------
def extreme(action: ActionSpec) -> float:
    """The end of the action's range (or its value) farthest from its idle value."""
    choices = action.values if action.values else (action.low, action.high)
    return max(choices, key=lambda v: abs(v - action.idle))


def probe(scn: Scenario, episode: EpisodeSpec, settings: list[tuple[str, str, float]]) -> dict[str, float]:
    """The terms summed over the first :data:`PROBE_S` of the scenario with ``settings`` held."""
    spec = EpisodeSpec(episode.decision_s, None, (), math.ceil(min(PROBE_S, scn.scenario.duration_s)
                                                                 / episode.decision_s), False)
    run = Episode(scn, spec)
    run.start(scn.scenario.seed)
    total: dict[str, float] = {}
    try:
        while not (run.terminated or run.truncated):
            for name, value in run.decide(settings).items():
                total[name] = total.get(name, 0.0) + value
    finally:
        run.close()
    return total


def _moved(before: float, after: float) -> bool:
    return abs(after - before) > ABS_TOL + REL_TOL * max(abs(before), abs(after))


def service_warnings(scn: Scenario, episode: EpisodeSpec, agents: dict[str, AgentSpec]) -> list[str]:
    """Check 2b: the service terms an IT action makes worse in the probe, unpriced or priced negligibly."""
    it = set(scn.roles().entities_with("it"))
    probed = [(where, i, a) for where, spec in agents.items() for i, a in enumerate(spec.actions) if a.entity in it]
    if not probed:
        return []
    idle = [(a.entity, a.attr, a.idle) for spec in agents.values() for a in spec.actions]
    try:
        base = probe(scn, episode, idle)
        runs = {(where, i): probe(scn, episode, [s if (s[0], s[1]) != (a.entity, a.attr) else (a.entity, a.attr, extreme(a))
                                                 for s in idle]) for where, i, a in probed}
    except Exception as exc:  # the check must not stop a scenario the env itself will report on
        return [f"reward guards: the service probe could not run ({type(exc).__name__}: {exc})"]
    found = []
    for where, i, action in probed:
        delta = {t: runs[where, i].get(t, 0.0) - v for t, v in base.items() if _moved(v, runs[where, i].get(t, 0.0))}
        found += _service_texts(where, i, action, agents[where].reward, delta)
    return found


def _service_texts(where: str, i: int, action: ActionSpec, weights: dict[str, float],
                   delta: dict[str, float]) -> list[str]:
    """The findings of check 2b for one action, from its probe changes ``delta`` (term: extreme - idle)."""
    usd = abs(weights.get("energy_cost_usd", 0.0))
    head = (f"{where}.actions[{i}] ({action.name} at {extreme(action):g}, idle {action.idle:g}, first "
            f"{PROBE_S / 3600:g} h)")
    given_up = {t: d for t, d in delta.items() if t in SERVICE_LOSS_SIGN and SERVICE_LOSS_SIGN[t] * d > 0}
    found = []
    for term, change in given_up.items():
        weight = weights.get(term, 0.0)
        if weight == 0:
            why = f"the reward does not price it ({where}.reward.{term} = 0 or absent)"
        elif weight * change > 0:
            why = f"the reward pays for the loss ({term} = {weight:g}: a loss takes a weight of the other sign)"
        elif usd and term in USD_FLOOR and abs(weight) / usd < USD_FLOOR[term]:
            unit = UNIT[term]
            why = (f"it is priced at {abs(weight) / usd:.3g} {unit}, below the {USD_FLOOR[term]:.3g} {unit} floor ("
                   f"{USD_FLOOR_FRAC:.0%} of a reference {USD_REFERENCE[term]:g} {unit}): nearly free")
        else:
            continue
        found.append(f"{head}: gives up service ({term} {change:+.4g}) but {why}; price it at a stated rate in "
                     f"{where}.reward.{term}")
    cost = sum(weights.get(t, 0.0) * d for t, d in given_up.items() if weights.get(t, 0.0) * d < 0)
    gains = {t: weights[t] * d for t, d in delta.items() if t not in given_up and weights.get(t, 0.0) * d > 0}
    best = max(gains, key=gains.get, default=None)
    if not found and given_up and best is not None and abs(cost) < REL_FLOOR * gains[best]:
        found.append(f"{head}: the service it gives up ({', '.join(given_up)}) costs {cost:.4g} in the reward, under "
                     f"{REL_FLOOR:.0%} of what it gains ({best}: {gains[best]:+.4g}): nearly free; raise the weights "
                     "of the service terms to stated rates")
    return found
