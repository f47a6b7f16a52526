"""What an entity's check finds wrong: `<entity>_check(...) -> list[FieldProblem]`, one check per
entity, used by its service, the REST API, the console and configuration documents alike (how a
service refuses them: `apps.common.validation_errors.problems_refuse`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """What is wrong with one field of an entity (`field` as the entity names it)."""

    field: str
    message: str
