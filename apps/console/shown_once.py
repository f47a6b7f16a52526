"""A secret shown once, after the POST that created it (post/redirect/get): the POST keeps it in the
session, encrypted like every stored secret, and redirects; the page it redirects to takes it out
and shows it. A reload finds nothing, so it neither repeats the POST nor shows the secret again,
and the secret is never in a URL. One whose page is never opened is forgotten after
SHOWN_ONCE_SECONDS (sessions last weeks)."""

from __future__ import annotations

import time

from django.http import HttpRequest

from apps.common.secrets import SecretUnreadable, secret_decrypt, secret_encrypt

_SESSION_KEY = "console:shown-once"
#: How long a kept secret waits for its page: the redirect is followed at once, or not at all.
SHOWN_ONCE_SECONDS = 300


def _fresh(kept: object) -> dict[str, list[object]]:
    """The kept secrets still within SHOWN_ONCE_SECONDS, as {what: [token, kept at]}."""
    if not isinstance(kept, dict):
        return {}
    oldest = time.time() - SHOWN_ONCE_SECONDS
    return {what: entry for what, entry in kept.items()
            if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], (int, float)) and entry[1] >= oldest}


def secret_keep(request: HttpRequest, *, what: str, secret: str) -> None:
    """Keep `secret` for one showing by the page of `what` (e.g. "key:12"); several may wait at once."""
    kept = _fresh(request.session.get(_SESSION_KEY))
    request.session[_SESSION_KEY] = {**kept, what: [secret_encrypt(secret), time.time()]}


def secret_take(request: HttpRequest, *, what: str) -> str | None:
    """The secret kept for `what`, forgotten as it is returned; None when there is none (any more)."""
    stored = request.session.get(_SESSION_KEY)
    if not isinstance(stored, dict) or not stored:
        return None
    kept = _fresh(stored)
    entry = kept.pop(what, None)
    request.session[_SESSION_KEY] = kept  # reassigned (the expired go too): the session saves the change
    if entry is None:
        return None
    try:
        return secret_decrypt(str(entry[0]))
    except SecretUnreadable:  # the keys changed in between: as good as gone
        return None
