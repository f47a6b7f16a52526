"""The console's virtual host pages: the list, create/edit/delete, a host's mounts (backends under map
keys), its tool aliases, and a preview of the tool names it serves (an htmx fragment: listing an MCP
server's tools takes a round trip, so the page does not wait for it).

Thin views: each calls selectors or one service and renders. Every object is looked up within the
URL's tenant, and form choices (backends, keys) come from that tenant only."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.catalog import selectors, services
from apps.catalog.models import Backend, VirtualHost
from apps.catalog.services import (
    ToolTarget,
    mount_delete,
    tool_alias_delete,
    tool_alias_set,
    virtual_host_create,
    virtual_host_delete,
    virtual_host_settings_set,
)
from apps.console.access import console_view
from apps.console.paging import page_of, query_without
from apps.console.refusals import refusal_show
from apps.console.views.vhost_tools import ToolRuleForm, vhost_or_404
from apps.console.widgets import ManyChoices
from apps.tenants.models import ApiKey, Tenant


class VirtualHostForm(forms.Form):
    slug = forms.SlugField(label="Slug", max_length=64, help_text="Part of the MCP URL: /mcp/<tenant>/<slug>.")
    tool_search = forms.ChoiceField(label="tool_search", choices=VirtualHost.ToolSearch.choices)
    tool_search_name = forms.CharField(
        label="tool_search name", max_length=128, initial="tool_search",
        help_text="The name the gateway's own search tool is listed and called by.",
    )
    allow_anonymous = forms.BooleanField(label="Serve callers without credentials", required=False)
    anonymous_key = forms.ModelChoiceField(
        label="Anonymous callers act as key", queryset=ApiKey.objects.none(), required=False,
        help_text="Its policy, limits and audit apply to anonymous callers.",
    )

    def __init__(self, *args: Any, tenant: Tenant, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["anonymous_key"].queryset = ApiKey.objects.filter(tenant=tenant, revoked_at__isnull=True)
        self.fields["anonymous_key"].label_from_instance = lambda key: f"{key.name} ({key.prefix}…)"


class MountForm(forms.Form):
    map_key = forms.CharField(
        label="Map key", max_length=32,
        help_text="Prefixes the backend's tool names when the host mounts several backends.",
    )
    backend = forms.ModelChoiceField(label="Backend", queryset=Backend.objects.none(), to_field_name="name",
                                     widget=ManyChoices)

    def __init__(self, *args: Any, tenant: Tenant, **kwargs: Any) -> None:
        super().__init__(*args, auto_id="mount_%s", **kwargs)  # ids distinct from the alias form's on one page
        self.fields["backend"].queryset = Backend.objects.filter(tenant=tenant).order_by("name")
        self.fields["backend"].label_from_instance = lambda backend: f"{backend.name} ({backend.get_kind_display()})"


class AliasForm(forms.Form):
    alias = forms.CharField(label="Alias", max_length=128, help_text="The tool name clients see, exactly as written.")
    map_key = forms.ChoiceField(label="Map key", choices=(), widget=ManyChoices)
    upstream_name = forms.CharField(
        label="Tool (its name at the backend)", max_length=128,
        # A picker: typing asks the host for its tools (vhost_tool_options) and offers them.
        widget=forms.TextInput(attrs={"list": "alias-tool-options", "autocomplete": "off"}),
    )

    def __init__(self, *args: Any, virtual_host: VirtualHost, map_keys: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, auto_id="alias_%s", **kwargs)
        keys = selectors.mount_keys_list(virtual_host=virtual_host) if map_keys is None else map_keys
        self.fields["map_key"].choices = [(key, key) for key in keys]
        options = reverse("console:vhost-tool-options", kwargs={"tenant": virtual_host.tenant.slug, "vhost_id": virtual_host.pk})
        self.fields["upstream_name"].widget.attrs.update({
            "hx-get": f"{options}?list=alias-tool-options", "hx-trigger": "input changed delay:200ms",
            "hx-target": "#alias-tool-options", "hx-swap": "outerHTML", "hx-include": "#alias_map_key",
        })


_vhost_or_404 = vhost_or_404


def _detail_page(
    request: HttpRequest, tenant: Tenant, virtual_host: VirtualHost, *, mount_form: MountForm | None = None,
    alias_form: AliasForm | None = None, error: str = "",
) -> HttpResponse:
    # A host may mount hundreds of backends and hold hundreds of aliases and rules: each list is paged
    # on its own (`?mounts_page=`, …), and the mounts can be searched.
    mounts_search = request.GET.get("mounts_q", "")[:100]
    lists = {
        "mounts": (selectors.mount_list(virtual_host=virtual_host, search=mounts_search), "mounts_page"),
        "aliases": (selectors.tool_alias_list(virtual_host=virtual_host), "aliases_page"),
        "rules": (selectors.tool_rule_list(virtual_host=virtual_host), "rules_page"),
    }
    pages = {name: page_of(request, rows, param=param) for name, (rows, param) in lists.items()}
    map_keys = selectors.mount_keys_list(virtual_host=virtual_host)
    context = {
        "vhost": virtual_host,
        **pages,
        **{f"{name}_keep": query_without(request, param) for name, (_, param) in lists.items()},
        "mounts_search": mounts_search,
        # What the mounts search keeps of the page's other parameters (the tools' filters, the other lists' pages).
        "mounts_find_keep": [(k, v) for k, v in request.GET.items() if k not in ("mounts_q", "mounts_page")],
        "mounted": mounts_search or pages["mounts"].paginator.count > 0,
        "mount_form": mount_form or MountForm(tenant=tenant),
        "alias_form": alias_form or AliasForm(virtual_host=virtual_host, map_keys=map_keys),
        "rule_form": ToolRuleForm(virtual_host=virtual_host, map_keys=map_keys),
        # The tools fragment is asked for with the filters the page was opened with (the tools' own).
        "tools_query": query_without(request, "mounts_q", *(param for _, param in lists.values())),
        "error": error,
    }
    refused = bool(error or context["mount_form"].errors or context["alias_form"].errors)
    return render(request, "console/vhosts/vhost_detail.html", context, status=400 if refused else 200)


@require_GET
@console_view()
def vhost_list(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    page = page_of(request, selectors.virtual_host_list(tenant=tenant))
    return render(request, "console/vhosts/vhost_list.html", {"page_obj": page, "vhosts": page.object_list})


@require_http_methods(["GET", "POST"])
@console_view()
def vhost_new(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    form = VirtualHostForm(request.POST or None, tenant=tenant)
    if request.method == "POST" and form.is_valid():
        try:
            virtual_host = virtual_host_create(tenant=tenant, **form.cleaned_data)
        except ValidationError as exc:
            refusal_show(form, exc)
        else:
            messages.success(request, f"Virtual host {virtual_host.slug} created: mount a backend next.")
            return redirect("console:vhost-detail", tenant=tenant.slug, vhost_id=virtual_host.pk)
    return render(request, "console/vhosts/vhost_form.html", {"form": form, "vhost": None}, status=400 if form.errors else 200)


@require_http_methods(["GET", "POST"])
@console_view()
def vhost_edit(request: HttpRequest, tenant: Tenant, vhost_id: int) -> HttpResponse:
    """Edit the host's tool_search and anonymous access (its slug stays: it is part of clients' URLs)."""
    virtual_host = _vhost_or_404(tenant, vhost_id)
    initial = {
        "slug": virtual_host.slug, "tool_search": virtual_host.tool_search,
        "tool_search_name": virtual_host.tool_search_name, "allow_anonymous": virtual_host.allow_anonymous,
        "anonymous_key": virtual_host.anonymous_key_id,
    }
    form = VirtualHostForm(request.POST or None, tenant=tenant, initial=initial)
    form.fields["slug"].disabled = True
    if request.method == "POST" and form.is_valid():
        data = dict(form.cleaned_data)
        data.pop("slug")
        try:
            virtual_host_settings_set(virtual_host=virtual_host, **data)
        except ValidationError as exc:
            refusal_show(form, exc)
        else:
            messages.success(request, f"Virtual host {virtual_host.slug} saved.")
            return redirect("console:vhost-detail", tenant=tenant.slug, vhost_id=virtual_host.pk)
    context = {"form": form, "vhost": virtual_host}
    return render(request, "console/vhosts/vhost_form.html", context, status=400 if form.errors else 200)


@require_http_methods(["GET", "POST"])
@console_view()
def vhost_remove(request: HttpRequest, tenant: Tenant, vhost_id: int) -> HttpResponse:
    virtual_host = _vhost_or_404(tenant, vhost_id)
    if request.method == "POST":
        virtual_host_delete(virtual_host=virtual_host)
        messages.success(request, f"Virtual host {virtual_host.slug} deleted.")
        return redirect("console:vhost-list", tenant=tenant.slug)
    return render(request, "console/vhosts/vhost_delete.html", {"vhost": virtual_host})


@require_GET
@console_view()
def vhost_detail(request: HttpRequest, tenant: Tenant, vhost_id: int) -> HttpResponse:
    return _detail_page(request, tenant, _vhost_or_404(tenant, vhost_id))


@require_POST
@console_view()
def mount_add(request: HttpRequest, tenant: Tenant, vhost_id: int) -> HttpResponse:
    virtual_host = _vhost_or_404(tenant, vhost_id)
    form = MountForm(request.POST, tenant=tenant)
    if form.is_valid():
        try:
            services.mount_add(virtual_host=virtual_host, **form.cleaned_data)
        except ValidationError as exc:
            refusal_show(form, exc)
        else:
            messages.success(request, f"Mounted {form.cleaned_data['backend'].name} under {form.cleaned_data['map_key']}.")
            return redirect("console:vhost-detail", tenant=tenant.slug, vhost_id=virtual_host.pk)
    return _detail_page(request, tenant, virtual_host, mount_form=form)


@require_http_methods(["GET", "POST"])
@console_view()
def mount_remove(request: HttpRequest, tenant: Tenant, vhost_id: int, mount_id: int) -> HttpResponse:
    """GET asks for confirmation, naming what goes with the mount; POST unmounts."""
    virtual_host = _vhost_or_404(tenant, vhost_id)
    mount = selectors.mount_get(virtual_host=virtual_host, mount_id=mount_id)
    if mount is None:
        raise Http404(f"no mount with id {mount_id}")
    if request.method == "POST":
        try:
            mount_delete(mount=mount)
        except ValidationError as exc:
            return _detail_page(request, tenant, virtual_host, error="; ".join(exc.messages))
        messages.success(request, f"Unmounted {mount.map_key}.")
        return redirect("console:vhost-detail", tenant=tenant.slug, vhost_id=virtual_host.pk)
    rules = virtual_host.tool_rules.filter(map_key=mount.map_key).count()
    described = virtual_host.tool_overrides.filter(map_key=mount.map_key).count()
    what = [f"{virtual_host.slug} stops serving every tool of {mount.backend.name} (map key {mount.map_key}) at once;"
            " clients calling them get an unknown-tool error."]
    if rules or described:
        what.append(f"Its {rules} curation rule{'s' if rules != 1 else ''} and {described} tool description"
                    f"{'s' if described != 1 else ''} go with it.")
    return render(request, "console/keys/confirm.html", {
        "title": f"Unmount {mount.map_key} from {virtual_host.slug}?", "what": what, "action": "Unmount",
        "back_url": reverse("console:vhost-detail", kwargs={"tenant": tenant.slug, "vhost_id": virtual_host.pk}),
    })


@require_POST
@console_view()
def alias_add(request: HttpRequest, tenant: Tenant, vhost_id: int) -> HttpResponse:
    virtual_host = _vhost_or_404(tenant, vhost_id)
    form = AliasForm(request.POST, virtual_host=virtual_host)
    if form.is_valid():
        data = form.cleaned_data
        try:
            tool_alias_set(
                virtual_host=virtual_host, alias=data["alias"],
                target=ToolTarget(map_key=data["map_key"], upstream_name=data["upstream_name"]),
            )
        except ValidationError as exc:
            refusal_show(form, exc)
        else:
            messages.success(request, f"Alias {data['alias']} saved.")
            return redirect("console:vhost-detail", tenant=tenant.slug, vhost_id=virtual_host.pk)
    return _detail_page(request, tenant, virtual_host, alias_form=form)


@require_http_methods(["GET", "POST"])
@console_view()
def alias_remove(request: HttpRequest, tenant: Tenant, vhost_id: int, alias_id: int) -> HttpResponse:
    """GET asks for confirmation (clients calling the alias break); POST removes it."""
    virtual_host = _vhost_or_404(tenant, vhost_id)
    tool_alias = selectors.tool_alias_get(virtual_host=virtual_host, alias_id=alias_id)
    if tool_alias is None:
        raise Http404(f"no alias with id {alias_id}")
    if request.method == "GET":
        return render(request, "console/keys/confirm.html", {
            "title": f"Remove the alias {tool_alias.alias} from {virtual_host.slug}?",
            "what": [f"Clients calling {tool_alias.alias} get an unknown-tool error from then on.",
                     f"The tool ({tool_alias.map_key}: {tool_alias.upstream_name}) is listed under its default name "
                     "again, unless another alias names it."],
            "action": "Remove alias",
            "back_url": reverse("console:vhost-detail", kwargs={"tenant": tenant.slug, "vhost_id": virtual_host.pk}),
        })
    tool_alias_delete(tool_alias=tool_alias)
    messages.success(request, f"Alias {tool_alias.alias} removed.")
    return redirect("console:vhost-detail", tenant=tenant.slug, vhost_id=virtual_host.pk)


urls = [
    path("virtual-hosts/", vhost_list, name="vhost-list"),
    path("virtual-hosts/new/", vhost_new, name="vhost-new"),
    path("virtual-hosts/<int:vhost_id>/", vhost_detail, name="vhost-detail"),
    path("virtual-hosts/<int:vhost_id>/edit/", vhost_edit, name="vhost-edit"),
    path("virtual-hosts/<int:vhost_id>/delete/", vhost_remove, name="vhost-delete"),
    path("virtual-hosts/<int:vhost_id>/mounts/", mount_add, name="vhost-mount-add"),
    path("virtual-hosts/<int:vhost_id>/mounts/<int:mount_id>/remove/", mount_remove, name="vhost-mount-remove"),
    path("virtual-hosts/<int:vhost_id>/aliases/", alias_add, name="vhost-alias-add"),
    path("virtual-hosts/<int:vhost_id>/aliases/<int:alias_id>/remove/", alias_remove, name="vhost-alias-remove"),
]
