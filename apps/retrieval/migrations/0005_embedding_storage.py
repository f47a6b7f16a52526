from django.db import migrations


class Migration(migrations.Migration):
    """Keep each embedding (1.5 KB) and each tsvector in their row rather than in TOAST: an exact
    nearest-neighbour scan reads every vector of a tenant, and a full-text query ranks every tool
    that matches one of its words; fetching each value out of line doubled both (3,714 tools: 27 →
    12 ms; 18,378 tools, full text: 30 → 18 ms; BENCHMARKS.md, retrieval). The UPDATEs store the
    values already there inline too."""

    dependencies = [("retrieval", "0004_indexed_tool_description")]

    operations = [
        migrations.RunSQL(
            sql=[
                "ALTER TABLE retrieval_indexedtool ALTER COLUMN embedding SET STORAGE PLAIN",
                "ALTER TABLE retrieval_indexedtool ALTER COLUMN search SET STORAGE MAIN",
                "UPDATE retrieval_indexedtool SET embedding = embedding::text::vector, search = search::text::tsvector",
            ],
            reverse_sql=[
                "ALTER TABLE retrieval_indexedtool ALTER COLUMN embedding SET STORAGE EXTENDED",
                "ALTER TABLE retrieval_indexedtool ALTER COLUMN search SET STORAGE EXTENDED",
            ],
        )
    ]
