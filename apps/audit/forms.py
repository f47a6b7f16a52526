"""The audit log's filter, read from a query string: the console page, its CSV export, its live
tail and the REST API all narrow the log through this one form. Its choices are the tenant's own
keys, teams and backends, so no other tenant's object can be named."""

from __future__ import annotations

from typing import Any

from django import forms

from apps.audit.models import AuditRecord
from apps.audit.selectors import AuditFilter
from apps.catalog.models import Backend
from apps.tenants.models import ApiKey, Team, Tenant

_ANY = ("", "any")


class AuditFilterForm(forms.Form):
    key = forms.TypedChoiceField(label="Key", required=False, coerce=int, empty_value=None)
    team = forms.ChoiceField(label="Team", required=False)
    tool = forms.CharField(label="Tool", required=False, max_length=255, help_text="The name the caller used.")
    backend = forms.ChoiceField(label="Backend", required=False)
    outcome = forms.ChoiceField(label="Outcome", required=False, choices=[_ANY, *AuditRecord.Outcome.choices])
    origin = forms.ChoiceField(label="Origin", required=False, choices=[_ANY, *AuditRecord.Origin.choices])
    trace = forms.RegexField(
        label="Trace", required=False, regex=r"^[0-9a-f]{32}$", max_length=32,
        error_messages={"invalid": "A trace id is 32 lowercase hexadecimal digits."},
    )
    since = forms.DateTimeField(
        label="From", required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        help_text="UTC, inclusive.",
    )
    until = forms.DateTimeField(
        label="To", required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        help_text="UTC, exclusive.",
    )

    def __init__(self, data: Any = None, *, tenant: Tenant) -> None:
        super().__init__(data)
        self.fields["key"].choices = [
            _ANY, *ApiKey.objects.filter(tenant=tenant).order_by("name", "pk").values_list("pk", "name")
        ]
        teams = Team.objects.filter(tenant=tenant).order_by("slug").values_list("slug", flat=True)
        self.fields["team"].choices = [_ANY, *((slug, slug) for slug in teams)]
        backends = Backend.objects.filter(tenant=tenant).order_by("name").values_list("name", flat=True)
        self.fields["backend"].choices = [_ANY, *((name, name) for name in backends)]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and since >= until:
            self.add_error("until", "Must be later than From.")
        return cleaned

    def audit_filter(self) -> AuditFilter:
        """The filter of a valid form."""
        data = self.cleaned_data
        return AuditFilter(
            api_key_id=data["key"], team=data["team"], tool=data["tool"], backend=data["backend"],
            outcome=data["outcome"], since=data["since"], until=data["until"], origin=data["origin"],
            trace_id=data["trace"],
        )

    def error_text(self) -> str:
        return "; ".join(f"{name}: {' '.join(errors)}" for name, errors in self.errors.items())
