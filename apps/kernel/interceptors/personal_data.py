"""The `personal_data` built-in: finds personal data in a call's arguments and in its result, and per
type masks it (`[REDACTED:<type>]`), refuses the call, or lets it be.

Each type is an expression that finds candidates (all of them in one `PatternSet` pass over the
payload's JSON text) and a check that confirms one, by its checksum where it has one:

- `email`: name@domain.tld (not `icon@2x.png`: a file's extension is not a top-level domain).
- `phone`: 7-15 digits, written as a phone number is and a count, a price, a date or an id is not:
  * international: `+` and the country code, then digits with at most one space, dash or dot
    between them and the area code perhaps in parentheses (`+44 20 7946 0958`, `+14155552671`,
    `+1 (415) 555-2671`); dots count only as two or more (`+1234567.89` is an amount);
  * North American: `(415) 555-2671`, `415-555-2671`, `415.555.2671`, `1-800-555-0199` (the area
    code does not start with 0 or 1);
  * national with the trunk 0: `020 7946 0958`, `030-12345678`, `01 23 45 67 89` — groups of
    2 digits or more, one kind of separator, 9-12 digits in all.
  Digits alone (`4155552671`) are never a phone number: they are as often an id or a count.
- `card`: 13-19 digits, alone or in groups of 3-6 split by one kind of separator (a space or a
  dash), starting with 2-6 (the card networks' ranges), passing Luhn's check. A bare JSON number is
  not taken for one: it is far more often an id, and could not be masked in place.
- `iban`: a country code, two check digits and the account, compact or in groups of 4 split by
  spaces; as long as the country's IBANs are (15-34 for a country not in the table), passing the
  mod-97 check.
- `us_ssn`: AAA-GG-SSSS, with the dashes; the area not 000, 666 or 9xx, the group not 00, the
  serial not 0000.
- `uk_nino`: a National Insurance number: two letters (neither D, F, I, Q, U or V, the second not
  O, and not BG, GB, KN, NK, NT, TN or ZZ), six digits (perhaps in pairs), and A, B, C or D.
- `es_dni`: a Spanish DNI (8 digits) or NIE (X, Y or Z and 7 digits) and its check letter.
- `in_aadhaar`: an Aadhaar number, written as it is printed (`2345 6789 0124`: groups of 4 split by
  spaces or dashes; not starting with 0 or 1), passing the Verhoeff check. Twelve digits alone are
  not taken for one (AWS account ids, timestamps…).

Settings: `types` — each type's action: `mask` (the default for every type), `refuse` or `off`;
a mapping that names some of the types leaves the others at their default."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

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
TYPES = ("email", "phone", "card", "iban", "us_ssn", "uk_nino", "es_dni", "in_aadhaar")
ACTIONS = ("mask", "refuse", "off")

#: (`types` is a plain mapping, as the other built-ins' lists are: settings merged over the defaults
#: are JSON.)
DEFAULTS: Mapping[str, Any] = MappingProxyType({"types": dict.fromkeys(TYPES, "mask")})
SETTINGS = {"types": f"each type's action: mask, refuse or off (the types: {', '.join(TYPES)})"}


# Checksums.

def luhn_valid(digits: str) -> bool:
    """Whether a string of digits passes Luhn's check (payment cards)."""
    total = 0
    for position, digit in enumerate(reversed(digits)):
        value = int(digit)
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def iban_valid(iban: str) -> bool:
    """Whether a compact IBAN (upper case, no spaces) passes the ISO 7064 mod-97 check."""
    rearranged = iban[4:] + iban[:4]
    return int("".join(str(int(character, 36)) for character in rearranged)) % 97 == 1


# The Verhoeff scheme: the dihedral group D5's multiplication table, and the position permutation.
_VERHOEFF_D = (
    (0, 1, 2, 3, 4, 5, 6, 7, 8, 9), (1, 2, 3, 4, 0, 6, 7, 8, 9, 5), (2, 3, 4, 0, 1, 7, 8, 9, 5, 6),
    (3, 4, 0, 1, 2, 8, 9, 5, 6, 7), (4, 0, 1, 2, 3, 9, 5, 6, 7, 8), (5, 9, 8, 7, 6, 0, 4, 3, 2, 1),
    (6, 5, 9, 8, 7, 1, 0, 4, 3, 2), (7, 6, 5, 9, 8, 2, 1, 0, 4, 3), (8, 7, 6, 5, 9, 3, 2, 1, 0, 4),
    (9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
)
_VERHOEFF_P = (
    (0, 1, 2, 3, 4, 5, 6, 7, 8, 9), (1, 5, 7, 6, 2, 8, 3, 0, 9, 4), (5, 8, 0, 3, 7, 9, 6, 1, 4, 2),
    (8, 9, 1, 6, 0, 4, 3, 5, 2, 7), (9, 4, 5, 3, 1, 2, 8, 7, 6, 0), (4, 2, 8, 6, 5, 7, 3, 9, 0, 1),
    (2, 7, 9, 3, 8, 0, 6, 4, 1, 5), (7, 0, 4, 6, 9, 1, 3, 2, 5, 8),
)


def verhoeff_valid(digits: str) -> bool:
    """Whether a string of digits, its check digit last, passes the Verhoeff check (Aadhaar)."""
    check = 0
    for position, digit in enumerate(reversed(digits)):
        check = _VERHOEFF_D[check][_VERHOEFF_P[position % 8][int(digit)]]
    return check == 0


#: The length of each country's IBANs (SWIFT's IBAN registry).
IBAN_LENGTHS: Mapping[str, int] = MappingProxyType({
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BI": 27,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HN": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
    "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21,
    "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28,
    "NL": 18, "NO": 15, "OM": 23, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22,
    "RU": 33, "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25,
    "SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
})

_DNI_LETTERS = "TRWAGMYFPDXBNJZSQVHLCKE"
_EMAIL_NAME = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%+-")
_NINO_NOT_ISSUED = frozenset({"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"})
#: Extensions of the files whose names look like addresses (`logo@2x.png`): no such top-level domain.
_FILE_EXTENSIONS = frozenset({"png", "jpg", "jpeg", "gif", "svg", "webp", "ico", "bmp", "tif", "tiff", "pdf",
                              "js", "css", "html", "htm", "json", "txt", "md", "py", "ts"})


# Checks: each takes a candidate match and gives where the value is (mostly: the match's group 1, the
# value without its edge), or None when it is not one. `match.string` is the scan view of the
# payload's JSON text.

Check = Callable[[re.Match[str]], tuple[int, int] | None]


def _digits(text: str) -> str:
    return "".join(character for character in text if character.isdigit())


def _one_separator(text: str, separators: str) -> bool:
    """Whether `text` uses at most one kind of the `separators`."""
    return sum(separator in text for separator in separators) <= 1


def _longest(match: re.Match[str], separators: str, valid: Callable[[str], bool]) -> tuple[int, int] | None:
    """The longest stretch of `match` from its start, ending at the end of one of its groups, that is
    `valid`: an expression that takes groups greedily may take one that follows the value (`020 7946
    0958 24 hours`)."""
    start, end = match.span(1)
    view = match.string
    while end > start:
        if valid(view[start:end]):
            return start, end
        end = max((view.rfind(separator, start, end) for separator in separators), default=-1)
        if end == -1:
            return None
        while end > start and view[end - 1] in separators:
            end -= 1
    return None


def _in_string(match: re.Match[str]) -> bool:
    """Whether a match is inside a JSON string (in the scan view, only strings' own quotes are left)."""
    return match.string.count('"', 0, match.start(1)) % 2 == 1


def _email(match: re.Match[str]) -> tuple[int, int] | None:
    # The expression starts at the `@` (a literal start is what `re` finds fast); the name is before.
    view, start = match.string, match.start()
    while start > 0 and view[start - 1] in _EMAIL_NAME:
        start -= 1
    if start == match.start() or match.group(1).rsplit(".", 1)[1].lower() in _FILE_EXTENSIONS:
        return None
    return start, match.end(1)


_AREA_CODE = re.compile(r"\(\d{1,4}\)")


def _international_phone(match: re.Match[str]) -> tuple[int, int] | None:
    number = match.group(1)
    if not 7 <= len(_digits(number)) <= 15:
        return None
    if number.count(".") == 1:  # one dot: a decimal amount (+1234567.89)
        return None
    outside = _AREA_CODE.sub("", number)
    return match.span(1) if "(" not in outside and ")" not in outside else None  # parentheses: an area code


def _north_american_phone(match: re.Match[str]) -> tuple[int, int] | None:
    digits = _digits(match.group(1))
    area = digits[1:4] if len(digits) == 11 else digits[:3]
    return match.span(1) if area[0] not in "01" else None


def _national_phone(match: re.Match[str]) -> tuple[int, int] | None:
    return _longest(match, " -", lambda number: 9 <= len(_digits(number)) <= 12 and _one_separator(number, " -"))


def _card(match: re.Match[str]) -> tuple[int, int] | None:
    def valid(number: str) -> bool:
        digits = _digits(number)
        return 13 <= len(digits) <= 19 and _one_separator(number, " -") and luhn_valid(digits)

    if match.group(1).isdigit() and not _in_string(match):
        return None
    return _longest(match, " -", valid)


def _iban(match: re.Match[str]) -> tuple[int, int] | None:
    start, end = match.span(1)
    view = match.string
    compact = match.group(1).replace(" ", "")
    length = IBAN_LENGTHS.get(compact[:2])
    if length is None:
        length = len(compact)
        if not 15 <= length <= 34:
            return None
    elif len(compact) < length:
        return None
    elif len(compact) > length:  # a group that follows the IBAN (`… 0130 00 CODE`): it ends before
        taken = 0
        for position in range(start, end):
            if view[position] != " ":
                taken += 1
                if taken == length:
                    end = position + 1
                    break
        if view[end] != " ":  # within a group: not this country's IBAN
            return None
        compact = compact[:length]
    if not 2 <= int(compact[2:4]) <= 98:  # check digits are 02-98
        return None
    return (start, end) if iban_valid(compact) else None


def _us_ssn(match: re.Match[str]) -> tuple[int, int] | None:
    area, group, serial = match.group(1).split("-")
    if area in {"000", "666"} or area[0] == "9" or group == "00" or serial == "0000":
        return None
    return match.span(1)


def _uk_nino(match: re.Match[str]) -> tuple[int, int] | None:
    return match.span(1) if match.group(1)[:2] not in _NINO_NOT_ISSUED else None


def _es_dni(match: re.Match[str]) -> tuple[int, int] | None:
    value = match.group(1).replace("-", "").upper()
    number = str("XYZ".index(value[0])) + value[1:-1] if value[0] in "XYZ" else value[:-1]
    return match.span(1) if _DNI_LETTERS[int(number) % 23] == value[-1] else None


def _in_aadhaar(match: re.Match[str]) -> tuple[int, int] | None:
    return match.span(1) if verhoeff_valid(_digits(match.group(1))) else None


# The expressions. Most find a value (their group 1) after an edge: a character that is not part
# of a word, a number, an amount or a signed value (`v1.415-555-2671`, `-05-01`), nor a space after
# digits (`DE88 3704 0044 0532 …` holds no phone number); and no word character, decimal or
# further group may follow. The edge is consumed rather than looked behind: Hyperscan's prefilter
# drops look-arounds, and without its edge every date and id would send `re` over the whole text
# (some 50-100 µs for 2 KiB, where the prefilter takes a few). An email address and an
# international number are led by their `@` and `+` instead: rare enough for the prefilter, and a
# literal start is what `re` finds fastest. An edge is never written as a negated ASCII class:
# Hyperscan sees a letter outside ASCII as `a` (see `patterns`), which such a class would refuse
# where `re` takes it.

_EDGE = r"[^\w.,+-](?<!\d )"
_AFTER = r"(?![\w]|[.,-]\d)"


@dataclass(frozen=True, slots=True)
class Form:
    """One way a type is written: what finds candidates (the value: group 1) and what confirms one."""

    type: str
    pattern: re.Pattern[str]
    check: Check


FORMS: tuple[Form, ...] = (
    # Group 1 is the domain: the check walks back over the name before the `@`.
    Form("email", re.compile(r"@((?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,24})(?![\w-])"), _email),
    # The `+`'s edge is looked behind after it; 7 digits at least, so `+1` alone (a vote, a score)
    # is no candidate.
    Form("phone", re.compile(r"(\+(?<![\w+]\+)[1-9](?:[ .-]?\(?\d\)?){6,})(?![\w])"),
         _international_phone),
    Form("phone", re.compile(_EDGE + r"(\(\d{3}\) ?\d{3}[-. ]\d{4}"
                                     r"|(?:1-)?\d{3}-\d{3}-\d{4}"
                                     r"|\d{3}\.\d{3}\.\d{4})" + _AFTER), _north_american_phone),
    Form("phone", re.compile(_EDGE + r"(0[1-9]\d{0,3}(?:[ -]\d{2,8}){1,4})" + _AFTER), _national_phone),
    Form("card", re.compile(_EDGE + r"([2-6](?:\d{12,18}|\d{3}(?:[ -]\d{3,6}){2,4}))" + _AFTER), _card),
    Form("iban", re.compile(r"[\W_]([A-Z]{2}\d{2}"
                            r"(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,3})?))(?![A-Za-z0-9])"), _iban),
    Form("us_ssn", re.compile(_EDGE + r"(\d{3}-\d{2}-\d{4})" + _AFTER), _us_ssn),
    Form("uk_nino", re.compile(r"[\W_]([A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D])"
                               r"(?![A-Za-z0-9])"), _uk_nino),
    Form("es_dni", re.compile(_EDGE + r"((?:\d{8}|[XYZ]\d{7})-?[A-Za-z])(?![\w-])"), _es_dni),
    Form("in_aadhaar", re.compile(_EDGE + r"([2-9]\d{3}(?: \d{4} \d{4}|-\d{4}-\d{4}))"
                                          r"(?![\w]|[ .,-]\d)"), _in_aadhaar),
)


def settings_check(settings: object) -> list[FieldProblem]:
    """What is wrong with a `personal_data` interceptor's settings (empty: nothing)."""
    if problems := settings_problems(settings, SETTINGS):
        return problems
    assert isinstance(settings, Mapping)
    types = settings.get("types", DEFAULTS["types"])
    if not isinstance(types, Mapping):
        return [FieldProblem("settings.types", f"types must be an object of type: action (the types: "
                                               f"{', '.join(TYPES)}; the actions: {', '.join(ACTIONS)})")]
    problems = []
    for name, action in types.items():
        if name not in TYPES:
            problems.append(FieldProblem("settings.types", f"unknown type {name!r}; the types are: {', '.join(TYPES)}"))
        elif action not in ACTIONS:
            problems.append(FieldProblem(f"settings.types.{name}", f"{name} must be mask, refuse or off"))
    return problems


def build(settings: Mapping[str, Any]) -> PersonalDataInspector:
    """The inspector for checked settings. `types` is merged over the default (every type masked):
    the settings at large are merged shallowly, so a host's partial mapping arrives alone."""
    actions = {**DEFAULTS["types"], **settings.get("types", {})}
    on = tuple(name for name in TYPES if actions[name] != "off")
    return PersonalDataInspector(_pattern_set(on), refused=frozenset(n for n in on if actions[n] == "refuse"))


def _pattern_set(types: tuple[str, ...]) -> PatternSet:
    # Named by their index in FORMS: a type has several forms, each with its own check. Kept per
    # process by `pattern_set`: hosts mostly share a few choices of types.
    return pattern_set([(str(index), form.pattern) for index, form in enumerate(FORMS) if form.type in types])


@dataclass(frozen=True, slots=True)
class PersonalDataInspector:
    patterns: PatternSet
    #: The types whose finding refuses the call (the others that are on are masked).
    refused: frozenset[str]

    def inspect(self, subject: Subject) -> Decision:
        """PASS when nothing is found; a refusal when a `refuse` type is (its reason names those
        types), else a rewrite with each value masked (a refusal when one could not be). Findings
        and reasons name types, never values."""
        payload, view = scannable(subject.payload)
        spans = []
        for index, match in self.patterns.matches(view):
            form = FORMS[int(index)]
            if (bounds := form.check(match)) is not None:
                spans.append(Span(*bounds, form.type))
        if not spans:
            return PASS
        spans = outermost(spans)
        findings = tuple(sorted({span.kind for span in spans}))
        where = _WHERE[subject.phase]
        if refused := [name for name in findings if name in self.refused]:
            return Decision("refuse", reason=f"{', '.join(refused)} found in the {where}", findings=findings)
        rewritten = masked(payload, spans)
        if rewritten is None:
            return Decision("refuse", reason=f"{', '.join(findings)} found in the {where}, where it could not be "
                                             f"masked", findings=findings)
        return Decision("rewrite", payload=rewritten, reason=f"masked: {', '.join(findings)}", findings=findings)


_WHERE = {"request": "call's arguments", "result": "result"}
