"""`manage.py tool_index sync [--tenant SLUG]`: build or refresh the tool index now."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from apps.retrieval.indexing import tool_indexes_sync


class Command(BaseCommand):
    help = "Maintain the index behind tool_search."

    def add_arguments(self, parser: ArgumentParser) -> None:
        subcommands = parser.add_subparsers(dest="subcommand", required=True, metavar="{sync}")
        sync = subcommands.add_parser("sync", help="Index every OpenAPI backend's tools that changed (all, first time).")
        sync.add_argument("--tenant", help="Only this tenant's backends (its slug).")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            done = tool_indexes_sync(tenant_slug=options["tenant"])
        except ValueError as error:
            raise CommandError(str(error)) from error
        for backend, change in done:
            self.stdout.write(
                f"{backend.tenant.slug}/{backend.name}: {change.embedded} embedded, {change.removed} removed, "
                f"{change.unchanged} unchanged"
            )
        self.stdout.write(f"{len(done)} backends indexed")
