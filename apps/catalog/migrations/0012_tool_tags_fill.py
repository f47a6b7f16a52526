"""Give the tools of every published spec their operations' tags (what a host's curation selects by
tag), read from the stored document: tools compiled before the tags were kept have none."""

from __future__ import annotations

from django.db import migrations

from apps.catalog.openapi.compiler import operation_tags
from apps.catalog.openapi.diagnostics import Diagnostics, unescape
from apps.catalog.openapi.loader import load_document

_DOCUMENT_MAX_BYTES = 1 << 30  # stored documents were size-checked on upload


def _operation(document: object, pointer: str) -> object:
    node = document
    for token in pointer.split("/")[1:]:
        node = node.get(unescape(token)) if isinstance(node, dict) else None
    return node


def tags_fill(apps, schema_editor) -> None:  # noqa: ANN001 - the migration framework's arguments
    backend_model = apps.get_model("catalog", "Backend")
    spec_model = apps.get_model("catalog", "SpecVersion")
    tool_model = apps.get_model("catalog", "Tool")
    for backend in backend_model.objects.filter(active_spec__isnull=False).only("pk", "active_spec_id").iterator():
        version = spec_model.objects.filter(pk=backend.active_spec_id).only("document").first()
        document = load_document(bytes(version.document), _DOCUMENT_MAX_BYTES, Diagnostics()) if version else None
        if document is None:
            continue
        tagged = []
        for tool in tool_model.objects.filter(backend_id=backend.pk).only("pk", "pointer", "tags"):
            operation = _operation(document, tool.pointer)
            tags = operation_tags(operation.get("tags")) if isinstance(operation, dict) else ()
            if tags:
                tool.tags = list(tags)
                tagged.append(tool)
        tool_model.objects.bulk_update(tagged, ["tags"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [("catalog", "0011_spec_lifecycle")]

    operations = [migrations.RunPython(tags_fill, migrations.RunPython.noop)]
