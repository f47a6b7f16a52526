"""A secret shown once, after the POST that created it (post/redirect/get): the POST keeps it in the
session, encrypted like every stored secret, and redirects; the page it redirects to takes it out
and shows it. A reload finds nothing, so it neither repeats the POST nor shows the secret again,
and the secret is never in a URL."""

from __future__ import annotations

from django.http import HttpRequest

from apps.common.secrets import SecretUnreadable, secret_decrypt, secret_encrypt

_SESSION_KEY = "console:shown-once"


def secret_keep(request: HttpRequest, *, what: str, secret: str) -> None:
    """Keep `secret` for one showing by the page of `what` (e.g. "key:12"); several may wait at once."""
    kept = request.session.get(_SESSION_KEY)
    kept = kept if isinstance(kept, dict) else {}
    request.session[_SESSION_KEY] = {**kept, what: secret_encrypt(secret)}


def secret_take(request: HttpRequest, *, what: str) -> str | None:
    """The secret kept for `what`, forgotten as it is returned; None when there is none (any more)."""
    kept = request.session.get(_SESSION_KEY)
    if not isinstance(kept, dict) or what not in kept:
        return None
    token = kept.pop(what)
    request.session[_SESSION_KEY] = kept  # reassigned: the session notices the change and saves it
    try:
        return secret_decrypt(str(token))
    except SecretUnreadable:  # the keys changed in between: as good as gone
        return None
