"""The `secrets` built-in: finds credentials in a call's arguments and in its result, and masks them
(`[REDACTED:<detector>]`) or refuses the call.

The detectors are detect-secrets' own: every regex-based plugin of `detect_secrets.plugins` but the
public-IP one (an address is not a credential), found once, when this module is imported, so an
upgrade of detect-secrets brings its new detectors with it. Their expressions run together in one
`PatternSet` over the payload's JSON text, which keeps a value's key beside it (the AWS secret-key
expression needs `"aws_secret_access_key": "…"`). A detector is named by a slug of its plugin's
`secret_type`: "AWS Access Key" is `aws-access-key`.

What is masked of a match: its first group when the expression has one and it matched (the secret
after a keyword, the password of a URL), else the whole match; a private key from its `-----BEGIN`
line through its `-----END … -----` line (to the end of its JSON string when there is none). A JSON
Web Token is confirmed as detect-secrets confirms it (its header and payload decode to JSON).

Settings: `action` — `mask` (the default) or `refuse`; `detectors` — the detectors to run (the
default: all)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from detect_secrets import plugins
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.ip_public import IPPublicDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector

from apps.kernel.interceptors.base import (
    PASS,
    Decision,
    Span,
    Subject,
    masked,
    outermost,
    scannable,
    settings_problems,
)
from apps.kernel.interceptors.patterns import PatternSet, pattern_set
from apps.kernel.problems import FieldProblem

PHASES = ("request", "result")
ACTIONS = ("mask", "refuse")


@dataclass(frozen=True, slots=True)
class Detector:
    """One detect-secrets plugin as this built-in runs it."""

    slug: str
    plugin: type[RegexBasedDetector]
    patterns: tuple[re.Pattern[str], ...]
    #: Whether a matched first group is the secret (else the whole match is masked).
    group_is_secret: bool = True
    #: Whether a match only marks the start of a block that is masked whole (a private key).
    block: bool = False
    #: A check a match must pass to be a finding (detect-secrets' own, where it has one).
    confirm: Callable[[str], bool] | None = None
    #: What may follow a match and is still the secret (the expression stops short of it).
    tail: re.Pattern[str] | None = None


#: Plugins that are regex-based but do not find credentials.
_NOT_SECRETS = frozenset({IPPublicDetector})
#: Plugins whose first group is not the secret: GitHub's captures the token's kind (`ghp`), GitLab's
#: a CI token's partition prefix. Their whole match is masked.
_GROUP_NOT_SECRET = frozenset({GitHubTokenDetector, GitLabTokenDetector})
#: The JWT expression is lazy at its end: it stops after the payload's dot, before the signature.
_JWT_SIGNATURE = re.compile(r"[A-Za-z0-9_\-+/=]*")


def slug(secret_type: str) -> str:
    """A plugin's `secret_type` as a detector name: "JSON Web Token" -> "json-web-token"."""
    return re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-")


def _discover() -> dict[str, Detector]:
    """The detectors, by slug, from every regex-based plugin module of detect-secrets."""
    found: dict[str, Detector] = {}
    for module_info in pkgutil.iter_modules(plugins.__path__):
        module = importlib.import_module(f"{plugins.__name__}.{module_info.name}")
        for plugin in vars(module).values():
            if not (inspect.isclass(plugin) and issubclass(plugin, RegexBasedDetector)
                    and plugin.__module__ == module.__name__  # defined here, not imported
                    and not inspect.isabstract(plugin) and plugin not in _NOT_SECRETS):
                continue
            name = slug(plugin.secret_type)
            if name in found:  # two plugins of one type (none in 1.5.0): one detector, run as the first
                found[name] = replace(found[name], patterns=found[name].patterns + tuple(plugin.denylist))
                continue
            found[name] = Detector(
                slug=name,
                plugin=plugin,
                patterns=tuple(plugin.denylist),  # compiled by the plugin, flags and all
                group_is_secret=plugin not in _GROUP_NOT_SECRET,
                block=plugin is PrivateKeyDetector,
                confirm=getattr(plugin, "is_formally_valid", None),
                tail=_JWT_SIGNATURE if plugin is JwtTokenDetector else None,
            )
    return dict(sorted(found.items()))


#: Every detector, by slug (computed once: importing the plugins is the slow part).
DETECTORS: Mapping[str, Detector] = MappingProxyType(_discover())

DEFAULTS: Mapping[str, Any] = MappingProxyType({"action": "mask", "detectors": tuple(DETECTORS)})
SETTINGS = {
    "action": "mask (each secret is replaced by [REDACTED:<detector>]; the default) or refuse (the call is refused)",
    "detectors": "the detectors to run (the default: all)",
}


def settings_check(settings: object) -> list[FieldProblem]:
    """What is wrong with a `secrets` interceptor's settings (empty: nothing)."""
    if problems := settings_problems(settings, SETTINGS):
        return problems
    assert isinstance(settings, Mapping)
    problems = []
    if settings.get("action", DEFAULTS["action"]) not in ACTIONS:
        problems.append(FieldProblem("settings.action", "action must be mask or refuse"))
    detectors = settings.get("detectors", DEFAULTS["detectors"])
    names = ", ".join(DETECTORS)
    if (not isinstance(detectors, (list, tuple)) or not detectors
            or not all(isinstance(name, str) for name in detectors)):
        problems.append(FieldProblem("settings.detectors", f"detectors must be a list of one or more of: {names}"))
    elif unknown := [name for name in detectors if name not in DETECTORS]:
        problems.append(FieldProblem("settings.detectors",
                                     f"unknown detector {unknown[0]!r}; the detectors are: {names}"))
    return problems


def build(settings: Mapping[str, Any]) -> SecretsInspector:
    """The inspector for checked settings (missing ones take their default)."""
    detectors = settings.get("detectors", DEFAULTS["detectors"])
    return SecretsInspector(_pattern_set(tuple(sorted(set(detectors)))),
                            refuse=settings.get("action", DEFAULTS["action"]) == "refuse")


def _pattern_set(detectors: tuple[str, ...]) -> PatternSet:
    # Kept per process by `pattern_set`: hosts mostly share a few detector choices (most: all).
    return pattern_set([(name, pattern) for name in detectors for pattern in DETECTORS[name].patterns])


@dataclass(frozen=True, slots=True)
class SecretsInspector:
    patterns: PatternSet
    refuse: bool

    def inspect(self, subject: Subject) -> Decision:
        """PASS when no secret is found; else a rewrite with each masked, or a refusal (the `refuse`
        action, or a secret that could not be masked). Findings and reasons name detectors, never
        the secrets."""
        payload, view = scannable(subject.payload)
        spans = [Span(*bounds, name) for name, match in self.patterns.matches(view)
                 if (bounds := _secret_bounds(view, DETECTORS[name], match)) is not None]
        if not spans:
            return PASS
        spans = outermost(spans)
        findings = tuple(sorted({span.kind for span in spans}))
        found = f"{', '.join(findings)} found in the {_WHERE[subject.phase]}"
        if self.refuse:
            return Decision("refuse", reason=found, findings=findings)
        rewritten = masked(payload, spans)
        if rewritten is None:
            return Decision("refuse", reason=f"{found}, where it could not be masked", findings=findings)
        return Decision("rewrite", payload=rewritten, reason=f"masked: {', '.join(findings)}", findings=findings)


_WHERE = {"request": "call's arguments", "result": "result"}
#: What may surround a secret in a match (delimiters the expressions include) but is not the secret.
_EDGES = " \t\r\n\"'=:"
#: The end line of a private key block (PEM, PGP, SSH2).
_BLOCK_END = re.compile(r"-{4,5} ?END [A-Z0-9 ]+?-{4,5}")


def _secret_bounds(view: str, detector: Detector, match: re.Match[str]) -> tuple[int, int] | None:
    """Where the secret of `match` is in `view` (the JSON text's scan view), or None: not a secret."""
    if detector.block:
        return _block_bounds(view, match)
    if detector.group_is_secret and match.re.groups and match.start(1) != -1:
        start, end = match.span(1)
    else:
        start, end = match.span()
    if detector.confirm is not None and not detector.confirm(view[start:end]):
        return None
    if detector.tail is not None and (tail := detector.tail.match(view, end)) is not None:
        end = tail.end()
    # The expressions were written for lines of source: some take a delimiter in, and a `.+` runs
    # on past the JSON string. A secret is within one string, on one line, and never quotes.
    while start < end and view[start] in _EDGES:
        start += 1
    for stop in ('"', "'", "\n"):
        if (at := view.find(stop, start, end)) != -1:
            end = at
    while end > start and view[end - 1] in " \t\r\n":  # a space here may be an escape's backslash
        end -= 1
    return (start, end) if start < end else None


def _block_bounds(view: str, match: re.Match[str]) -> tuple[int, int]:
    """A private key block: from its first dash (the match is the `BEGIN …` words) through its END
    line, or to the end of its JSON string when it has none there (a key cut short, or PuTTY's)."""
    start = match.start()
    while start > 0 and match.start() - start < 5 and view[start - 1] in "- ":
        start -= 1
    string_end = view.find('"', match.end())  # in the view, only a string's own quotes are left
    if string_end == -1:
        string_end = len(view)
    end = _BLOCK_END.search(view, match.end(), string_end)
    return start, end.end() if end is not None else string_end
