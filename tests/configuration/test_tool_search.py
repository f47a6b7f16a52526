"""`tool_search` on virtual hosts: applied, idempotent, refused with a path, exported."""

from __future__ import annotations

import pytest
import yaml

from apps.catalog.models import VirtualHost
from apps.configuration.reports import Action
from apps.configuration.services import config_apply, config_export
from tests.configuration.documents import README_EXAMPLE, assert_refused_and_nothing_written

pytestmark = pytest.mark.django_db


def _host() -> tuple[str, str]:
    host = VirtualHost.objects.get(tenant__slug="acme", slug="main")
    return host.tool_search, host.tool_search_name


def test_tool_search_applies_changes_and_exports() -> None:
    config_apply(document=README_EXAMPLE, prune=False)
    assert _host() == ("auto", "tool_search")  # a new host's mode
    assert "tool_search" not in yaml.safe_load(config_export())["virtual_hosts"][0]
    only = README_EXAMPLE + "    tool_search: only\n    tool_search_name: find_tools\n"
    report = config_apply(document=only, prune=False)
    assert [(c.action, c.detail) for c in report.changes if c.kind == "virtual_host"] == [
        (Action.UPDATED, "tool_search")]
    assert _host() == ("only", "find_tools")
    assert not [c for c in config_apply(document=only, prune=False).changes if c.action is not Action.UNCHANGED]
    exported = yaml.safe_load(config_export())["virtual_hosts"][0]
    assert (exported["tool_search"], exported["tool_search_name"]) == ("only", "find_tools")
    # YAML reads a bare `off` as false, and `on` as true: both mean what they say.
    config_apply(document=README_EXAMPLE + "    tool_search: off\n", prune=False)
    assert _host() == ("off", "find_tools")  # the name was not said: the host keeps it
    assert yaml.safe_load(config_export())["virtual_hosts"][0]["tool_search"] == "off"
    config_apply(document=README_EXAMPLE + "    tool_search: on\n", prune=False)
    assert _host() == ("listed", "find_tools")


def test_a_document_that_does_not_say_leaves_an_existing_host_as_it_is() -> None:
    """Documents written before `auto` existed say nothing of tool_search on hosts that are off:
    applying them again must not turn search on."""
    config_apply(document=README_EXAMPLE + "    tool_search: off\n    tool_search_name: find_tools\n", prune=False)
    report = config_apply(document=README_EXAMPLE, prune=False)
    assert not [c for c in report.changes if c.action is not Action.UNCHANGED]
    assert _host() == ("off", "find_tools")
    exported = config_export()
    config_apply(document=exported, prune=False)
    assert _host() == ("off", "find_tools")


@pytest.mark.parametrize(("extra", "expected"), [
    ("    tool_search: sometimes\n", "virtual_hosts[0].tool_search: tool_search must be one of auto, off, listed, only"),
    ("    tool_search: listed\n    tool_search_name: 'find tools'\n", "virtual_hosts[0].tool_search_name: "),
    ("    tool_search: listed\n    tool_search_name: add\n",
     "virtual_hosts[0].tool_search_name: 'add' is an alias of this host; tool_search and an alias cannot share a name"),
])
def test_a_bad_tool_search_is_refused_with_its_path_and_nothing_changes(extra: str, expected: str) -> None:
    with_alias = README_EXAMPLE.replace("tool_aliases: {}", 'tool_aliases: {add: "demo:add"}')
    assert_refused_and_nothing_written(stored_first=with_alias, broken=with_alias + extra, expected=expected,
                                       stored=_host)
