"""The console's view of a virtual host's tools: the tools it serves and hides (searched, filtered and
paged on the server; an htmx fragment, since listing an MCP server's tools takes a round trip), and
its curation — include/exclude rules, hiding and showing tools in bulk, renaming (an alias) and
re-describing one tool (docs/virtual-hosts.md, "Curating a host's tools").

Thin views: each calls one service or selector and renders or redirects back to the host's page."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.catalog import selectors
from apps.catalog.curation import (
    TOOLS_AT_ONCE_MAX,
    rule_describe,
    tool_override_delete,
    tool_override_set,
    tool_rule_delete,
    tools_hide,
    tools_show,
)
from apps.catalog.models import ToolRule, VirtualHost
from apps.catalog.services import ToolTarget, tool_alias_set
from apps.console.access import console_view
from apps.console.widgets import ManyChoices
from apps.gateway.exposure import STATES, ExposedTools, tool_rules_add_measured, virtual_host_exposed_tools
from apps.kernel.curation import PATTERN_MAX_LENGTH, ToolRuleSpec
from apps.tenants.models import Tenant

PAGE_SIZE = 50
#: Tools a picker offers as the operator types.
OPTIONS_MAX = 20


class ToolRuleForm(forms.Form):
    action = forms.ChoiceField(label="Action", choices=ToolRule.Action.choices)
    match = forms.ChoiceField(label="Match by", choices=ToolRule.Match.choices)
    pattern = forms.CharField(label="Name, glob or tag", max_length=PATTERN_MAX_LENGTH, strip=False,
                              help_text="Globs: *, ? and [...]; tags: an OpenAPI operation's tags.")
    map_key = forms.ChoiceField(label="Of", choices=(), required=False, widget=ManyChoices)

    def __init__(self, *args: Any, virtual_host: VirtualHost, map_keys: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, auto_id="rule_%s", **kwargs)
        keys = selectors.mount_keys_list(virtual_host=virtual_host) if map_keys is None else map_keys
        self.fields["map_key"].choices = [("", "every backend"), *((key, key) for key in keys)]
        # A picker for names: typing asks the host for its tools (a glob or tag is typed as it is).
        options = reverse("console:vhost-tool-options", kwargs={"tenant": virtual_host.tenant.slug, "vhost_id": virtual_host.pk})
        self.fields["pattern"].widget.attrs.update({
            "list": "rule-tool-options", "autocomplete": "off", "hx-get": f"{options}?list=rule-tool-options",
            "hx-trigger": "input changed delay:200ms", "hx-target": "#rule-tool-options", "hx-swap": "outerHTML",
            "hx-include": "#rule_map_key",
        })


def vhost_or_404(tenant: Tenant, virtual_host_id: int) -> VirtualHost:
    virtual_host = selectors.virtual_host_get(tenant=tenant, virtual_host_id=virtual_host_id, prefetched=False)
    if virtual_host is None:
        raise Http404(f"no virtual host with id {virtual_host_id}")
    return virtual_host


def _listing(request: HttpRequest) -> dict[str, str]:
    """The listing's filters as the request gives them (GET, or a POST's `back_*` fields)."""
    given = request.GET if request.method == "GET" else {k[5:]: v for k, v in request.POST.items() if k.startswith("back_")}
    state = given.get("state", "served")
    return {"q": str(given.get("q", ""))[:200], "state": state if state in STATES else "served",
            "key": str(given.get("key", ""))[:32], "page": str(given.get("page", ""))[:6]}


def _back(tenant: Tenant, virtual_host: VirtualHost, listing: dict[str, str]) -> HttpResponse:
    query = urlencode({k: v for k, v in listing.items() if v and not (k == "state" and v == "served")})
    url = reverse("console:vhost-detail", kwargs={"tenant": tenant.slug, "vhost_id": virtual_host.pk})
    return redirect(f"{url}{'?' + query if query else ''}#tools-heading")


class _OnePage:
    """One page of a host's tools, as Django's Paginator takes a list: counted in full, sliced to it."""

    def __init__(self, exposed: ExposedTools) -> None:
        self._exposed = exposed

    def count(self) -> int:
        return self._exposed.count

    def __getitem__(self, _: slice) -> list[Any]:
        return self._exposed.tools


def _page_of_tools(virtual_host: VirtualHost, listing: dict[str, str], number: int) -> ExposedTools:
    return virtual_host_exposed_tools(virtual_host=virtual_host, search=listing["q"], state=listing["state"],
                                      map_key=listing["key"], offset=(number - 1) * PAGE_SIZE, limit=PAGE_SIZE)


@require_GET
@console_view()
def vhost_tools(request: HttpRequest, tenant: Tenant, vhost_id: int) -> HttpResponse:
    """The tools fragment: `q` (names and description, most relevant first), `state` (served, hidden,
    all), `key` (one map key), `page`."""
    virtual_host = vhost_or_404(tenant, vhost_id)
    listing = _listing(request)
    number = int(listing["page"]) if listing["page"].isdigit() and int(listing["page"]) > 0 else 1
    exposed = _page_of_tools(virtual_host, listing, number)
    last = max(1, -(-exposed.count // PAGE_SIZE))
    if number > last:  # past the end: the last page, as the console's other lists do
        number, exposed = last, _page_of_tools(virtual_host, listing, last)
    page = Paginator(_OnePage(exposed), PAGE_SIZE).page(number)
    return render(request, "console/vhosts/_exposed.html", {
        "vhost": virtual_host, "exposed": exposed, "page_obj": page, "listing": listing,
        "states": STATES,
    })


@require_GET
@console_view()
def vhost_tool_options(request: HttpRequest, tenant: Tenant, vhost_id: int) -> HttpResponse:
    """Options for a tool picker (a `<datalist>`): the host's tools, served or hidden, that match what
    was typed (`q`, the alias form's `upstream_name` or the rule form's `pattern`), perhaps of one map
    key (`key` or `map_key`)."""
    virtual_host = vhost_or_404(tenant, vhost_id)
    typed = request.GET.get("q", request.GET.get("upstream_name", request.GET.get("pattern", "")))[:200]
    key = request.GET.get("key", request.GET.get("map_key", ""))[:32]
    found = virtual_host_exposed_tools(virtual_host=virtual_host, search=typed, state="all", map_key=key,
                                       limit=OPTIONS_MAX)
    return render(request, "console/vhosts/_tool_options.html", {"tools": found.tools,
                                                                  "list_id": request.GET.get("list", "tool-options")[:40]})


def _picked(request: HttpRequest) -> list[tuple[str, str]]:
    """The tools a bulk form ticked, each `map-key:name` (a map key holds no `:`)."""
    picked = []
    for value in request.POST.getlist("tool")[:TOOLS_AT_ONCE_MAX]:
        key, colon, name = value.partition(":")
        if colon and key and name:
            picked.append((key, name))
    return picked


@require_POST
@console_view()
def vhost_tools_bulk(request: HttpRequest, tenant: Tenant, vhost_id: int) -> HttpResponse:
    """Hide or show the ticked tools (`do` = hide | show)."""
    virtual_host = vhost_or_404(tenant, vhost_id)
    picked, do = _picked(request), request.POST.get("do")
    if not picked or do not in ("hide", "show"):
        messages.error(request, "Tick the tools to hide or show first.")
        return _back(tenant, virtual_host, _listing(request))
    try:
        if do == "hide":
            tools_hide(virtual_host=virtual_host, tools=picked)
            messages.success(request, f"{len(picked)} tool{'s' if len(picked) != 1 else ''} hidden: "
                                      "clients no longer see or call them.")
        else:
            shown = tools_show(virtual_host=virtual_host, tools=picked)
            served = len(picked) - len(shown.still_hidden)
            messages.success(request, f"{served} tool{'s' if served != 1 else ''} served again.")
            for (key, name), why in list(shown.still_hidden.items())[:10]:
                messages.warning(request, f"{key}:{name} stays hidden: {why}. Narrow or remove that rule to serve it.")
    except ValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
    return _back(tenant, virtual_host, _listing(request))


@require_POST
@console_view()
def tool_rule_add(request: HttpRequest, tenant: Tenant, vhost_id: int) -> HttpResponse:
    virtual_host = vhost_or_404(tenant, vhost_id)
    form = ToolRuleForm(request.POST, virtual_host=virtual_host)
    if not form.is_valid():
        messages.error(request, "The rule was refused: " + "; ".join(
            f"{form.fields[f].label if f in form.fields else f}: {' '.join(e)}" for f, e in form.errors.items()))
        return _back(tenant, virtual_host, _listing(request))
    data = form.cleaned_data
    try:
        [rule], effect = tool_rules_add_measured(virtual_host=virtual_host, rules=[
            ToolRuleSpec(data["action"], data["match"], data["pattern"], data["map_key"])])
    except ValidationError as exc:
        messages.error(request, "The rule was refused: " + "; ".join(exc.messages))
    else:
        said = f"Rule added: {rule_describe(rule)}: {effect.describe()}."
        (messages.warning if effect.warning else messages.success)(request, said)
    return _back(tenant, virtual_host, _listing(request))


@require_http_methods(["GET", "POST"])
@console_view()
def tool_rule_remove(request: HttpRequest, tenant: Tenant, vhost_id: int, rule_id: int) -> HttpResponse:
    """GET asks for confirmation (what the host will serve again, or stop serving); POST removes."""
    virtual_host = vhost_or_404(tenant, vhost_id)
    rule = selectors.tool_rule_get(virtual_host=virtual_host, rule_id=rule_id)
    if rule is None:
        raise Http404(f"no tool rule with id {rule_id}")
    if request.method == "POST":
        tool_rule_delete(tool_rule=rule)
        messages.success(request, f"Rule removed: {rule_describe(rule)}.")
        return _back(tenant, virtual_host, {})
    effect = ("the tools it hides are served again, unless another rule hides them"
              if rule.action == ToolRule.Action.EXCLUDE else
              "the tools only it let in are hidden, if other include rules remain; if it is the last include rule, "
              "every tool not excluded is served")
    return render(request, "console/keys/confirm.html", {
        "title": f"Remove the rule {rule_describe(rule)}?",
        "what": [f"On {virtual_host.slug}, {effect}.", "Clients see the change on their next list."],
        "action": "Remove rule",
        "back_url": reverse("console:vhost-detail", kwargs={"tenant": tenant.slug, "vhost_id": virtual_host.pk}),
    })


@require_POST
@console_view()
def tool_edit(request: HttpRequest, tenant: Tenant, vhost_id: int) -> HttpResponse:
    """Rename one tool (`do` = rename: an alias) or set the description the host shows for it
    (describe; an empty one shows the backend's again). `tool` is `map-key:name`."""
    virtual_host = vhost_or_404(tenant, vhost_id)
    key, _, name = request.POST.get("tool", "").partition(":")
    description = request.POST.get("description", "")
    try:
        if request.POST.get("do") == "rename":
            alias = request.POST.get("alias", "").strip()
            tool_alias_set(virtual_host=virtual_host, alias=alias, target=ToolTarget(map_key=key, upstream_name=name))
            messages.success(request, f"{key}:{name} is listed and called as {alias} now.")
        elif description.strip():
            tool_override_set(virtual_host=virtual_host, map_key=key, upstream_name=name, description=description)
            messages.success(request, f"{key}:{name} is described by this host now.")
        else:
            found = selectors.tool_override_get(virtual_host=virtual_host, map_key=key, upstream_name=name)
            if found is not None:
                tool_override_delete(tool_override=found)
            messages.success(request, f"{key}:{name} shows its backend's description again.")
    except ValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
    return _back(tenant, virtual_host, _listing(request))


urls = [
    path("virtual-hosts/<int:vhost_id>/tools/", vhost_tools, name="vhost-tools"),
    path("virtual-hosts/<int:vhost_id>/tools/options/", vhost_tool_options, name="vhost-tool-options"),
    path("virtual-hosts/<int:vhost_id>/tools/bulk/", vhost_tools_bulk, name="vhost-tools-bulk"),
    path("virtual-hosts/<int:vhost_id>/tools/edit/", tool_edit, name="vhost-tool-edit"),
    path("virtual-hosts/<int:vhost_id>/tool-rules/", tool_rule_add, name="vhost-tool-rule-add"),
    path("virtual-hosts/<int:vhost_id>/tool-rules/<int:rule_id>/remove/", tool_rule_remove,
         name="vhost-tool-rule-remove"),
]
