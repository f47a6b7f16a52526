"""How a service refuses what an entity's check found (`apps.kernel.problems.FieldProblem`)."""

from __future__ import annotations

from collections.abc import Sequence

from django.core.exceptions import ValidationError

from apps.kernel.problems import FieldProblem


def problems_refuse(problems: Sequence[FieldProblem]) -> None:
    """A ValidationError with every problem, by field; nothing when there are none."""
    if problems:
        by_field: dict[str, list[str]] = {}
        for problem in problems:
            by_field.setdefault(problem.field, []).append(problem.message)
        raise ValidationError(by_field)
