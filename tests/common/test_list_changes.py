"""The list change messages gateway instances share over Redis."""

from __future__ import annotations

import pytest

from apps.common.list_changes import list_change_parse, list_change_payload


def test_a_message_round_trips() -> None:
    payload = list_change_payload(backend_id=7, notification="notifications/tools/list_changed", origin="gw1:5")
    assert list_change_parse(payload) == (7, "notifications/tools/list_changed", "gw1:5")


@pytest.mark.parametrize("data", [b"", b"not json", b"[1]", b'{"backend": "7", "notification": "x", "origin": "o"}',
                                  b'{"backend": 7, "notification": null, "origin": "o"}', b'{"backend": 7}'])
def test_malformed_messages_are_ignored(data: bytes) -> None:
    assert list_change_parse(data) is None
