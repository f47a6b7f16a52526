from django.db import migrations


class Migration(migrations.Migration):
    """Searches rank every tool of a tenant in process now, exactly, over what they read once per
    index version (docs/tool-search.md, "How a search runs"): nothing queries the HNSW graph of the
    embeddings or the GIN index of the full-text vectors any more, which took half of the table's
    size and were written on every indexed tool."""

    dependencies = [("retrieval", "0007_indexed_tool_needs")]

    operations = [
        migrations.RemoveIndex(model_name="indexedtool", name="indexed_tool_embedding"),
        migrations.RemoveIndex(model_name="indexedtool", name="indexed_tool_search"),
    ]
