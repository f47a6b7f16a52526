from apps.gateway.pipeline.mounts import merge_capabilities


def test_capabilities_are_the_union() -> None:
    merged = merge_capabilities([
        {"tools": {"listChanged": False}, "logging": {}},
        {"tools": {"listChanged": True}, "resources": {"subscribe": True}},
    ])
    assert merged == {"tools": {"listChanged": True}, "logging": {}, "resources": {"subscribe": True}}
