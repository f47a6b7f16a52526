"""One way to paginate a console list: `?page=N`, a fixed page size, two queries (count + rows)."""

from __future__ import annotations

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import HttpRequest

PER_PAGE = 50


def page_of(request: HttpRequest, queryset: QuerySet, *, per_page: int = PER_PAGE, param: str = "page") -> Page:
    """The page `?page=` (or `?<param>=`, for a page with several lists) names of `queryset` (the
    last one when past the end, the first when not a number). Templates render it with
    `{% include "console/_pager.html" %}` as `page_obj`; with a `param`, also pass `page_param` and
    `keep`, the other parameters (`query_without`)."""
    return Paginator(queryset, per_page).get_page(request.GET.get(param))


def query_without(request: HttpRequest, *params: str) -> str:
    """The request's query string without `params`: what a link to another page of one list keeps."""
    query = request.GET.copy()
    for param in params:
        query.pop(param, None)
    return query.urlencode()
