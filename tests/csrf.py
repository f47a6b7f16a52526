"""CSRF for session-authenticated API writes, as the console's pages send it."""

from __future__ import annotations

from django.test import Client


def csrf_header(client: Client, tenant_slug: str) -> dict[str, str]:
    """The `X-CSRFToken` header a console page's htmx sends with a write (templates/console/base.html),
    taken from the cookie the tenant's backends page sets for the client's signed-in user."""
    assert client.get(f"/console/t/{tenant_slug}/backends/").status_code == 200
    return {"HTTP_X_CSRFTOKEN": client.cookies["csrftoken"].value}
