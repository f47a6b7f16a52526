"""Form widgets the console shares."""

from __future__ import annotations

from typing import Any

from django import forms
from django.forms.utils import flatatt
from django.utils.html import format_html, format_html_join

#: Choices a plain `<select>` offers; past that, a text box that offers them as one types.
FEW_CHOICES = 50


class ManyChoices(forms.Select):
    """A `<select>` while the choices are few; past FEW_CHOICES a text box whose `<datalist>` offers
    them as one types (a 400-option select is slow to render and to scroll). Either way the value
    sent is a choice's value, checked by the field as usual, so give choices values a person can
    type (a name, not a database id). An empty choice becomes the box's placeholder."""

    def render(self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None) -> str:
        choices = [(str(v), str(label)) for v, label in self.choices]
        self.choices = choices  # read once: a model field's choices are a query each time
        if len(choices) <= FEW_CHOICES:
            return super().render(name, value, attrs, renderer)
        final = self.build_attrs(self.attrs, attrs)
        list_id = f"{final.get('id') or name}-choices"
        given = self.format_value(value)
        # An optional field's empty choice says what leaving the box empty means; a required one's
        # ("---------") says nothing.
        empty = next((label for v, label in choices if v == ""), "")
        final.update(type="text", list=list_id, autocomplete="off",
                     placeholder=empty if empty and not self.is_required else "type to choose")
        if self.is_required:
            final["required"] = True  # (a select with an empty first choice leaves it to the field)
        return format_html(
            '<input name="{}" value="{}"{}><datalist id="{}">{}</datalist>',
            name, given[0] if given else "", flatatt(final), list_id,
            format_html_join("", '<option value="{}">{}</option>', ((v, label) for v, label in choices if v != "")),
        )
