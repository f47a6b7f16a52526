"""deploy/kubernetes as kustomize renders it (no cluster needed): every object of every overlay
valid against the Kubernetes API schemas of the oldest and newest release we claim (kubernetes-validate,
strict: an unknown field fails), and every value that must match the app read from the app itself —
its port and probe views, its settings (the rendered environment must start the production
settings), its drain time, its Celery queues, the Dockerfile's user — so that neither can drift."""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from django.conf import settings
from django.core.management.commands.migrate import Command as MigrateCommand
from django.urls import resolve

from apps.common import views as probe_views
from apps.gateway import views as gateway_views
from apps.gateway.transports import shutdown
from tests.deploy.helpers import DOCKERFILE, dockerfile_stages
from tests.processes import ROOT

KUBERNETES = ROOT / "deploy" / "kubernetes"
#: The oldest Kubernetes release the manifests are for, and the newest kubernetes-validate knows.
VERSIONS = ("1.30", kubernetes_validate.utils.latest_version())
#: Custom resources: no schema ships with Kubernetes, so kubernetes-validate has none.
CUSTOM_KINDS = {"ServiceMonitor"}
IMAGE_NAME = "mcp-gateway"
#: What the production settings refuse to start without (gatewaysite/settings/startup_checks.py).
REQUIRED_SECRETS = ("GATEWAY_SECRET_KEY", "DATABASE_URL", "REDIS_URL")
MISSING_KUSTOMIZE = "`kustomize` is not available: scripts/install-kustomize.sh installs Debian's"


def require_kustomize() -> str:
    """The kustomize binary; skips the test without one, or fails it under CI=true (CI must prove the
    manifests, not skip them)."""
    for found in (shutil.which("kustomize"), str(Path.home() / ".local" / "bin" / "kustomize")):
        if found and os.access(found, os.X_OK):
            return found
    if os.environ.get("CI") == "true":
        pytest.fail(MISSING_KUSTOMIZE)
    pytest.skip(MISSING_KUSTOMIZE)


def build(kustomize: str, directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([kustomize, "build", str(directory)], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def kustomize() -> str:
    return require_kustomize()


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of deploy/kubernetes with what an operator adds: the dev overlay's secrets.env made by
    its own script, and an overlay of production with the ServiceMonitor component."""
    root = tmp_path_factory.mktemp("kubernetes") / "kubernetes"
    shutil.copytree(KUBERNETES, root, ignore=shutil.ignore_patterns("secrets.env"))
    made = subprocess.run([str(root / "overlays" / "dev" / "new-secrets.sh")], capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    monitored = root / "overlays" / "monitored"
    monitored.mkdir()
    (monitored / "kustomization.yaml").write_text(
        "namespace: mcp-gateway\nresources: [../production]\ncomponents: [../../components/servicemonitor]\n")
    # The operator's own overlay exactly as docs/deploy.md shows it.
    section = (ROOT / "docs" / "deploy.md").read_text().split("**Production.**", 1)[1]
    mine = root / "overlays" / "mine"
    mine.mkdir()
    (mine / "kustomization.yaml").write_text(re.search(r"```yaml\n(.*?)```", section, re.S).group(1))  # type: ignore[union-attr]
    return root


@pytest.fixture(scope="module")
def rendered(kustomize: str, tree: Path) -> dict[str, list[dict]]:
    out = {}
    for overlay in ("dev", "production", "monitored", "mine"):
        done = build(kustomize, tree / "overlays" / overlay)
        assert done.returncode == 0, done.stderr
        out[overlay] = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    return out


def objects(docs: list[dict], kind: str) -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == kind}


def app_workloads(docs: list[dict]) -> dict[str, dict]:
    """Deployments and Jobs that run the gateway's image, by name."""
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] in {"Deployment", "Job"}
            and any(c["image"].split(":")[0].endswith(IMAGE_NAME) for c in doc["spec"]["template"]["spec"]["containers"])}


def containers(workload: dict, *, init: bool = True) -> Iterator[dict]:
    spec = workload["spec"]["template"]["spec"]
    yield from spec.get("initContainers", []) if init else []
    yield from spec["containers"]


def config_env(docs: list[dict], container: dict) -> dict[str, str]:
    """The container's settings that are no secret: the image's ENV, then its envFrom ConfigMaps."""
    runtime = next(stage for stage in dockerfile_stages(DOCKERFILE.read_text()) if stage.name == "runtime")
    env = dict(word.split("=", 1) for line in runtime.all("ENV") for word in shlex.split(line))
    env.pop("PATH")
    config_maps = objects(docs, "ConfigMap")
    for source in container.get("envFrom", []):
        env.update(config_maps[source["configMapRef"]["name"]]["data"])
    return env


def container_env(docs: list[dict], container: dict, secrets: dict[str, str] | None = None) -> dict[str, str]:
    """What the container's process sees: `config_env`, then env (Secret keys from the rendered
    Secret, or from `secrets` for an overlay that ships none)."""
    env = config_env(docs, container)
    secret_objects = objects(docs, "Secret")
    for variable in container.get("env", []):
        if "value" in variable:
            env[variable["name"]] = variable["value"]
            continue
        ref = variable["valueFrom"]["secretKeyRef"]
        if secrets is not None:
            value = secrets.get(ref["key"])
        else:
            data = secret_objects[ref["name"]]["data"]
            value = base64.b64decode(data[ref["key"]]).decode() if ref["key"] in data else None
        if value is None:
            assert ref.get("optional"), f"{ref['key']} is required but not in the Secret"
        else:
            env[variable["name"]] = value
    return env


def secret_refs(container: dict) -> dict[str, dict]:
    return {v["name"]: v["valueFrom"]["secretKeyRef"] for v in container.get("env", []) if "valueFrom" in v}


def gateway(docs: list[dict]) -> tuple[dict, dict]:
    deployment = objects(docs, "Deployment")["mcp-gateway"]
    return deployment, deployment["spec"]["template"]["spec"]["containers"][0]


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def quantity_bytes(value: str) -> int:
    number, unit = re.fullmatch(r"(\d+)(Ki|Mi|Gi)?", value).groups()  # type: ignore[union-attr]
    return int(number) * {None: 1, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}[unit]


def production_settings(env: dict[str, str], script: str) -> subprocess.CompletedProcess[str]:
    """`script` run after django.setup() with exactly `env` (and a PATH), as the pod's process would."""
    return subprocess.run([sys.executable, "-c", f"import django, json; django.setup(); {script}"], cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(ROOT), **env}, capture_output=True, text=True,
                          timeout=120)


# --- rendering and schemas -------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", ["dev", "production", "monitored", "mine"])
def test_every_object_passes_the_kubernetes_schemas(rendered: dict[str, list[dict]], overlay: str) -> None:
    without_schema = set()
    for doc in rendered[overlay]:
        for version in VERSIONS:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.SchemaNotFoundError:
                without_schema.add(doc["kind"])
            except kubernetes_validate.ValidationError as error:
                pytest.fail(f"{overlay}: {doc['kind']}/{doc['metadata']['name']} against Kubernetes {version}: "
                            f"{error.message} at {'/'.join(map(str, error.path))}")
    assert without_schema == (CUSTOM_KINDS if overlay == "monitored" else set())
    assert {doc["metadata"].get("namespace") for doc in rendered[overlay] if doc["kind"] != "Namespace"} == {"mcp-gateway"}


def test_the_validator_refuses_what_a_cluster_would(rendered: dict[str, list[dict]]) -> None:
    """The schema check has teeth: a misspelt field and a wrong type are refused."""
    deployment, _ = gateway(rendered["production"])
    broken = json.loads(json.dumps(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["paht"] = "/readyz"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[0], strict=True)
    broken = json.loads(json.dumps(deployment))
    broken["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "40s"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[0], strict=True)


def test_the_documented_overlay_sets_the_image_and_host_names(rendered: dict[str, list[dict]]) -> None:
    docs = rendered["mine"]
    images = {c["image"] for w in app_workloads(docs).values() for c in containers(w)}
    assert len(images) == 1 and images.pop().startswith("registry.internal/mcp-gateway:")
    _, container = gateway(docs)
    hosts = config_env(docs, container)["GATEWAY_ALLOWED_HOSTS"].split(",")
    assert "mcp-gateway" in hosts and len(hosts) > 1
    assert config_env(docs, container)["GATEWAY_SHUTDOWN_GRACE_SECONDS"]  # merged into, not replaced


def test_the_dev_overlay_needs_the_secrets_its_script_makes(kustomize: str, tree: Path, tmp_path: Path) -> None:
    copy = tmp_path / "kubernetes"
    shutil.copytree(tree, copy)
    (copy / "overlays" / "dev" / "secrets.env").unlink()
    done = build(kustomize, copy / "overlays" / "dev")
    assert done.returncode != 0 and "secrets.env" in done.stderr
    again = subprocess.run([str(tree / "overlays" / "dev" / "new-secrets.sh")], capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "exists" in again.stderr  # never overwrites the database's password
    assert "deploy/kubernetes/overlays/dev/secrets.env" in (ROOT / ".gitignore").read_text()


def test_the_workloads_of_each_overlay(rendered: dict[str, list[dict]]) -> None:
    for overlay in ("dev", "production"):
        assert set(app_workloads(rendered[overlay])) == {
            "mcp-gateway", "mcp-gateway-worker", "mcp-gateway-indexer", "mcp-gateway-beat", "mcp-gateway-migrate"}
    assert set(objects(rendered["dev"], "StatefulSet")) == {"postgres", "redis"}
    assert objects(rendered["production"], "Secret") == {}  # the operator's, never shipped
    build_script = (ROOT / "scripts" / "build-image.sh").read_text()
    built = "localhost/" + re.search(r"^IMAGE=\$\{IMAGE:-([^}]+)\}", build_script, re.M).group(1)  # type: ignore[union-attr]
    images = {c["image"] for w in app_workloads(rendered["dev"]).values() for c in containers(w)}
    assert images == {built}, "the dev overlay runs what scripts/build-image.sh tags"


# --- the app's own values ----------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", ["dev", "production"])
def test_the_rendered_environment_starts_the_production_settings(rendered: dict[str, list[dict]], overlay: str) -> None:
    """Every app container's environment passes the production settings' checks and `check
    --deploy` at error level, and each required Secret key is one they cannot start without."""
    docs = rendered[overlay]
    # Production ships no Secret: stand in for the operator's, with values the settings accept.
    secrets = None if overlay == "dev" else {
        "GATEWAY_SECRET_KEY": base64.b64encode(os.urandom(48)).decode(), "GATEWAY_METRICS_TOKEN": os.urandom(24).hex(),
        "DATABASE_URL": f"postgresql://gateway:{os.urandom(24).hex()}@postgres.example:5432/gateway",
        "REDIS_URL": f"redis://:{os.urandom(24).hex()}@redis.example:6379/0"}
    _, container = gateway(docs)
    env = container_env(docs, container, secrets)
    check = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "ERROR"], cwd=ROOT,
                           env={"PATH": "/usr/bin:/bin", "HOME": str(ROOT), **env}, capture_output=True, text=True,
                           timeout=120)
    assert check.returncode == 0, check.stderr
    read = production_settings(env, "from django.conf import settings as s; print(json.dumps({"
                               "'grace': s.GATEWAY_SHUTDOWN_GRACE_SECONDS, 'readyz': s.GATEWAY_READYZ_TIMEOUT_SECONDS, "
                               "'token': bool(s.GATEWAY_METRICS_TOKEN), 'static': s.GATEWAY_SERVE_STATIC, "
                               "'hosts': s.ALLOWED_HOSTS, 'embeddings': str(s.GATEWAY_EMBEDDING_CACHE_DIR)}))")
    assert read.returncode == 0, read.stderr
    values = json.loads(read.stdout)
    assert values["token"] and values["static"]
    assert "mcp-gateway" in values["hosts"]  # the Service's name, for clients in the cluster
    assert float(env["GATEWAY_SHUTDOWN_GRACE_SECONDS"]) == values["grace"]
    # The other roles see the same settings, less the scrape token only the gateway needs.
    others = {k: v for k, v in env.items() if k != "GATEWAY_METRICS_TOKEN"}
    for workload in app_workloads(docs).values():
        for c in containers(workload):
            if c is not container:
                assert container_env(docs, c, secrets) == others, f"{workload['metadata']['name']}/{c['name']}"
    if overlay == "dev":
        for missing in REQUIRED_SECRETS:
            refused = production_settings({k: v for k, v in env.items() if k != missing}, "")
            assert refused.returncode != 0 and missing in refused.stderr, missing


def test_every_variable_set_is_one_the_app_reads(rendered: dict[str, list[dict]]) -> None:
    """A misspelt name would be ignored silently: each must be read by the settings and documented."""
    read = set(re.findall(r'"([A-Z][A-Z0-9_]+)"', "".join(p.read_text() for p in (ROOT / "gatewaysite" / "settings").glob("*.py"))))
    documented = set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)`", (ROOT / "docs" / "deploy.md").read_text(), re.M))
    for overlay in ("dev", "production"):
        docs = rendered[overlay]
        names = {key for cm in objects(docs, "ConfigMap").values() for key in cm["data"]}
        names |= {v["name"] for w in app_workloads(docs).values() for c in containers(w) for v in c.get("env", [])}
        for name in names - {"DJANGO_SETTINGS_MODULE"}:
            assert name in read, f"{name} is set but no setting reads it"
            assert name in documented, f"{name} is set but docs/deploy.md does not list it"


def test_secrets_come_only_from_secret_objects(rendered: dict[str, list[dict]]) -> None:
    docs = rendered["production"]
    config_keys = {key for cm in objects(docs, "ConfigMap").values() for key in cm["data"]}
    for name, workload in app_workloads(docs).items():
        for c in containers(workload):
            refs = secret_refs(c)
            for key in REQUIRED_SECRETS:
                assert key in refs and not refs[key].get("optional"), f"{name}/{c['name']}: {key}"
            assert all(ref["name"] == "mcp-gateway-secrets" and ref["key"] == var for var, ref in refs.items())
            assert not any("value" in v for v in c.get("env", [])), f"{name}/{c['name']}: a literal env value"
            assert not set(refs) & config_keys
    _, container = gateway(docs)
    assert not secret_refs(container)["GATEWAY_METRICS_TOKEN"].get("optional")


def test_the_gateway_serves_the_images_command_on_the_probed_port(rendered: dict[str, list[dict]]) -> None:
    runtime = next(stage for stage in dockerfile_stages(DOCKERFILE.read_text()) if stage.name == "runtime")
    command = json.loads(runtime.all("CMD")[-1])
    port = int(command[command.index("-p") + 1])
    assert runtime.all("EXPOSE") == [str(port)]
    for overlay in ("dev", "production"):
        deployment, container = gateway(rendered[overlay])
        assert "command" not in container and "args" not in container  # the image's CMD: Daphne
        assert container["ports"] == [{"name": "http", "containerPort": port}]
        probes = {kind: container[kind]["httpGet"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")}
        assert all(probe["port"] == "http" for probe in probes.values())
        assert resolve(probes["livenessProbe"]["path"]).func is probe_views.healthz
        assert resolve(probes["startupProbe"]["path"]).func is probe_views.healthz
        assert resolve(probes["readinessProbe"]["path"]).func is probe_views.readyz
        # /readyz gives each dependency GATEWAY_READYZ_TIMEOUT_SECONDS; the kubelet must wait longer.
        readyz_timeout = float(config_env(rendered[overlay], container).get(
            "GATEWAY_READYZ_TIMEOUT_SECONDS", settings.GATEWAY_READYZ_TIMEOUT_SECONDS))
        assert container["readinessProbe"]["timeoutSeconds"] >= readyz_timeout + 1
        annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/port"] == str(port)
        assert resolve(annotations["prometheus.io/path"]).func is gateway_views.metrics
        service = objects(rendered[overlay], "Service")["mcp-gateway"]
        assert service["spec"]["ports"] == [{"name": "http", "port": port, "targetPort": "http"}]


def test_the_termination_grace_period_covers_the_drain(rendered: dict[str, list[dict]]) -> None:
    """preStop pause + the app's drain (GATEWAY_SHUTDOWN_GRACE_SECONDS, then up to twice
    shutdown._ENDING_SECONDS to end streams and write the audit rows) before the SIGKILL."""
    for overlay in ("dev", "production"):
        deployment, container = gateway(rendered[overlay])
        pause_command = container["lifecycle"]["preStop"]["exec"]["command"]
        assert pause_command[0] == "sleep"
        grace = float(config_env(rendered[overlay], container)["GATEWAY_SHUTDOWN_GRACE_SECONDS"])
        needed = float(pause_command[1]) + grace + 2 * shutdown._ENDING_SECONDS
        assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= needed + 1
        assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_the_autoscaler_and_disruption_budget_cover_the_gateways_only(rendered: dict[str, list[dict]]) -> None:
    bounds = {}
    for overlay in ("dev", "production"):
        docs = rendered[overlay]
        deployment, container = gateway(docs)
        assert "replicas" not in deployment["spec"], "the autoscaler owns the gateway's replica count"
        assert "cpu" in container["resources"]["requests"]  # what Utilization is a share of
        (hpa,) = objects(docs, "HorizontalPodAutoscaler").values()
        assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "mcp-gateway"}
        assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]
        bounds[overlay] = (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"])
        (pdb,) = objects(docs, "PodDisruptionBudget").values()
        if overlay == "production":  # a drain never takes every gateway (dev may run only one)
            assert pdb["spec"]["maxUnavailable"] < hpa["spec"]["minReplicas"]
        pod_labels = {name: w["spec"]["template"]["metadata"]["labels"] for name, w in app_workloads(docs).items()}
        for selector in (pdb["spec"]["selector"]["matchLabels"], objects(docs, "Service")["mcp-gateway"]["spec"]["selector"],
                         deployment["spec"]["selector"]["matchLabels"]):
            assert {name for name, labels in pod_labels.items() if selects(selector, labels)} == {"mcp-gateway"}
        spread = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
        assert {c["topologyKey"] for c in spread} == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
        assert all(c["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"] for c in spread)
    assert bounds["production"][0] >= 3 and bounds["production"][1] > bounds["dev"][1]


def test_exactly_one_beat(rendered: dict[str, list[dict]]) -> None:
    for overlay in ("dev", "production"):
        docs = rendered[overlay]
        beat = objects(docs, "Deployment")["mcp-gateway-beat"]
        assert beat["spec"]["replicas"] == 1
        assert beat["spec"]["strategy"] == {"type": "Recreate"}  # never two, not even during a rollout
        assert all(h["spec"]["scaleTargetRef"]["name"] != "mcp-gateway-beat"
                   for h in objects(docs, "HorizontalPodAutoscaler").values())
        labels = beat["spec"]["template"]["metadata"]["labels"]
        assert not any(selects(p["spec"]["selector"]["matchLabels"], labels) for p in objects(docs, "PodDisruptionBudget").values())
        runners = [name for name, w in app_workloads(docs).items() for c in containers(w, init=False)
                   if c.get("command", [])[:4] == ["celery", "-A", "gatewaysite", "beat"]]
        assert runners == ["mcp-gateway-beat"]


def test_workers_consume_every_queue_the_app_routes_to(rendered: dict[str, list[dict]]) -> None:
    routed = {settings.CELERY_TASK_DEFAULT_QUEUE} | {route["queue"] for route in settings.CELERY_TASK_ROUTES.values()}
    for overlay in ("dev", "production"):
        consumed = set()
        for name, workload in app_workloads(rendered[overlay]).items():
            (container,) = containers(workload, init=False)
            command = container.get("command", [])
            if command[:4] != ["celery", "-A", "gatewaysite", "worker"]:
                continue
            queues = command[command.index("-Q") + 1].split(",")
            consumed.update(queues)
            node = command[command.index("-n") + 1].split("@")[0] if "-n" in command else "celery"
            assert f"-d {node}@$HOSTNAME" in container["livenessProbe"]["exec"]["command"][-1], name
            # Celery recycles a child past --max-memory-per-child (KiB) after its task; the kernel
            # must not kill the pod first.
            children = int(command[command.index("--concurrency") + 1])
            per_child = int(command[command.index("--max-memory-per-child") + 1]) * 1024
            limit = quantity_bytes(container["resources"]["limits"]["memory"])
            assert limit >= children * per_child + 256 * 1024**2, name
            assert workload["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 60, name
        assert consumed == routed, overlay


def test_every_app_container_runs_as_the_images_user_on_a_read_only_root(rendered: dict[str, list[dict]]) -> None:
    runtime = next(stage for stage in dockerfile_stages(DOCKERFILE.read_text()) if stage.name == "runtime")
    uid, gid = map(int, runtime.all("USER")[-1].split(":"))
    for overlay in ("dev", "production"):
        docs = rendered[overlay]
        for name, workload in app_workloads(docs).items():
            pod = workload["spec"]["template"]["spec"]
            assert pod["securityContext"]["runAsNonRoot"] and pod["automountServiceAccountToken"] is False
            assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == (uid, gid)
            scratch = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
            for c in containers(workload):
                security = c["securityContext"]
                assert security["readOnlyRootFilesystem"] and not security["allowPrivilegeEscalation"]
                assert security["capabilities"] == {"drop": ["ALL"]}
                assert {"cpu", "memory"} <= set(c["resources"]["requests"]) and "memory" in c["resources"]["limits"]
                writable = [m["mountPath"] for m in c["volumeMounts"] if m["name"] in scratch and not m.get("readOnly")]
                # What the app writes: temporary files (torch's compile cache too), the -int8
                # model's export, beat's schedule file.
                paths = ["/tmp/x", config_env(docs, c)["GATEWAY_EMBEDDING_CACHE_DIR"] + "/x"]
                command = c.get("command", [])
                if "--schedule" in command:
                    paths.append(command[command.index("--schedule") + 1])
                for path in paths:
                    assert any(path.startswith(mount.rstrip("/") + "/") for mount in writable), f"{name}/{c['name']}: {path}"


def test_migrations_run_once_per_release_before_the_new_pods(rendered: dict[str, list[dict]]) -> None:
    assert MigrateCommand().create_parser("manage.py", "migrate").parse_args(["--check"]).check_unapplied
    for overlay in ("dev", "production"):
        workloads = app_workloads(rendered[overlay])
        job = workloads.pop("mcp-gateway-migrate")
        assert job["kind"] == "Job" and job["spec"]["template"]["spec"]["restartPolicy"] in {"OnFailure", "Never"}
        assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["python", "manage.py", "migrate", "--noinput"]
        for name, workload in workloads.items():
            (wait,) = workload["spec"]["template"]["spec"]["initContainers"]
            assert "python manage.py migrate --check" in wait["command"][-1], name
            assert wait["image"] == workload["spec"]["template"]["spec"]["containers"][0]["image"], name


def test_the_service_monitor_scrapes_each_gateway_with_its_token(rendered: dict[str, list[dict]]) -> None:
    docs = rendered["monitored"]
    (monitor,) = objects(docs, "ServiceMonitor").values()
    service = objects(docs, "Service")["mcp-gateway"]
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]
    assert selects(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {port["name"] for port in service["spec"]["ports"]}
    assert resolve(endpoint["path"]).func is gateway_views.metrics
    _, container = gateway(docs)
    assert endpoint["authorization"]["type"] == "Bearer"
    token = secret_refs(container)["GATEWAY_METRICS_TOKEN"]
    assert endpoint["authorization"]["credentials"] == {"name": token["name"], "key": token["key"]}
