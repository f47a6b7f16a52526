"""The `backends` section of the configuration document, applied (for `reconcile`): a backend's own
fields, its OpenAPI spec file and its credential (`credentials.py`). Checking the section is
`validation`'s."""

from __future__ import annotations

import hashlib
from pathlib import Path

from django.core.exceptions import ValidationError

from apps.catalog.models import Backend, SpecVersion
from apps.catalog.selectors import backend_list
from apps.catalog.services import backend_create, backend_update
from apps.catalog.specs import spec_upload, spec_version_publish
from apps.configuration.credentials import credential_reconcile
from apps.configuration.document import BackendSpec
from apps.configuration.reports import Action, Change
from apps.tenants.models import Tenant


def backend_reconcile(
    *, tenant: Tenant, spec: BackendSpec, base_dir: Path | None, uploaded: list[int]
) -> tuple[Backend, Change]:
    """Create the backend or bring it in line with `spec`, writing only what differs. A spec file
    that differs from the latest upload is uploaded; its version id is appended to `uploaded` (to
    be compiled once the apply commits). The same file as a held latest upload is published when
    `spec.allow_removals` says so. Raises the services' ValidationError."""
    name = f"{spec.tenant}/{spec.name}"
    backend = backend_list(tenant=tenant).filter(name=spec.name).first()
    if backend is None:
        backend = backend_create(
            tenant=tenant, name=spec.name, urls=spec.urls, kind=spec.kind,
            transport=spec.transport, timeout_seconds=spec.timeout_seconds, base_url=spec.base_url,
            tool_name_max_length=spec.tool_name_max_length, include_deprecated=spec.include_deprecated,
            max_concurrency=spec.max_concurrency,
        )
        details = _spec_and_credential(backend, spec, base_dir, uploaded)
        return backend, Change(Action.CREATED, "backend", name, ", ".join(details))
    current = {
        "kind": backend.kind,
        "transport": backend.transport,
        "urls": tuple(r.url for r in backend.replicas.all()),
        "timeout_seconds": backend.timeout_seconds,
        "base_url": backend.base_url,
        "tool_name_max_length": backend.tool_name_max_length,
        "include_deprecated": backend.include_deprecated,
        "max_concurrency": backend.max_concurrency,
    }
    wanted = {
        "kind": spec.kind,
        "transport": spec.transport,
        "urls": spec.urls,
        "timeout_seconds": spec.timeout_seconds,
        "base_url": spec.base_url,
        "tool_name_max_length": spec.tool_name_max_length,
        "include_deprecated": spec.include_deprecated,
        "max_concurrency": spec.max_concurrency,
    }
    details = [field for field in current if current[field] != wanted[field]]
    if details:
        backend_update(
            backend=backend, kind=spec.kind, transport=spec.transport, urls=spec.urls,
            timeout_seconds=spec.timeout_seconds, base_url=spec.base_url,
            tool_name_max_length=spec.tool_name_max_length, include_deprecated=spec.include_deprecated,
            max_concurrency=spec.max_concurrency,
        )
    details += _spec_and_credential(backend, spec, base_dir, uploaded)
    return backend, Change(Action.UPDATED if details else Action.UNCHANGED, "backend", name, ", ".join(details))


def _spec_and_credential(backend: Backend, spec: BackendSpec, base_dir: Path | None, uploaded: list[int]) -> list[str]:
    """Upload the spec file when it differs from the latest upload (or publish the latest upload
    when it is that file, held, and removals are allowed now), and set the credential when it
    differs from the stored one. Returns what changed."""
    details: list[str] = []
    if spec.spec is not None:
        file = Path(spec.spec)
        if not file.is_absolute() and base_dir is not None:
            file = base_dir / file
        try:
            document = file.read_bytes()
        except OSError as error:
            raise ValidationError({"spec": f"cannot read {str(file)!r}: {error.strerror}"}) from None
        latest = backend.spec_versions.order_by("-number").values("pk", "sha256", "status", "number").first()
        if latest is None or latest["sha256"] != hashlib.sha256(document).hexdigest():
            version = spec_upload(backend=backend, document=document, filename=file.name, uploaded_by="config",
                                  allow_removals=spec.allow_removals)
            uploaded.append(version.pk)
            details.append(f"spec v{version.number} uploaded")
        elif latest["status"] == SpecVersion.Status.HELD and spec.allow_removals:
            version = spec_version_publish(backend=backend, number=latest["number"])
            uploaded.append(version.pk)
            details.append(f"held spec v{version.number} published")
        elif latest["status"] == SpecVersion.Status.HELD:
            uploaded.append(latest["pk"])  # still held: reported (and failing) on every apply until confirmed
    if (change := credential_reconcile(backend=backend, spec=spec.credential)) is not None:
        details.append(change)
    return details
