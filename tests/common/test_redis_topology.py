"""Reading REDIS_URL: one server, a cluster or a Sentinel master, and what the channel layer and
Celery are given for each; URLs that cannot work are refused with the reason."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from apps.common.redis_topology import RedisUrlError, celery_broker, channel_layer_hosts, redis_topology
from tests.processes import ROOT


def test_a_plain_url_is_one_server_as_given() -> None:
    for url in ("redis://127.0.0.1:6390/3", "rediss://:pw@cache:6380/0", "unix:///run/redis.sock?db=2"):
        assert redis_topology(url).kind == "single" and redis_topology(url).url == url
    assert channel_layer_hosts("redis://h:1/2", socket_timeout=None) == [{"address": "redis://h:1/2", "socket_timeout": None}]
    assert celery_broker("redis://h:1/2") == ("redis://h:1/2", {})


def test_a_cluster_url_names_its_nodes_and_credentials() -> None:
    topology = redis_topology("rediss+cluster://app:s%40cret@10.0.0.1:7000,10.0.0.2:7001,[::1]:7002/")
    assert topology.kind == "cluster" and topology.tls
    assert topology.nodes == (("10.0.0.1", 7000), ("10.0.0.2", 7001), ("::1", 7002))
    assert (topology.username, topology.password) == ("app", "s@cret")


def test_a_sentinel_url_names_the_master_and_the_database() -> None:
    topology = redis_topology("redis+sentinel://:pw@s1:26379,s2:26379/gateway/4?sentinel_password=sp")
    assert (topology.kind, topology.service, topology.db) == ("sentinel", "gateway", 4)
    assert topology.nodes == (("s1", 26379), ("s2", 26379))
    assert (topology.password, topology.sentinel_password) == ("pw", "sp")
    [host] = channel_layer_hosts(topology.url, socket_keepalive=True)
    assert host["sentinels"] == [("s1", 26379), ("s2", 26379)] and host["master_name"] == "gateway"
    assert host["db"] == 4 and host["password"] == "pw" and host["sentinel_kwargs"] == {"password": "sp"}
    assert host["socket_keepalive"] is True
    broker, options = celery_broker(topology.url)
    assert broker == "sentinel://:pw@s1:26379/4;sentinel://:pw@s2:26379/4"
    assert options == {"master_name": "gateway", "sentinel_kwargs": {"password": "sp"}}


@pytest.mark.parametrize(("url", "reason"), [
    ("redis+cluster://", "names no host"),
    ("redis+cluster://h1", "needs its port"),
    ("redis+cluster://h1:99999", "not a port"),
    ("redis+cluster://h1:7000/2", "only database 0"),
    ("redis+sentinel://s1:26379", "names the master"),
    ("redis+sentinel://s1:26379/gateway/x", "/service[/db]"),
    ("127.0.0.1:6379", "not a URL"),
])
def test_urls_that_cannot_work_are_refused_with_the_reason(url: str, reason: str) -> None:
    with pytest.raises(RedisUrlError, match=reason.replace("[", r"\[").replace("]", r"\]")):
        redis_topology(url)


def test_the_channel_layer_and_celery_refuse_a_cluster_and_say_what_to_set() -> None:
    url = "redis+cluster://h1:7000,h2:7000"
    with pytest.raises(RedisUrlError, match="GATEWAY_CHANNEL_LAYER_URLS"):
        channel_layer_hosts(url)
    with pytest.raises(RedisUrlError, match="CELERY_BROKER_URL"):
        celery_broker(url)


@pytest.mark.parametrize(("env", "reason"), [
    ({"REDIS_URL": "redis+cluster://h1:7000/3"}, "only database 0"),
    ({"REDIS_URL": "redis+cluster://h1:7000"}, "GATEWAY_CHANNEL_LAYER_URLS"),
    ({"REDIS_URL": "redis+cluster://h1:7000", "GATEWAY_CHANNEL_LAYER_URLS": "redis://h2:6379/0"}, "CELERY_BROKER_URL"),
])
def test_a_deployment_whose_redis_cannot_work_does_not_start(env: dict[str, str], reason: str) -> None:
    started = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "gatewaysite.settings.dev", **env}, timeout=60,
    )
    assert started.returncode != 0 and reason in started.stderr


def test_a_cluster_with_its_channel_layer_and_broker_elsewhere_starts() -> None:
    env = {"REDIS_URL": "redis+cluster://h1:7000,h2:7000", "GATEWAY_CHANNEL_LAYER_URLS": "redis://h3:6379/0",
           "CELERY_BROKER_URL": "redis+sentinel://s1:26379,s2:26379/gateway/1"}
    started = subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); from django.conf import settings; "
         "print(settings.CELERY_BROKER_URL, settings.CELERY_BROKER_TRANSPORT_OPTIONS)"],
        capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "gatewaysite.settings.dev", **env}, timeout=60,
    )
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == "sentinel://s1:26379/1;sentinel://s2:26379/1 {'master_name': 'gateway'}"
