"""Interceptors: what a virtual host runs over each call's request and result (docs/interceptors.md).

A host's interceptors are `InterceptorSpec`s in the order written; `interceptor_check` is the one
check of each (the service, the REST API, the console and `gateway apply` all use it), and
`interceptors_compile` makes them, once per configuration snapshot, the `Interceptors` the call
path runs. Built-ins are pure (`secrets`, `personal_data`, `fields`, `size`, `injection`: one module
each, with `PHASES`, `DEFAULTS`, `settings_check` and `build`); a `webhook` asks an outside service,
which the pipeline does through its port."""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType, ModuleType
from typing import Any
from urllib.parse import urlsplit

from apps.kernel.globs import glob_problem, globs_compile
from apps.kernel.interceptors.base import METHODS, PHASES, Decision, Inspector, Payload, Subject
from apps.kernel.problems import FieldProblem

#: The built-ins, by kind (each a module of this package), and the outside service.
BUILTINS = ("secrets", "personal_data", "fields", "size", "injection")
KINDS = (*BUILTINS, "webhook")
#: Most interceptors on one host: each runs on every call it applies to.
MAX_INTERCEPTORS = 20
#: Most names or globs one interceptor is scoped to (each is matched on every call).
MAX_TARGETS = 100
NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")

#: A webhook's settings, and what each is.
WEBHOOK_SETTINGS = {
    "url": "the https URL the call is posted to",
    "secret": "the name of the tenant secret that signs each request",
    "timeout_seconds": "how long the gateway waits for the answer (0.05 to 30)",
    "failure": "open (the call goes on) or closed (it is refused) when the service does not answer in time",
}
WEBHOOK_DEFAULTS: Mapping[str, Any] = MappingProxyType({"timeout_seconds": 2.0, "failure": "closed"})


def builtin(kind: str) -> ModuleType:
    """The module of a built-in kind."""
    if kind not in BUILTINS:
        raise KeyError(kind)
    return importlib.import_module(f"apps.kernel.interceptors.{kind}")


@dataclass(frozen=True, slots=True)
class InterceptorSpec:
    """One interceptor as configured."""

    name: str
    kind: str
    #: Where it runs: "request", "result" or both (a kind that runs on one side only takes that one).
    phases: tuple[str, ...] = PHASES
    methods: tuple[str, ...] = METHODS
    #: Globs of what the call names (a tool or prompt as the client calls it, or a resource URI);
    #: empty: every call.
    targets: tuple[str, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)
    enabled: bool = True


def kind_phases(kind: str) -> tuple[str, ...]:
    """The phases an interceptor of `kind` can run on."""
    return PHASES if kind == "webhook" else tuple(builtin(kind).PHASES)


def kind_defaults(kind: str) -> Mapping[str, Any]:
    return WEBHOOK_DEFAULTS if kind == "webhook" else builtin(kind).DEFAULTS


def interceptor_spec(fields: dict[str, Any]) -> InterceptorSpec | None:
    """An interceptor from its fields as a configuration document, the REST API or the console gives them, the defaults
    filled in (phases: every phase the kind runs on); None for an unknown kind."""
    kind = fields.get("kind")
    if kind not in KINDS:
        return None
    def listed(name: str, default: tuple[str, ...]) -> Any:
        value = fields.get(name, default)
        return tuple(value) if isinstance(value, list) else value
    return InterceptorSpec(
        name=fields.get("name"), kind=kind, phases=listed("phases", kind_phases(kind)),
        methods=listed("methods", METHODS), targets=listed("targets", ()),
        settings=fields.get("settings", {}), enabled=fields.get("enabled", True),
    )


def interceptor_fields(spec: InterceptorSpec) -> dict[str, Any]:
    """An interceptor as a document or the REST API shows it: the defaults left unsaid."""
    item: dict[str, Any] = {"name": spec.name, "kind": spec.kind}
    if tuple(spec.phases) != kind_phases(spec.kind):
        item["phases"] = list(spec.phases)
    if tuple(spec.methods) != METHODS:
        item["methods"] = list(spec.methods)
    if spec.targets:
        item["targets"] = list(spec.targets)
    if spec.settings:
        item["settings"] = dict(spec.settings)
    if not spec.enabled:
        item["enabled"] = False
    return item


def interceptor_check(spec: InterceptorSpec) -> list[FieldProblem]:
    """What is wrong with one interceptor (empty: nothing), in the words every face shows."""
    problems: list[FieldProblem] = []
    if not isinstance(spec.name, str) or not NAME.match(spec.name):
        problems.append(FieldProblem("name", "name must be 1-64 lower-case letters, digits, '-' or '_', "
                                             "starting with a letter or digit"))
    if spec.kind not in KINDS:
        problems.append(FieldProblem("kind", f"kind must be one of: {', '.join(KINDS)}"))
        return problems
    phases = kind_phases(spec.kind)
    if not spec.phases or not isinstance(spec.phases, (list, tuple)) or any(p not in phases for p in spec.phases):
        problems.append(FieldProblem("phases", f"phases must be one or more of: {', '.join(phases)}"
                                               f"{'' if len(phases) > 1 else f' ({spec.kind} inspects results only)'}"))
    if not spec.methods or not isinstance(spec.methods, (list, tuple)) or any(m not in METHODS for m in spec.methods):
        problems.append(FieldProblem("methods", f"methods must be one or more of: {', '.join(METHODS)}"))
    if not isinstance(spec.targets, (list, tuple)) or any(not isinstance(t, str) or not t for t in spec.targets):
        problems.append(FieldProblem("targets", "targets must be a list of names or globs"))
    elif len(spec.targets) > MAX_TARGETS or any(len(t) > 500 for t in spec.targets):
        problems.append(FieldProblem("targets", f"at most {MAX_TARGETS} targets, each at most 500 characters"))
    elif (problem := next(filter(None, map(glob_problem, spec.targets)), None)) is not None:
        problems.append(FieldProblem("targets", problem))
    if not isinstance(spec.enabled, bool):
        problems.append(FieldProblem("enabled", "enabled must be true or false"))
    if spec.kind == "webhook":
        problems.extend(webhook_settings_check(spec.settings))
    else:
        problems.extend(builtin(spec.kind).settings_check(spec.settings))
    return problems


def interceptors_check(specs: Sequence[InterceptorSpec]) -> list[FieldProblem]:
    """The problems of a host's whole chain: each interceptor's, at `<position>.<field>` (1-based),
    names used twice, and more than `MAX_INTERCEPTORS`."""
    problems: list[FieldProblem] = []
    if len(specs) > MAX_INTERCEPTORS:
        problems.append(FieldProblem("interceptors", f"a host has at most {MAX_INTERCEPTORS} interceptors"))
    seen: set[str] = set()
    for number, spec in enumerate(specs, start=1):
        problems.extend(FieldProblem(f"{number}.{p.field}", p.message) for p in interceptor_check(spec))
        if spec.name in seen:
            problems.append(FieldProblem(f"{number}.name", f"the name {spec.name!r} is used by another interceptor"))
        seen.add(spec.name)
    return problems


def webhook_settings_check(settings: object) -> list[FieldProblem]:
    from apps.kernel.interceptors.base import settings_problems

    if problems := settings_problems(settings, WEBHOOK_SETTINGS):
        return problems
    assert isinstance(settings, Mapping)
    problems = []
    url = settings.get("url")
    try:
        parts = urlsplit(url) if isinstance(url, str) else None
        port = parts.port if parts is not None else None  # raises for a port out of range
    except ValueError:
        parts = port = None
    if parts is None or parts.scheme not in {"https", "http"} or not parts.hostname or port == 0:
        problems.append(FieldProblem("settings.url", "url must be an https URL"))
    elif parts.scheme == "http" and parts.hostname not in {"localhost", "127.0.0.1", "::1"}:
        problems.append(FieldProblem("settings.url", "url must be https (plain http only to a service on the "
                                                     "gateway's own machine: localhost)"))
    elif parts.username or parts.password:
        problems.append(FieldProblem("settings.url", "url must not carry a user name or password"))
    secret = settings.get("secret")
    if not isinstance(secret, str) or not secret:
        problems.append(FieldProblem("settings.secret", "secret must name one of the tenant's secrets "
                                                        "(the key each request is signed with)"))
    timeout = settings.get("timeout_seconds", WEBHOOK_DEFAULTS["timeout_seconds"])
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0.05 <= timeout <= 30:
        problems.append(FieldProblem("settings.timeout_seconds", "timeout_seconds must be a number from 0.05 to 30"))
    if settings.get("failure", WEBHOOK_DEFAULTS["failure"]) not in ("open", "closed"):
        problems.append(FieldProblem("settings.failure", "failure must be open or closed"))
    return problems


@dataclass(frozen=True, slots=True)
class Webhook:
    """A webhook interceptor's endpoint, with its signing key resolved."""

    url: str
    key: bytes = field(repr=False)
    timeout: float
    fail_open: bool
    #: Whether it may be at a private address (the tenant's setting, as for its backends).
    allow_private: bool = False


@dataclass(frozen=True, slots=True)
class Interceptor:
    """One interceptor, compiled: a built-in's `inspector`, or a `webhook`."""

    name: str
    kind: str
    phases: frozenset[str]
    methods: frozenset[str]
    targets: re.Pattern[str] | None
    inspector: Inspector | None = None
    webhook: Webhook | None = None

    def applies(self, phase: str, method: str, target: str) -> bool:
        return (phase in self.phases and method in self.methods
                and (self.targets is None or self.targets.fullmatch(target) is not None))


@dataclass(frozen=True, slots=True)
class Interceptors:
    """A host's enabled interceptors, in order."""

    chain: tuple[Interceptor, ...]

    @property
    def results(self) -> bool:
        """Whether any of them inspects results."""
        return any("result" in interceptor.phases for interceptor in self.chain)

    def on(self, phase: str, method: str, target: str) -> tuple[Interceptor, ...]:
        return tuple(i for i in self.chain if i.applies(phase, method, target))


class InterceptorError(ValueError):
    """A chain that cannot be compiled (names the interceptor)."""


def interceptors_compile(
    specs: Sequence[InterceptorSpec], *, keys: Mapping[str, bytes], allow_private: bool = False,
) -> Interceptors | None:
    """The enabled interceptors of `specs`, compiled; None when there are none (a host without
    interceptors costs its calls nothing). `keys`: the tenant's secrets a webhook may name, by name.
    Raises InterceptorError for one that does not pass its check or names a secret not in `keys`."""
    chain = []
    for spec in specs:
        if not spec.enabled:
            continue
        if problems := interceptor_check(spec):
            raise InterceptorError(f"interceptor {spec.name!r}: {problems[0].field}: {problems[0].message}")
        settings = {**kind_defaults(spec.kind), **spec.settings}
        targets = globs_compile(spec.targets) if spec.targets else None
        inspector = webhook = None
        if spec.kind == "webhook":
            key = keys.get(settings["secret"])
            if key is None:
                raise InterceptorError(f"interceptor {spec.name!r}: no tenant secret named {settings['secret']!r}")
            webhook = Webhook(settings["url"], key, float(settings["timeout_seconds"]), settings["failure"] == "open",
                              allow_private)
        else:
            inspector = builtin(spec.kind).build(settings)
        chain.append(Interceptor(spec.name, spec.kind, frozenset(spec.phases), frozenset(spec.methods), targets,
                                 inspector, webhook))
    return Interceptors(tuple(chain)) if chain else None


@dataclass(frozen=True, slots=True)
class _Refusing:
    reason: str

    def inspect(self, subject: Subject) -> Decision:
        return Decision("refuse", reason=self.reason)


def interceptors_refusing(reason: str) -> Interceptors:
    """A chain that refuses every call it sees, saying `reason`: what a host whose interceptors
    cannot run gets (failing closed)."""
    return Interceptors((Interceptor("configuration", "configuration", frozenset(PHASES), frozenset(METHODS), None,
                                     _Refusing(reason)),))


@dataclass(frozen=True, slots=True)
class TrialStep:
    """What one interceptor decided in a trial."""

    name: str
    kind: str
    action: str  # pass | rewrite | refuse | flag | skipped (a webhook: not asked in a trial)
    findings: tuple[str, ...] = ()
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Trial:
    """A host's chain run over sample content: each step, and the content as the chain left it
    (None when it was refused)."""

    steps: tuple[TrialStep, ...]
    payload: Any
    refused_by: str | None = None


def interceptors_try(interceptors: Interceptors | None, *, phase: str, method: str, target: str, value: Any) -> Trial:
    """Run the built-ins of `interceptors` that apply over `value` (a request's params, or a
    JSON-RPC response), as a call would meet them; webhooks are not asked (a trial must not send
    sample content to an outside service), and show as skipped."""
    steps: list[TrialStep] = []
    payload = Payload(value=value)
    for interceptor in () if interceptors is None else interceptors.on(phase, method, target):
        if interceptor.inspector is None:
            steps.append(TrialStep(interceptor.name, interceptor.kind, "skipped", reason="webhooks are not asked in a trial"))
            continue
        decision = interceptor.inspector.inspect(Subject(phase, method, target, payload))
        steps.append(TrialStep(interceptor.name, interceptor.kind, decision.action, decision.findings, decision.reason))
        if decision.action == "refuse":
            return Trial(tuple(steps), None, interceptor.name)
        if decision.action == "rewrite" and decision.payload is not None:
            payload = decision.payload
    return Trial(tuple(steps), payload.value)
