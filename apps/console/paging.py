"""One way to paginate a console list: `?page=N`, a fixed page size, two queries (count + rows)."""

from __future__ import annotations

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import HttpRequest

PER_PAGE = 50


def page_of(request: HttpRequest, queryset: QuerySet, *, per_page: int = PER_PAGE) -> Page:
    """The page `?page=` names of `queryset` (the last one when past the end, the first when not a
    number). Templates render it with `{% include "console/_pager.html" %}` as `page_obj`."""
    return Paginator(queryset, per_page).get_page(request.GET.get("page"))
