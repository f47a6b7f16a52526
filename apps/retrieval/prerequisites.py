"""Prerequisite chains (docs/tool-search.md, "Prerequisite chains"). Pure: no I/O, no Django.

A tool that acts on a resource needs that resource's id: `AuthorizeSecurityGroupIngress` takes a
`GroupId`, which `CreateSecurityGroup` produces, which in turn wants a `VpcId` from `CreateVpc`. An
agent that finds `AuthorizeSecurityGroupIngress` should be told about the others too — and, since
the resource usually exists already, of the read-only tool that finds one (`DescribeSecurityGroups`).

The chain is derived from the catalog alone, and follows only the ids a tool cannot work without:
- a parameter is id-like when its name ends in Id, Arn, Name or Identifier (singular or plural,
  camel or snake case), or names a resource type outright (`Bucket`, `Subnets`), or is a plain string
  the schema requires whose description opens on one ("The name of S3 bucket …": `destination`); an
  id ending in OwnerId or AccountId is an account's, never made here; the resource type
  is the rest of the name, read with the words of the tool's own name when they extend it
  (`GroupId` of `AuthorizeSecurityGroupIngress` is a security group's id), else with leading words
  dropped until a type is known (`executionRoleArn`: a role). A bare `name`, `Id` or `Arn` the schema
  requires names what its description says it identifies ("the name or the CloudTrail ARN of the
  trail" of StartLogging), else, of a tool that makes nothing, what the tool acts on (`name` of eks
  `DescribeCluster`: a cluster; the longest start of the tool's type its backend makes). The name or
  id of what a tool makes, down to its type's last words, is no prerequisite (`PolicyName` of
  PutRolePolicy); a required ARN never is what the tool makes, since the service assigns ARNs
  (`TransitGatewayArn` of RegisterTransitGateway, `VpcArn` of CreateVpcAttachment);
- where the name gives no type a tool of the same backend makes (`VPCZoneIdentifier`,
  `DeliverLogsPermissionArn`, `Targets.Id`), the parameter's description may: the first made type
  it names as identified ("a comma-separated list of subnet IDs", "the ARN of the IAM role", "the ARN
  for the log group", "the name of the S3 bucket"; a type named before an ARN is the one it
  identifies: "the subnet ARN of the VPC attachment");
- an id-like parameter is essential when the schema requires it; or, of a tool that does not only
  read (Describe, List, Get), when its description says it must be given of this parameter ("This
  parameter is required if …", "You must specify …"; not "The service-linked role is required
  if …"), a plain name too ("A task definition must be specified if …"), when it names the very
  type the tool acts on (the `GroupId` of `AuthorizeSecurityGroupIngress`), or when it is one id of
  a type its own backend makes and many tools require (`HUB_MIN_REQUIRED`: where a resource is
  placed, a VPC, a subnet);
  or, as a member of an object the schema requires though it requires none of its members, when it
  is an id of a type the making tools of many backends require (`PLACED_BY`: `resourcesVpcConfig.
  subnetIds` of eks CreateCluster, a subnet; not its security groups). Of optional ids whose
  descriptions say they exclude another ("you cannot specify …", "but not both"), the one whose type
  shares a word with the tool's name is essential and the others are not (`VpnGatewayId` of
  CreateVpnConnection, not its `TransitGatewayId`). Filters, lists of optional ids, optional names
  and pagination tokens never are;
- the tools that make a type are the ones named for making it (Create, Allocate, Run, Register,
  Request, Import, Publish + the type: `RunInstances` makes instances; not one handed a list of
  what it makes, `CreateTags` takes `Tags`), and, for an id no such
  name explains, the making tools whose response carries a member of that very name
  (`AllocateAddress` answers with an `AllocationId`), else the tools of the same backend named for
  no making that answer with it, are not handed it and require no id of what they act on
  (`Subscribe` answers with a `SubscriptionArn`; not UpdateResource), else, for an essential id, the
  making tool of the same backend that requires it and nothing the tool does not: it registered it
  under the same keys (RegisterScalableTarget for PutScalingPolicy's `ResourceId`); one producer
  per parameter: of the tool's
  own backend first, then of any other. Put and Start + a type (WEAK_MAKERS) make it only for their
  own backend, where no tool of it is named for making it, and when they require no list
  (PutRule, StartExecution, ebs StartSnapshot; not StartInstances beside RunInstances, nor PutEvents
  handed `Entries`): after their backend's named makers, before another backend's (PutTargets'
  `Rule` is an EventBridge rule, not a load balancer's);
- a tool of another backend makes (and finds) it only when the parameter's name spells all of its
  type and ends in Id, Arn, Name or Identifier or is a plural list (`roleArn`, `subnets`; not
  `LogicalResourceId`, a resource only once a word is dropped), when the description names that
  type as identified ("the ARN of the Pod execution role"), or, for a plain name (`Bucket`), when
  tools of SHARED_BY backends that do not make its type require it: `Device` of `AttachVolume` is
  a device name, not the device another service registers. Never when tools of most backends (at
  least GENERIC_BY) require the type without making it: each `TagResource`'s `ResourceArn` is its
  own service's, no REST API resource;
- the lookup of an id is the read-only tool of its type (Describe, then List, then Get + the
  type, or + what its producer makes), of the tool's own backend first, then of the producer's;
- a tool's closure is every producer reachable from it over essential ids, dependencies first;
  an id the schema does not require is not followed to a producer that needs the tool itself
  first (`RunInstances`' `ImageId`: `CreateImage` wants an instance); other cycles end where they
  close (a tool is never its own prerequisite)."""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from apps.retrieval.text import identifier_words, name_words, singular, type_words

MAKERS = ("create", "allocate", "run", "register", "request", "import", "publish")
#: Verbs that make their type only where their backend has no tool named for making it (PutRule,
#: StartExecution, StartSnapshot): elsewhere they write or start what exists (StartInstances).
WEAK_MAKERS = ("put", "start")
#: Tools that only read: what they take is what to look at, never what must exist first.
READERS = ("describe", "list", "get")
_SUFFIX = re.compile(r"^(.*?)(Ids?|IDs?|Arns?|ARNs?|Names?|Identifiers?)$")
_SNAKE_SUFFIX = re.compile(r"^(.+?)[_-](ids?|arns?|names?|identifiers?)$")
_ARN = re.compile(r"(?:Arns?|ARNs?|[_-]arns?)$")
#: Parameters that look like ids but name no resource anyone must make first.
GENERIC = frozenset({
    "clienttoken", "nexttoken", "dryrun", "requestid", "regionid", "zoneid",
    "availabilityzoneid", "resourcegroupid", "name", "id", "arn", "identifier",
    "type",  # the kind of something (`Type` of CreateVpnConnection: "ipsec.1"), not a resource
})
#: Endings of an account's id, whatever it is the account of (`EC2SecurityGroupOwnerId`).
_ACCOUNT = ("ownerid", "accountid")
_MAX_DEPTH = 5
#: An optional id is essential when its type is made by the tool's own backend and this many tools
#: of the catalog require it (`cloud3k`: a VPC 43, a subnet 27), or one tool in HUB_SHARE of a
#: smaller catalog (at least 2).
HUB_MIN_REQUIRED = 20
HUB_SHARE = 200
#: A plain name is read as another service's type only when tools of this many backends that do not
#: make it require it: one such service alone more likely means something else by the word.
SHARED_BY = 2
#: A type the making tools of this many backends require is where things are placed or who runs
#: them (`cloud3k`: a subnet 9 backends, a role 7; a bucket or a "service" 4, an image 1): a
#: required object that requires none of its members still needs such an id of it.
PLACED_BY = 5
#: A type tools of most backends, and at least this many, require without making it is no other
#: service's at all: a word each service uses for its own things.
GENERIC_BY = 3
#: What a parameter's description says it identifies: "<words> ID(s)/ARN(s)", "ID(s)/ARN(s) of (or for) the
#: <words>", "the name of the <words>" (not "the logical name of the resource": a template's).
_NAMED_BEFORE = re.compile(r"((?:[A-Za-z][\w-]* ){1,3})(?:IDs?|ARNs?)\b")
_NAMED_AFTER = re.compile(r"(?:\b(?:IDs?|ARNs?)\)?|\b[Tt]he names?) (?:of|for) (?:the |an? )?((?:[A-Za-z][\w-]*\s?){1,3})")
#: A description saying its parameter must be given, perhaps only in some cases ("This parameter is
#: required if the destination type is …"); a sentence that opens on another choice ("If you specify
#: a network interface, you must specify …") says it of something else.
_STATED = re.compile(
    r"^required\b|\b(?:this(?: parameter| field| value)?|it) is required\b"
    r"|\bmust (?:be specified|specify (?:this|either|the|a|an)\b)", re.IGNORECASE)
#: A description saying its parameter excludes another.
_EXCLUSIVE = re.compile(r"\b(?:cannot|can't|can not) (?:also )?specify\b|\bbut not both\b", re.IGNORECASE)
#: A bare name or id: of a tool that makes nothing, it names what the tool acts on.
_BARE = frozenset({"name", "id", "arn", "identifier"})
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
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
    """One id-like parameter of a tool: where it is, the type it names, whether the tool cannot work
    without it."""

    parameter: str
    kind: tuple[str, ...]
    required: bool  # by the schema
    essential: bool
    by_id: bool  # named ...Id or ...Arn (not ...Name, and not the type's bare name)
    #: Whether a tool of another backend may make it (and find it): see the module's docstring.
    foreign: bool = False


@dataclass(frozen=True, slots=True)
class ToolNeed:
    """An essential id of a tool: the tool that makes one and the read-only tool that finds one
    (keys; None when the catalog has none)."""

    parameter: str
    producer: Hashable | None
    lookup: Hashable | None


@dataclass(frozen=True, slots=True)
class Chain:
    closure: tuple[Hashable, ...]  # dependencies first
    needs: tuple[ToolNeed, ...]  # in the schema's order


@dataclass(frozen=True, slots=True)
class _Parameter:
    name: str  # dotted for a member of an object parameter: `Targets.Id`
    required: bool  # by the schema, at every level
    stated: bool  # required, or said to be by the descriptions, at every level
    single: bool  # holds one value, not a list
    text: bool  # a string
    strings: bool  # a list of strings
    description: str
    #: A member of an object the schema requires though it requires none of its members: the object
    #: must hold something, the schema does not say what (`resourcesVpcConfig.subnetIds`).
    loose: bool = False


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


def _parameters(schema: Mapping[str, Any]) -> Iterable[_Parameter]:
    """Top-level parameters and, one level down, members of object parameters (`Targets.Id`)."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return
    required = set(schema.get("required") or ())
    for name, sub in properties.items():
        top = _Parameter(name, name in required, name in required or _says_required(_description(sub)),
                         _single(sub), _text(sub), _strings(sub), _description(sub))
        yield top
        inner = _object_of(sub)
        if inner is not None:
            inner_required = set(inner.get("required") or ())
            for member, member_schema in (inner.get("properties") or {}).items():
                description = _description(member_schema)
                yield _Parameter(f"{name}.{member}", top.required and member in inner_required,
                                 top.stated and (member in inner_required or _says_required(description)),
                                 top.single and _single(member_schema), _text(member_schema), _strings(member_schema),
                                 description, top.required and not inner_required)


def _says_required(description: str) -> bool:
    return any(_STATED.search(sentence) for sentence in _SENTENCE.split(description)
               if not sentence.lower().startswith("if "))


def _description(schema: Any) -> str:
    return str(schema.get("description") or "") if isinstance(schema, Mapping) else ""


def _single(schema: Any) -> bool:
    return not (isinstance(schema, Mapping) and schema.get("type") == "array")


def _text(schema: Any) -> bool:
    return isinstance(schema, Mapping) and schema.get("type") == "string"


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


def _verb_and_type(name: str) -> tuple[str, tuple[str, ...]]:
    """A tool name's verb and the type that follows it: `RunInstances`, `create_issue` → ("run",
    ("instance",)), ("create", ("issue",)); the type is empty when a linking word joins two names."""
    words = identifier_words(name)
    if len(words) < 2:
        return (words[0].lower() if words else ""), ()
    kind = type_words("_".join(words[1:]))
    return words[0].lower(), () if _LINKING & set(kind) else kind


def _given_many(schema: Mapping[str, Any], kind: tuple[str, ...]) -> bool:
    """Whether a making tool is handed a list of what it makes (`CreateTags` takes `Tags`,
    `RegisterTargets` `Targets`): it records values the caller holds, no resource another tool
    refers to by an id it hands back."""
    properties = schema.get("properties")
    return isinstance(properties, Mapping) and any(
        type_words(name) == kind and _listed(sub) for name, sub in properties.items())


def _records(schema: Mapping[str, Any]) -> bool:
    """Whether a tool requires a list (PutEvents' `Entries`, PutTargets' `Targets`): a weak maker
    handed one writes records, no resource of its own."""
    properties = schema.get("properties")
    return isinstance(properties, Mapping) and any(
        _listed(properties.get(name)) for name in schema.get("required") or ())


def _listed(schema: Any) -> bool:
    """Whether a schema is an array, perhaps wrapped (`{"allOf": [{"type": "array", ...}]}`)."""
    return isinstance(schema, Mapping) and (schema.get("type") == "array" or any(
        _listed(sub) for key in ("allOf", "anyOf", "oneOf") for sub in schema.get(key) or ()))


def _id_name(leaf: str) -> tuple[str, bool] | None:
    """The part of an id-like name before its suffix, and whether the suffix says id (not name):
    `SubnetId` → ("Subnet", True), `repo_name` → ("repo", False); None for other names."""
    m = _SUFFIX.match(leaf) or _SNAKE_SUFFIX.match(leaf)
    if m is None:
        return None
    return m.group(1), not m.group(2).lower().startswith("name")


class Catalog:
    """The tools of one tenant, indexed for deriving prerequisites."""

    def __init__(self, tools: Sequence[ToolSchemas]) -> None:
        self.tools = {tool.key: tool for tool in tools}
        self.makers: dict[tuple[str, ...], list[ToolSchemas]] = {}
        self.weak_makers: dict[tuple[str, ...], list[ToolSchemas]] = {}
        self.readers: dict[tuple[str, ...], list[ToolSchemas]] = {}
        self.answers: dict[Hashable, frozenset[str]] = {}  # maker's key -> member names of its answer
        #: The same of the tools that neither make nor only read (`Subscribe`, `AssociateRouteTable`).
        self.other_answers: dict[Hashable, frozenset[str]] = {}
        self._required_by: dict[tuple[str, ...], int] | None = None
        self._required_in: dict[tuple[str, ...], set[Hashable]] = {}  # kind -> backends requiring it
        self._placed_in: dict[tuple[str, ...], set[Hashable]] = {}  # kind -> backends whose makers require it
        self._needs: dict[Hashable, list[Need]] = {}
        self._makers_in: dict[Hashable, list[ToolSchemas]] | None = None
        self._read_cache: dict[Hashable, list[tuple[Need, _Parameter]]] = {}
        self.hub = max(2, min(HUB_MIN_REQUIRED, len(self.tools) // HUB_SHARE))
        self.backends = {tool.backend for tool in tools}
        for tool in tools:
            verb, kind = _verb_and_type(tool.name)
            if kind and verb in MAKERS and not _given_many(tool.input_schema, kind):
                self.makers.setdefault(kind, []).append(tool)
                self.answers[tool.key] = frozenset(_members(tool.output_schema))
            elif kind and verb in WEAK_MAKERS and not _records(tool.input_schema):
                self.weak_makers.setdefault(kind, []).append(tool)
            elif kind and verb in READERS:
                self.readers.setdefault(kind, []).append(tool)
            if verb not in READERS and tool.key not in self.answers:
                self.other_answers[tool.key] = frozenset(_members(tool.output_schema))

    def needs(self, tool: ToolSchemas) -> list[Need]:
        """The tool's id-like parameters with the types they name (worked out once per tool)."""
        found = self._needs.get(tool.key)
        if found is None:
            reads = _verb_and_type(tool.name)[0] in READERS
            found = self._needs[tool.key] = [
                replace(need, essential=self._essential(tool, p, need, reads),
                        foreign=(need.foreign or self._plain_shared(p, need.kind)) and not self._generic(need.kind))
                for need, p in self._read(tool)]
            if not reads:
                found = self._needs[tool.key] = self._one_of(tool, found)
        return found

    def _one_of(self, tool: ToolSchemas, needs: list[Need]) -> list[Need]:
        """Of optional ids that exclude each other ("If you specify a virtual private gateway, you cannot
        specify a transit gateway"), the one whose type shares a word with the tool's own name is
        essential and the others are not (`VpnGatewayId` of CreateVpnConnection); with no such one,
        or several, they stay as they are."""
        own = {singular(word) for word in name_words(tool.name)[1:]}
        group = [i for i, (need, p) in enumerate(self._read(tool))
                 if not p.required and p.single and "." not in p.name and need.by_id and _EXCLUSIVE.search(p.description)]
        chosen = [i for i in group if own & set(needs[i].kind)]
        if len(chosen) != 1:
            return needs
        return [replace(need, essential=i == chosen[0]) if i in group else need for i, need in enumerate(needs)]

    def _read(self, tool: ToolSchemas) -> list[tuple[Need, _Parameter]]:
        """The tool's id-like parameters, read as needs (none essential yet), each with its parameter."""
        found = self._read_cache.get(tool.key)
        if found is None:
            found = self._read_cache[tool.key] = list(self._read_needs(tool))
        return found

    def _read_needs(self, tool: ToolSchemas) -> Iterable[tuple[Need, _Parameter]]:
        own = name_words(tool.name)
        made = self.made_by(tool) or self._weakly_made_by(tool)
        for p in _parameters(tool.input_schema):
            parent, _, leaf = p.name.rpartition(".")
            id_name = _id_name(leaf)
            plain = leaf.lower().replace("_", "").replace("-", "")
            if plain.endswith(_ACCOUNT):
                continue  # an account (`EC2SecurityGroupOwnerId`), which no tool here makes
            if plain in GENERIC:
                # `Targets.Id` says nothing of its type; its description may ("specify an instance ID").
                described = self._described(p.description, type_words(parent)) if parent and id_name else None
                if described is None and not parent and p.required and leaf.lower() in _BARE:
                    # "the name or the CloudTrail ARN of the trail" (`Name` of StartLogging): not what it makes.
                    described = self._described(p.description, ())
                    if described is not None and made is not None and made[len(made) - len(described):] == described:
                        described = None
                if described is not None:
                    yield Need(p.name, described, p.required, False, leaf.lower() != "name", True), p
                elif not parent and p.required and made is None and leaf.lower() in _BARE:
                    # The `name` of eks `DescribeCluster` is the cluster's: what the tool's own name is for.
                    acted = self._acted_on(tool)
                    if acted is not None:
                        yield Need(p.name, acted, True, False, id_name is not None and id_name[1]), p
                continue
            base = id_name[0] if id_name else leaf
            kind = named = type_words(base)
            if not kind:
                continue
            if id_name and not self._made_near(kind, tool):
                # `VPCZoneIdentifier`, `DeliverLogsPermissionArn`, `ResourceIds`: the name gives no
                # type made here; the description may name one ("a list of subnet IDs").
                described = self._described(p.description, kind)
                if described is not None and (kind not in self.makers or self._made_near(described, tool)):
                    kind = described
            # A list of strings named for a type in the plural holds ids of it (`subnets`, `SecurityGroups`).
            listed = id_name is None and p.strings and singular(leaf.lower()) != leaf.lower() and kind in self.makers
            if id_name is None and not listed and not parent and p.stated and p.text and kind not in self.makers:
                kind = self._opened_on(p.description) or kind  # `destination`: "The name of S3 bucket for …"
            if id_name is None and not listed and (parent or not p.stated or kind not in self.makers
                                                   or not p.text):
                # A plain parameter counts only when required (or said to be: "A task definition must be
                # specified if …"), a string, named for a type (`Bucket`).
                continue
            if parent:  # `Placement.GroupId`: a placement group
                wider = (*name_words(parent), *kind)
                kind = next((wider[i:] for i in range(len(wider) - len(kind)) if wider[i:] in self.makers), kind)
            kind = self._extend(kind, own)
            # The service assigns an ARN, no caller picks one: an ARN names what exists already, never
            # what the tool makes (`VpcArn` of CreateVpcAttachment, `TransitGatewayArn` of RegisterTransitGateway).
            arn = p.required and _ARN.search(leaf) is not None
            if not self._made_near(kind, tool):
                longer = self._extend_right(kind, own, tool)
                kind = kind if arn and longer == made else longer
            if made is not None and made[len(made) - len(kind):] == kind and not arn:
                continue  # the name or id of what the tool itself makes (`PolicyName` of PutRolePolicy)
            # Another service makes it only when the name spells all of its type (`roleArn`; not
            # `LogicalResourceId`: a resource) or the description names the type as identified.
            foreign = ((id_name is not None or listed) and set(named) <= set(kind)) \
                or any(k == kind for _, k in self._identified(p.description))
            yield Need(p.name, kind, p.required, False, listed or (id_name is not None and id_name[1]), foreign), p

    def _essential(self, tool: ToolSchemas, p: _Parameter, need: Need, reads: bool) -> bool:
        """Whether the tool cannot work without the parameter (see the module's docstring)."""
        kind = need.kind
        if p.required or reads:
            return p.required
        if p.stated:
            return True
        acted_on = tuple(singular(word) for word in name_words(tool.name)[1:])
        if any(acted_on[i:i + len(kind)] == kind for i in range(len(acted_on) - len(kind) + 1)):
            return True
        if p.loose and need.by_id and not self._generic(kind) and self.placed_by(kind) >= PLACED_BY:
            return True
        return need.by_id and p.single and "." not in p.name and self._made_near(kind, tool) \
            and self.required_by(kind) >= self.hub

    def _acted_on(self, tool: ToolSchemas) -> tuple[str, ...] | None:
        """The type the tool's name says it acts on, when its own backend makes that: the longest
        start of what follows the verb (`UpdateClusterConfig`: a cluster)."""
        kind = _verb_and_type(tool.name)[1]
        return next((kind[:end] for end in range(len(kind), 0, -1)
                     if self._made_near(kind[:end], tool) or self._weakly_made_near(kind[:end], tool)), None)

    def makers_of(self, backend: Hashable) -> list[ToolSchemas]:
        """The tools of `backend` named for making something."""
        if self._makers_in is None:
            self._makers_in = {}
            for made in self.makers.values():
                for t in made:
                    self._makers_in.setdefault(t.backend, []).append(t)
        return self._makers_in.get(backend, [])

    def _changes(self, tool: ToolSchemas) -> bool:
        """Whether the tool requires an id of the type its name says it acts on (UpdateResource)."""
        acted = self._acted_on(tool)
        return acted is not None and any(need.required and need.kind == acted for need, _ in self._read(tool))

    def _weakly_made_near(self, kind: tuple[str, ...], tool: ToolSchemas) -> bool:
        """Whether a weak maker of `tool`'s own backend makes `kind` (none is named for making it)."""
        return not self._made_near(kind, tool) and any(t.backend == tool.backend for t in self.weak_makers.get(kind, ()))

    def _weakly_made_by(self, tool: ToolSchemas) -> tuple[str, ...] | None:
        """The type a weak maker makes: PutRolePolicy a role policy, StartSnapshot (ebs) a snapshot; not
        StartInstances, whose backend has RunInstances."""
        verb, kind = _verb_and_type(tool.name)
        return kind if verb in WEAK_MAKERS and kind and not self._made_near(kind, tool) else None

    def _made_near(self, kind: tuple[str, ...], tool: ToolSchemas) -> bool:
        """Whether a tool of `tool`'s own backend is named for making `kind`."""
        return any(maker.backend == tool.backend for maker in self.makers.get(kind, ()))

    def _described(self, description: str, own: tuple[str, ...]) -> tuple[str, ...] | None:
        """The type a parameter's description names as what it identifies: the words before
        "ID"/"ARN" ("a list of subnet IDs") or after "IDs of the"/"ARN of the" ("the ARN of the IAM
        role"), the longest run of them some tool is named for making; the first such, `own` (the
        type the parameter's name gives: "the IDs of the resources") aside."""
        found = [(at, kind) for at, kind in self._identified(description) if kind != own]
        return min(found)[1] if found else None

    def _opened_on(self, description: str) -> tuple[str, ...] | None:
        """The made type a description opens by naming as identified ("The name of the S3 bucket …")."""
        found = self._identified(description)
        if not found:
            return None
        at, kind = min(found)
        return kind if set(description[:at].lower().split()) <= {"the", "a", "an", "specifies"} else None

    def _identified(self, description: str) -> list[tuple[int, tuple[str, ...]]]:
        """Every made type the description names as identified, with where (see `_described`)."""
        found: list[tuple[int, tuple[str, ...]]] = []
        named_before: set[int] = set()  # where the "ID"/"ARN" of each type named before one starts
        for pattern, before in ((_NAMED_BEFORE, True), (_NAMED_AFTER, False)):
            for match in pattern.finditer(description):
                if not before and match.start() in named_before:
                    continue  # "the subnet ARN of the VPC attachment" identifies a subnet
                words = match.group(1).lower().split()  # "VPCs" is one word here, not "VP Cs"
                # Longest runs first; nearest the "ID" first among equals ("IAM role" → a role).
                runs = sorted((words[i:j] for i in range(len(words)) for j in range(i + 1, len(words) + 1)),
                              key=lambda run: (-len(run), -words.index(run[0]) if before else words.index(run[0])))
                kind = next((k for k in (type_words("-".join(run)) for run in runs) if k in self.makers), None)
                if kind is not None:
                    found.append((match.start(), kind))
                    if before:
                        named_before.add(match.end(1))
        return found

    def required_by(self, kind: tuple[str, ...]) -> int:
        """How many tools take an id of `kind` as a parameter their schema requires."""
        if self._required_by is None:
            counts: dict[tuple[str, ...], int] = {}
            for tool in self.tools.values():
                makes = self.made_by(tool) is not None
                for k in {need.kind for need, _ in self._read(tool) if need.required}:
                    counts[k] = counts.get(k, 0) + 1
                    self._required_in.setdefault(k, set()).add(tool.backend)
                    if makes:
                        self._placed_in.setdefault(k, set()).add(tool.backend)
            self._required_by = counts
        return self._required_by.get(kind, 0)

    def placed_by(self, kind: tuple[str, ...]) -> int:
        """How many backends have a making tool whose schema requires an id of `kind`."""
        self.required_by(kind)
        return len(self._placed_in.get(kind, ()))

    def _plain_shared(self, p: _Parameter, kind: tuple[str, ...]) -> bool:
        """Whether a plain name (`Bucket`, not `BucketArn`) is of a type services share: tools of
        SHARED_BY backends that do not make it require it (a bucket, a role; not `Device` of
        AttachVolume, a device name only one service's tools take)."""
        if _id_name(p.name.rpartition(".")[2]) is not None:
            return False
        return len(self._required_elsewhere(kind)) >= SHARED_BY

    def _generic(self, kind: tuple[str, ...]) -> bool:
        """Whether tools of most backends (at least GENERIC_BY) require `kind` without making it: a
        word every service uses for its own things (the `ResourceArn` of each `TagResource`), no
        type one other service makes."""
        elsewhere = len(self._required_elsewhere(kind))
        return elsewhere >= GENERIC_BY and 2 * elsewhere > len(self.backends)

    def _required_elsewhere(self, kind: tuple[str, ...]) -> set[Hashable]:
        """The backends whose tools require an id of `kind` and that make none."""
        self.required_by(kind)
        return self._required_in.get(kind, set()) - {maker.backend for maker in self.makers.get(kind, ())}

    def made_by(self, tool: ToolSchemas) -> tuple[str, ...] | None:
        """The type `tool` makes, if it is a making tool (`RegisterInstancesWithLoadBalancer` makes
        nothing: what follows its verb is no type's name)."""
        verb, kind = _verb_and_type(tool.name)
        return kind if verb in MAKERS and kind else None

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

    def _extend_right(self, kind: tuple[str, ...], own: tuple[str, ...], tool: ToolSchemas) -> tuple[str, ...]:
        """`kind` with the words that follow it in the tool's own name, when its own backend makes
        that and not `kind`: `KeyName` of `CreateKeyPair` names a key pair, not a key of another
        service."""
        words = tuple(singular(word) for word in own)
        for start in range(len(words) - len(kind)):
            if words[start:start + len(kind)] == kind:
                for end in range(len(words), start + len(kind), -1):
                    longer = (*own[start:end - 1], words[end - 1])
                    if self._made_near(longer, tool):
                        return longer
        return kind

    def producer(self, tool: ToolSchemas, need: Need) -> ToolSchemas | None:
        """Who makes what `need` names: a tool named for making its type (of the tool's own backend
        first: `roleArn` may name a role another service makes), else, for a top-level or essential
        id, a making tool of the same backend whose answer carries that very member. A weak maker of the
        type (PutRule, StartExecution) comes after its own backend's named makers, before another's."""
        named = [t for t in self.makers.get(need.kind, ()) if t.key != tool.key]
        candidates = [t for t in named if t.backend == tool.backend] \
            or [t for t in self.weak_makers.get(need.kind, ()) if t.key != tool.key and t.backend == tool.backend] \
            or [t for t in named if need.foreign]
        if not candidates and need.by_id and (need.essential or "." not in need.parameter):
            leaf = need.parameter.rsplit(".", 1)[-1]
            member = leaf[:-1] if leaf.endswith("s") and not leaf.endswith("ss") else leaf
            candidates = [self.tools[key] for key, answer in self.answers.items()
                          if key != tool.key and self.tools[key].backend == tool.backend
                          and (member in answer or leaf in answer)]
            # Else a tool named for no making that answers with it, is not handed it and changes nothing
            # that exists (`Subscribe` answers with the `SubscriptionArn` SetSubscriptionAttributes takes;
            # UpdateResource, handed a resource, answers with its `parentId`).
            candidates = candidates or [
                self.tools[key] for key, answer in self.other_answers.items()
                if key != tool.key and self.tools[key].backend == tool.backend and (member in answer or leaf in answer)
                and not {member, leaf} & set(self.tools[key].input_schema.get("properties") or {})
                and not self._changes(self.tools[key])]
        if not candidates and need.essential:
            # Else the making tool of the same backend that registered it under the same keys: it
            # requires this parameter and nothing the tool does not (RegisterScalableTarget takes the
            # `ResourceId`, `ServiceNamespace` and `ScalableDimension` PutScalingPolicy requires).
            required = set(tool.input_schema.get("required") or ())
            candidates = [t for t in self.makers_of(tool.backend) if t.key != tool.key
                          and need.parameter in set(t.input_schema.get("required") or ()) <= required]
        if not candidates:
            return None
        # Of several, the one of the tool's own backend whose made type shares most words with the
        # need's (a transit gateway attachment: CreateTransitGatewayVpcAttachment), then the shortest.
        wanted = set(need.kind)
        candidates.sort(key=lambda t: (t.backend != tool.backend, -len(wanted & set(self.made_by(t) or ())),
                                       len(t.name), t.name))
        return candidates[0]

    def lookup(self, tool: ToolSchemas, need: Need, producer: ToolSchemas | None) -> ToolSchemas | None:
        """The read-only tool that finds an existing resource of the need's type (or of what its
        producer makes: `AllocationId` → the addresses `AllocateAddress` makes): of the tool's own
        backend first, then of the producer's; Describe, then List, then Get; the shortest name."""
        made = self.made_by(producer) if producer is not None else None
        for kind in (need.kind, made):
            readers = [t for t in self.readers.get(kind or (), ()) if need.foreign or t.backend == tool.backend
                       or (producer is not None and t.backend == producer.backend)]
            if readers:
                return min(readers, key=lambda t: (t.backend != tool.backend, producer is None or t.backend != producer.backend,
                                                   READERS.index(_verb_and_type(t.name)[0]), len(t.name), t.name))
        return None

    def chain_needs(self, tool: ToolSchemas) -> list[tuple[Need, ToolSchemas | None]]:
        """The tool's essential needs, each with its producer (None when no tool makes it)."""
        return [(need, self.producer(tool, need)) for need in self.needs(tool) if need.essential]


def prerequisite_chains(tools: Sequence[ToolSchemas]) -> dict[Hashable, Chain]:
    """Every tool's chain: its closure of prerequisites (keys, dependencies first) and its essential
    ids with their producers and lookups; tools with neither are left out."""
    catalog = Catalog(tools)
    needs = {tool.key: catalog.chain_needs(tool) for tool in tools}
    every = {key: list(dict.fromkeys(made.key for _, made in found if made is not None)) for key, found in needs.items()}
    # A need the schema does not require whose maker needs the tool itself first (RunInstances may
    # take an ImageId; CreateImage wants an instance) is met by what exists already: the first
    # instance runs from an image nobody here made. The required half of such a cycle stays.
    reach: dict[Hashable, set[Hashable]] = {}

    def reached(key: Hashable) -> set[Hashable]:
        if key not in reach:
            reach[key] = set(_closure(key, every))
        return reach[key]

    direct = {key: list(dict.fromkeys(made.key for need, made in found if made is not None and (
        need.required or key not in reached(made.key)))) for key, found in needs.items()}
    chains: dict[Hashable, Chain] = {}
    for tool in tools:
        found = tuple(ToolNeed(need.parameter, made.key if made is not None else None,
                               _key(catalog.lookup(tool, need, made))) for need, made in needs[tool.key])
        closure = _closure(tool.key, direct)
        if closure or found:
            chains[tool.key] = Chain(tuple(closure), found)
    return chains


def _key(tool: ToolSchemas | None) -> Hashable | None:
    return tool.key if tool is not None else None


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
