"""Showing a service's refusal on the form that asked for the change."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError


def refusal_show(form: forms.Form, error: ValidationError) -> None:
    """Put each of the refusal's messages beside the form's field it is about, and the rest (the
    service names a field the form does not have, or none) above the form. Never raises: Django's
    own `add_error` refuses a field the form lacks."""
    if not hasattr(error, "error_dict"):
        form.add_error(None, error.messages)
        return
    for field, errors in error.error_dict.items():
        messages = [message for e in errors for message in e.messages]
        form.add_error(field if field in form.fields and not form.fields[field].disabled else None, messages)
