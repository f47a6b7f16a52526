"""What the tool index reads of a tool (docs/tool-search.md, "The index"). Pure: no I/O, no Django.

A tool's name is the densest description it has (`DescribeVpcEndpoints`, `create_pull_request`),
but neither full-text search nor an embedding model reads it as words unless it is split; the
service it belongs to names the domain ("ec2", "Amazon Elastic Compute Cloud"); the description
says what it does; the names of its required parameters say what it acts on (`VpcId`,
`LoadBalancerArn`). Each part is kept apart (`IndexText`) so that full-text search can weigh
them, and joined in one order for the embedding."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# A word boundary inside an identifier: lower→Upper (`describeVpc`), acronym→Word (`VPCEndpoint`),
# but not before the plural s of an acronym (`WebACLs`, `ListAPIs`: an acronym followed by a word
# of two letters, `DNSIsEnabled`, reads as `DNSIs Enabled`, the rarer case), letter↔digit
# (`ipv6Cidr` keeps `ipv6`: digits stick to the letters before them).
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])(?![A-Z]s(?![a-z]))")
_SEPARATORS = re.compile(r"[^0-9A-Za-z]+")

#: Enough of a description to say what a tool does; the rest (every caveat of a long API reference)
#: dilutes an embedding of at most 256 word pieces and full-text ranks alike.
DESCRIPTION_CHARS = 600
#: What of a description the embedding reads: its first sentence, up to this.
SUMMARY_CHARS = 200


def identifier_words(name: str) -> list[str]:
    """`DescribeVPCEndpoints_v2` → ["Describe", "VPC", "Endpoints", "v2"]."""
    words: list[str] = []
    for part in _SEPARATORS.split(name):
        if part:
            words.extend(piece for piece in _CAMEL.split(part) if piece)
    return words


def name_words(name: str) -> tuple[str, ...]:
    """`DescribeVPCEndpoints` → ("describe", "vpc", "endpoints")."""
    return tuple(word.lower() for word in identifier_words(name))


def type_words(name: str) -> tuple[str, ...]:
    """The resource type `name` spells, as the index compares types: its words in lower case, the
    last one singular (`NetworkAcls`, `network-acl` → ("network", "acl"))."""
    words = name_words(name)
    return (*words[:-1], singular(words[-1])) if words else ()


def singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def split_identifiers(text: str) -> str:
    """`text` with every identifier-like token also split into words (`DescribeVpcs` →
    `DescribeVpcs Describe Vpcs`), so that a query naming a tool by its name meets the name's words."""
    out: list[str] = []
    for token in text.split():
        out.append(token)
        words = identifier_words(token)
        if len(words) > 1:
            out.extend(words)
    return " ".join(out)


@dataclass(frozen=True, slots=True)
class ToolText:
    """A tool as a source offers it: its name, description and input schema, and the names of the
    service it belongs to (the backend's name, and its API's title when it has one)."""

    name: str
    description: str
    input_schema: Mapping[str, object]
    service: str
    service_title: str = ""


@dataclass(frozen=True, slots=True)
class IndexText:
    name: str  # the name's words
    service: str
    parameters: str  # required parameters first
    description: str

    def document(self) -> str:
        """The text an embedding model reads: what the tool is called, where it belongs, and the
        first sentence of what it does. Measured (BENCHMARKS.md, retrieval): the rest of a
        description and the parameter names make the embedding worse; full-text search keeps them."""
        return " ".join(part for part in (self.name, f"({self.service})", first_sentence(self.description)) if part)

    def digest(self, model: str) -> str:
        """Changes when the text or the embedding model does: an entry is embedded again only then."""
        h = hashlib.blake2b(digest_size=16)
        for part in (model, self.document(), self.name, self.service, self.parameters, self.description):
            h.update(part.encode())
            h.update(b"\x00")
        return h.hexdigest()


def index_text(tool: ToolText) -> IndexText:
    service_words = [*identifier_words(tool.service)]
    if tool.service_title and tool.service_title.lower() != tool.service.lower():
        service_words.append(tool.service_title)
    return IndexText(
        name=" ".join(identifier_words(tool.name)),
        service=" ".join(service_words),
        parameters=", ".join(" ".join(identifier_words(name)) for name in parameter_names(tool.input_schema)),
        description=_first_chars(" ".join(tool.description.split()), DESCRIPTION_CHARS),
    )


def parameter_names(schema: Mapping[str, object]) -> Sequence[str]:
    """The top-level parameter names of an input schema, required ones first."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return ()
    required = schema.get("required")
    first = [name for name in required if isinstance(name, str) and name in properties] if isinstance(required, list) else []
    return [*first, *(name for name in properties if name not in first)]


def first_sentence(text: str, limit: int = SUMMARY_CHARS) -> str:
    """The first sentence of `text` (up to a full stop followed by a space), at most `limit`
    characters cut at a word."""
    end = text.find(". ")
    return _first_chars(text if end < 0 else text[: end + 1], limit)


def _first_chars(text: str, limit: int) -> str:
    """`text` cut at a word boundary at or before `limit` characters."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > 0 else limit]
