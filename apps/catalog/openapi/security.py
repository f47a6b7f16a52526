"""What the document says about authentication, as credential kinds the invoker can apply.

A backend's egress credential may leave its kind to the spec: the first supported scheme wins,
preferring the ones the document's top-level `security` requires, in the order written."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apps.common.http_syntax import header_name_problem, text_problem

from .diagnostics import Diagnostics, join
from .outgoing import CredentialKind


@dataclass(frozen=True, slots=True)
class SecurityScheme:
    """One supported scheme: ``name`` is the scheme's key in the document, ``parameter`` the header,
    query parameter or cookie name of an API key (``""`` otherwise)."""

    name: str
    kind: CredentialKind
    parameter: str = ""


def _kind(scheme: dict[str, Any]) -> tuple[CredentialKind, str] | None:
    kind = scheme.get("type")
    if kind == "apiKey":
        where, parameter = scheme.get("in"), scheme.get("name")
        if where in ("header", "query", "cookie") and isinstance(parameter, str) and parameter:
            return f"api_key_{where}", parameter  # type: ignore[return-value]
        return None
    if kind == "basic":  # Swagger 2.0
        return "basic", ""
    if kind == "http":
        scheme_name = str(scheme.get("scheme", "")).lower()
        if scheme_name == "bearer":
            return "bearer", ""
        if scheme_name == "basic":
            return "basic", ""
        return None
    if kind in ("oauth2", "openIdConnect"):
        return "bearer", ""  # the access token goes in as a bearer token
    return None


def _defined(doc: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The pointer and object of the document's scheme definitions, if it has them."""
    components = doc.get("components")
    defined = components.get("securitySchemes") if isinstance(components, dict) else None
    if defined is not None:
        return ("/components/securitySchemes", defined) if isinstance(defined, dict) else None
    defined = doc.get("securityDefinitions")  # Swagger 2.0
    return ("/securityDefinitions", defined) if isinstance(defined, dict) else None


def security_names_check(doc: dict[str, Any], diag: Diagnostics) -> None:
    """An error for each API key scheme whose ``name`` could not stand where the key is sent: a
    header name must be an HTTP token; query and cookie names (percent-encoded) hold no control
    characters. The credential is written under that name into every request."""
    found = _defined(doc)
    if found is None:
        return
    ptr, defined = found
    for key, scheme in defined.items():
        if not isinstance(scheme, dict) or scheme.get("type") != "apiKey" or not isinstance(scheme.get("name"), str):
            continue
        name, where = scheme["name"], scheme.get("in")
        if not name:  # not a supported scheme (see `_kind`): nothing is sent under it
            continue
        if where == "header":
            problem = header_name_problem(name)
        elif where in ("query", "cookie"):
            problem = text_problem(name, f"the {where} parameter name")
        else:
            continue
        if problem is not None:
            diag.error(join(ptr, key, "name"), problem)


def security_schemes(doc: dict[str, Any]) -> tuple[SecurityScheme, ...]:
    """The document's supported schemes, those its top-level ``security`` names first."""
    found = _defined(doc)
    if found is None:
        return ()
    defined = found[1]
    required: list[str] = []
    security = doc.get("security")
    if isinstance(security, list):
        for requirement in security:
            if isinstance(requirement, dict):
                required.extend(name for name in requirement if name not in required)
    order = [name for name in required if name in defined] + [name for name in defined if name not in required]
    schemes: list[SecurityScheme] = []
    for name in order:
        scheme = defined[name]
        found = _kind(scheme) if isinstance(scheme, dict) else None
        if found is not None:
            schemes.append(SecurityScheme(str(name), found[0], found[1]))
    return tuple(schemes)
