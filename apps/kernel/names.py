"""The naming contract of a virtual host: which name or URI the client sees for each backend's tools,
prompts, resources and resource templates, and which backend (map key) and upstream identifier an
incoming name or URI routes to. Operators rely on this contract: **changing a map key changes every
exposed name and URI of that backend**, and changing or adding an alias changes which tool a name reaches.

Rules (docs/virtual-hosts.md, "The naming contract"):

1. **Aliases.** An explicit tool alias is advertised and routed exactly as written (case, dots,
   underscores), on single- and multi-backend hosts alike. An aliased tool is shown *only* under its
   alias(es): its default name (prefixed, or unchanged on a single-backend host) no longer routes. A
   tool with several aliases is listed once per alias. Aliases whose map key is not mounted are ignored.
2. **Single-backend hosts** pass every identifier through unchanged (tools, prompts, resource names,
   URIs and URI templates); only rule 1 applies.
3. **Multi-backend hosts** expose `{map-key}-{name}` for tools, prompts, resource names and resource
   template names. Splitting takes the *longest* mounted map key the name starts with, then requires
   `-` right after it and a non-empty rest: with `gateway` and `gateway-one` mounted,
   `gateway-one-increment` -> (`gateway-one`, `increment`), `gateway-increment` -> (`gateway`,
   `increment`), and `gateway-oneincrement` is rejected (its longest key, `gateway-one`, is not followed
   by `-`). Map keys are matched case-sensitively in names.
4. **Round trip.** A name or URI is advertised only if it routes back to the very item it was made for.
   This settles the ambiguity of rule 3: with keys `a` and `a-b`, tool `b-x` of `a` and tool `x` of
   `a-b` would both be `a-b-x`, which routes to `a-b`; so `a`'s tool `b-x` is *not* advertised
   (reported as dropped; give it an alias to expose it). The same holds for every tool of `a` whose
   name starts with `b` (`a-bx` is rejected by rule 3), and for a default name equal to an alias of
   another tool. The rule depends on configuration only (map keys, aliases), never on what the other
   backends currently list, so a tool never appears or vanishes because another backend changed.
5. **Tool name grammar.** On multi-backend hosts an exposed tool name must match `[A-Za-z0-9_.-]{1,128}`
   (MCP 2025-11-25, SEP-986); tools whose prefixed name would not (too long, `/`, spaces) are dropped,
   and such names do not route. Single-backend hosts do not check: the name is the upstream's own.
   Resource and prompt names have no grammar in the spec and are not checked.
6. **Resource URIs and URI templates** (multi-backend): the URI prefix of a map key goes in front of the
   upstream URI's scheme: `{prefix}-{uri}`, e.g. `demo-file:///x` (scheme `demo-file`), and the same
   for RFC 6570 templates: `demo-users://{id}/profile`. The result is a valid absolute URI because
   `prefix-scheme` is a valid scheme (RFC 3986: `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`), and
   every expansion of an exposed template is an exposed URI that routes back, since the scheme is literal.
   - The prefix is the map key itself when it is a valid scheme start (a letter first, no `_`) and no
     other mounted key equals it ignoring case. Otherwise (digit first, `_`, or keys differing only in
     case, since schemes are case-insensitive and SDKs lower-case them) it is `x+` followed by the key
     with `_` written `++` and each upper-case letter `+` plus its lower-case form: `1demo` ->
     `x+1demo-file:///x`, `my_db` -> `x+my++db-...`, `Demo` beside `demo` -> `x++demo-...` / `x+demo-...`.
     `+` never occurs in a map key, so these never clash with verbatim prefixes.
   - Routing applies rule 3 to the scheme, matching prefixes ignoring case: `demo-x` beside `demo`
     shadows `demo`'s URIs whose scheme starts with `x`.
   - Upstream URIs without a scheme, and templates whose scheme is not literal (`{+url}`), are dropped.
   Resource links inside results are not rewritten here (the gateway's `compose.BackendMessages` does).
   A tool's MCP Apps UI (`io.modelcontextprotocol/ui`), the `ui://` resource its `_meta.ui.resourceUri`
   (or the older flat `_meta["ui/resourceUri"]`, or the OpenAI Apps SDK's `_meta["openai/outputTemplate"]`)
   names, is exposed like any resource URI, so the host can read it back; one that has no exposed form
   is left out of the tool's `_meta`.
7. **Curation** (`apps.kernel.curation`). A tool the host's curation does not serve has no name at
   all: it is not listed, its default name and its aliases do not route, exactly as if the backend
   did not have it. A curated description replaces the backend's in lists. A curated single-backend
   host is composed (its lists are looked into).

Everything is precomputed by `Naming.build` (once per configuration snapshot): routing a name is a
dict lookup, one `str.partition`, a `startswith` per longer map key sharing the name's first `-`
segment and (tools on multi-backend hosts) one regex match. Names the gateway answers itself
(e.g. `tool_search`) are the caller's business and must be handled before these rules.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from apps.kernel.curation import Curation

Target = tuple[str, str]  # (map key, upstream name or URI)

TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_is_tool_name = TOOL_NAME.fullmatch
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")  # a URI (or template) that starts with a literal scheme
_VERBATIM_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9.-]*")
ROUTED_METHODS = frozenset({
    "tools/call", "prompts/get", "resources/read", "resources/subscribe", "resources/unsubscribe",
    "completion/complete",
})


@dataclass(frozen=True, slots=True)
class Dropped:
    """An upstream item left out of a list because it has no exposed name that routes back to it."""

    kind: str  # "tool", "prompt", "resource", "resource template"
    map_key: str
    name: str  # the upstream name, URI or URI template
    reason: str


#: The MCP Apps UI of a tool as hosts before the nested `_meta.ui` read it.
#: `_meta` keys of a tool that name its UI resource by URI, besides `ui.resourceUri`.
_FLAT_UI_KEYS = ("ui/resourceUri", "openai/outputTemplate")


def uri_prefix(map_key: str, case_clash: bool = False) -> str:
    """The URI prefix of a map key (module docstring, rule 6)."""
    if not case_clash and _VERBATIM_PREFIX.fullmatch(map_key):
        return map_key
    escaped = ("++" if ch == "_" else f"+{ch.lower()}" if ch.isupper() else ch for ch in map_key)
    return "x+" + "".join(escaped)


Deeper = tuple[tuple[str, str, str], ...]  # (map key, its prefix, prefix + "-"), longest first


def _deeper(prefixes: Mapping[str, str]) -> dict[str, Deeper]:
    """Prefix -> map key becomes: first `-`-separated segment -> the prefixes holding `-` that start with it.

    A prefix that a name starts with either holds no `-` (then, unless it is that first segment, it is
    followed by something other than `-` and the name is rejected anyway) or shares the name's first
    segment. So routing costs one `partition` plus a `startswith` per longer prefix sharing that segment."""
    found: dict[str, list[tuple[str, str, str]]] = {}
    for prefix, key in prefixes.items():
        if "-" in prefix:
            found.setdefault(prefix.partition("-")[0], []).append((key, prefix, prefix + "-"))
    return {head: tuple(sorted(found[head], key=lambda entry: -len(entry[1]))) for head in found}


@dataclass(frozen=True, slots=True, eq=False, weakref_slot=True)  # compared and hashed by identity
class Naming:
    """The naming contract of one virtual host; build it with `Naming.build`."""

    # Plain dicts, never mutated after `build`: a `MappingProxyType` costs a lookup as much again.
    single_key: str | None  # the map key of a single-backend host
    keys: frozenset[str]
    deeper_keys: dict[str, Deeper]
    alias_routes: dict[str, Target]  # alias -> (map key, upstream name)
    alias_names: dict[Target, tuple[str, ...]]  # (map key, upstream name) -> its aliases, sorted
    uri_prefixes: dict[str, str]  # map key -> URI prefix
    uri_routes: dict[str, str]  # lower-case URI prefix -> map key
    deeper_uri_prefixes: dict[str, Deeper]  # over lower-case URI prefixes
    #: Which tools the host serves and with which description (None: all, as the backends say).
    curation: Curation | None = None
    #: Aliases of tools the curation hides: they name nothing, and never fall through to a default name.
    hidden_aliases: frozenset[str] = frozenset()

    @classmethod
    def build(cls, map_keys: Iterable[str], aliases: Mapping[str, Target], curation: Curation | None = None) -> Naming:
        keys = sorted(set(map_keys))
        mounted = {alias: (key, name) for alias, (key, name) in aliases.items() if key in keys}
        # An alias of a tool the host does not serve names nothing (rule 7).
        routes = {alias: target for alias, target in mounted.items() if curation is None or curation.shows(*target)}
        names: dict[Target, list[str]] = {}
        for alias, target in sorted(routes.items()):
            names.setdefault(target, []).append(alias)
        lowered = Counter(key.lower() for key in keys)
        prefixes = {key: uri_prefix(key, lowered[key.lower()] > 1) for key in keys}
        uri_routes = {prefix.lower(): key for key, prefix in prefixes.items()}
        return cls(
            single_key=keys[0] if len(keys) == 1 else None,
            keys=frozenset(keys),
            deeper_keys=_deeper({key: key for key in keys}),
            alias_routes=routes,
            alias_names={target: tuple(found) for target, found in names.items()},
            uri_prefixes=prefixes,
            uri_routes=uri_routes,
            deeper_uri_prefixes=_deeper(uri_routes),
            curation=curation,
            hidden_aliases=frozenset(mounted.keys() - routes.keys()),
        )

    @property
    def composed(self) -> bool:
        """Whether any identifier is rewritten or any tool hidden or redescribed (several backends, an
        alias of a mounted backend, or a curation)."""
        return self.single_key is None or bool(self.alias_routes) or self.curation is not None

    # --- names -----------------------------------------------------------------------------------

    def _split(self, exposed: str) -> Target | None:
        if self.single_key is not None:
            return (self.single_key, exposed)
        head, _, rest = exposed.partition("-")
        for key, _, dashed in self.deeper_keys.get(head, ()):  # longer keys that start with `head-`
            if exposed.startswith(key):  # the longest key the name starts with: `-` must follow
                rest = exposed[len(dashed) :]
                return (key, rest) if rest and exposed.startswith(dashed) else None
        return (head, rest) if rest and head in self.keys else None

    def _default_name(self, map_key: str, name: str) -> str:
        return name if self.single_key is not None else f"{map_key}-{name}"

    def route_tool(self, exposed: str) -> Target | None:
        """(map key, upstream tool name) for an exposed tool name; None when it names no tool."""
        target = self.alias_routes.get(exposed)
        if target is not None:
            return target
        if self.hidden_aliases and exposed in self.hidden_aliases:
            return None
        if self.single_key is not None:
            target = (self.single_key, exposed)
        elif _is_tool_name(exposed) is None:
            return None
        else:  # `_split`, inlined: this is the hot path of every `tools/call`
            head, _, rest = exposed.partition("-")
            for key, _, dashed in self.deeper_keys.get(head, ()):
                if exposed.startswith(key):
                    if not exposed.startswith(dashed):
                        return None
                    head, rest = key, exposed[len(dashed) :]
                    break
            else:
                if head not in self.keys:
                    return None
            if not rest:
                return None
            target = (head, rest)
        # An aliased tool answers to its aliases only.
        if self.alias_names and target in self.alias_names:
            return None
        return None if self.curation is not None and not self.curation.shows(*target) else target

    def tool_names(self, map_key: str, name: str) -> tuple[str, ...]:
        """Every name the tool is listed under: its aliases, else its default name if that routes back."""
        aliased = self.alias_names.get((map_key, name))
        if aliased is not None:
            return aliased
        exposed = self._default_name(map_key, name)
        return (exposed,) if map_key in self.keys and self.route_tool(exposed) == (map_key, name) else ()

    def tool_names_all(self, map_key: str, names: Sequence[str]) -> list[tuple[str, ...]]:
        """`tool_names` of each of one backend's tools `names`, in order, worked out in bulk for a
        whole listing: the route back (rules 3–4) is decided once for the map key, not per name."""
        dashed = f"{map_key}-"
        if map_key not in self.keys:
            return [self.tool_names(map_key, name) for name in names]
        # A longer key `{map_key}-{tail}` may take the names that start with its tail: those are named one by one.
        tails = () if self.single_key is not None else tuple(
            key[len(dashed):] for key, _, _ in self.deeper_keys.get(map_key.partition("-")[0], ()) if key.startswith(dashed))
        shown = self.curation.shown(map_key) if self.curation is not None else None
        aliases, routes, hidden = self.alias_names, self.alias_routes, self.hidden_aliases
        prefix, checked = ("", False) if self.single_key is not None else (dashed, True)
        found: list[tuple[str, ...]] = []
        for name in names:
            aliased = aliases.get((map_key, name)) if aliases else None
            if aliased is not None:
                found.append(aliased)
                continue
            if tails and name.startswith(tails):
                found.append(self.tool_names(map_key, name))
                continue
            exposed = prefix + name
            if (exposed in routes or exposed in hidden or checked and (not name or _is_tool_name(exposed) is None)
                    or shown is not None and not shown(name)):
                found.append(())
            else:
                found.append((exposed,))
        return found

    def serves_tool(self, map_key: str, name: str) -> bool:
        """Whether the host's curation lets the tool be served at all (rule 7)."""
        return self.curation is None or self.curation.shows(map_key, name)

    def expose_tool(self, map_key: str, name: str) -> str | None:
        """The name a tool is shown under (its first alias when it has several); None when it is not shown."""
        names = self.tool_names(map_key, name)
        return names[0] if names else None

    def route_prompt(self, exposed: str) -> Target | None:
        return self._split(exposed)

    def expose_prompt(self, map_key: str, name: str) -> str | None:
        exposed = self._default_name(map_key, name)
        return exposed if map_key in self.keys and self._split(exposed) == (map_key, name) else None

    def expose_resource_name(self, map_key: str, name: str) -> str:
        """A resource's or template's `name`: a label, never routed (the URI is), so no round-trip check."""
        return self._default_name(map_key, name)

    # --- URIs ------------------------------------------------------------------------------------

    def route_uri(self, exposed: str) -> Target | None:
        """(map key, upstream URI) for an exposed resource URI; also takes exposed URI templates
        (`completion/complete` names a template by its exposed text)."""
        if self.single_key is not None:
            return (self.single_key, exposed)
        # Prefixes hold no `:`, so a match is always inside the scheme; the rest must keep a scheme.
        head, _, rest = exposed.partition("-")
        head = head.lower()
        for key, prefix, dashed in self.deeper_uri_prefixes.get(head, ()):
            start = exposed[: len(dashed)].lower()
            if start.startswith(prefix):
                rest = exposed[len(dashed) :]
                return (key, rest) if start == dashed and rest.find(":") > 0 else None
        key = self.uri_routes.get(head)
        return (key, rest) if key is not None and rest.find(":") > 0 else None

    def expose_uri(self, map_key: str, uri: str) -> str | None:
        """The exposed form of an upstream resource URI; None when it has none (no scheme, or shadowed)."""
        if self.single_key is not None:
            return uri if map_key == self.single_key else None
        prefix = self.uri_prefixes.get(map_key)
        if prefix is None or not _SCHEME.match(uri):
            return None
        exposed = f"{prefix}-{uri}"
        return exposed if self.route_uri(exposed) == (map_key, uri) else None

    def expose_uri_template(self, map_key: str, template: str) -> str | None:
        """The exposed form of an RFC 6570 URI template. Its scheme must be literal, so every expansion
        has the scheme checked here and routes back to the upstream expansion."""
        return self.expose_uri(map_key, template)

    # --- messages --------------------------------------------------------------------------------

    def route_ref(self, ref: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """The map key and upstream form of a `completion/complete` ref (`ref/prompt` or `ref/resource`)."""
        kind = ref.get("type")
        field, route = ("name", self.route_prompt) if kind == "ref/prompt" else ("uri", self.route_uri)
        value = ref.get(field)
        if kind not in ("ref/prompt", "ref/resource") or not isinstance(value, str):
            return None
        target = route(value)
        return None if target is None else (target[0], {**ref, field: target[1]})

    def route_request(self, method: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """The map key and upstream params of a routed request (`ROUTED_METHODS`); None when the
        identifier names nothing (answer -32602) or the method is not routed by identifier."""
        if method == "completion/complete":
            ref = params.get("ref")
            routed = self.route_ref(ref) if isinstance(ref, Mapping) else None
            return None if routed is None else (routed[0], {**params, "ref": routed[1]})
        if method == "tools/call":
            field, route = "name", self.route_tool
        elif method == "prompts/get":
            field, route = "name", self.route_prompt
        elif method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
            field, route = "uri", self.route_uri
        else:
            return None
        value = params.get(field)
        target = route(value) if isinstance(value, str) else None
        return None if target is None else (target[0], {**params, field: target[1]})

    def expose_notification(self, map_key: str, method: str, params: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """Params of a backend notification as the client must see them; None to drop it (its URI was
        never shown). Notifications without identifiers come back unchanged."""
        if method != "notifications/resources/updated":
            return params
        uri = params.get("uri")
        exposed = self.expose_uri(map_key, uri) if isinstance(uri, str) else None
        if exposed is None:
            return None
        return params if exposed == uri else {**params, "uri": exposed}

    # --- list results ----------------------------------------------------------------------------
    # Each takes one backend's items and returns the exposed items plus what was dropped. Inputs are
    # never mutated; an item whose identifiers do not change is returned as the same object.

    def expose_tools(self, map_key: str, tools: Sequence[Mapping[str, Any]]) -> tuple[list[Any], list[Dropped]]:
        shown: list[Any] = []
        dropped: list[Dropped] = []
        curation = self.curation
        for tool in tools:
            name = tool.get("name")
            names = self.tool_names(map_key, name) if isinstance(name, str) else ()
            if not names:
                if curation is None or not isinstance(name, str) or curation.shows(map_key, name):
                    dropped.append(Dropped("tool", map_key, str(name), self._refusal(map_key, name, tool=True)))
                continue  # (a tool the host does not serve is not "dropped": it was left out on purpose)
            if self.single_key is None and isinstance(meta := tool.get("_meta"), Mapping):
                tool = self._expose_ui(map_key, tool, meta)
            if curation is not None and (described := curation.description(map_key, name)) is not None:
                tool = {**tool, "description": described}
            shown.extend(tool if exposed == name else {**tool, "name": exposed} for exposed in names)
        return shown, dropped

    def _expose_ui(self, map_key: str, tool: Mapping[str, Any], meta: Mapping[str, Any]) -> Mapping[str, Any]:
        """The tool with the URI of its MCP Apps UI in `_meta` exposed (see the module's rule 6)."""
        changed = dict(meta)
        ui = meta.get("ui")
        if isinstance(ui, Mapping) and isinstance(uri := ui.get("resourceUri"), str):
            exposed = self.expose_uri(map_key, uri)
            changed["ui"] = {**ui, "resourceUri": exposed} if exposed else {k: v for k, v in ui.items() if k != "resourceUri"}
        for key in _FLAT_UI_KEYS:
            if isinstance(flat := meta.get(key), str):
                exposed = self.expose_uri(map_key, flat)
                if exposed:
                    changed[key] = exposed
                else:
                    del changed[key]
        return tool if changed == meta else {**tool, "_meta": changed}

    def expose_prompts(self, map_key: str, prompts: Sequence[Mapping[str, Any]]) -> tuple[list[Any], list[Dropped]]:
        shown: list[Any] = []
        dropped: list[Dropped] = []
        for prompt in prompts:
            name = prompt.get("name")
            exposed = self.expose_prompt(map_key, name) if isinstance(name, str) else None
            if exposed is None:
                dropped.append(Dropped("prompt", map_key, str(name), self._refusal(map_key, name, tool=False)))
            else:
                shown.append(prompt if exposed == name else {**prompt, "name": exposed})
        return shown, dropped

    def expose_resources(self, map_key: str, resources: Sequence[Mapping[str, Any]]) -> tuple[list[Any], list[Dropped]]:
        return self._expose_uris(map_key, resources, "uri", "resource")

    def expose_resource_templates(
        self, map_key: str, templates: Sequence[Mapping[str, Any]]
    ) -> tuple[list[Any], list[Dropped]]:
        return self._expose_uris(map_key, templates, "uriTemplate", "resource template")

    def _expose_uris(
        self, map_key: str, items: Sequence[Mapping[str, Any]], field: str, kind: str
    ) -> tuple[list[Any], list[Dropped]]:
        shown: list[Any] = []
        dropped: list[Dropped] = []
        for item in items:
            uri = item.get(field)
            exposed = self.expose_uri(map_key, uri) if isinstance(uri, str) else None
            if exposed is None:
                dropped.append(Dropped(kind, map_key, str(uri), self._uri_refusal(map_key, uri)))
                continue
            name = item.get("name")
            label = self.expose_resource_name(map_key, name) if isinstance(name, str) else name
            shown.append(item if exposed == uri and label == name else {**item, field: exposed, "name": label})
        return shown, dropped

    # Reasons are worked out only for dropped items, off the hot path.

    def _refusal(self, map_key: str, name: object, *, tool: bool) -> str:
        if not isinstance(name, str):
            return "no name"
        if map_key not in self.keys:
            return f"map key {map_key!r} is not mounted"
        exposed = self._default_name(map_key, name)
        if tool and self.single_key is None and not TOOL_NAME.fullmatch(exposed):
            return f"{exposed!r} is not a valid MCP tool name ([A-Za-z0-9_.-]{{1,128}})"
        if tool and (exposed in self.alias_routes or exposed in self.hidden_aliases):
            return f"{exposed!r} is an alias of another tool"
        routed = self._split(exposed)
        return f"{exposed!r} routes to map key {routed[0]!r}" if routed else f"{exposed!r} does not route"

    def _uri_refusal(self, map_key: str, uri: object) -> str:
        if not isinstance(uri, str):
            return "no URI"
        if map_key not in self.keys:
            return f"map key {map_key!r} is not mounted"
        if not _SCHEME.match(uri):
            return "not an absolute URI with a literal scheme"
        routed = self.route_uri(f"{self.uri_prefixes[map_key]}-{uri}")
        return f"its exposed URI routes to map key {routed[0]!r}" if routed else "its exposed URI does not route"
