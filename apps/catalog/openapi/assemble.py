"""The steps of building a request that come after the arguments are serialised: the unknown and missing
argument errors, the server URL and the credential. Shared by the generic builder (``invoke``) and the
generated ones (``codegen``), so that both follow the rules in ``invoke``'s docstring word for word."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from .calls import ArgumentError, Credential, InvokeError
from .serialize import _enc, _enc_cookie


def _unknown_arguments(arguments: Mapping[str, Any], known: Collection[str]) -> ArgumentError:
    unknown = sorted(str(k) for k in arguments if k not in known)
    return ArgumentError(f"unknown argument{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}")


def _missing_arguments(missing: list[str]) -> ArgumentError:
    return ArgumentError(f"missing required argument{'s' if len(missing) > 1 else ''}: {', '.join(missing)}")


def _server(server: str, base_url: str | None) -> str:
    if base_url is not None:
        base = base_url.rstrip("/")
        server = base if "://" in server else base + server
    if "://" not in server:
        raise InvokeError("the API has no absolute server URL; configure a base URL for this backend")
    return server


def _apply(credential: Credential, headers: list[tuple[str, str]], query: list[str], cookies: list[str],
           header_names: Iterable[str]) -> None:
    """Add ``credential``, replacing any argument of the same name. ``header_names`` are the lower-cased
    names of the tool's header parameters (the only headers in the list yet): when the credential's
    header is not among them, nothing needs removing."""
    kind = credential.kind
    if (header := credential.header()) is not None:
        low = header[0].lower()
        if low in header_names:
            headers[:] = [h for h in headers if h[0].lower() != low]
        headers.append(header)
    elif kind == "api_key_query":
        # Exploded object values add pairs named by their keys, so any entry may carry the name.
        prefix = _enc(credential.name) + "="
        query[:] = [q for q in query if not q.startswith(prefix)]
        query.append(prefix + _enc(credential.value))
    else:
        prefix = _enc_cookie(credential.name) + "="
        cookies[:] = [c for c in cookies if not c.startswith(prefix)]
        cookies.append(prefix + _enc_cookie(credential.value))
