"""What an entity's check finds wrong (`<entity>_check(...) -> list[FieldProblem]`: one per entity,
used by its service, the REST API, the console and configuration documents alike), and how a
service refuses it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.core.exceptions import ValidationError


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """What is wrong with one field of an entity (`field` as the entity names it)."""

    field: str
    message: str


def problems_refuse(problems: Sequence[FieldProblem]) -> None:
    """A ValidationError with every problem, by field; nothing when there are none."""
    if problems:
        by_field: dict[str, list[str]] = {}
        for problem in problems:
            by_field.setdefault(problem.field, []).append(problem.message)
        raise ValidationError(by_field)
