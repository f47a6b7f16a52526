"""How the REST API's URLs are matched: every API path also answers with one trailing slash (the
docs and many clients add one), and a path under `/api/` that matches nothing answers a JSON 404
like every other API error, never an HTML page (not even Django's debug page)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse
from django.urls import URLResolver, include, path
from django.urls.exceptions import Resolver404
from django.urls.resolvers import ResolverMatch
from django.views.decorators.csrf import csrf_exempt


class _SlashOptionalResolver(URLResolver):
    """Tries the path as given, then without its one trailing slash. The patterns stay as written,
    so reversing a URL and the OpenAPI schema still spell each path once, without the slash."""

    def resolve(self, path: Any) -> ResolverMatch:
        try:
            return super().resolve(path)
        except Resolver404:
            if isinstance(path, str) and path.endswith("/") and not path.endswith("//"):
                return super().resolve(path[:-1])
            raise


def api_path(route: str, patterns: Any) -> URLResolver:
    """`path(route, include(patterns))` whose every path also answers with one trailing slash."""
    plain = path(route, include(patterns))
    assert isinstance(plain, URLResolver)
    return _SlashOptionalResolver(plain.pattern, plain.urlconf_name, plain.default_kwargs,
                                  app_name=plain.app_name, namespace=plain.namespace)


@csrf_exempt  # nothing here is changed; a token-authenticated POST must get the 404, not a CSRF page
def api_not_found(request: HttpRequest) -> JsonResponse:
    """The answer to any method on a path under `/api/` that no endpoint serves."""
    return JsonResponse(
        {"detail": f"Not found: no API endpoint {request.path} (the endpoints are listed by /api/v1/schema)."},
        status=404,
    )
