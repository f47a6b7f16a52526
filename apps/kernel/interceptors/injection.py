"""The `injection` built-in: flags (or refuses) a result that carries instructions aimed at the
model rather than information for it: prompt injection, as a web page, an issue, an email or a file
a tool returns may carry it.

It is a set of heuristics, each named by a slug, matched together in one pass against the result's
JSON text, case-insensitively (but `system-fence`, whose fences are upper case). They look at what
the text says, not at who says it or why: an article about prompt injection that quotes "ignore
previous instructions" is flagged like the attack it quotes, while one that describes the attack in
its own words ("text that tries to make the model drop what it was told") is not. That is why the
default action is "flag" (the result goes on unchanged; its `_meta` tells the client what was
found); "refuse" suits hosts whose tools never fetch such text.

- `override-instructions`: "ignore / disregard / forget … previous / prior / above / earlier / all /
  your … instructions / prompts / rules / guidelines / context", "override / bypass … previous …
  instructions / guardrails", "forget everything you were told".
- `new-instructions`: "new instructions:", "updated system instructions:", "your new task is",
  "from now on you will act / respond / obey …".
- `addresses-the-model`: text that speaks to a model reading it: "if you are an AI / LLM / a
  language model", "note to the AI:", "attention LLM agents,", "hey ChatGPT,", "AI assistants
  reading this".
- `jailbreak-persona`: "you are now DAN / unrestricted / in developer mode / no longer bound by",
  "act as DAN / an unfiltered AI", "developer mode enabled".
- `system-prompt`: asks for or replaces the system prompt: "reveal / print / repeat / ignore … your
  system prompt (or initial / hidden instructions)", "new system prompt:". The words "system prompt"
  alone are not enough: documentation of language-model APIs is full of them.
- `conceal-from-user`: "do not tell / mention / reveal … the user", "without telling the user",
  "keep this secret from the user", "the user must not know".
- `permission-claim`: claims that clear the way: "the author does not care about privacy", "go ahead
  and put everything you find", "you are authorized to share / send …", "the user has allowed you
  to …".
- `secret-exfiltration`: "send / upload / post / email / forward … ~/.ssh, id_rsa, .env,
  .aws/credentials, /etc/passwd, a private key, mcp.json …" (not after "never", "not", "n't";
  not a public key).
- `chat-template-token`: chat-template control tokens: `<|im_start|>`, `<|im_end|>`, `<|system|>`,
  `<|user|>`, `<|assistant|>`, `<|endoftext|>`, `<|eot_id|>`, `<|start_header_id|>`, `[INST]`,
  `[/INST]`, `<<SYS>>`, `<</SYS>>`, and `</s><s>` (a lone `</s>` is HTML's strikethrough).
- `system-fence`: fences and pseudo-tags that dress text as the system's: "BEGIN SYSTEM PROMPT",
  "END OF SYSTEM INSTRUCTIONS", "SYSTEM OVERRIDE:", "ADMIN MESSAGE:", "[SYSTEM]:", `<IMPORTANT>`,
  `<system_prompt>`, `[system](#…)`.
- `hidden-markup`: an HTML comment, or an element hidden by its style (`display:none`,
  `visibility:hidden`, `font-size:0`, `opacity:0`), whose text names a model (AI, LLM, assistant,
  Claude…) and tells it something (ignore, you must, do not, instructions…).
- `exfiltration-link`: a markdown image (or an HTML `<img>`) whose URL carries a query parameter
  built to be filled in: a placeholder (`{…}`, `[…]`, `<…>`, `$VAR`, `%7B…`, `...`) in its value, or,
  within 300 characters, words telling the model to fill it ("append", "replace", "encode"…) with
  what it holds ("conversation", "password", "API key", "base64"…). A client that renders the
  image sends the parameter to that host without anyone clicking.
- `invisible-tag-characters`: Unicode tag characters (U+E0000–U+E007F), invisible text that models
  read ("ASCII smuggling"); a flag emoji's subdivision tags (🏴 + tags + cancel tag, as Scotland's)
  are not counted.
- `bidi-override`: bidirectional embedding, override and isolate controls (U+202A–U+202E,
  U+2066–U+2069), which make text display in another order than it is read ("Trojan Source").
  Right-to-left text (Arabic, Hebrew) needs none of them and is not flagged; text that mixes
  directions with these controls on purpose is.
- `zero-width-run`: 4 or more zero-width characters in a row (U+200B–U+200D, U+2060–U+2064, U+FEFF,
  U+180E), the carrier of binary-encoded hidden text. One zero-width joiner inside an emoji
  sequence (👩‍💻) or a zero-width non-joiner in Persian is not a run.

The JSON text is scanned as the backend sent it when it holds no `\\u` escape; otherwise as
re-serialized from its value, so invisible characters and `<` (which some serializers write as
`\\u003c`) are seen as characters, not escapes. The words of a phrase may be apart by any spaces
(Unicode's are read as plain ones) or by the JSON escape of a newline or tab (`\\n`, `\\t`)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import orjson

from apps.kernel.interceptors.base import PASS, Decision, Subject, settings_problems
from apps.kernel.interceptors.patterns import PatternSet, pattern_set
from apps.kernel.problems import FieldProblem

PHASES = ("result",)
ACTIONS = ("flag", "refuse")

#: Between two words of a phrase: whitespace, or the JSON escape of a newline, tab or return.
_S = r"(?:\s|\\[nrt])+"
#: A word's boundary, also right after such an escape (in `\nIgnore` the `n` is a word character).
_B = r"(?:\b|(?<=\\[nrt]))"
#: Up to a few words between two parts of a phrase, without crossing the end of a sentence.
_GAP = r"(?:(?:\s|\\[nrt])+[^\s.!?;:\\]{1,20}){0,4}?"


def _phrase(pattern: str) -> str:
    """`pattern` with each space standing for `_S` (whitespace, or an escaped newline or tab), each
    `~` for `_GAP` (a few words), and each `\\b` for `_B`."""
    return _words(pattern.replace(" ~ ", _GAP + _S).replace(" ", _S))


def _words(pattern: str) -> str:
    """`pattern` with each word boundary `\\b` also taking one right after an escaped newline or tab."""
    return pattern.replace(r"\b", _B)


_TARGETS = r"(?:instructions?|prompts?|rules|directions|directives|guidelines|guardrails|commands|orders|context)"
#: What names a language model (not "assistant", "agent" or "model" alone: people are those too).
_MODEL = (r"(?:an? )?(?:AI|A\.I\.|LLM|large language model|language model|AI (?:assistant|agent|model|system)"
          r"|chatbot|Claude|ChatGPT|GPT(?:-?[0-9][a-z0-9]*)?)")
#: What a greeting names when it greets a model (not Claude: people are called that too).
_GREETED = r"(?:AI|LLM|language model|AI (?:assistant|agent|model)|chatbot|ChatGPT|GPT(?:-?[0-9][a-z0-9]*)?)"
#: Up to 80 characters within one sentence (a dot inside a word or path, as in `~/.ssh`, is not its end).
_CLAUSE = r"(?:[^.!?\\\n]|\.(?=[\w/~])){0,80}?"
#: A negation right before a verb ("never send your private key" is advice, not an instruction);
#: fixed-width look-behinds, so written with \s, not with spaces.
_NOT_NEGATED = r"(?<!never\s)(?<!not\s)(?<!n't\s)"

#: The heuristics that look for phrases, by slug: run together through one `PatternSet`.
_PHRASES: tuple[tuple[str, str], ...] = (
    ("override-instructions", _phrase(
        r"\b(?:ignore|disregard|forget) ~ "
        r"(?:previous|prior|above|earlier|preceding|foregoing|former|original|initial|all|any|every|your|the system)"
        rf" ~ {_TARGETS}\b"
        r"|\b(?:override|bypass) ~ (?:previous|prior|above|earlier|all|any|your|the system) ~ "
        r"(?:instructions|prompts?|guardrails|safety (?:rules|guidelines))\b"
        r"|\bforget (?:everything|all|what) (?:(?:you (?:were|have been|'ve been) told)|(?:above|before|so far))")),
    ("new-instructions", _phrase(
        r"\b(?:new|updated|revised|real|actual|true|secret|hidden) (?:system |admin |developer )?instructions?\s*:"
        r"|\byour (?:new|real|actual|true) (?:task|instructions?|goal|objective|mission|role|job|purpose) (?:is|are)\b"
        r"|\bfrom now on,? you (?:will|must|shall|should|are to) (?:only |always |never )?(?:act|respond|answer"
        r"|behave|reply|pretend|obey|follow|ignore|speak|talk|write)\b")),
    ("addresses-the-model", _phrase(
        rf"\bif you are {_MODEL}\b"
        r"|\b(?:note|message|instructions?|attention|important|notice|reminder) (?:to|for) (?:the |all |any )?"
        rf"{_MODEL}s?"
        r"(?:\s*[:,!]| (?:reading|processing|summari[sz]ing)\b)"
        rf"|\b(?:dear|hey|hello|hi|attention),? {_GREETED}s?\s*[:,!]"
        r"|\b(?:AI|LLM|language model) (?:assistants?|agents?|models?|systems?) (?:reading|processing|summari[sz]ing)"
        r" this\b")),
    ("jailbreak-persona", _phrase(
        r"\byou are now (?:DAN\b|(?:an? )?(?:unrestricted|unfiltered|uncensored|jailbroken)\b"
        r"|in (?:developer|dev|god|jailbreak|DAN) mode\b|no longer (?:bound by|restricted by|an AI\b|an assistant\b))"
        r"|\b(?:act|behave|respond) as (?:DAN|an? (?:unrestricted|unfiltered|uncensored|jailbroken) [a-z]+)\b"
        r"|\b(?:developer|dev|god|jailbreak|DAN) mode (?:enabled|activated|on|engaged)\b")),
    ("system-prompt", _phrase(
        r"\b(?:reveal|print|show|output|repeat|leak|dump|disclose|recite|ignore|bypass|forget|disregard) ~ "
        r"(?:system (?:prompt|message|instructions)|initial instructions|hidden instructions)\b"
        r"|\b(?:new|updated|revised|real) system (?:prompt|message)\s*:")),
    ("conceal-from-user", _phrase(
        r"\b(?:do not|don't|never|must not) (?:tell|inform|mention|reveal|disclose|notify)"
        rf"{_CLAUSE}\bthe user\b(?!\W?s\b)"  # not "the user's password" (nor with ’)
        r"|\bwithout (?:telling|informing) the user\b|\bwithout the user's knowledge\b"
        r"|\bkeep (?:this|it|that) (?:secret|hidden|confidential) from the user\b"
        r"|\bthe user (?:must|should) (?:not|never) (?:know|see|find out|be told)\b")),
    ("permission-claim", _phrase(
        r"\b(?:does not|doesn't|do not|don't) care about (?:privacy|security|confidentiality)\b"
        r"|\bgo ahead and (?:put|share|post|publish|send|leak|include|copy|add) (?:everything|all) (?:that )?you\b"
        r"|\byou (?:are|'re) (?:fully |now )?(?:authori[sz]ed|permitted|allowed|cleared) to (?:share|send|post"
        r"|publish|reveal|disclose|leak|upload|exfiltrate|bypass|ignore)\b"
        r"|\bthe (?:user|owner|author|admin|administrator) (?:has )?(?:already )?(?:authori[sz]ed|permitted|allowed)"
        r" you to\b")),
    ("secret-exfiltration", _phrase(
        _NOT_NEGATED + rf"\b(?:send|upload|post|e-?mail|forward|transmit|exfiltrate|leak)\b{_CLAUSE}"
        r"(?:~/\.ssh\b(?!/(?:[\w.-]+\.pub|known_hosts|config)\b)|\bid_(?:rsa|dsa|ecdsa|ed25519)\b(?!\.pub)"
        r"|(?<![\w.])\.env\b|\.aws/credentials\b|/etc/(?:passwd|shadow)\b|\bprivate (?:ssh )?keys?\b"
        r"|\bmcp\.json\b|\bwallet (?:seed|recovery) phrase\b)")),
    ("chat-template-token",
     r"<\|(?:im_start|im_end|im_sep|system|user|assistant|endoftext|eot_id|start_header_id|end_header_id"
     r"|begin_of_text)\|>|\[/?INST\]|<</?SYS>>|</s>(?:\s|\\n)*<s>"),
    # Upper case only (`(?-i:…)`): "System notice: maintenance tonight" is a status page's.
    ("system-fence", _phrase(
        r"(?-i:\b(?:BEGIN|END|START) (?:OF )?(?:THE )?(?:SYSTEM|ADMIN|DEVELOPER|HIDDEN) "
        r"(?:PROMPT|INSTRUCTIONS?|MESSAGE|OVERRIDE)\b"
        r"|\b(?:SYSTEM|ADMIN|DEVELOPER) (?:OVERRIDE|MESSAGE|NOTICE|INSTRUCTIONS?)\s*:"
        r"|\[(?:SYSTEM|ADMIN)\]\s*:)"
        r"|<(?:system_prompt|system-prompt|important)>|\[system\]\(#")),
    # What is hidden from a person reading the page; `_hidden` checks that it speaks to the model.
    ("hidden-markup",
     r"<!--(?:(?!-->).){1,2000}"
     r"|(?:display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0(?![.\d]*[1-9])|opacity\s*:\s*0(?![.\d]*[1-9]))"
     r"[^<>]{0,200}>[^<]{1,2000}"),
    # A link with a query parameter; `_exfiltration` checks that it is built to carry data out.
    ("exfiltration-link",
     r"!\[[^\]\n]{0,300}\]\(\s*(?:https?:)?//[^\s)]{1,2000}?[?&][^\s)=&#]{1,64}=[^\s)&#]*"
     r"|<img\s[^>]{0,300}?src\s*=\s*\\?[\"']?(?:https?:)?//[^\s\"'>\\]{1,2000}?[?&][^\s\"'>=&#\\]{1,64}="
     r"[^\s\"'>&#\\]*"),
)

#: The heuristics that look for characters: checked in Python, and only in a text that is not all
#: ASCII (a `PatternSet` runs an expression naming characters outside ASCII in `re` on every text).
_CHARACTERS = ("invisible-tag-characters", "bidi-override", "zero-width-run")
_BIDI = tuple("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_ZERO_WIDTH = tuple("\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff\u180e")
_ZERO_WIDTH_RUN = re.compile("[\u200b-\u200d\u2060-\u2064\ufeff\u180e]{4,}")
_TAG_RUN = re.compile("[\U000e0000-\U000e007f]+")
#: How every tag character (U+E0000–U+E007F) starts in UTF-8.
_TAG_UTF8 = (b"\xf3\xa0\x80", b"\xf3\xa0\x81")

#: Every heuristic, by slug, in the order they are reported.
MARKERS = (*(slug for slug, _ in _PHRASES), *_CHARACTERS)
DEFAULTS: Mapping[str, Any] = MappingProxyType({"action": "flag", "markers": list(MARKERS)})
SETTINGS = {
    "action": "flag (the default: the result goes on, its _meta says what was found) or refuse",
    "markers": "the heuristics to use, by name (default: all)",
}

#: A placeholder in a link's query value: what an injected instruction asks the model to fill in.
_PLACEHOLDER = re.compile(r"[{}\[\]<>$]|%7[bd]|%5[bd]|%3[ce]|%24|\.\.\.|…", re.IGNORECASE)
#: Near a link: a verb that tells the model to put something into it, and what.
_FILL = re.compile(_words(r"\b(?:append|replace|fill in|substitute|insert|encode|url-?encode)\b"), re.IGNORECASE)
_DATA = re.compile(_words(
    r"\b(?:conversation|chat history|previous messages|message history|this chat|memory|secrets?|passwords?"
    r"|api keys?|credentials|private data|personal data|the user's \w+|base64)\b"), re.IGNORECASE)
#: The words of a language model, and of an instruction to one, in hidden markup.
_TO_MODEL = re.compile(_words(r"\b(?:AI|A\.I\.|LLM|language model|assistant|chatbot|AI agent|Claude|ChatGPT|GPT)s?\b"),
                       re.IGNORECASE)
_IMPERATIVE = re.compile(_words(
    r"\b(?:ignore|disregard|you must|you should|you will|do not|don't|never|always|instead|instructions?)\b"),
    re.IGNORECASE)
#: A subdivision flag's tags, after its 🏴: 2 to 6 lower-case letters or digits, then the cancel tag.
_FLAG_TAGS = re.compile("[\U000e0030-\U000e0039\U000e0061-\U000e007a]{2,6}\U000e007f")


def _exfiltration(match: re.Match[str]) -> bool:
    """Whether a link with a query parameter is built to carry data out: a placeholder in the
    parameter's value, or an instruction to fill it within 300 characters."""
    if _PLACEHOLDER.search(match.group(), match.group().rfind("=") + 1):
        return True
    start, end = max(0, match.start() - 300), match.end() + 300
    return _FILL.search(match.string, start, end) is not None and _DATA.search(match.string, start, end) is not None


def _hidden(match: re.Match[str]) -> bool:
    """Whether hidden markup speaks to a language model and tells it something."""
    return _TO_MODEL.search(match.group()) is not None and _IMPERATIVE.search(match.group()) is not None


def _smuggled(match: re.Match[str]) -> bool:
    """Whether a run of tag characters is other than a flag emoji's subdivision (🏴 + its tags)."""
    flag = match.start() > 0 and match.string[match.start() - 1] == "\U0001f3f4"
    return not (flag and _FLAG_TAGS.fullmatch(match.group()))


#: Phrase heuristics whose every match is checked again, in Python, before it counts.
_CONFIRM: Mapping[str, Callable[[re.Match[str]], bool]] = {
    "hidden-markup": _hidden,
    "exfiltration-link": _exfiltration,
}


def settings_check(settings: object) -> list[FieldProblem]:
    if problems := settings_problems(settings, SETTINGS):
        return problems
    assert isinstance(settings, Mapping)
    problems = []
    if settings.get("action", DEFAULTS["action"]) not in ACTIONS:
        problems.append(FieldProblem("settings.action", "action must be flag or refuse"))
    markers = settings.get("markers", DEFAULTS["markers"])
    if not isinstance(markers, (list, tuple)) or not markers or not all(isinstance(m, str) for m in markers):
        problems.append(FieldProblem("settings.markers", f"markers must be a list of one or more of: "
                                                         f"{', '.join(MARKERS)}"))
    elif unknown := [m for m in markers if m not in MARKERS]:
        problems.append(FieldProblem("settings.markers", f"unknown marker {unknown[0]!r}; the markers are: "
                                                         f"{', '.join(MARKERS)}"))
    elif len(set(markers)) != len(markers):
        duplicate = next(m for m in markers if markers.count(m) > 1)
        problems.append(FieldProblem("settings.markers", f"the marker {duplicate!r} is named twice"))
    return problems


@dataclass(frozen=True, slots=True)
class Heuristic:
    """One heuristic, compiled: its expression, and the check each match must also pass (if any)."""

    slug: str
    pattern: re.Pattern[str]
    confirm: Callable[[re.Match[str]], bool] | None


@dataclass(frozen=True, slots=True)
class Heuristics:
    """The heuristics an interceptor uses: its phrases, in reporting order, with their one-pass
    prefilter (None: no phrase chosen), and its character heuristics."""

    chosen: tuple[Heuristic, ...]
    prefilter: PatternSet | None
    characters: frozenset[str]


#: A bounded repeat of an expression's source (none of the sources has a literal brace).
_BOUNDED = re.compile(r"(?<!\\)\{(\d+),\d+\}")


def _widened(source: str) -> str:
    """`source` made wider, for the prefilter: without its word boundaries, each run of spaces and
    escaped newlines as a run of ASCII punctuation, spaces and the letters of escapes (Hyperscan
    scans a stand-in of the text where every space is a plain one), each gap of words or clause as
    a run of what it may hold, each bounded repeat unbounded. It matches all the exact one does (and
    more), and Hyperscan compiles it several times faster: long bounded repeats take it seconds."""
    spaces = r"[\x00-\x40\\nrt]+"
    source = source.replace(_GAP + _S, r"[^.!?;:]*" + spaces).replace(_CLAUSE, r"[^!?\\\n]*")
    source = source.replace(_S, spaces).replace(_B, "").replace(r"\b", "")
    return _BOUNDED.sub(r"{\1,}", source)


@functools.lru_cache(maxsize=32)  # hosts mostly share a few choices of markers (most: all)
def heuristics(markers: tuple[str, ...]) -> Heuristics:
    """The heuristics named by `markers`, compiled: the prefilter finds, in one pass, which phrases
    may match (each expression `_widened`: it misses nothing the exact one matches); the exact
    expression then runs, in Python, only for those."""
    chosen = tuple(Heuristic(slug, re.compile(source, re.IGNORECASE), _CONFIRM.get(slug))
                   for slug, source in _PHRASES if slug in markers)
    widened = [(h.slug, re.compile(_widened(h.pattern.pattern), re.IGNORECASE)) for h in chosen]
    return Heuristics(chosen, pattern_set(widened) if widened else None,
                      frozenset(slug for slug in _CHARACTERS if slug in markers))


def build(settings: Mapping[str, Any]) -> Injection:
    """The interceptor of checked `settings`."""
    markers = tuple(settings.get("markers", DEFAULTS["markers"]))
    return Injection(heuristics(markers), settings.get("action", DEFAULTS["action"]) == "refuse")


class Injection:
    """A compiled `injection` interceptor."""

    def __init__(self, heuristics: Heuristics, refuse: bool) -> None:
        self._heuristics = heuristics
        self._refuse = refuse

    def inspect(self, subject: Subject) -> Decision:
        found = markers_found(self._heuristics, subject.payload.text, lambda: subject.payload.value)
        if not found:
            return PASS
        if self._refuse:
            return Decision("refuse", reason=f"the result carries instructions aimed at the model ({', '.join(found)})",
                            findings=found)
        return Decision("flag", findings=found, meta={"markers": list(found)})


def markers_found(heuristics: Heuristics, text: str, value: Callable[[], Any]) -> tuple[str, ...]:
    """The slugs of the heuristics that match the JSON text `text` (of the value `value()` gives),
    in reporting order."""
    text = scanned(text, value)
    found: set[str] = set()
    if heuristics.prefilter is not None:
        for index in heuristics.prefilter.candidates(text):
            heuristic = heuristics.chosen[index]
            confirm = heuristic.confirm
            if any(confirm is None or confirm(match) for match in heuristic.pattern.finditer(text)):
                found.add(heuristic.slug)
    if heuristics.characters and not text.isascii():
        found.update(_characters(text, heuristics.characters))
    return tuple(slug for slug in MARKERS if slug in found)


def _characters(text: str, chosen: frozenset[str]) -> set[str]:
    """The character heuristics of `chosen` that `text` trips. Each first asks whether the text
    has any of its characters at all, which `str` answers in C, without a regular expression."""
    found = set()
    if "bidi-override" in chosen and any(char in text for char in _BIDI):
        found.add("bidi-override")
    if ("zero-width-run" in chosen and any(char in text for char in _ZERO_WIDTH)
            and _ZERO_WIDTH_RUN.search(text) is not None):
        found.add("zero-width-run")
    if "invisible-tag-characters" in chosen:
        encoded = text.encode(errors="surrogatepass")
        if any(start in encoded for start in _TAG_UTF8) and any(map(_smuggled, _TAG_RUN.finditer(text))):
            found.add("invisible-tag-characters")
    return found


def scanned(text: str, value: Callable[[], Any]) -> str:
    """The JSON text `text` (of the value `value()` gives) as the heuristics read it: without `\\u`
    escapes (re-serialized from the value when it has any)."""
    if "\\u" in text:  # escaped characters: read them as characters
        try:
            return orjson.dumps(value()).decode()
        except (orjson.JSONDecodeError, orjson.JSONEncodeError):
            pass  # not JSON after all (a lone surrogate…): scan it as it is
    return text
