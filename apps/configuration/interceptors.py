"""The `interceptors` section of a virtual host in the configuration document (docs/interceptors.md):
checking it (pure, like `validation`), bringing the host's stored chain in line with it (for
`reconcile`), and exporting it.

```yaml
interceptors:
  - {name: secrets, kind: secrets, settings: {action: mask}}
  - name: audit-hook
    kind: webhook
    phases: [result]                       # default: every phase the kind runs on
    methods: [tools/call]                  # default: tools/call, resources/read, prompts/get
    targets: ["billing_*"]                 # default: every call
    settings: {url: "https://hooks.example.com/mcp", secret: hook-key, timeout_seconds: 1, failure: open}
    enabled: true
```

A host whose entry has the section gets exactly that chain, in that order; a host whose entry leaves
it out keeps its interceptors (`--prune` removes them)."""

from __future__ import annotations

from typing import Any

from apps.catalog.models import VirtualHost
from apps.configuration.fields import FieldChecks
from apps.configuration.reports import Action, Change
from apps.kernel.interceptors import KINDS, InterceptorSpec, interceptor_check, interceptor_fields, interceptor_spec
from apps.policies.selectors import interceptor_specs_list
from apps.policies.services import interceptors_set

_FIELDS = ("name", "kind", "phases", "methods", "targets", "settings", "enabled")


def interceptors_section_check(checks: FieldChecks, raw: Any, path: str) -> tuple[InterceptorSpec, ...] | None:
    """A host's `interceptors` section (None: the entry has none); problems are recorded on
    `checks` at their paths, and an interceptor with one is left out."""
    if raw is None:
        return None
    specs: list[InterceptorSpec] = []
    names: set[str] = set()
    for i, item in enumerate(checks.items(raw, path)):
        item_path = f"{path}[{i}]"
        fields = checks.mapping(item, item_path, fields=_FIELDS, required=("name", "kind"))
        if fields is None:
            continue
        spec = interceptor_spec(fields)
        if spec is None:
            checks.add(f"{item_path}.kind", f"kind must be one of: {', '.join(KINDS)}")
            continue
        wrong = checks.refuse(item_path, interceptor_check(spec), given=_Given(fields))
        if spec.name in names:
            checks.add(f"{item_path}.name", f"the name {spec.name!r} is used by another interceptor of this host")
        elif not wrong:
            specs.append(spec)
        names.add(spec.name)
    return tuple(specs)


class _Given:
    """The fields a problem is reported at: all but a required one the entry leaves out (reported
    as missing already)."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self._fields = fields

    def __contains__(self, field: object) -> bool:
        top = str(field).split(".", 1)[0]
        return top in self._fields or top not in {"name", "kind"}


def interceptors_reconcile(*, host: VirtualHost, specs: tuple[InterceptorSpec, ...], name: str) -> list[Change]:
    """The host's chain made the document's (nothing changes when it is already)."""
    stored = interceptor_specs_list(virtual_host=host)
    if [interceptor_fields(s) for s in stored] == [interceptor_fields(s) for s in specs]:
        return []
    interceptors_set(virtual_host=host, interceptors=specs)
    return [Change(Action.UPDATED if stored else Action.CREATED, "interceptors", name,
                   ", ".join(spec.name for spec in specs) or "none")]


def interceptors_prune(*, host: VirtualHost, name: str) -> Change | None:
    """Remove the host's interceptors (a host the document names without the section, `--prune`)."""
    if not host.interceptors.exists():
        return None
    interceptors_set(virtual_host=host, interceptors=())
    return Change(Action.DELETED, "interceptors", name)


def interceptors_export(*, host: VirtualHost) -> list[dict[str, Any]]:
    """The host's `interceptors` section (empty when it has none)."""
    return [interceptor_fields(spec) for spec in interceptor_specs_list(virtual_host=host)]
