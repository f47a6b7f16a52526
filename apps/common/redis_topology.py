"""What `REDIS_URL` names: one Redis server, a Redis Cluster, or a master watched by Sentinel
(docs/scale.md). Read by the settings (the channel layer, Celery) and by `apps.common.redis` (the
gateway's own clients), so that one URL configures all of them the same way.

    redis://[user:password@]host:port/db           one server (rediss:// with TLS, unix:// a socket)
    redis+cluster://[user:password@]host:port,host:port,...   a cluster: any of its nodes
    redis+sentinel://[user:password@]host:port,host:port,.../service[/db][?sentinel_password=...]

No Django, no redis-py here: settings import this before either is set up."""

from __future__ import annotations

import dataclasses
from typing import Literal
from urllib.parse import parse_qs, unquote

Kind = Literal["single", "cluster", "sentinel"]

_SCHEMES: dict[str, tuple[Kind, bool]] = {
    "redis+cluster": ("cluster", False), "rediss+cluster": ("cluster", True),
    "redis+sentinel": ("sentinel", False), "rediss+sentinel": ("sentinel", True),
}


class RedisUrlError(ValueError):
    """A Redis URL this deployment cannot use; the message says what is wrong with it."""


@dataclasses.dataclass(frozen=True)
class RedisTopology:
    kind: Kind
    url: str  # as given: what a single server's clients open
    nodes: tuple[tuple[str, int], ...] = ()  # cluster nodes or sentinels
    service: str = ""  # the master's name at the sentinels
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None
    tls: bool = False


def redis_topology(url: str) -> RedisTopology:
    """Raises RedisUrlError for a URL naming no node, a bad port, a cluster with a database number
    (a cluster has only database 0) or a Sentinel URL without the master's name."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise RedisUrlError(f"not a URL: {url!r}")
    if scheme not in _SCHEMES:
        return RedisTopology("single", url)
    kind, tls = _SCHEMES[scheme]
    rest, _, query = rest.partition("?")
    credentials, at, location = rest.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = credentials.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    hosts, _, path = location.partition("/")
    nodes = tuple(_node(part, url) for part in hosts.split(",") if part)
    if not nodes:
        raise RedisUrlError(f"{scheme} URL names no host: {url!r}")
    options = {name: values[-1] for name, values in parse_qs(query).items()}
    parts = [p for p in path.split("/") if p]
    if kind == "cluster":
        if parts and parts != ["0"]:
            raise RedisUrlError(f"a Redis Cluster has only database 0, the URL names /{'/'.join(parts)}: {url!r}")
        return RedisTopology("cluster", url, nodes, username=username, password=password, tls=tls)
    if not parts:
        raise RedisUrlError(f"a Sentinel URL names the master after the hosts (…:26379/mymaster): {url!r}")
    if len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
        raise RedisUrlError(f"a Sentinel URL's path is /service[/db]: {url!r}")
    return RedisTopology(
        "sentinel", url, nodes, service=unquote(parts[0]), db=int(parts[1]) if len(parts) == 2 else 0,
        username=username, password=password, sentinel_password=options.get("sentinel_password"), tls=tls,
    )


def _node(part: str, url: str) -> tuple[str, int]:
    host, colon, port = part.rpartition(":")
    if not colon or not host:
        raise RedisUrlError(f"each host needs its port (host:port): {part!r} in {url!r}")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise RedisUrlError(f"not a port: {port!r} in {url!r}")
    return host.strip("[]"), int(port)


def channel_layer_hosts(url: str, **connection: object) -> list[dict[str, object]]:
    """channels-redis's `hosts` entry for one Redis URL (a single server or a Sentinel master);
    `connection`: keyword arguments for its connections. channels-redis cannot use a Redis Cluster:
    such a URL raises RedisUrlError (give the channel layer servers of its own)."""
    topology = redis_topology(url)
    if topology.kind == "cluster":
        raise RedisUrlError(
            "channels-redis cannot use a Redis Cluster: set GATEWAY_CHANNEL_LAYER_URLS to one or more "
            "single Redis servers or Sentinel masters (docs/scale.md)")
    if topology.kind == "single":
        return [{"address": url, **connection}]
    sentinel_kwargs = {"password": topology.sentinel_password} if topology.sentinel_password else None
    return [{
        "sentinels": list(topology.nodes), "master_name": topology.service, "sentinel_kwargs": sentinel_kwargs,
        "db": topology.db, "username": topology.username, "password": topology.password, "ssl": topology.tls,
        **connection,
    }]


def celery_broker(url: str) -> tuple[str, dict[str, object]]:
    """Celery's broker (and result backend) URL and transport options for one Redis URL: a
    Sentinel master becomes kombu's `sentinel://` list. A Redis Cluster raises RedisUrlError:
    kombu cannot use one (set CELERY_BROKER_URL to a single server or a Sentinel master)."""
    topology = redis_topology(url)
    if topology.kind == "single":
        return url, {}
    if topology.kind == "cluster":
        raise RedisUrlError(
            "Celery cannot use a Redis Cluster as its broker: set CELERY_BROKER_URL and CELERY_RESULT_BACKEND "
            "to a single Redis server or a Sentinel master (docs/scale.md)")
    auth = ""
    if topology.password is not None:
        auth = f"{topology.username or ''}:{topology.password}@"
    scheme = "sentinel"
    urls = ";".join(f"{scheme}://{auth}{host}:{port}/{topology.db}" for host, port in topology.nodes)
    options: dict[str, object] = {"master_name": topology.service}
    if topology.sentinel_password:
        options["sentinel_kwargs"] = {"password": topology.sentinel_password}
    return urls, options
