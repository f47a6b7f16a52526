from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations


class Migration(migrations.Migration):
    """Built without locking out uploads and snapshot loads: the tool table may be large."""

    atomic = False

    dependencies = [
        ("catalog", "0013_database_defaults"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="tool",
            index=GinIndex(fields=["tags"], name="tool_tags", opclasses=["jsonb_path_ops"]),
        ),
    ]
