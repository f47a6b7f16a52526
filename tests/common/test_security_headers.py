"""`form_action_allow`: a page's forms may lead to one more origin, and nothing else gets into the
policy header (a hostile server's metadata names the origin)."""

from __future__ import annotations

import pytest
from django.http import HttpResponse
from django.test import override_settings

from apps.common.security_headers import form_action_allow

POLICY = "default-src 'self'; form-action 'self'; frame-ancestors 'none'"


@override_settings(GATEWAY_CONTENT_SECURITY_POLICY=POLICY)
@pytest.mark.parametrize(("url", "source"), [
    ("https://login.example.test/authorize?x=1", "https://login.example.test"),
    ("http://127.0.0.1:8123/cb", "http://127.0.0.1:8123"),
    ("http://[::1]:8123/cb", "http://[::1]:8123"),
    ("com.example.app:/callback", "com.example.app:"),
])
def test_the_origin_is_added_to_form_action(url: str, source: str) -> None:
    policy = form_action_allow(HttpResponse(), url).headers["Content-Security-Policy"]
    assert policy == f"default-src 'self'; form-action 'self' {source}; frame-ancestors 'none'"


@override_settings(GATEWAY_CONTENT_SECURITY_POLICY=POLICY)
@pytest.mark.parametrize("url", [
    "https://evil.example;frame-ancestors */x", "https://evil.example frame-ancestors/x", "https://a b/x",
    "https://evil.example:99999/x", "javascript;x:/y", "https://user@evil.example:notaport/",
])
def test_anything_else_leaves_the_policy_as_it_was(url: str) -> None:
    assert "Content-Security-Policy" not in form_action_allow(HttpResponse(), url).headers
