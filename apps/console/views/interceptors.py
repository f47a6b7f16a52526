"""The console's interceptors page of a virtual host (docs/interceptors.md): the chain that inspects
each call's request and result, in the order it runs; for tenant admins Add, Edit, Move up / down,
Enable / Disable and Remove (asked first); and "Try it", the stored chain run over sample content.

Every change builds the whole new chain and stores it through `interceptors_set`, which checks every
interceptor first (`kernel.interceptors.interceptor_check`, the one check every face uses): a
refused change stores nothing, and its problems, keyed `<position>.<field>`, are shown next to the
fields of the form that asked. Each kind's own fields are made from its module's constants (actions,
detectors, markers, types, defaults), so a detector a library upgrade brings shows up here by itself.
Every form works as a plain POST; the trial answers htmx with its result alone."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.catalog.models import TenantSecret, VirtualHost
from apps.console.access import console_view
from apps.console.views.tools import htmx_fragment
from apps.console.views.vhost_tools import vhost_or_404
from apps.kernel.interceptors import (
    KINDS,
    WEBHOOK_SETTINGS,
    InterceptorSpec,
    Trial,
    builtin,
    kind_defaults,
    kind_phases,
)
from apps.kernel.interceptors.base import METHODS, PHASES
from apps.policies import selectors
from apps.policies.models import Interceptor
from apps.policies.services import interceptors_set
from apps.tenants.models import Tenant

#: What each kind does, for the chooser (its name is the model's label).
KIND_NOTES = {
    "secrets": "finds credentials (cloud keys, tokens, private keys) and masks them or refuses the call",
    "personal_data": "finds personal data (e-mail addresses, card numbers…) and masks it or refuses the call",
    "fields": "drops or masks named fields, and refuses (or masks) what matches deny patterns",
    "size": "caps how large a result may be: truncates or refuses one over the cap",
    "injection": "flags or refuses a result that carries instructions aimed at the model (prompt injection)",
    "webhook": "asks an outside service of yours, which passes, rewrites or refuses each call",
}
KIND_LABELS = dict(Interceptor.Kind.choices)
#: The longest sample "Try it" takes (characters).
MAX_SAMPLE = 200_000


def _lines(text: str) -> list[str]:
    """The non-blank lines of a textarea, without the spaces at either end."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def _choices(values: Iterable[str]) -> list[tuple[str, str]]:
    return [(value, value) for value in values]


def _checkboxes(label: str, values: Sequence[str], help_text: str = "") -> forms.MultipleChoiceField:
    # Not required: an empty choice is the service's to refuse, in the words every face uses.
    return forms.MultipleChoiceField(label=label, choices=_choices(values), required=False, help_text=help_text,
                                     widget=forms.CheckboxSelectMultiple)


# --- Each kind's own fields: made from its settings, and its settings from them --------------------


@dataclass(frozen=True, slots=True)
class KindForm:
    """How the form shows one kind's settings: `fields` (given the tenant's secret names), the
    settings of the cleaned fields, and the fields' initial values of stored settings (the kind's
    defaults filled in)."""

    fields: Callable[[list[str]], dict[str, forms.Field]]
    settings: Callable[[dict[str, Any]], dict[str, Any]]
    initial: Callable[[Mapping[str, Any]], dict[str, Any]]


def _same_keys(names: Sequence[str]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Settings that are the fields of the same names."""
    return lambda data: {name: data[name] for name in names}


def _same_initial(names: Sequence[str]) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    return lambda settings: {name: list(value) if isinstance(value, (list, tuple)) else value
                             for name, value in settings.items() if name in names}


def _secrets_fields(_: list[str]) -> dict[str, forms.Field]:
    module = builtin("secrets")
    return {
        "action": forms.ChoiceField(label="Action", choices=_choices(module.ACTIONS),
                                    help_text=module.SETTINGS["action"]),
        "detectors": _checkboxes("Detectors", list(module.DETECTORS), "Each masks as [REDACTED:<detector>]."),
    }


def _personal_data_fields(_: list[str]) -> dict[str, forms.Field]:
    module = builtin("personal_data")
    return {f"type_{name}": forms.ChoiceField(label=name, choices=_choices(module.ACTIONS))
            for name in module.DEFAULTS["types"]}


def _personal_data_types(settings: Mapping[str, Any]) -> dict[str, str]:
    """Each type's action: a type the settings leave out takes the kind's default for it."""
    return {**builtin("personal_data").DEFAULTS["types"], **settings.get("types", {})}


def _personal_data_settings(data: dict[str, Any]) -> dict[str, Any]:
    # Only the types whose action is not their default are named, as a document would name them.
    defaults = builtin("personal_data").DEFAULTS["types"]
    types = {name.removeprefix("type_"): action for name, action in data.items()
             if name.startswith("type_") and action != defaults.get(name.removeprefix("type_"))}
    return {"types": types} if types else {}


def _personal_data_initial(settings: Mapping[str, Any]) -> dict[str, Any]:
    return {f"type_{name}": action for name, action in _personal_data_types(settings).items()}


def _fields_fields(_: list[str]) -> dict[str, forms.Field]:
    module = builtin("fields")
    return {
        "rules": forms.CharField(
            label="Field rules", required=False, strip=False, widget=forms.Textarea(attrs={"rows": 4}),
            help_text="One per line: a path, then drop or mask, as in $.user.ssn drop or $..password mask.",
        ),
        "deny": forms.CharField(
            label="Deny patterns", required=False, strip=False, widget=forms.Textarea(attrs={"rows": 3}),
            help_text="Regular expressions, one per line, matched against the call's JSON text.",
        ),
        "deny_action": forms.ChoiceField(label="When a deny pattern matches", choices=_choices(module.DENY_ACTIONS),
                                         help_text=module.SETTINGS["deny_action"]),
    }


def _fields_settings(data: dict[str, Any]) -> dict[str, Any]:
    rules = []
    for line in _lines(data["rules"]):
        # The action is the last word: a path may hold spaces inside a quoted key (['odd key']).
        parts = line.rsplit(None, 1)
        rules.append({"path": parts[0], "action": parts[1] if len(parts) == 2 else ""})
    return {"rules": rules, "deny": _lines(data["deny"]), "deny_action": data["deny_action"]}


def _fields_initial(settings: Mapping[str, Any]) -> dict[str, Any]:
    return {"rules": "\n".join(f"{rule['path']} {rule['action']}" for rule in settings["rules"]),
            "deny": "\n".join(settings["deny"]), "deny_action": settings["deny_action"]}


def _size_fields(_: list[str]) -> dict[str, forms.Field]:
    module = builtin("size")
    return {
        "max_bytes": forms.IntegerField(
            label="Largest result (bytes)", help_text=f"From {module.MIN_BYTES} to {module.MAX_BYTES:,}.",
            widget=forms.NumberInput(attrs={"min": str(module.MIN_BYTES), "max": str(module.MAX_BYTES)}),
        ),
        "action": forms.ChoiceField(label="Action", choices=_choices(module.ACTIONS), help_text=module.SETTINGS["action"]),
    }


def _injection_fields(_: list[str]) -> dict[str, forms.Field]:
    module = builtin("injection")
    return {
        "action": forms.ChoiceField(label="Action", choices=_choices(module.ACTIONS),
                                    help_text="flag: the result goes on, its _meta says what was found; "
                                              "refuse: the call is refused"),
        "markers": _checkboxes("Markers", module.MARKERS),
    }


def _webhook_fields(secret_names: list[str]) -> dict[str, forms.Field]:
    about = {name: f"{text[0].upper()}{text[1:]}." for name, text in WEBHOOK_SETTINGS.items()}
    if not secret_names:
        about["secret"] = ("The tenant has no secrets yet: add one under the tenant's secrets in a configuration "
                           "document (gateway apply).")
    return {
        "url": forms.CharField(label="URL", max_length=2000, widget=forms.URLInput(attrs={"placeholder": "https://"}),
                               help_text=f"{about['url']} Plain http only to localhost."),
        "secret": forms.ChoiceField(label="Signing secret", choices=[("", "—"), *_choices(secret_names)],
                                    required=False, help_text=about["secret"]),
        "timeout_seconds": forms.FloatField(
            label="Timeout (seconds)", help_text=about["timeout_seconds"],
            widget=forms.NumberInput(attrs={"min": "0.05", "max": "30", "step": "0.05"}),
        ),
        "failure": forms.ChoiceField(
            label="When it does not answer in time", help_text=about["failure"],
            choices=[("closed", "closed: the call is refused"), ("open", "open: the call goes on")],
        ),
    }


KIND_FORMS: dict[str, KindForm] = {
    "secrets": KindForm(_secrets_fields, _same_keys(("action", "detectors")), _same_initial(("action", "detectors"))),
    "personal_data": KindForm(_personal_data_fields, _personal_data_settings, _personal_data_initial),
    "fields": KindForm(_fields_fields, _fields_settings, _fields_initial),
    "size": KindForm(_size_fields, _same_keys(("max_bytes", "action")), _same_initial(("max_bytes", "action"))),
    "injection": KindForm(_injection_fields, _same_keys(("action", "markers")), _same_initial(("action", "markers"))),
    "webhook": KindForm(_webhook_fields, _same_keys(("url", "secret", "timeout_seconds", "failure")),
                        _same_initial(("url", "secret", "timeout_seconds", "failure"))),
}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, (list, tuple)) else value


def _without_defaults(kind: str, settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` without those equal to the kind's default: a host that keeps a default follows it
    (all of secrets' detectors includes those a detect-secrets upgrade brings)."""
    defaults = kind_defaults(kind)
    return {name: value for name, value in settings.items()
            if name not in defaults or _plain(value) != _plain(defaults[name])}


class InterceptorForm(forms.Form):
    """One interceptor of `kind`: its name, its kind's settings, where it runs, and whether it does."""

    name = forms.CharField(label="Name", max_length=64,
                           help_text="Lower-case letters, digits, '-' or '_'; refusals and the audit log name it.")
    phases = _checkboxes("Phases", PHASES, "request: before the call is forwarded; result: before the client sees it.")
    methods = _checkboxes("Methods", METHODS)
    targets = forms.CharField(
        label="Targets", required=False, strip=False, widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Tool or prompt names as clients call them, or resource URIs; globs (* ? [...]) allowed; "
                  "one per line. Empty: every call.",
    )
    enabled = forms.BooleanField(label="Enabled", required=False)

    WHERE = ("phases", "methods", "targets")

    def __init__(self, *args: Any, kind: str, tenant: Tenant, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kind = kind
        self.fields["phases"].choices = _choices(kind_phases(kind))
        # A webhook's secret is chosen among the tenant's (their names only: values are never read here).
        names = list(TenantSecret.objects.filter(tenant=tenant).order_by("name").values_list("name", flat=True)
                     ) if kind == "webhook" else []
        settings = KIND_FORMS[kind].fields(names)
        self.setting_names = list(settings)
        self.fields.update(settings)

    @classmethod
    def initial_of(cls, spec: InterceptorSpec) -> dict[str, Any]:
        settings = {**kind_defaults(spec.kind), **spec.settings}
        return {"name": spec.name, "phases": list(spec.phases), "methods": list(spec.methods),
                "targets": "\n".join(spec.targets), "enabled": spec.enabled,
                **KIND_FORMS[spec.kind].initial(settings)}

    @classmethod
    def initial_new(cls, kind: str) -> dict[str, Any]:
        return cls.initial_of(InterceptorSpec(name="", kind=kind, phases=kind_phases(kind)))

    def setting_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in self.setting_names]

    def where_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in self.WHERE]

    def spec(self) -> InterceptorSpec:
        data = self.cleaned_data
        settings = KIND_FORMS[self.kind].settings(data)
        return InterceptorSpec(
            name=data["name"], kind=self.kind, phases=tuple(data["phases"]), methods=tuple(data["methods"]),
            targets=tuple(_lines(data["targets"])), settings=_without_defaults(self.kind, settings),
            enabled=data["enabled"],
        )

    def problems_show(self, error: ValidationError, position: int, chain: Sequence[InterceptorSpec]) -> None:
        """Put each of the service's problems beside the field it names: `<position>.<field>` of this
        interceptor (a setting `<position>.settings.<name>` beside the setting's field); the rest
        (another interceptor's, the chain's) above the form, naming whose."""
        if not hasattr(error, "error_dict"):
            self.add_error(None, error.messages)
            return
        for key, problems in error.message_dict.items():
            number, _, field = key.partition(".")
            if number != str(position):
                whose = (f"interceptor {number} ({chain[int(number) - 1].name})"
                         if number.isdigit() and 0 < int(number) <= len(chain) else "")
                self.add_error(None, [f"{whose}: {problem}" if whose else problem for problem in problems])
                continue
            name = field.removeprefix("settings.")
            self.add_error(name if name in self.fields else None, problems)


# --- Try it --------------------------------------------------------------------------------------


class TrialForm(forms.Form):
    """Sample content, and the call it is met on."""

    phase = forms.ChoiceField(label="Phase", choices=_choices(PHASES), initial="result")
    method = forms.ChoiceField(label="Method", choices=_choices(METHODS))
    target = forms.CharField(label="Target", required=False, max_length=1000, initial="",
                             help_text="The tool or prompt name as clients call it, or the resource URI.")
    sample = forms.CharField(
        label="Sample", strip=False, max_length=MAX_SAMPLE, widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Text, or a JSON object: the arguments of a request, the structured content of a result.",
    )

    def value(self) -> dict[str, Any]:
        """The sample as a call carries it: a request's params, or the JSON-RPC response of a result."""
        data = self.cleaned_data
        sample = data["sample"]
        try:
            parsed = json.loads(sample)
        except ValueError:
            parsed = None
        if data["phase"] == "request":
            return {"name": data["target"], "arguments": parsed if isinstance(parsed, dict) else {"text": sample}}
        result: dict[str, Any] = {"content": [{"type": "text", "text": sample}]}
        if isinstance(parsed, dict):
            # As an MCP server sends structured content: the object, mirrored as its JSON text.
            result = {"content": [{"type": "text", "text": json.dumps(parsed)}], "structuredContent": parsed}
        return {"jsonrpc": "2.0", "id": 1, "result": result}


def _trial_context(trial: Trial | None) -> dict[str, Any] | None:
    if trial is None:
        return None
    return {"steps": trial.steps, "refused_by": trial.refused_by,
            "refusal": next((step.reason for step in trial.steps if step.action == "refuse"), ""),
            "after": json.dumps(trial.payload, indent=2, ensure_ascii=False) if trial.refused_by is None else ""}


# --- The page ------------------------------------------------------------------------------------


def _summary(spec: InterceptorSpec) -> list[str]:
    """A few words on each setting of `spec`, as the table shows them; never a secret's value (a
    webhook's secret is named)."""
    settings = {**kind_defaults(spec.kind), **spec.settings}
    if spec.kind == "webhook":
        return [settings.get("url", ""), f"signed with secret {settings.get('secret', '')}",
                f"timeout {settings['timeout_seconds']:g} s, fails {settings['failure']}"]
    if spec.kind == "personal_data":
        types = _personal_data_types(spec.settings)
        by_action: dict[str, list[str]] = {}
        for name, action in types.items():
            by_action.setdefault(action, []).append(name)
        return [f"{action}: {'every type' if len(names) == len(types) else ', '.join(names)}"
                for action, names in by_action.items() if action != "off"] or ["every type off"]
    if spec.kind == "fields":
        rules = [f"{rule['path']} {rule['action']}" for rule in settings["rules"]]
        deny = settings["deny"]
        lines = [f"{len(rules)} rule{'s' if len(rules) != 1 else ''}: {', '.join(rules)}"] if rules else []
        if deny:
            lines.append(f"{len(deny)} deny pattern{'s' if len(deny) != 1 else ''}, {settings['deny_action']}")
        return lines
    if spec.kind == "size":
        return [f"at most {settings['max_bytes']:,} bytes, {settings['action']}"]
    chosen, every = ("detectors", builtin("secrets").DETECTORS) if spec.kind == "secrets" else (
        "markers", builtin("injection").MARKERS)
    count = len(settings[chosen])
    which = f"all {chosen}" if set(settings[chosen]) >= set(every) else f"{count} of {len(every)} {chosen}"
    return [f"{settings['action']}; {which}"]


def _host(tenant: Tenant, vhost_id: int) -> VirtualHost:
    return vhost_or_404(tenant, vhost_id)


def _list_url(tenant: Tenant, host: VirtualHost) -> str:
    return reverse("console:interceptor-list", kwargs={"tenant": tenant.slug, "vhost_id": host.pk})


def _page(request: HttpRequest, host: VirtualHost, *, trial_form: TrialForm | None = None,
          trial: Trial | None = None, status: int = 200) -> HttpResponse:
    specs = selectors.interceptor_specs_list(virtual_host=host)
    rows = [{"position": position, "spec": spec, "kind_label": KIND_LABELS.get(spec.kind, spec.kind),
             "all_methods": tuple(spec.methods) == METHODS, "summary": _summary(spec)}
            for position, spec in enumerate(specs, start=1)]
    context = {
        "vhost": host, "rows": rows,
        "kinds": [(kind, KIND_LABELS[kind], KIND_NOTES[kind]) for kind in KINDS],
        "trial_form": trial_form or TrialForm(prefix="try"),
        "trial": _trial_context(trial),
    }
    return render(request, "console/interceptors/interceptor_list.html", context, status=status)


def _form_page(request: HttpRequest, host: VirtualHost, form: InterceptorForm, *, editing: str | None = None,
               status: int = 200) -> HttpResponse:
    context = {"vhost": host, "form": form, "editing": editing, "kind": form.kind,
               "kind_label": KIND_LABELS[form.kind], "kind_note": KIND_NOTES[form.kind]}
    return render(request, "console/interceptors/interceptor_form.html", context, status=status)


def _index(specs: list[InterceptorSpec], name: str) -> int:
    index = next((i for i, spec in enumerate(specs) if spec.name == name), None)
    if index is None:
        raise Http404(f"no interceptor {name!r}")
    return index


def _store(request: HttpRequest, tenant: Tenant, host: VirtualHost, chain: list[InterceptorSpec], done: str) -> HttpResponse:
    """Store `chain` as the host's (for the actions without a form: move, enable, remove); a refusal
    is said above the list."""
    try:
        interceptors_set(virtual_host=host, interceptors=chain)
    except ValidationError as exc:
        messages.error(request, "Not changed: " + "; ".join(
            f"{key}: {problem}" for key, problems in exc.message_dict.items() for problem in problems))
    else:
        messages.success(request, done)
    return redirect(_list_url(tenant, host))


@require_GET
@console_view()
def interceptor_list(request: HttpRequest, tenant: Tenant, vhost_id: int) -> HttpResponse:
    """The chain in order; for tenant admins the ways to change it; "Try it" for everyone who may read."""
    return _page(request, _host(tenant, vhost_id))


@require_http_methods(["GET", "POST"])
@console_view(manage=True)
def interceptor_add(request: HttpRequest, tenant: Tenant, vhost_id: int) -> HttpResponse:
    """`?kind=`: the form of an interceptor of that kind (GET), added at the end of the chain (POST);
    without a kind (or an unknown one), back to the list, whose Add asks for one."""
    host = _host(tenant, vhost_id)
    kind = request.POST.get("kind") or request.GET.get("kind")
    if kind not in KINDS:
        return redirect(f"{_list_url(tenant, host)}#add-interceptor")
    if request.method == "GET":
        form = InterceptorForm(kind=kind, tenant=tenant, initial=InterceptorForm.initial_new(kind))
        return _form_page(request, host, form)
    form = InterceptorForm(request.POST, kind=kind, tenant=tenant)
    if not form.is_valid():
        return _form_page(request, host, form, status=400)
    chain = [*selectors.interceptor_specs_list(virtual_host=host), form.spec()]
    try:
        interceptors_set(virtual_host=host, interceptors=chain)
    except ValidationError as exc:
        form.problems_show(exc, len(chain), chain)
        return _form_page(request, host, form, status=400)
    messages.success(request, f"Interceptor {chain[-1].name} added at position {len(chain)}.")
    return redirect(_list_url(tenant, host))


@require_http_methods(["GET", "POST"])
@console_view(manage=True)
def interceptor_edit(request: HttpRequest, tenant: Tenant, vhost_id: int, name: str) -> HttpResponse:
    """The interceptor's form (its kind stays: to change it, add another); POST stores the chain with it changed."""
    host = _host(tenant, vhost_id)
    chain = selectors.interceptor_specs_list(virtual_host=host)
    index = _index(chain, name)
    kind = chain[index].kind
    if request.method == "GET":
        form = InterceptorForm(kind=kind, tenant=tenant, initial=InterceptorForm.initial_of(chain[index]))
        return _form_page(request, host, form, editing=name)
    form = InterceptorForm(request.POST, kind=kind, tenant=tenant)
    if not form.is_valid():
        return _form_page(request, host, form, editing=name, status=400)
    chain[index] = form.spec()
    try:
        interceptors_set(virtual_host=host, interceptors=chain)
    except ValidationError as exc:
        form.problems_show(exc, index + 1, chain)
        return _form_page(request, host, form, editing=name, status=400)
    messages.success(request, f"Interceptor {chain[index].name} saved.")
    return redirect(_list_url(tenant, host))


@require_POST
@console_view()
def interceptor_move(request: HttpRequest, tenant: Tenant, vhost_id: int, name: str) -> HttpResponse:
    """Swap the interceptor with the one above (`direction=up`) or below (`down`); at either end, nothing moves."""
    host = _host(tenant, vhost_id)
    chain = selectors.interceptor_specs_list(virtual_host=host)
    index = _index(chain, name)
    other = index - 1 if request.POST.get("direction") == "up" else index + 1
    if not 0 <= other < len(chain):
        return redirect(_list_url(tenant, host))
    chain[index], chain[other] = chain[other], chain[index]
    return _store(request, tenant, host, chain, f"Interceptor {name} moved to position {other + 1}.")


@require_POST
@console_view()
def interceptor_enable(request: HttpRequest, tenant: Tenant, vhost_id: int, name: str) -> HttpResponse:
    """`enabled=yes` turns the interceptor on, anything else off (said, not toggled: a second click
    of a stale page does not undo the first)."""
    host = _host(tenant, vhost_id)
    chain = selectors.interceptor_specs_list(virtual_host=host)
    index = _index(chain, name)
    enabled = request.POST.get("enabled") == "yes"
    chain[index] = replace(chain[index], enabled=enabled)
    done = "enabled" if enabled else "disabled: calls pass it by"
    return _store(request, tenant, host, chain, f"Interceptor {name} {done}.")


@require_http_methods(["GET", "POST"])
@console_view(manage=True)
def interceptor_remove(request: HttpRequest, tenant: Tenant, vhost_id: int, name: str) -> HttpResponse:
    """GET asks for confirmation; POST removes the interceptor from the chain."""
    host = _host(tenant, vhost_id)
    chain = selectors.interceptor_specs_list(virtual_host=host)
    index = _index(chain, name)
    if request.method == "POST":
        return _store(request, tenant, host, chain[:index] + chain[index + 1:], f"Interceptor {name} removed.")
    spec = chain[index]
    what = [f"Interceptor {index + 1} of {host.slug}, {name} ({KIND_LABELS.get(spec.kind, spec.kind)}: "
            f"{'; '.join(_summary(spec))}), is removed.",
            "From the next call on, what it would have stopped or changed goes on (the other interceptors still run)."
            if spec.enabled else "It is disabled: calls already pass it by."]
    return render(request, "console/keys/confirm.html", {
        "title": f"Remove interceptor {name} from {host.slug}?", "what": what, "action": "Remove interceptor",
        "back_url": _list_url(tenant, host),
    })


@require_POST
@console_view(members_write=True)  # a trial changes nothing and sends nothing out: whoever sees the chain may run it
def interceptor_try(request: HttpRequest, tenant: Tenant, vhost_id: int) -> HttpResponse:
    """The stored chain run over the sample (webhooks are not asked). An htmx request gets the
    result alone, with 200 even for a form with errors: htmx does not swap an error status in."""
    host = _host(tenant, vhost_id)
    form = TrialForm(request.POST, prefix="try")
    trial = None
    if form.is_valid():
        data = form.cleaned_data
        trial = selectors.interceptors_trial(virtual_host=host, phase=data["phase"], method=data["method"],
                                             target=data["target"], value=form.value())
    if htmx_fragment(request):
        context = {"trial_form": form, "trial": _trial_context(trial), "fragment": True}
        return render(request, "console/interceptors/_trial.html", context)
    return _page(request, host, trial_form=form, trial=trial, status=400 if form.errors else 200)


urls = [
    path("virtual-hosts/<int:vhost_id>/interceptors/", interceptor_list, name="interceptor-list"),
    path("virtual-hosts/<int:vhost_id>/interceptors/new/", interceptor_add, name="interceptor-add"),
    path("virtual-hosts/<int:vhost_id>/interceptors/try/", interceptor_try, name="interceptor-try"),
    # An interceptor's own pages sit one level below its name, so that one named "new" or "try" has them too.
    path("virtual-hosts/<int:vhost_id>/interceptors/<str:name>/edit/", interceptor_edit, name="interceptor-edit"),
    path("virtual-hosts/<int:vhost_id>/interceptors/<str:name>/move/", interceptor_move, name="interceptor-move"),
    path("virtual-hosts/<int:vhost_id>/interceptors/<str:name>/enable/", interceptor_enable,
         name="interceptor-enable"),
    path("virtual-hosts/<int:vhost_id>/interceptors/<str:name>/remove/", interceptor_remove,
         name="interceptor-remove"),
]
