"""The tool index: one entry per tool of a backend, for `tool_search` (docs/tool-search.md, "The index").

Entries are keyed by backend and upstream tool name, not by catalog row: a spec's publication
replaces its backend's tool rows, and an unchanged tool must keep its embedding (`digest`)."""

from __future__ import annotations

from django.contrib.postgres.search import SearchVectorField
from django.db import models
from pgvector.django import VectorField

from apps.catalog.models import Backend
from apps.retrieval.embeddings import DIMENSIONS
from apps.tenants.models import Tenant


class IndexedTool(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    backend = models.ForeignKey(Backend, on_delete=models.CASCADE, related_name="indexed_tools")
    name = models.CharField(max_length=128, help_text="The tool's name at its backend.")
    document = models.TextField(help_text="The text the embedding was computed from.")
    description = models.TextField(blank=True, default="", help_text="The description as full-text search reads it.")
    parameters = models.JSONField(default=list, help_text="The tool's parameter names, as its schema writes them.")
    prerequisites = models.JSONField(
        default=list, help_text="[backend id, name] of the tools that must run first, dependencies first."
    )
    needs = models.JSONField(
        default=list, help_text="The ids the tool cannot work without: {parameter, producer, lookup}, each tool as "
        "[backend id, name] or null (docs/tool-search.md, Prerequisite chains)."
    )
    input_schema = models.JSONField(
        default=dict, blank=True, help_text="An MCP tool's input schema as its server lists it, for deriving "
        "chains (an OpenAPI tool's is its catalog row's: empty here)."
    )
    digest = models.CharField(max_length=32, help_text="Of the indexed text and the model: changes when either does.")
    search = SearchVectorField()
    embedding = VectorField(dimensions=DIMENSIONS)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["backend", "name"], name="indexed_tool_unique_name")]

    def __str__(self) -> str:
        return f"{self.backend_id}:{self.name}"
