"""A virtual host's `tools` section in `gateway apply` / export (apps/configuration/curation.py)."""

from __future__ import annotations

import pytest
import yaml

from apps.catalog.models import ToolOverride, ToolRule
from apps.configuration.reports import Action
from apps.configuration.services import config_apply, config_export
from tests.configuration.documents import README_EXAMPLE, assert_refused_and_nothing_written

pytestmark = pytest.mark.django_db

TOOLS = """\
    tools:
      include: [{glob: "ec*"}, add]
      exclude: [{name: echo_twice, of: demo}]
      descriptions: {"demo:echo": "Say it back."}
"""
DOCUMENT = README_EXAMPLE + TOOLS


def _stored() -> tuple[object, ...]:
    rules = sorted(ToolRule.objects.values_list("action", "match", "pattern", "map_key"))
    return tuple(rules), tuple(ToolOverride.objects.values_list("map_key", "upstream_name", "description"))


def test_the_section_applies_exports_and_applies_again_unchanged() -> None:
    report = config_apply(document=DOCUMENT, prune=False)
    assert _stored() == (
        (("exclude", "name", "echo_twice", "demo"), ("include", "glob", "ec*", ""), ("include", "name", "add", "")),
        (("demo", "echo", "Say it back."),),
    )
    created = {(c.kind, c.action) for c in report.changes if c.kind.startswith("tool_")}
    assert created == {("tool_rule", Action.CREATED), ("tool_description", Action.CREATED)}
    exported = yaml.safe_load(config_export())
    host = next(h for h in exported["virtual_hosts"] if h["slug"] == "main")
    assert host["tools"] == {"include": [{"glob": "ec*"}, {"name": "add"}], "exclude": [{"name": "echo_twice", "of": "demo"}],
                             "descriptions": {"demo:echo": "Say it back."}}
    assert not config_apply(document=DOCUMENT, prune=True).changed
    # Without --prune, what the document leaves out stays (made in the console, say); with it, it goes,
    # like the host's other parts.
    config_apply(document=README_EXAMPLE, prune=False)
    assert len(_stored()[0]) == 3 and len(_stored()[1]) == 1
    config_apply(document=README_EXAMPLE.replace("tool_aliases: {}", "tools: {exclude: [echo_twice]}"), prune=True)
    assert _stored() == ((("exclude", "name", "echo_twice", ""),), ())
    config_apply(document=README_EXAMPLE, prune=True)
    assert _stored() == ((), ())


@pytest.mark.parametrize(("section", "expected"), [
    ('      exclude: [{glob: "Describe["}]\n', "virtual_hosts[0].tools.exclude[0].glob: the glob 'Describe['"),
    ("      exclude: [{name: x, of: nowhere}]\n", "virtual_hosts[0].tools.exclude[0].of: map key 'nowhere' is not mounted"),
    ("      include: [{name: x, glob: y}]\n", "virtual_hosts[0].tools.include[0]: name exactly one of name, glob or tag"),
    ('      descriptions: {"nowhere:x": "y"}\n', "virtual_hosts[0].tools.descriptions.nowhere:x: map key 'nowhere'"),
    ('      descriptions: {"demo:x": ""}\n', "virtual_hosts[0].tools.descriptions.demo:x: description must be some text"),
    ("      hide: [x]\n", "virtual_hosts[0].tools.hide"),
])
def test_a_wrong_rule_is_refused_at_its_path_and_nothing_is_written(section: str, expected: str) -> None:
    assert_refused_and_nothing_written(stored_first=DOCUMENT, broken=README_EXAMPLE + "    tools:\n" + section,
                                       expected=expected, stored=_stored)
