from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    """Built without locking out the audit writers of running instances: the table may be large."""

    atomic = False

    dependencies = [
        ("audit", "0009_task_outcome"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="auditrecord",
            index=models.Index(condition=models.Q(("task_id", ""), _negated=True), fields=["tenant_id", "task_id"],
                               name="audit_tenant_task"),
        ),
    ]
