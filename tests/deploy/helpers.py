"""What the deployment tests read: `docker compose config` of docker/compose.yml, the stages of
docker/Dockerfile, and docker/nginx.conf made runnable on loopback."""

from __future__ import annotations

import getpass
import grp
import json
import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.processes import ROOT

DOCKER_DIR = ROOT / "docker"
COMPOSE_FILE = DOCKER_DIR / "compose.yml"
DOCKERFILE = DOCKER_DIR / "Dockerfile"
NGINX_CONF = DOCKER_DIR / "nginx.conf"
MISSING_COMPOSE = "`docker compose` is not available: scripts/install-compose.sh installs the CLI plugin"

#: The variables docker/compose.yml refuses to start without, with values a production settings
#: module accepts (long random secret, explicit host names).
REQUIRED = {
    "GATEWAY_SECRET_KEY": secrets.token_urlsafe(48),
    "POSTGRES_PASSWORD": secrets.token_hex(24),
    "REDIS_PASSWORD": secrets.token_hex(24),
    "GATEWAY_ALLOWED_HOSTS": "mcp.example.com,localhost",
}


def docker_binary() -> str | None:
    """The docker CLI: on PATH, or where scripts/install-compose.sh puts it for a non-root user."""
    found = shutil.which("docker")
    local = Path.home() / ".local" / "bin" / "docker"
    if found is None and os.access(local, os.X_OK):
        found = str(local)
    return found


def require_compose() -> str:
    """The docker CLI with a working compose plugin; skips the test when there is none, or fails it
    under CI=true (CI must prove the compose file, not skip it)."""
    binary = docker_binary()
    if binary is not None:
        probe = subprocess.run([binary, "compose", "version"], capture_output=True, text=True, timeout=60)
        if probe.returncode == 0:
            return binary
    if os.environ.get("CI") == "true":
        pytest.fail(MISSING_COMPOSE)
    pytest.skip(MISSING_COMPOSE)


def compose(binary: str, variables: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`docker compose -f docker/compose.yml ARGS` seeing only `variables` (no .env file, none of
    this process's environment besides PATH and HOME, which the CLI needs to find its plugin)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(Path.home()), **variables}
    argv = [binary, "compose", "--env-file", os.devnull, "-f", str(COMPOSE_FILE), *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def compose_config(binary: str, variables: Mapping[str, str], *profiles: str) -> dict:
    profile_args = [arg for name in profiles for arg in ("--profile", name)]
    done = compose(binary, variables, *profile_args, "config", "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@dataclass(frozen=True)
class Stage:
    name: str
    base: str
    instructions: tuple[tuple[str, str], ...]  # (INSTRUCTION, arguments), continuations joined

    def all(self, instruction: str) -> list[str]:
        return [args for name, args in self.instructions if name == instruction]


def dockerfile_stages(text: str) -> list[Stage]:
    """The build stages of a Dockerfile, in order, with their instructions."""
    logical: list[str] = []
    pending = ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if pending and line.lstrip().startswith("#"):
            continue  # a comment line inside a continued instruction
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    stages: list[Stage] = []
    current: list[tuple[str, str]] = []
    header: tuple[str, str] | None = None
    for entry in logical:
        instruction, _, args = entry.strip().partition(" ")
        instruction = instruction.upper()
        if instruction == "FROM":
            if header is not None:
                stages.append(Stage(header[0], header[1], tuple(current)))
            words = args.split()
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else str(len(stages))
            header, current = (name, words[0]), []
        elif header is not None:
            current.append((instruction, " ".join(args.split())))
    if header is not None:
        stages.append(Stage(header[0], header[1], tuple(current)))
    return stages


def dockerignore_excludes(path: str, patterns: Sequence[str]) -> bool:
    """Whether .dockerignore `patterns` leave `path` (relative to the context) out of the build
    context: a pattern matches the path or any of its parent directories; `!` re-includes."""
    parts = path.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    excluded = False
    for raw in patterns:
        negate = raw.startswith("!")
        pattern = raw[1:] if negate else raw
        regex = _pattern_regex(pattern.strip("/"))
        if any(regex.fullmatch(candidate) for candidate in candidates):
            excluded = not negate
    return excluded


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out)


def dockerignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def nginx_upstream_servers(conf: str, upstream: str = "gateways") -> list[str]:
    """The `server` addresses of an upstream block of an nginx config."""
    block = re.search(r"upstream\s+" + re.escape(upstream) + r"\s*\{(.*?)\}", conf, re.S)
    assert block, f"no upstream {upstream} in the nginx config"
    return re.findall(r"^\s*server\s+(\S+?)[\s;]", block.group(1), re.M)


def size_in_bytes(value: str) -> int:
    """An nginx size (`4m`, `512k`, `100`) in bytes."""
    number, unit = re.fullmatch(r"(\d+)([kKmMgG]?)", value).groups()  # type: ignore[union-attr]
    return int(number) * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[unit.lower()]


def local_nginx_conf(conf: str, *, gateway_ports: Sequence[int], listen: int, prefix: Path, static: Path) -> str:
    """docker/nginx.conf as it would run on this machine: the compose service names resolved to
    loopback gateways (in order), the listener on loopback, everything under /tmp moved to
    `prefix` (so runs never collide) and the static root to `static`. Everything else unchanged."""
    servers = re.findall(r"server gateway-\d+:8000", conf)
    assert len(servers) == len(gateway_ports), f"{len(servers)} upstream servers, {len(gateway_ports)} gateways given"
    for server, port in zip(servers, gateway_ports, strict=True):
        conf = conf.replace(server, f"server 127.0.0.1:{port}", 1)
    for old, new in (("listen 8080;", f"listen 127.0.0.1:{listen};"), ("/tmp/", f"{prefix}/"), ("/srv/static/", f"{static}/")):
        assert old in conf, f"{old!r} is not in the nginx config any more"
        conf = conf.replace(old, new)
    if os.geteuid() == 0:
        # As root the workers would switch to `nobody`, who cannot read our prefix.
        conf = f"user {getpass.getuser()} {grp.getgrgid(os.getegid()).gr_name};\n{conf}"
    return conf
