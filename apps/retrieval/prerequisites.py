"""Prerequisite chains (issue 6 §3). Pure: no I/O, no Django.

A tool that acts on a resource needs that resource's id: `AuthorizeSecurityGroupIngress` takes a
`GroupId`, which `CreateSecurityGroup` produces, which in turn wants a `VpcId` from `CreateVpc`. An
agent that finds `AuthorizeSecurityGroupIngress` should be told about the others too.

The chain is derived from the catalog alone:
- a parameter is id-like when its name ends in Id, Arn, Name or Identifier (singular or plural), or
  names a resource type outright (`Bucket`, `Subnets`); the resource type is the rest of the name,
  read with the words of the tool's own name when they extend it (`GroupId` of
  `AuthorizeSecurityGroupIngress` is a security group's id), else with leading words dropped until
  a type is known (`executionRoleArn`: a role);
- the tools that make a type are the ones named for making it (Create, Allocate, Run, Register,
  Request, Import, Publish + the type: `RunInstances` makes instances), and, for an id no such
  name explains, the making tools whose response carries a member of that very name
  (`AllocateAddress` answers with an `AllocationId`);
- one producer per parameter: of the tool's own backend first, then of any other;
- a tool's closure is every producer reachable from it, dependencies first; cycles end where they
  close (a tool is never its own prerequisite).

Where the name gives no type a tool of the same service makes (`VPCZoneIdentifier`,
`DeliverLogsPermissionArn`, `ResourceIds`, `Targets.Id`), the parameter's description may: the first
made type it names as identified ("a comma-separated list of subnet IDs", "the ARN of the IAM
role"). A list of strings named for a type in the plural holds its ids (`subnets`).

Which parameters count: of the tool itself, every id-like parameter that is required, every
optional id, and the optional names of what its own service makes by that name
(`DBSubnetGroupName`); of its prerequisites, the required ones and the optional top-level ids of
types many tools require (`HUB_MIN_REQUIRED`) — measured in `bench/retrieval` against the
development set's hand-derived chains."""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from apps.retrieval.text import name_words, singular, type_words

MAKERS = ("Create", "Allocate", "Run", "Register", "Request", "Import", "Publish")
_SUFFIX = re.compile(r"^(.*?)(Ids?|IDs?|Arns?|ARNs?|Names?|Identifiers?)$")
#: Parameters that look like ids but name no resource anyone must make first.
GENERIC = frozenset({
    "clienttoken", "nexttoken", "dryrun", "requestid", "accountid", "ownerid", "regionid", "zoneid",
    "availabilityzoneid", "resourceownerid", "resourcegroupid", "name", "id", "arn", "identifier",
})
_MAX_DEPTH = 5
#: A prerequisite's own optional ids count only for types many tools require: a VPC (43 tools of
#: `cloud3k`), a subnet (27), not an IPAM pool (10), which would otherwise join the chain of
#: everything that wants a VPC. "Many" is this many, or one tool in HUB_SHARE of a smaller catalog
#: (at least 2). Between 15 and 25 the development chains score the same.
HUB_MIN_REQUIRED = 20
HUB_SHARE = 200
#: What a parameter's description says it identifies: "<words> ID(s)/ARN(s)", "ID(s)/ARN(s) of the <words>".
_NAMED_BEFORE = re.compile(r"((?:[A-Za-z][\w-]* ){1,3})(?:IDs?|ARNs?)\b")
_NAMED_AFTER = re.compile(r"\b(?:IDs?|ARNs?) of (?:the |an? )?((?:[A-Za-z][\w-]*\s?){1,3})")
#: Words that join two names: a making tool's name holding one names no single type.
_LINKING = frozenset({"with", "to", "from", "for", "in", "on", "into", "and", "by", "of"})


@dataclass(frozen=True, slots=True)
class ToolSchemas:
    key: Hashable
    backend: Hashable
    name: str
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class Need:
    """One id-like parameter of a tool: where it is, the type it names, whether it is required."""

    parameter: str
    kind: tuple[str, ...]
    required: bool
    by_id: bool  # named ...Id or ...Arn (not ...Name, and not the type's bare name)


def _members(schema: Any, depth: int = 0) -> Iterable[str]:
    """Every property name of a (response) schema, at any depth up to _MAX_DEPTH."""
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, sub in properties.items():
            yield name
            yield from _members(sub, depth + 1)
    for key in ("items", "additionalProperties"):
        yield from _members(schema.get(key), depth + 1)
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in schema.get(key) or ():
            yield from _members(sub, depth + 1)


def _parameters(schema: Mapping[str, Any]) -> Iterable[tuple[str, bool, bool, str]]:
    """Top-level parameters (name, required, whether it is a list of strings, description) and, one
    level down, members of object parameters (`Targets.Id`), required when both levels are."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return
    required = set(schema.get("required") or ())
    for name, sub in properties.items():
        yield name, name in required, _strings(sub), _description(sub)
        inner = _object_of(sub)
        if inner is not None:
            inner_required = set(inner.get("required") or ())
            for member, member_schema in (inner.get("properties") or {}).items():
                yield (f"{name}.{member}", name in required and member in inner_required, _strings(member_schema),
                       _description(member_schema))


def _description(schema: Any) -> str:
    return str(schema.get("description") or "") if isinstance(schema, Mapping) else ""


def _strings(schema: Any) -> bool:
    return isinstance(schema, Mapping) and schema.get("type") == "array" and isinstance(schema.get("items"), Mapping) \
        and schema["items"].get("type") == "string"


def _object_of(schema: Any) -> Mapping[str, Any] | None:
    if not isinstance(schema, Mapping):
        return None
    if isinstance(schema.get("properties"), Mapping):
        return schema
    for key in ("items", "allOf", "anyOf", "oneOf"):
        value = schema.get(key)
        for sub in (value if isinstance(value, list) else [value]):
            found = _object_of(sub)
            if found is not None:
                return found
    return None


class Catalog:
    """The tools of one tenant, indexed for deriving prerequisites."""

    def __init__(self, tools: Sequence[ToolSchemas]) -> None:
        self.tools = {tool.key: tool for tool in tools}
        self.makers: dict[tuple[str, ...], list[ToolSchemas]] = {}
        self.answers: dict[Hashable, frozenset[str]] = {}  # maker's key -> member names of its answer
        self._required_by: dict[tuple[str, ...], int] | None = None
        self._needs: dict[Hashable, list[Need]] = {}
        self.hub = max(2, min(HUB_MIN_REQUIRED, len(self.tools) // HUB_SHARE))
        for tool in tools:
            kind = self.made_by(tool)
            if kind is not None:
                self.makers.setdefault(kind, []).append(tool)
                self.answers[tool.key] = frozenset(_members(tool.output_schema))

    def needs(self, tool: ToolSchemas) -> list[Need]:
        """The tool's id-like parameters with the types they name (worked out once per tool)."""
        found = self._needs.get(tool.key)
        if found is None:
            found = self._needs[tool.key] = self._read_needs(tool)
        return found

    def _read_needs(self, tool: ToolSchemas) -> list[Need]:
        own = name_words(tool.name)
        made = self.made_by(tool)
        found = []
        for parameter, required, strings, description in _parameters(tool.input_schema):
            parent, _, leaf = parameter.rpartition(".")
            m = _SUFFIX.match(leaf)
            if leaf.lower() in GENERIC:
                # `Targets.Id` says nothing of its type; its description may ("specify an instance ID").
                described = self._described(description, type_words(parent)) if parent and m else None
                if described is None:
                    continue
                found.append(Need(parameter, described, required, by_id=True))
                continue
            base = m.group(1) if m else leaf
            kind = type_words(base)
            if not kind:
                continue
            if m and not self._made_near(kind, tool):
                # `VPCZoneIdentifier`, `DeliverLogsPermissionArn`, `ResourceIds`: the name gives no
                # type made here; the description may name one ("a list of subnet IDs").
                described = self._described(description, kind)
                if described is not None and (kind not in self.makers or self._made_near(described, tool)):
                    kind = described
            # A list of strings named for a type in the plural holds ids of it (`subnets`, `SecurityGroups`).
            listed = m is None and strings and singular(leaf.lower()) != leaf.lower() and kind in self.makers
            if m is None and not listed and (parent or not required or kind not in self.makers):
                continue  # a plain parameter counts only when required and named for a type (`Bucket`)
            if parent:  # `Placement.GroupId`: a placement group
                wider = (*name_words(parent), *kind)
                kind = next((wider[i:] for i in range(len(wider) - len(kind)) if wider[i:] in self.makers), kind)
            kind = self._extend(kind, own)
            if kind == made:
                continue  # the name or id of what the tool itself makes
            found.append(Need(parameter, kind, required, by_id=listed or (m is not None and not m.group(2).startswith("Name"))))
        return found

    def _made_near(self, kind: tuple[str, ...], tool: ToolSchemas) -> bool:
        """Whether a tool of `tool`'s own backend is named for making `kind`."""
        return any(maker.backend == tool.backend for maker in self.makers.get(kind, ()))

    def _described(self, description: str, own: tuple[str, ...]) -> tuple[str, ...] | None:
        """The type a parameter's description names as what it identifies: the words before
        "ID"/"ARN" ("a list of subnet IDs") or after "IDs of the"/"ARN of the" ("the ARN of the IAM
        role"), the longest run of them some tool is named for making; the first such, `own` (the
        type the parameter's name gives: "the IDs of the resources") aside."""
        found: list[tuple[int, tuple[str, ...]]] = []
        for pattern, before in ((_NAMED_BEFORE, True), (_NAMED_AFTER, False)):
            for match in pattern.finditer(description):
                words = match.group(1).lower().split()  # "VPCs" is one word here, not "VP Cs"
                # Longest runs first; nearest the "ID" first among equals ("IAM role" → a role).
                runs = sorted((words[i:j] for i in range(len(words)) for j in range(i + 1, len(words) + 1)),
                              key=lambda run: (-len(run), -words.index(run[0]) if before else words.index(run[0])))
                kind = next((k for k in (type_words("-".join(run)) for run in runs) if k in self.makers), None)
                if kind is not None and kind != own:
                    found.append((match.start(), kind))
        return min(found)[1] if found else None

    def required_by(self, kind: tuple[str, ...]) -> int:
        """How many tools take an id of `kind` as a required parameter."""
        if self._required_by is None:
            counts: dict[tuple[str, ...], int] = {}
            for tool in self.tools.values():
                for k in {need.kind for need in self.needs(tool) if need.required}:
                    counts[k] = counts.get(k, 0) + 1
            self._required_by = counts
        return self._required_by.get(kind, 0)

    def made_by(self, tool: ToolSchemas) -> tuple[str, ...] | None:
        """The type `tool` makes, if it is a making tool (`RegisterInstancesWithLoadBalancer` makes
        nothing: what follows its verb is no type's name)."""
        for verb in MAKERS:
            if tool.name.startswith(verb) and tool.name[len(verb):][:1].isupper():
                kind = type_words(tool.name[len(verb):])
                return None if not kind or _LINKING & set(kind) else kind
        return None

    def _extend(self, kind: tuple[str, ...], own: tuple[str, ...]) -> tuple[str, ...]:
        """`kind` as the tool's own name reads it: ("group",) in AuthorizeSecurityGroupIngress is
        ("security", "group"); else `kind` itself, or its tail once a maker of that is known."""
        for end in range(len(own), 0, -1):
            if own[end - 1] == kind[-1] or singular(own[end - 1]) == kind[-1]:
                for start in range(0, end - len(kind) + 1):
                    longer = (*own[start:end - 1], kind[-1])
                    if len(longer) > len(kind) and longer[-len(kind):] == kind and longer in self.makers:
                        return longer
        for start in range(len(kind)):
            if kind[start:] in self.makers:
                return kind[start:]
        return kind

    def producer(self, tool: ToolSchemas, need: Need) -> ToolSchemas | None:
        """Who makes what `need` names: a tool named for making its type (of the tool's own backend
        first: `roleArn` may name a role another service makes), else, for a required or top-level
        id, a making tool of the same backend whose answer carries that very member."""
        candidates = [t for t in self.makers.get(need.kind, ()) if t.key != tool.key]
        if not candidates and need.by_id and (need.required or "." not in need.parameter):
            leaf = need.parameter.rsplit(".", 1)[-1]
            member = leaf[:-1] if leaf.endswith("s") and not leaf.endswith("ss") else leaf
            candidates = [self.tools[key] for key, answer in self.answers.items()
                          if key != tool.key and self.tools[key].backend == tool.backend
                          and (member in answer or leaf in answer)]
        if not candidates:
            return None
        # Of several, the one of the tool's own backend whose made type shares most words with the
        # need's (a transit gateway attachment: CreateTransitGatewayVpcAttachment), then the shortest.
        wanted = set(need.kind)
        candidates.sort(key=lambda t: (t.backend != tool.backend, -len(wanted & set(self.made_by(t) or ())),
                                       len(t.name), t.name))
        return candidates[0]

    def direct(self, tool: ToolSchemas, *, deep: bool = False) -> list[ToolSchemas]:
        """The tool's direct prerequisites, each once: the producer of every required id-like
        parameter, of every optional id (`SubnetId`, not `KeyName`) and of optional names its own
        service makes by that name. `deep` (the tool is itself a prerequisite): optional ids only
        top-level, of types many tools require, and made by a tool named for them."""
        chosen: list[ToolSchemas] = []
        for need in self.needs(tool):
            made = self.producer(tool, need)
            if not need.required and not need.by_id and (
                made is None or made.backend != tool.backend or self.made_by(made) != need.kind or deep
                or "." in need.parameter
            ):
                continue  # an optional name counts only for what the tool's own service makes by that name
            if deep and not need.required and made is not None and (
                "." in need.parameter or self.made_by(made) != need.kind or self.required_by(need.kind) < self.hub
            ):
                continue
            if made is not None and made not in chosen:
                chosen.append(made)
        return chosen


def prerequisite_closures(tools: Sequence[ToolSchemas]) -> dict[Hashable, list[Hashable]]:
    """Every tool's closure of prerequisites (keys), dependencies first; tools with none are left out."""
    catalog = Catalog(tools)
    direct = {tool.key: [t.key for t in catalog.direct(tool)] for tool in tools}
    required = {tool.key: [t.key for t in catalog.direct(tool, deep=True)] for tool in tools}
    closures: dict[Hashable, list[Hashable]] = {}
    for tool in tools:
        # A tool's optional ids are worth knowing about; its prerequisites' optional ids are not
        # (what RunInstances may take is no prerequisite of StopInstances).
        order = _closure(tool.key, {**required, tool.key: direct[tool.key]})
        if order:
            closures[tool.key] = order
    return closures


def _closure(start: Hashable, direct: Mapping[Hashable, Sequence[Hashable]]) -> list[Hashable]:
    """Everything reachable from `start`, each after its own dependencies (depth first, post-order);
    a cycle ends at the first tool met twice."""
    order: list[Hashable] = []
    seen = {start}
    stack: list[tuple[Hashable, int]] = [(start, 0)]
    while stack:
        key, at = stack.pop()
        dependencies = direct.get(key, ())
        if at < len(dependencies):
            stack.append((key, at + 1))
            dependency = dependencies[at]
            if dependency not in seen:
                seen.add(dependency)
                stack.append((dependency, 0))
        elif key != start:
            order.append(key)
    return order
