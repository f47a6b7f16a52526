from django.db import migrations, models


class Migration(migrations.Migration):
    """Where each call came from. Constant defaults in the database: PostgreSQL adds both columns
    without rewriting the table, and rows of instances still on the previous release get them."""

    dependencies = [
        ("audit", "0010_audit_tenant_task"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditrecord",
            name="origin",
            field=models.CharField(
                choices=[("mcp", "MCP client"), ("console", "console tool tester")], db_default="mcp", default="mcp",
                help_text="Where the call came from: an MCP client, or the console's tool tester.", max_length=8,
            ),
        ),
        migrations.AddField(
            model_name="auditrecord",
            name="console_user",
            field=models.CharField(
                blank=True, db_default="", default="", max_length=150,
                help_text="The console user who ran the call in the tool tester (origin console).",
            ),
        ),
    ]
