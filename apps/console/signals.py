"""Revoking the audit log's live tails: whenever a user's access to tenants may have shrunk, the
user's open tails are told to check theirs again (`apps.audit.live`). Connected in the app's
`ready`; the ORM's signals reach every way the console, the REST API, the admin and `gateway
apply` change memberships and users."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models.signals import post_delete, post_save

from apps.audit.live import audit_live_access_changed
from apps.tenants.models import Membership

#: The user fields access depends on (`apps.tenants.access.access_get`); a save that names only
#: others (`last_login`, at every sign-in) changes nothing a tail relies on.
_ACCESS_FIELDS = frozenset({"is_active", "is_superuser"})


def _membership_changed(sender: type[Membership], instance: Membership, **kwargs: Any) -> None:
    audit_live_access_changed(user_id=instance.user_id)


def _user_changed(sender: type, instance: Any, **kwargs: Any) -> None:
    if kwargs.get("created"):
        return  # a new user has no tails open
    update_fields = kwargs.get("update_fields")
    if update_fields is not None and not _ACCESS_FIELDS & set(update_fields):
        return
    audit_live_access_changed(user_id=instance.pk)


def live_tail_revocation_connect() -> None:
    """Connect the receivers (idempotent: each is connected under a fixed uid)."""
    user = get_user_model()
    post_save.connect(_membership_changed, sender=Membership, dispatch_uid="live-tail-membership-saved")
    post_delete.connect(_membership_changed, sender=Membership, dispatch_uid="live-tail-membership-deleted")
    post_save.connect(_user_changed, sender=user, dispatch_uid="live-tail-user-saved")
    post_delete.connect(_user_changed, sender=user, dispatch_uid="live-tail-user-deleted")
