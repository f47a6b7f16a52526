"""The tool tester's form (docs/console.md, "Trying a tool"): the virtual host to call on, who to call
as, and the arguments — a field for each top-level property of the tool's input schema (strings,
numbers, integers, booleans, enums as a select, arrays and objects as JSON), required ones marked,
defaults filled in — or the arguments as one JSON object, the only way for a schema that fields
cannot express (`argument_fields` says which). The tool itself judges the arguments: the form
only reads their types."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django import forms

from apps.catalog.tool_selectors import schema_type

#: Root keywords that shape the arguments beyond a list of named properties.
_BEYOND_FIELDS = frozenset({
    "anyOf", "oneOf", "allOf", "not", "if", "then", "else", "$ref", "$dynamicRef", "patternProperties",
    "dependentSchemas", "dependencies",
})
#: More properties than this: the JSON box is the better form.
MAX_FIELDS = 100
_SCALARS = (str, int, float, bool, type(None))
_NOT_SENT = ("", "— not sent —")
FORM, JSON = "form", "json"


@dataclass(frozen=True, slots=True)
class ArgumentField:
    """One top-level argument as the form asks for it. `kind`: string | integer | number | boolean |
    choice (one of `choices`) | json (any JSON value; `json_type` "array" or "object" when the
    schema says which)."""

    name: str
    kind: str
    required: bool
    description: str = ""
    type_words: str = ""  # the schema's type in a few words
    has_default: bool = False
    default: Any = None
    choices: tuple[Any, ...] = ()
    json_type: str = ""


def _types(schema: Mapping[str, Any]) -> list[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list):
        return [t for t in declared if isinstance(t, str) and t != "null"]
    return []


def _field(name: str, schema: object, required: bool) -> ArgumentField:
    if not isinstance(schema, Mapping):  # `true`: any value
        return ArgumentField(name, "json", required, type_words="any")
    common = {
        "required": required, "description": str(schema.get("description") or ""), "type_words": schema_type(schema),
        "has_default": "default" in schema, "default": schema.get("default"),
    }
    values = schema.get("enum") if isinstance(schema.get("enum"), list) else [schema["const"]] if "const" in schema else None
    if values and all(isinstance(v, _SCALARS) for v in values):
        return ArgumentField(name, "choice", choices=tuple(values), **common)
    types = _types(schema)
    structured = any(key in schema for key in ("anyOf", "oneOf", "allOf", "$ref", "not"))
    if len(types) == 1 and not structured:
        kind = types[0]
        if kind in {"string", "integer", "number", "boolean"}:
            return ArgumentField(name, kind, **common)
        if kind in {"array", "object"}:
            return ArgumentField(name, "json", json_type=kind, **common)
    return ArgumentField(name, "json", **common)


def argument_fields(schema: object) -> list[ArgumentField] | None:
    """The fields of a tool's input schema, required ones first, each in the schema's order; None
    when fields cannot express it (not an object schema of named properties, a root `anyOf`,
    `oneOf`, `allOf`, `$ref` or pattern properties, or more than MAX_FIELDS properties): the
    arguments are then written as JSON."""
    if not isinstance(schema, Mapping) or any(key in schema for key in _BEYOND_FIELDS):
        return None
    types = _types(schema)
    if types and types != ["object"]:
        return None
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping) or len(properties) > MAX_FIELDS:
        return None
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    names = [n for n in properties if n in required] + [n for n in properties if n not in required]
    # A property whose schema is `false` can never be given: no field.
    return [_field(name, properties[name], name in required) for name in names if properties[name] is not False]


class _NumberField(forms.CharField):
    """A JSON number: an integer stays one (3, not 3.0)."""

    widget = forms.NumberInput(attrs={"step": "any"})

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value).strip()
        if not text:
            return None
        try:
            return int(text)
        except ValueError:
            pass
        try:
            number = float(text)
        except ValueError:
            raise forms.ValidationError("Enter a number.") from None
        if not math.isfinite(number):
            raise forms.ValidationError("Enter a finite number.")
        return number


class _JsonField(forms.CharField):
    """Any JSON value (an `array` or an `object` when `json_type` says so); empty: not sent."""

    def __init__(self, *, json_type: str = "", **kwargs: Any) -> None:
        kwargs.setdefault("widget", forms.Textarea(attrs={"rows": 3, "spellcheck": "false", "class": "json"}))
        super().__init__(strip=False, **kwargs)
        self.json_type = json_type

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value)
        if not text.strip():
            return None
        try:
            parsed = json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"This is not JSON: {exc}.") from None
        except RecursionError:
            raise forms.ValidationError("This JSON is nested too deeply.") from None
        expected = {"array": list, "object": dict}.get(self.json_type)
        if expected is not None and not isinstance(parsed, expected):
            raise forms.ValidationError(f"Write a JSON {self.json_type} here.")
        return _Given(parsed)


@dataclass(frozen=True, slots=True)
class _Given:
    """A value given in a JSON field (JSON null included), told apart from an empty field."""

    value: Any


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _django_field(arg: ArgumentField) -> forms.Field:
    label, help_text = arg.name, " — ".join(part for part in (arg.type_words, arg.description) if part)
    initial = arg.default if arg.has_default else None
    common: dict[str, Any] = {"label": label, "help_text": help_text}
    if arg.kind == "string":
        return forms.CharField(required=arg.required, strip=False, initial=initial, **common)
    if arg.kind == "integer":
        return forms.IntegerField(required=arg.required, initial=initial, **common)
    if arg.kind == "number":
        return _NumberField(required=arg.required, initial=initial, **common)
    if arg.kind == "boolean":
        if arg.required:  # a checkbox always says true or false
            return forms.BooleanField(required=False, initial=bool(initial), **common)
        return forms.TypedChoiceField(
            required=False, choices=[_NOT_SENT, ("true", "true"), ("false", "false")], coerce=lambda v: v == "true",
            empty_value=None, initial="" if initial is None else json.dumps(bool(initial)), **common,
        )
    if arg.kind == "choice":
        choices = [(json.dumps(v), _shown(v)) for v in arg.choices]
        return forms.TypedChoiceField(
            required=arg.required, choices=choices if arg.required else [_NOT_SENT, *choices],
            coerce=lambda v: _Given(json.loads(v)), empty_value=None,
            initial=json.dumps(initial) if arg.has_default else None, **common,
        )
    return _JsonField(required=arg.required, json_type=arg.json_type,
                      initial=json.dumps(initial, indent=2) if arg.has_default else None, **common)


class ToolTryForm(forms.Form):
    """Where, as whom, and with what arguments. `hosts`: (value, label) of the virtual hosts that
    serve the tool; `callers`: (value, label) of who may call ("me" for the user's test identity,
    else a key's id). Valid, `call()` is what to call with."""

    host = forms.ChoiceField(label="Virtual host")
    caller = forms.ChoiceField(label="Call as")
    mode = forms.ChoiceField(label="Arguments as", choices=[(FORM, "fields"), (JSON, "JSON")], initial=FORM,
                             widget=forms.RadioSelect)
    arguments_json = _JsonField(
        label="Arguments (JSON)", required=False, json_type="object",
        widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false", "class": "json"}),
        help_text="One JSON object: the tool's arguments by name.",
    )

    def __init__(self, data: Mapping[str, Any] | None = None, *, schema: object,
                 hosts: Sequence[tuple[str, str]], callers: Sequence[tuple[str, str]]) -> None:
        super().__init__(data)
        self.fields["host"].choices = list(hosts)
        if len(hosts) == 1:  # nothing to choose
            self.fields["host"].widget = forms.HiddenInput()
            self.fields["host"].initial = hosts[0][0]
        self.fields["caller"].choices = list(callers)
        self.arguments = argument_fields(schema)
        self.argument_names: dict[str, str] = {}
        defaults: dict[str, Any] = {}
        for index, arg in enumerate(self.arguments or ()):
            self.fields[f"arg_{index}"] = _django_field(arg)
            self.argument_names[f"arg_{index}"] = arg.name
            if arg.has_default:
                defaults[arg.name] = arg.default
        self.fields["arguments_json"].initial = json.dumps(defaults, indent=2)
        if self.arguments is None:  # the JSON box alone
            self.fields["mode"].initial = JSON
            self.fields["mode"].widget = forms.HiddenInput()

    @property
    def json_only(self) -> bool:
        return self.arguments is None

    def argument_boxes(self) -> list[forms.BoundField]:
        return [self[name] for name in self.argument_names]

    def full_clean(self) -> None:
        super().full_clean()
        if not self.is_bound:
            return
        if self.cleaned_data.get("mode") == JSON or self.json_only:
            for name in self.argument_names:  # the fields are not read: what they hold does not matter
                self._errors.pop(name, None)  # type: ignore[union-attr]
            if self.cleaned_data.get("arguments_json") is None and "arguments_json" not in self._errors:  # type: ignore[operator]
                self.add_error("arguments_json", "Write the arguments as a JSON object ({} for none).")

    def call(self) -> dict[str, Any]:
        """{host, caller, arguments} of a valid form."""
        data = self.cleaned_data
        if data["mode"] == JSON or self.json_only:
            arguments = data["arguments_json"].value
        else:
            arguments = {}
            for field, name in self.argument_names.items():
                value = data.get(field)
                if value is None or (value == "" and not self.fields[field].required):
                    continue  # not sent
                arguments[name] = value.value if isinstance(value, _Given) else value
        return {"host": data["host"], "caller": data["caller"], "arguments": arguments}
