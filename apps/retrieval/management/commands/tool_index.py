"""`manage.py tool_index sync [--tenant SLUG]`: build or refresh the tool index now.
`manage.py tool_index rules --tenant SLUG [--explain ID ...]`: the resource types extracted from a
tenant's index for reading ids in queries, or how given ids are read."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from apps.retrieval.indexing import tool_indexes_sync
from apps.retrieval.search import rewrite_rules_describe


class Command(BaseCommand):
    help = "Maintain the index behind tool_search."

    def add_arguments(self, parser: ArgumentParser) -> None:
        subcommands = parser.add_subparsers(dest="subcommand", required=True, metavar="{sync,rules}")
        sync = subcommands.add_parser("sync", help="Index every OpenAPI backend's tools that changed (all, first time).")
        sync.add_argument("--tenant", help="Only this tenant's backends (its slug).")
        rules = subcommands.add_parser("rules", help="Show the rules that read ids in queries as resource types.")
        rules.add_argument("--tenant", required=True, help="The tenant's slug.")
        rules.add_argument("--explain", nargs="+", metavar="ID", help="Show how these ids (or ARNs) are read.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["subcommand"] == "rules":
            try:
                lines = rewrite_rules_describe(tenant_slug=options["tenant"], explain=options["explain"] or ())
            except ValueError as error:
                raise CommandError(str(error)) from error
            for line in lines:
                self.stdout.write(line)
            return
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
