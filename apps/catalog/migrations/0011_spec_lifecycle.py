from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("catalog", "0010_tool_curation"),
    ]

    operations = [
        migrations.AddField(
            model_name="specversion",
            name="allow_removals",
            field=models.BooleanField(
                default=False, help_text="Published even when it removes more than half of the tools served (confirmed)."),
        ),
        migrations.AddField(
            model_name="specversion",
            name="restores",
            field=models.PositiveIntegerField(
                blank=True, null=True,
                help_text="The number of the earlier version whose document this one restores (a rollback)."),
        ),
        migrations.AlterField(
            model_name="specversion",
            name="status",
            field=models.CharField(
                choices=[("pending", "pending"), ("compiling", "compiling"), ("ready", "ready"), ("held", "held"),
                         ("failed", "failed")],
                default="pending", max_length=16),
        ),
    ]
