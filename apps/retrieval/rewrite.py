"""Rewriting identifier queries (docs/tool-search.md, "Ids in queries"). Pure: no I/O, no Django.

An agent often knows only an id: "is i-070a5bbc7e7f40dc5 up", "rtb-3d560345 routes". Neither an
embedding model nor full-text search knows that `rtb-` is a route table. Catalogs rarely spell their
id formats out, but they do name their resource types everywhere — in operation names
(`DescribeRouteTables`), in parameter names (`RouteTableId`), in ARN-shaped parameters — and an id
prefix abbreviates one of them: the type's name (`vpc-`, `subnet-`), a prefix of it (`vol-`,
`snap-`), its initials (`sg-`, `lt-`), or letters of each word in order (`rtb-` Route TaBle, `igw-`
Internet GateWay). Some abbreviate a longer name the documentation uses: an acronym it introduces
("Amazon Machine Image (AMI)") or the type's words with an adjective it often carries ("elastic
network interface": `eni-`).

`Vocabulary.build` extracts the resource types of a catalog (with how often its tools take their
ids, and the tools that describe them: `Describe|Get|List<Type>`) and those longer names; `rewrite`
finds id-like tokens and ARNs in a query and names their types. Nothing here knows any particular
prefix, service or query."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, lru_cache

from apps.retrieval.text import identifier_words, singular, type_words

# An id: a short lower-case head, '-', then letters and digits with at least one digit
# (`sg-0123abcd`, `vpc-1a2b3c4d`, `eipalloc-64d5890a`), not a plain hyphenated word (`t3-micro` passes,
# and finds nothing).
_ID = re.compile(r"^([a-z][a-z0-9]{0,15})-([a-z0-9]{4,})$")
_ARN = re.compile(r"^arn:[a-z0-9-]+:([a-z0-9-]+):[a-z0-9-]*:[0-9]*:(\S+)$")
_ID_PARAMETER = re.compile(r"^(.+?)(?:Ids?|IDs?|Arns?|ARNs?)$")
_NAMING_PARAMETER = re.compile(r"^(.+?)(?:Ids?|IDs?|Arns?|ARNs?|Names?|Urls?|URLs?|Identifiers?)$")
_DESCRIBER = re.compile(r"^(Describe|Get|List)([A-Z][A-Za-z0-9]*)$")
_ACRONYM = re.compile(r"((?:[A-Z][a-z]+ ){1,4}[A-Za-z]+) \(([A-Z]{2,6})s?\)")
_STOPWORDS = frozenset(
    "a an the and or of to in on for by with from your its is are be this that these those which each "
    "specified one more new all any other only see as at if".split()
)
#: Words of a query that say nothing about what to do with an id ("what is", "details", "?").
_WEAK_WORDS_MAX = 3

_SKIP = 1.0  # a word of the type the prefix does not abbreviate
_GAPS = 0.5  # a segment that skips letters inside its word (`tb` of `table`)
_TRAIL = 0.5  # an unmatched word at the end (`nat` of NatGateway)
_LONGER_NAME = 0.3  # the prefix abbreviates a longer name from the documentation
_FAMILIAR = 0.1  # per doubling of how many parameters take the type's ids
_NO_IDS = 0.5  # no parameter takes the type's ids: an id is unlikely to be one of them
MAX_COST = 1.6
_NEARLY = 0.25  # readings this close to the best are kept beside it


@dataclass(frozen=True, slots=True)
class ToolFacts:
    """What the vocabulary reads of one tool: its key (anything hashable, e.g. (backend id, name)),
    name, parameter names and description, and the service it belongs to (its backend's name)."""

    key: Hashable
    name: str
    parameters: Sequence[str]
    description: str
    service: str = ""
    service_title: str = ""  # its API's title ("Elastic Load Balancing"), which ARNs may name it by


@dataclass
class ResourceType:
    name: str  # as the catalog writes it: "RouteTable"
    words: tuple[str, ...]  # lower case: ("route", "table")
    weight: int = 0  # how many parameters of the catalog take its id
    describers: list[tuple[int, Hashable]] = field(default_factory=list)  # (preference, tool key)
    longer: set[tuple[str, ...]] = field(default_factory=set)  # longer names: ("elastic", "network", "interface")

    def tools(self) -> list[Hashable]:
        return [key for _, key in sorted(self.describers, key=lambda d: (d[0], str(d[1])))]


@dataclass(frozen=True, slots=True)
class Match:
    token: str
    type: str
    cost: float
    tools: tuple[Hashable, ...]


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A query with each id it holds replaced by the words of its type; `matches` say which; `weak`:
    the query says little else, so the tools describing those types are what it asks for."""

    text: str
    matches: tuple[Match, ...]
    weak: bool


class Vocabulary:
    def __init__(
        self,
        types: dict[tuple[str, ...], ResourceType],
        services: Mapping[str, frozenset[Hashable]],
        namespaces: Mapping[str, tuple[str, ...]] | None = None,
        main: Mapping[str, ResourceType] | None = None,
    ) -> None:
        self.types = types
        self.services = services  # service name -> keys of its tools
        # What ARNs may call a service (`elasticloadbalancing`: elbv2), and
        # the type an ARN of it means when it spells none (`arn:aws:sns:…:alerts`: a topic).
        self.namespaces = {**(namespaces or {}), **{service: (service,) for service in services}}
        self.main = dict(main or {})
        self._by_letter: dict[str, list[ResourceType]] = defaultdict(list)
        self._squashed: dict[str, list[ResourceType]] = defaultdict(list)  # ARNs write `targetgroup`, `webacl`
        for words, rtype in types.items():  # a prefix starts with the first letter of one of a name's words
            for letter in {word[0] for name in (rtype.words, *rtype.longer) for word in name}:
                self._by_letter[letter].append(rtype)
            self._squashed["".join(words)].append(rtype)

    @classmethod
    def build(cls, tools: Iterable[ToolFacts]) -> Vocabulary:
        types: dict[tuple[str, ...], ResourceType] = {}

        def of(name: str) -> ResourceType | None:
            words = type_words(name)
            if not words or not words[0][:1].isalpha():
                return None
            found = types.get(words)
            if found is None:
                found = types[words] = ResourceType("".join(w.capitalize() for w in words), words)
            return found

        tools = list(tools)
        for tool in tools:
            for parameter in tool.parameters:
                m = _ID_PARAMETER.match(parameter)
                if m and (rtype := of(m.group(1))) is not None:
                    rtype.weight += 1
            m = _DESCRIBER.match(tool.name)
            if m and (rtype := of(m.group(2))) is not None:
                plural = identifier_words(m.group(2))[-1].lower() != rtype.words[-1]
                # For an id: Describe<Type(s)> takes ids, Get<Type> takes one, List<Types> lists all.
                preference = {"Describe": 0, "Get": 3 if plural else 1, "List": 2}[m.group(1)]
                rtype.describers.append((preference, tool.key))
        types = {words: rtype for words, rtype in types.items() if rtype.describers}
        _add_longer_names(types, [tool.description for tool in tools])
        services: dict[str, set[Hashable]] = defaultdict(set)
        for tool in tools:
            if tool.service:
                services[tool.service].add(tool.key)
        return cls(types, {service: frozenset(keys) for service, keys in services.items()},
                   _namespaces(tools), _main_types(types, tools))

    def match(self, prefix: str) -> list[Match]:
        """The resource types `prefix` may abbreviate, best first (lowest cost, then the type whose
        ids the catalog takes most often)."""
        found = []
        for rtype in {id(t): t for t in self._by_letter.get(prefix[:1], ())}.values():
            cost = min(
                [_cost(prefix, rtype.words)] + [_cost(prefix, longer) + _LONGER_NAME for longer in rtype.longer]
            )
            if cost <= MAX_COST:
                # A type whose ids the catalog takes often is the likelier reading of a short prefix.
                familiar = _FAMILIAR * math.log2(1 + rtype.weight) if rtype.weight else -_NO_IDS
                found.append((round(cost - familiar, 6), -rtype.weight, rtype.name, rtype))
        found.sort(key=lambda f: f[:3])
        return [Match(prefix, rtype.name, score, tuple(rtype.tools())) for score, _, _, rtype in found]

    def rewrite(self, query: str) -> Rewrite | None:
        """None when the query holds no id or ARN this catalog's types explain."""
        words = query.split()
        out, matches, rest = [], [], []
        changed = False
        for word in words:
            token = word.strip("?!.,;:()'\"")
            services, readings = self._located(token)
            if services:
                # An ARN names its service: its words say where to look, its tools come first.
                keys = frozenset().union(*(self.services[service] for service in services))
                readings = [replace(r, tools=_service_first(r.tools, keys)) for r in readings]
                out.append(" ".join([*services, *(identifier_words(readings[0].type) if readings else ())]))
                matches.extend(readings)
                changed = True
                continue
            readings = readings or self._explain(token)
            if not readings:
                out.append(word)
                if token.lower() not in _STOPWORDS and token:
                    rest.append(token)
                continue
            matches.extend(readings)
            out.append(" ".join(identifier_words(readings[0].type)))
        if not matches and not changed:
            return None
        return Rewrite(" ".join(out), tuple(matches), weak=len(rest) <= _WEAK_WORDS_MAX)

    def _located(self, token: str) -> tuple[tuple[str, ...], list[Match]]:
        """What an ARN says: the services of this catalog it names (none: it is no ARN, or names
        none of them), and the resource type. An ARN spells its type in the resource part
        (`function:name`, `db-instance:name`, `loadbalancer/app/name/id`, `regional/webacl/name/id`:
        the first part naming a type some tool of its service describes, as written or run
        together; a bucket's object path names none); one whose resource is a bare name
        (`arn:aws:sns:…:alerts`) means its service's main type, if it has one. (Endpoint URLs are
        not read: a host's labels are anybody's words, `api.github.com` no backend called `api`.)"""
        arn = _ARN.match(token)
        if arn is None:
            return (), []
        services = self.namespaces.get(arn.group(1), ())
        of_services = frozenset().union(*(self.services[service] for service in services))
        parts = re.split(r"[/:]", arn.group(2))
        for part in parts[:-1]:
            words = type_words(part)
            named = [rtype for rtype in (self.types.get(words), *self._squashed.get("".join(words), ()))
                     if rtype is not None and (not services or of_services.intersection(rtype.tools()))]
            if named:  # of a known service, only its own types: `my-logs/snapshots/x` is no EC2 snapshot
                rtype = min(named, key=lambda t: (-t.weight, t.name))
                return services, [Match(token, rtype.name, 0.0, tuple(rtype.tools()))]
        if len(parts) > 1 or not services:
            return services, []
        mains = [self.main[service] for service in services if service in self.main]
        return services, [Match(token, main.name, _LONGER_NAME, tuple(main.tools())) for main in mains[:1]]

    def _explain(self, token: str) -> list[Match]:
        """The readings of one id token: the best, and those nearly as good (`acl-` may be a network
        ACL or a web ACL), at most three."""
        m = _ID.match(token)
        if m is None or not any(c.isdigit() for c in m.group(2)):
            return []
        readings = self.match(m.group(1))
        if not readings:
            return []
        best = readings[0].cost
        return [Match(token, r.type, r.cost, r.tools) for r in readings[:3] if r.cost <= best + _NEARLY]


def _service_first(tools: tuple[Hashable, ...], of_service: frozenset[Hashable]) -> tuple[Hashable, ...]:
    return tuple(sorted(tools, key=lambda key: key not in of_service))


def _namespaces(tools: Sequence[ToolFacts]) -> dict[str, tuple[str, ...]]:
    """The names ARNs may give services besides their own: an API's title run
    together, whole and without each leading word ("Amazon Elastic File System":
    `amazonelasticfilesystem`, `elasticfilesystem`), as long as two words are left; a name the
    titles of several services give (`elasticloadbalancing`) is theirs together."""
    claims: dict[str, set[str]] = defaultdict(set)
    for tool in tools:
        words = [w.lower() for w in _WORD.findall(tool.service_title)] if tool.service else []
        for start in range(max(0, len(words) - 1)):
            claims["".join(words[start:])].add(tool.service)
    return {name: tuple(sorted(owners)) for name, owners in claims.items()}


def _main_types(types: Mapping[tuple[str, ...], ResourceType], tools: Sequence[ToolFacts]) -> dict[str, ResourceType]:
    """Each service's main type: of the types some tool of the service describes and some of its
    parameters name (by id, ARN, name or URL: `TopicArn`, `QueueUrl`, `TableName`), the one they
    name most, then the one with the most describing tools. A service whose parameters name no
    described type has none."""
    taken: Counter[tuple[str, tuple[str, ...]]] = Counter()
    of_service: dict[Hashable, str] = {tool.key: tool.service for tool in tools if tool.service}
    for tool in tools:
        for parameter in tool.parameters:
            m = _NAMING_PARAMETER.match(parameter)
            if m and tool.service:
                taken[(tool.service, type_words(m.group(1)))] += 1
    described: Counter[tuple[str, tuple[str, ...]]] = Counter()
    for words, rtype in types.items():
        for _, key in rtype.describers:
            if key in of_service:
                described[(of_service[key], words)] += 1
    best: dict[str, tuple[tuple[int, int, int, str], ResourceType]] = {}
    for (service, words), count in described.items():
        if not taken[(service, words)]:
            continue
        rank = (-taken[(service, words)], -count, len(words), types[words].name)
        if service not in best or rank < best[service][0]:
            best[service] = (rank, types[words])
    return {service: rtype for service, (_, rtype) in best.items()}


def _add_longer_names(types: dict[tuple[str, ...], ResourceType], descriptions: Sequence[str]) -> None:
    """Acronyms the documentation introduces for a type ("Amazon Machine Image (AMI)" names Image),
    and the type's words with an adjective they carry at least three times ("elastic network
    interface")."""
    for description in descriptions:
        for phrase, _acronym in _ACRONYM.findall(description):
            words = tuple(singular(w.lower()) for w in phrase.split())
            for n in range(1, len(words)):
                rtype = types.get(words[n:])
                if rtype is not None:
                    rtype.longer.add(words)
                    break
    before: Counter[tuple[tuple[str, ...], str]] = Counter()
    for adjective, words in _adjectives(" ".join(descriptions).lower(), [words for words in types if len(words) > 1]):
        if adjective not in _STOPWORDS:
            before[(words, adjective)] += 1
    for (words, adjective), count in before.items():
        if count >= 3:
            types[words].longer.add((adjective, *words))


_WORD = re.compile(r"\w+")
_LOWER = re.compile(r"[a-z]+")


def _adjectives(text: str, names: Sequence[tuple[str, ...]]) -> Iterable[tuple[str, tuple[str, ...]]]:
    """Each word of `text` that is lower-case letters alone and is followed, one space apart, by one
    of `names` (its last word perhaps plural: +s, +es), with that name: the longest name first,
    scanning on after it. A word-by-word lookup: one regular expression alternating thousands of
    names took 12 s over the AWS catalog's descriptions."""
    if not names:
        return
    known = set(names)
    starts = {name[:size] for name in names for size in range(1, len(name))}  # what a longer name starts with
    tokens = [(m.group(), m.start(), m.end()) for m in _WORD.finditer(text)]
    at = 0
    while at < len(tokens):
        word, _, end = tokens[at]
        found = None
        if _LOWER.fullmatch(word):
            run: list[str] = []
            for nxt in range(at + 1, len(tokens)):
                if tokens[nxt][1] != end + 1 or text[end] != " ":
                    break
                run.append(tokens[nxt][0])
                end = tokens[nxt][2]
                if tuple(run) not in starts:  # it may end a name; no longer one goes on from here
                    break
            for size in range(len(run), 1, -1):
                head, last = tuple(run[:size - 1]), run[size - 1]
                for stem in (last, last[:-1] if last.endswith("s") else None, last[:-2] if last.endswith("es") else None):
                    if stem and (*head, stem) in known:
                        found = (size, (*head, stem))
                        break
                if found:
                    break
        if found is None:
            at += 1
            continue
        yield word, found[1]
        at += 1 + found[0]


@lru_cache(maxsize=65536)
def _cost(prefix: str, words: tuple[str, ...]) -> float:
    """How badly `prefix` abbreviates the name made of `words`: each piece of the prefix, in
    order, is letters of one word (its first letter first); skipped words and skipped letters cost."""

    if len(words) > 1 and prefix == words[-1]:
        return 0.3 * (len(words) - 1)  # the type's head noun itself (`acl` of NetworkAcl)

    @cache
    def best(i: int, j: int) -> float:
        if i == len(prefix):
            return (len(words) - j) * _TRAIL
        if j == len(words):
            return float("inf")
        cheapest = _SKIP + best(i, j + 1)
        word = words[j]
        if prefix[i] != word[0]:
            return cheapest
        at = 1  # letters of `word` used so far (its first)
        gaps = False
        for end in range(i + 1, len(prefix) + 1):
            cheapest = min(cheapest, (_GAPS if gaps else 0.0) + best(end, j + 1))
            if end == len(prefix):
                break
            found = word.find(prefix[end], at)
            if found < 0:
                break
            gaps = gaps or found != at
            at = found + 1
        return cheapest

    return best(0, 0)
