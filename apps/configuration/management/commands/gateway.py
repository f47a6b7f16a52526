"""`manage.py gateway apply|export|seed-demo`: configuration as code from the command line."""

from __future__ import annotations

from argparse import ArgumentParser
from pathlib import Path
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandError

from apps.catalog.models import SpecVersion
from apps.catalog.specs import spec_versions_wait
from apps.configuration.document import ConfigInvalid
from apps.configuration.reports import report_lines, spec_report_lines
from apps.configuration.services import config_apply, config_export, demo_seed

# Exit status for a configuration that cannot be applied (argparse uses 2 for bad usage too).
INVALID_EXIT_CODE = 2


class Command(BaseCommand):
    help = "Apply or export the gateway configuration as YAML, or seed the demo tenant."

    def add_arguments(self, parser: ArgumentParser) -> None:
        subcommands = parser.add_subparsers(dest="subcommand", required=True, metavar="{apply,export,seed-demo}")
        apply = subcommands.add_parser("apply", help="Make the database match a YAML configuration file.")
        apply.add_argument("-f", "--file", required=True, type=Path, help="The YAML file ('-' is not supported).")
        apply.add_argument("--prune", action="store_true", help="Also delete what the file does not name.")
        apply.add_argument("--dry-run", action="store_true", help="Report what would change; write nothing.")
        apply.add_argument(
            "--allow-removals", action="store_true",
            help="Publish OpenAPI specs even when they remove more than half of a backend's tools (else they are held).",
        )
        apply.add_argument(
            "--wait", type=float, default=300.0, metavar="SECONDS",
            help="How long to wait for uploaded OpenAPI specs to compile (0: do not wait; default 300).",
        )
        subcommands.add_parser("export", help="Print the configuration as YAML (without key secrets).")
        seed = subcommands.add_parser("seed-demo", help="Idempotently set up the demo tenant and admin user.")
        seed.add_argument("--backend-url", required=True)
        seed.add_argument("--key-file", required=True, type=Path)
        seed.add_argument("--admin-password-file", required=True, type=Path)

    def handle(self, *args: Any, **options: Any) -> None:
        subcommand = options["subcommand"]
        if subcommand == "apply":
            self._apply(options["file"], prune=options["prune"], dry_run=options["dry_run"], wait=options["wait"],
                        allow_removals=options["allow_removals"])
        elif subcommand == "export":
            self.stdout.write(config_export(), ending="")
        else:
            try:
                report = demo_seed(
                    backend_url=options["backend_url"],
                    key_file=options["key_file"],
                    admin_password_file=options["admin_password_file"],
                )
            except ConfigInvalid as error:
                self._fail(error)
            # Only the summary: the credentials are in the files, for the run script to read.
            self.stdout.write(f"demo seeded: {report_lines(report)[-1]}")

    def _apply(self, path: Path, *, prune: bool, dry_run: bool, wait: float, allow_removals: bool) -> None:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise CommandError(f"cannot read {path}: {error.strerror}", returncode=INVALID_EXIT_CODE) from error
        try:
            report = config_apply(document=text, prune=prune, dry_run=dry_run, base_dir=path.parent,
                                  allow_removals=allow_removals)
        except ConfigInvalid as error:
            self._fail(error, path=path)
        for line in report_lines(report):
            self.stdout.write(line)
        if report.spec_versions and wait > 0:
            versions = spec_versions_wait(ids=report.spec_versions, timeout=wait)
            lines = spec_report_lines(versions)
            for line in lines:
                self.stdout.write(line)
            if any(v.status == SpecVersion.Status.FAILED for v in versions):
                raise CommandError("an OpenAPI spec failed to compile; the previous version keeps serving")
            if any(v.status == SpecVersion.Status.HELD for v in versions):
                raise CommandError("an OpenAPI spec was held: it would remove more than half of its backend's tools; "
                                   "the previous version keeps serving (apply again with --allow-removals to publish it)")

    def _fail(self, error: ConfigInvalid, *, path: Path | None = None) -> NoReturn:
        for problem in error.problems:
            self.stderr.write(str(problem))
        where = f" in {path}" if path else ""
        raise CommandError(
            f"{len(error.problems)} problem(s){where}; nothing was changed", returncode=INVALID_EXIT_CODE
        )
