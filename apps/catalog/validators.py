"""Field rules the models cannot express without a migration, and each entity's one check
(`backend_check`, `virtual_host_check`), shared by the services, the API, the console and the configuration validator."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

from apps.catalog.models import Backend, VirtualHost, tool_name_validator
from apps.common.url_guard import url_address_validate
from apps.kernel.problems import FieldProblem

REPLICA_URL_MAX_LENGTH = 500
#: A day: a call the gateway waits on longer than that is a stream's work, not a call's.
TIMEOUT_MAX_SECONDS = 86_400
#: What the database's positive integer columns hold.
INTEGER_MAX = 2_147_483_647
_HOST_LABELS = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?")


def replica_url_validate(url: str) -> None:
    """Accept an http(s) URL with a host. Unlike Django's URLValidator (what URLField checks) this
    allows single-label host names, because backends are routinely reached as `http://mcp-server:8000`
    inside Docker or Kubernetes networks."""
    message = f"invalid URL {url!r}: use http:// or https:// with a host name or IP address"
    if not isinstance(url, str) or len(url) > REPLICA_URL_MAX_LENGTH or any(ch.isspace() for ch in url):
        raise ValidationError(message)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as error:
        raise ValidationError(message) from error
    host = parts.hostname or ""
    if parts.scheme not in {"http", "https"} or not host:
        raise ValidationError(message)
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if not _HOST_LABELS.fullmatch(host):
            raise ValidationError(message) from None



@dataclass(frozen=True, slots=True)
class BackendFields:
    """A backend's editable attributes, as any face hands them over: the console's form, the API's
    body, a configuration document, a service call. Values are as given (a document may hold a
    string where a number belongs): `backend_check` judges them."""

    kind: object
    transport: object
    urls: Sequence[object]
    timeout_seconds: object
    base_url: object = ""
    tool_name_max_length: object = 64
    max_concurrency: object = None


def backend_check(fields: BackendFields, *, allow_private: bool, resolve: bool = True) -> list[FieldProblem]:
    """What is wrong with `fields`, each with the field it is about; empty when nothing is. The one
    set of backend rules every face applies, with the same words. `resolve`: judge host names by
    the addresses they resolve to now (a document is checked before it is applied: literal
    addresses only)."""
    problems: list[FieldProblem] = []
    if fields.kind not in Backend.Kind.values:
        problems.append(FieldProblem("kind", f"kind must be one of {', '.join(Backend.Kind.values)}"))
    if fields.transport not in Backend.Transport.values:
        problems.append(FieldProblem("transport", f"transport must be one of {', '.join(Backend.Transport.values)}"))
    timeout = fields.timeout_seconds
    # Compared as given: `math.isfinite` of a huge int raises, and an int is finite anyway.
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= TIMEOUT_MAX_SECONDS:
        problems.append(FieldProblem(
            "timeout_seconds", f"timeout_seconds must be a positive number of seconds, at most {TIMEOUT_MAX_SECONDS}"))
    concurrency = fields.max_concurrency
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= INTEGER_MAX
    ):
        problems.append(FieldProblem(
            "max_concurrency",
            f"max_concurrency must be a whole number from 1 to {INTEGER_MAX}; leave it out for the deployment's default"))
    length = fields.tool_name_max_length
    if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= 128:
        problems.append(FieldProblem("tool_name_max_length", "tool_name_max_length must be a whole number from 1 to 128"))
    urls, base_url = list(fields.urls), fields.base_url
    if fields.kind == Backend.Kind.OPENAPI:
        if urls:
            problems.append(FieldProblem("urls", "an OpenAPI backend has no replica URLs; set its base URL"))
        if not isinstance(base_url, str):
            problems.append(FieldProblem("base_url", "base_url must be a URL"))
        elif base_url:
            problems.extend(FieldProblem("base_url", message) for message in _url_problems(base_url, allow_private, resolve))
    elif fields.kind == Backend.Kind.MCP:
        if base_url:
            problems.append(FieldProblem("base_url", "only OpenAPI backends have a base URL (MCP backends list replica URLs)"))
        if not urls:
            problems.append(FieldProblem("urls", "a backend needs at least one replica URL"))
        elif len({repr(url) for url in urls}) != len(urls):
            problems.append(FieldProblem("urls", "replica URLs must be distinct"))
        for url in urls:
            problems.extend(FieldProblem("urls", message) for message in _url_problems(url, allow_private, resolve))
    return problems


def _url_problems(url: object, allow_private: bool, resolve: bool) -> list[str]:
    try:
        replica_url_validate(url)  # type: ignore[arg-type]
        url_address_validate(url, allow_private=allow_private, resolve=resolve)  # type: ignore[arg-type]
    except ValidationError as error:
        return list(error.messages)
    return []


@dataclass(frozen=True, slots=True)
class VirtualHostFields:
    """What a virtual host's rules read of it, as it would be after a change: its mounted map
    keys, its aliases (alias, map key), who may call anonymously (the key given: whether there is
    one, and whether it is of the host's tenant), and its `tool_search`."""

    map_keys: Collection[str] = ()
    aliases: Collection[tuple[str, str]] = ()
    allow_anonymous: bool = False
    anonymous_key: bool = False
    anonymous_key_of_tenant: bool = True
    tool_search: object = "auto"
    tool_search_name: object = "tool_search"


def virtual_host_check(fields: VirtualHostFields) -> list[FieldProblem]:
    """What is wrong with a virtual host as `fields` describe it (empty: nothing): the one set of
    virtual host rules every face applies, with the same words."""
    problems: list[FieldProblem] = []
    modes = VirtualHost.ToolSearch.values
    if fields.tool_search not in modes:
        problems.append(FieldProblem("tool_search", f"tool_search must be one of {', '.join(modes)}"))
    name = fields.tool_search_name
    if not isinstance(name, str) or not tool_name_validator.regex.fullmatch(name):
        problems.append(FieldProblem("tool_search_name", str(tool_name_validator.message)))
    elif fields.tool_search != VirtualHost.ToolSearch.OFF and name in {alias for alias, _ in fields.aliases}:
        problems.append(FieldProblem(
            "tool_search_name", f"{name!r} is an alias of this host; tool_search and an alias cannot share a name"))
    if fields.anonymous_key and not fields.anonymous_key_of_tenant:
        problems.append(FieldProblem("anonymous_key", "the anonymous key must belong to the virtual host's tenant"))
    if fields.allow_anonymous and not fields.anonymous_key:
        problems.append(FieldProblem("anonymous_key", "allowing anonymous callers needs an anonymous key"))
    mounted = set(fields.map_keys)
    for alias, map_key in fields.aliases:
        if map_key not in mounted:
            problems.append(FieldProblem(
                f"tool_aliases.{alias}", f"map key {map_key!r} is not mounted on this virtual host (alias {alias!r} routes to it)"))
    return problems
