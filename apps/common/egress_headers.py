"""Headers a request to a backend never carries from anywhere but the gateway's HTTP client.

`Host` and `Content-Length` are written by the client for the target and body it sends; the
hop-by-hop headers (RFC 9110 §7.6.1: Connection, Keep-Alive, Proxy-*, TE, Trailer,
Transfer-Encoding, Upgrade) and `Expect` belong to one connection and would let a value change how
the message is framed or routed. Configured header names (credentials) may not be any of them, and
the client drops them from whatever it is handed (the second line).

The caller's own credentials (its `Authorization`, `X-API-Key`, cookies) never reach a backend
either: requests are built from scratch, never copied from the inbound request; this module is
the list for the names that could be configured or built by mistake."""

from __future__ import annotations

from apps.common.http_syntax import header_name_problem as http_header_name_problem

#: Never sent from a configured or built header: the client writes or refuses them.
DENIED = frozenset({
    "host", "content-length", "connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade", "expect",
    "proxy-authenticate", "proxy-authorization", "proxy-connection",
})


_verdicts: dict[str, bool] = {}  # by name as written: the hot path sees the same few names
_VERDICTS_MAX = 4096


def header_denied(name: str) -> bool:
    """Whether a header named `name` may not be sent to a backend (any Proxy-* too)."""
    verdict = _verdicts.get(name)
    if verdict is None:
        low = name.lower()
        verdict = low in DENIED or low.startswith("proxy-")
        if len(_verdicts) < _VERDICTS_MAX:
            _verdicts[name] = verdict
    return verdict


def header_name_problem(name: str) -> str | None:
    """Why a configured header name is refused, or None when it may be used (an empty name is
    the caller's to refuse)."""
    if name and (problem := http_header_name_problem(name)) is not None:
        return problem  # the client would refuse to send it
    if header_denied(name):
        return (f"the header {name!r} is written by the gateway's HTTP client or belongs to one connection "
                "(Host, Content-Length, hop-by-hop and Proxy-* headers); choose another name")
    return None
