"""Celery tasks of the authorization server. Thin: each calls one service."""

from __future__ import annotations

from celery import shared_task

from apps.oauth.services import oauth_rows_prune


@shared_task(ignore_result=True)
def oauth_prune() -> None:
    """Periodic (Celery beat): spent codes, replaced refresh tokens and long-revoked grants go."""
    oauth_rows_prune()
