"""Which of its backends' tools a virtual host serves, and with which description: the host's tool
curation (docs/virtual-hosts.md, "Curating a host's tools").

A rule includes or excludes tools of one mounted backend (its map key) or of every one (no map key),
by exact name, by glob (`*`, `?`, `[...]`, case-sensitive, whole name) or by tag (an OpenAPI
operation's tags). Names and globs match a tool's name at the backend or its default exposed name
(`{map key}-{name}` on a host of several backends), never an alias. A tool is served when

1. no include rule applies to its backend, or one of those that apply matches it, and
2. no exclude rule that applies to its backend matches it (an exclusion always wins).

The order of the rules does not matter. A tool that is not served is hidden exactly like one the
backend does not have: not listed, not callable, not found by `tool_search`.

Everything a rule needs is known when the configuration snapshot is built (tags come from the
catalog then), so `Curation.shows` depends on the configuration only, like the naming contract."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from apps.kernel.globs import glob_problem, globs_compile
from apps.kernel.problems import FieldProblem

ACTIONS = ("include", "exclude")
MATCHES = ("name", "glob", "tag")
PATTERN_MAX_LENGTH = 200
RULES_MAX = 1000
DESCRIPTION_MAX_LENGTH = 10_000
#: Routed names remembered per host; names come from clients, so the memory is bounded.
_MEMO_MAX = 50_000

Target = tuple[str, str]  # (map key, upstream tool name)


@dataclass(frozen=True, slots=True)
class ToolRuleSpec:
    """One curation rule as configured. `map_key` "" applies it to every mounted backend."""

    action: str
    match: str
    pattern: str
    map_key: str = ""


def tool_rule_check(rule: ToolRuleSpec, *, map_keys: Iterable[str]) -> list[FieldProblem]:
    """What is wrong with one rule on a host mounting `map_keys` (empty: nothing)."""
    problems: list[FieldProblem] = []
    if rule.action not in ACTIONS:
        problems.append(FieldProblem("action", f"action must be one of {', '.join(ACTIONS)}"))
    if rule.match not in MATCHES:
        problems.append(FieldProblem("match", f"match must be one of {', '.join(MATCHES)}"))
    pattern = rule.pattern
    if not isinstance(pattern, str) or not pattern.strip():
        problems.append(FieldProblem("pattern", "pattern must be a tool name, a glob or a tag"))
    elif len(pattern) > PATTERN_MAX_LENGTH:
        problems.append(FieldProblem("pattern", f"pattern is at most {PATTERN_MAX_LENGTH} characters"))
    elif pattern != pattern.strip():
        problems.append(FieldProblem("pattern", f"pattern has spaces around it: {pattern[:60]!r}"))
    elif rule.match == "glob":
        problem = glob_problem(pattern)
        if problem:
            problems.append(FieldProblem("pattern", problem))
    if not isinstance(rule.map_key, str):
        problems.append(FieldProblem("map_key", "map_key must be a mounted map key, or empty for every backend"))
    elif rule.map_key and rule.map_key not in set(map_keys):
        problems.append(FieldProblem("map_key", f"map key {rule.map_key!r} is not mounted on this virtual host"))
    return problems


def description_check(description: object) -> list[FieldProblem]:
    if not isinstance(description, str) or not description.strip():
        return [FieldProblem("description", "description must be some text (remove the override to show the backend's)")]
    if len(description) > DESCRIPTION_MAX_LENGTH:
        return [FieldProblem("description", f"description is at most {DESCRIPTION_MAX_LENGTH} characters")]
    return []


@dataclass(frozen=True, slots=True)
class _Rules:
    """The rules that apply to one map key, compiled."""

    names: frozenset[str]
    glob: re.Pattern[str] | None
    tagged: frozenset[str]  # upstream names the tag rules match

    def matches(self, name: str, default: str) -> bool:
        if name in self.names or default in self.names or name in self.tagged:
            return True
        return self.glob is not None and (self.glob.match(name) is not None or self.glob.match(default) is not None)


def _compiled(rules: list[ToolRuleSpec], tags: Mapping[str, Iterable[str]]) -> _Rules | None:
    if not rules:
        return None
    globs = [r.pattern for r in rules if r.match == "glob"]
    wanted = {r.pattern for r in rules if r.match == "tag"}
    return _Rules(
        names=frozenset(r.pattern for r in rules if r.match == "name"),
        glob=globs_compile(globs) if globs else None,
        tagged=frozenset(name for name, its in tags.items() if wanted.intersection(its)) if wanted else frozenset(),
    )


class Curation:
    """A host's compiled curation; build it with `Curation.build` once per configuration snapshot."""

    __slots__ = ("_include", "_exclude", "_prefixed", "_descriptions", "_memo", "_rules", "_tags", "_alone")

    def __init__(
        self, include: dict[str, _Rules | None], exclude: dict[str, _Rules | None], prefixed: bool,
        descriptions: dict[Target, str], rules: list[ToolRuleSpec], tags: Mapping[str, Mapping[str, Iterable[str]]],
    ) -> None:
        self._include = include
        self._exclude = exclude
        self._prefixed = prefixed
        self._descriptions = descriptions
        self._memo: dict[Target, bool] = {}
        self._rules = rules  # kept to explain a decision (`hidden_by`), off the hot path
        self._tags = tags
        self._alone: dict[tuple[int, str], _Rules | None] = {}  # (rule, map key) -> that rule compiled alone

    @classmethod
    def build(
        cls,
        rules: Iterable[ToolRuleSpec],
        *,
        map_keys: Iterable[str],
        tags: Mapping[str, Mapping[str, Iterable[str]]] | None = None,
        descriptions: Mapping[Target, str] | None = None,
    ) -> Curation | None:
        """None when nothing is curated (every tool served as the backend describes it). `tags`:
        map key -> upstream tool name -> its tags (only tools with tags need be given)."""
        keys = sorted(set(map_keys))
        rules = [r for r in rules if not r.map_key or r.map_key in keys]
        described = {target: text for target, text in (descriptions or {}).items() if target[0] in keys}
        if not rules and not described:
            return None
        tags = tags or {}
        include: dict[str, _Rules | None] = {}
        exclude: dict[str, _Rules | None] = {}
        everywhere = [r for r in rules if not r.map_key]
        own: dict[str, list[ToolRuleSpec]] = {}
        for rule in rules:
            if rule.map_key:
                own.setdefault(rule.map_key, []).append(rule)
        # Keys with the same rules and none by tag share them compiled (a glob compiled once, not per key).
        shared: dict[tuple[ToolRuleSpec, ...], _Rules | None] = {}
        for key in keys:
            for action, compiled in (("include", include), ("exclude", exclude)):
                applying = tuple(r for r in (*everywhere, *own.get(key, ())) if r.action == action)
                if any(r.match == "tag" for r in applying):
                    compiled[key] = _compiled(list(applying), tags.get(key, {}))
                else:
                    if applying not in shared:
                        shared[applying] = _compiled(list(applying), {})
                    compiled[key] = shared[applying]
        return cls(include, exclude, len(keys) > 1, described, rules, tags)

    def shows(self, map_key: str, name: str) -> bool:
        """Whether the host serves the tool `name` of the backend under `map_key`."""
        target = (map_key, name)
        known = self._memo.get(target)
        if known is not None:
            return known
        shown = self.shown(map_key)(name)
        if len(self._memo) < _MEMO_MAX:
            self._memo[target] = shown
        return shown

    def shown(self, map_key: str) -> Callable[[str], bool]:
        """`shows` for the tools of one backend, as a function of the name (unmemoised: for judging a
        whole listing at once)."""
        include, exclude = self._include.get(map_key), self._exclude.get(map_key)
        prefix = f"{map_key}-" if self._prefixed else ""

        def judge(name: str) -> bool:
            default = prefix + name
            return (include is None or include.matches(name, default)) and (
                exclude is None or not exclude.matches(name, default))

        return judge

    def description(self, map_key: str, name: str) -> str | None:
        """The description the host shows for the tool instead of the backend's, if it has one."""
        return self._descriptions.get((map_key, name)) if self._descriptions else None

    def hidden_by(self, map_key: str, name: str) -> ToolRuleSpec | None:
        """The first exclude rule that hides the tool (an include cannot bring it back), or None: either
        it is served, or only the include rules leave it out."""
        default = f"{map_key}-{name}" if self._prefixed else name
        for number, rule in enumerate(self._rules):
            if rule.action == "exclude" and rule.map_key in ("", map_key):
                # Compiled once per rule (per rule and map key by tag: it reads that backend's tools' tags).
                slot = (number, map_key if rule.match == "tag" else "")
                alone = self._alone.get(slot)
                if alone is None:
                    alone = self._alone[slot] = _compiled([rule], self._tags.get(map_key, {}) if rule.match == "tag" else {})
                if alone is not None and alone.matches(name, default):
                    return rule
        return None

    @property
    def filters(self) -> bool:
        """Whether any rule hides tools (else only descriptions are overridden)."""
        return any(self._include.values()) or any(self._exclude.values())
