"""The checks of single values the configuration validator is made of (see `validation`)."""

from __future__ import annotations

from collections.abc import Container, Iterable
from datetime import date, datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator

from apps.configuration.document import Problem, TenantSpec
from apps.kernel.problems import FieldProblem


def _first_message(error: ValidationError) -> str:
    message = error.messages[0]
    return message[:1].lower() + message[1:]


def private_networks_allowed(tenant: TenantSpec | None) -> bool:
    """Whether the document lets the tenant's backends, token endpoints and key sets be at private
    addresses."""
    if tenant is None or tenant.allow_private_networks is None:
        return bool(settings.GATEWAY_ALLOW_PRIVATE_NETWORKS)
    return tenant.allow_private_networks


class FieldChecks:
    """Checks of one value each: a problem is recorded at the value's path and a harmless
    default returned, so that one walk reports every problem of a document."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def refuse(self, path: str, problems: Iterable[FieldProblem], *, given: Container[str]) -> set[str]:
        """Record an entity check's problems at `path.<field>`, for the fields the document gives
        (a missing one is already reported as required); the fields found wrong."""
        wrong: set[str] = set()
        for problem in problems:
            if problem.field in given:
                self.add(f"{path}.{problem.field}", problem.message)
                wrong.add(problem.field)
        return wrong

    # --- shapes ------------------------------------------------------------------------------
    def mapping(
        self, value: Any, path: str, *, fields: tuple[str, ...], required: tuple[str, ...]
    ) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.add(path, "must be a mapping")
            return None
        for key in value:
            if key not in fields:
                self.add(f"{path}.{key}", f"unknown field (expected one of: {', '.join(fields)})")
        for key in required:
            if key not in value:
                self.add(f"{path}.{key}", "is required")
        return value

    def items(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.add(path, "must be a list")
            return []
        return value

    def pairs(self, value: Any, path: str) -> list[tuple[str, Any]]:
        """A mapping with string keys, as (key, value) pairs in document order."""
        if value is None:
            return []
        if not isinstance(value, dict):
            self.add(path, "must be a mapping")
            return []
        pairs = []
        for key, item in value.items():
            if not isinstance(key, str):
                self.add(f"{path}.{key}", "keys must be strings")
                continue
            pairs.append((key, item))
        return pairs

    def text(
        self, value: Any, path: str, *, max_length: int, validator: RegexValidator | None = None, what: str = ""
    ) -> str:
        if not isinstance(value, str) or not value:
            self.add(path, "must be a non-empty string")
            return ""
        if len(value) > max_length:
            self.add(path, f"must be at most {max_length} characters")
            return value
        if validator is not None:
            try:
                validator(value)
            except ValidationError as error:
                self.add(path, f"invalid {what} {value!r}: {_first_message(error)}")
        return value

    def flag(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            self.add(path, "must be true or false")
            return False
        return value

    def choice(self, value: Any, path: str, choices: list[str]) -> str:
        if value not in choices:
            self.add(path, f"must be one of: {', '.join(choices)}")
            return ""
        return value

    def timestamp(self, value: Any, path: str) -> datetime | None:
        if isinstance(value, str):
            try:
                value = datetime.fromisoformat(value)
            except ValueError:
                self.add(path, "must be an ISO 8601 timestamp, e.g. 2030-01-31T00:00:00Z")
                return None
        if not isinstance(value, datetime):
            kind = "a date without a time" if isinstance(value, date) else "not a timestamp"
            self.add(path, f"must be an ISO 8601 timestamp with a timezone, e.g. 2030-01-31T00:00:00Z ({kind})")
            return None
        if value.tzinfo is None:
            self.add(path, "must include a timezone, e.g. 2030-01-31T00:00:00Z")
            return None
        return value
