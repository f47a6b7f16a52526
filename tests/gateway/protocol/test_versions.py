import pytest

from apps.gateway.protocol.versions import LATEST_LEGACY, LEGACY_VERSIONS, negotiate_legacy


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_supported_versions_are_answered_as_asked(version: str) -> None:
    assert negotiate_legacy(version) == version


@pytest.mark.parametrize("version", ["2026-07-28", "2024-01-01", None, 5, ""])
def test_anything_else_gets_the_latest_legacy_version(version: object) -> None:
    assert negotiate_legacy(version) == LATEST_LEGACY
