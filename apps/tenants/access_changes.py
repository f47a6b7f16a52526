"""Telling a user's open connections that their access may have shrunk.

Long-lived connections (the console's audit live tail) decide access once, when they open. Every
service that can take access away — a membership removed or changed, a tenant deleted, a user
deactivated, demoted or deleted in the admin — calls `access_changed_notify`; each connection of
that user is in the user's channel-layer group (`access_user_group`), hears `ACCESS_CHANGED`, and
checks its access again. Telling is best effort (a lost message costs at most the connection's own
periodic re-check), so it never fails the change that caused it."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger(__name__)

#: The channel-layer message type; consumers handle it as `access_changed`.
ACCESS_CHANGED = "access.changed"


def access_user_group(*, user_id: int) -> str:
    """The channel-layer group every long-lived connection of one user joins."""
    return f"access-user.{user_id}"


def access_changed_notify(*, user_ids: Iterable[int]) -> None:
    """Tell these users' connections to check their access again, once the current transaction
    commits (at once outside one). Never raises: a failure is logged."""
    ids = sorted(set(user_ids))
    if ids:
        transaction.on_commit(lambda: _send(ids))


def _send(user_ids: list[int]) -> None:
    layer = get_channel_layer()
    for user_id in user_ids:
        try:
            async_to_sync(layer.group_send)(access_user_group(user_id=user_id), {"type": ACCESS_CHANGED})
        except Exception:
            log.warning("telling user %s's connections that their access changed failed", user_id, exc_info=True)
