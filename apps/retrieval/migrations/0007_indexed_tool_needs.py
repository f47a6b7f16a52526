from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0006_tool_browser_indexes")]

    operations = [
        migrations.AddField(
            model_name="indexedtool",
            name="needs",
            field=models.JSONField(
                default=list,
                help_text="The ids the tool cannot work without: {parameter, producer, lookup}, each tool as "
                "[backend id, name] or null (docs/tool-search.md, Prerequisite chains).",
            ),
        ),
        migrations.AddField(
            model_name="indexedtool",
            name="input_schema",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="An MCP tool's input schema as its server lists it, for deriving chains (an OpenAPI "
                "tool's is its catalog row's: empty here).",
            ),
        ),
    ]
