from django.db import migrations

# The console's tools browser and `GET /api/v1/tenants/<t>/tools` (apps/catalog/tool_selectors.py)
# page through a tenant's catalog tools in (backend, name) order and search their names and
# descriptions with full text. The expression must stay exactly `tool_selectors.TOOL_SEARCH_SQL`,
# or PostgreSQL cannot use the index for it (tests/catalog/test_api_tools.py checks the plan).
TOOL_SEARCH_SQL = (
    "to_tsvector('english'::regconfig, name || ' ' || regexp_replace(regexp_replace(regexp_replace("
    "name, '[^0-9A-Za-z]+', ' ', 'g'), '([a-z0-9])([A-Z])', '\\1 \\2', 'g'), '([A-Z])([A-Z][a-z])', '\\1 \\2', 'g')"
    " || ' ' || left(description, 20000))"
)


class Migration(migrations.Migration):
    """Indexes only, on the catalog's tool table (kept here, beside the tool index, so that the
    catalog's own migrations are not touched)."""

    dependencies = [("retrieval", "0005_embedding_storage"), ("catalog", "0007_virtual_host_tool_search")]

    operations = [
        migrations.RunSQL(
            sql=[
                "CREATE INDEX catalog_tool_backend_name ON catalog_tool (backend_id, name) INCLUDE (id)",
                f"CREATE INDEX catalog_tool_search ON catalog_tool USING gin ({TOOL_SEARCH_SQL})",
            ],
            reverse_sql=["DROP INDEX catalog_tool_search", "DROP INDEX catalog_tool_backend_name"],
        )
    ]
