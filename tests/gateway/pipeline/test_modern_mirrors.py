"""A stateless-era request's `Mcp-Param-*` headers after an interceptor rewrote its arguments
(`modern._mirrors_rewritten`): a header that mirrored a changed argument carries the new value (or
goes with the argument), so a backend's header/body check holds and a masked value does not travel
in a header; the others pass as sent."""

from __future__ import annotations

from apps.gateway.pipeline.modern import _mirrors_rewritten
from apps.gateway.protocol.envelope import encode_header_value

BEFORE = {"name": "deploy", "arguments": {"region": "eu-west-1", "token": "AKIAIOSFODNN7EXAMPLE", "dry": True,
                                          "count": 3, "note": "café"}}


def test_a_changed_argument_takes_its_header_along_and_the_rest_pass() -> None:
    after = {"name": "deploy", "arguments": {**BEFORE["arguments"], "token": "[REDACTED:aws-access-key]",
                                             "note": "thé"}}
    mirrored = [("mcp-param-region", "eu-west-1"), ("mcp-param-token", "AKIAIOSFODNN7EXAMPLE"),
                ("mcp-param-dry", "true"), ("mcp-param-count", "3"), ("mcp-param-note", encode_header_value("café")),
                ("mcp-param-other", "unrelated")]
    assert _mirrors_rewritten(mirrored, BEFORE, after) == [
        ("mcp-param-region", "eu-west-1"), ("mcp-param-token", "[REDACTED:aws-access-key]"),
        ("mcp-param-dry", "true"), ("mcp-param-count", "3"), ("mcp-param-note", encode_header_value("thé")),
        ("mcp-param-other", "unrelated")]


def test_a_dropped_argument_drops_its_header() -> None:
    after = {"name": "deploy", "arguments": {"region": "eu-west-1"}}
    mirrored = [("mcp-param-region", "eu-west-1"), ("mcp-param-token", "AKIAIOSFODNN7EXAMPLE")]
    assert _mirrors_rewritten(mirrored, BEFORE, after) == [("mcp-param-region", "eu-west-1")]


def test_a_header_the_client_encoded_and_a_value_two_arguments_share_follow_the_change() -> None:
    before = {"arguments": {"token": "AKIAIOSFODNN7EXAMPLE", "copy": "AKIAIOSFODNN7EXAMPLE", "plain": "x"}}
    after = {"arguments": {"token": "[REDACTED:aws-access-key]", "copy": "AKIAIOSFODNN7EXAMPLE", "plain": "x"}}
    base64_form = "=?base64?QUtJQUlPU0ZPRE5ON0VYQU1QTEU=?="  # the same key, encoded though it need not be
    mirrored = [("mcp-param-copy", "AKIAIOSFODNN7EXAMPLE"), ("mcp-param-token", base64_form), ("mcp-param-plain", "x")]
    assert _mirrors_rewritten(mirrored, before, after) == [
        ("mcp-param-copy", "[REDACTED:aws-access-key]"), ("mcp-param-token", "[REDACTED:aws-access-key]"),
        ("mcp-param-plain", "x")]
