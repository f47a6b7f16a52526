"""The dashboard's per-minute counts of the last day's rows, written before the counts existed (the
writer keeps them from now on). Buckets as LATENCY_BOUNDS at the time of writing (a latency exactly
on a bound lands one bucket up, as PostgreSQL's width_bucket puts it)."""

from django.db import migrations

BOUNDS = ",".join(str(round(0.1 * 1.19**i, 4)) for i in range(92))

BACKFILL = f"""
INSERT INTO audit_auditminute (tenant_id, tool, minute, calls, errors, denied, rate_limited, over_budget, latency)
SELECT k.tenant_id, '', k.minute, sum(coalesce(c.calls, 0)), sum(coalesce(c.errors, 0)), sum(coalesce(c.denied, 0)),
       sum(coalesce(c.rate_limited, 0)), sum(coalesce(c.over_budget, 0)), array_agg(coalesce(c.calls, 0) ORDER BY b.b)
FROM (SELECT DISTINCT tenant_id, date_trunc('minute', created_at) AS minute FROM audit_auditrecord
      WHERE created_at >= now() - interval '1 day') k
CROSS JOIN generate_series(0, 92) AS b(b)
LEFT JOIN (
    SELECT tenant_id, date_trunc('minute', created_at) AS minute,
           width_bucket(latency_ms, ARRAY[{BOUNDS}]::float8[]) AS b, count(*) AS calls,
           count(*) FILTER (WHERE outcome IN ('error', 'tool_error')) AS errors,
           count(*) FILTER (WHERE outcome = 'denied') AS denied,
           count(*) FILTER (WHERE outcome = 'rate_limited') AS rate_limited,
           count(*) FILTER (WHERE outcome = 'over_budget') AS over_budget
    FROM audit_auditrecord WHERE created_at >= now() - interval '1 day' GROUP BY 1, 2, 3
) c ON c.tenant_id = k.tenant_id AND c.minute = k.minute AND c.b = b.b
GROUP BY k.tenant_id, k.minute
ON CONFLICT (tenant_id, minute, tool) DO NOTHING;

INSERT INTO audit_auditminute (tenant_id, tool, minute, calls, errors, denied, rate_limited, over_budget)
SELECT tenant_id, exposed_name, date_trunc('minute', created_at), count(*),
       count(*) FILTER (WHERE outcome IN ('error', 'tool_error')),
       count(*) FILTER (WHERE outcome = 'denied'), count(*) FILTER (WHERE outcome = 'rate_limited'),
       count(*) FILTER (WHERE outcome = 'over_budget')
FROM audit_auditrecord WHERE created_at >= now() - interval '1 day' AND exposed_name <> '' GROUP BY 1, 2, 3
ON CONFLICT (tenant_id, minute, tool) DO NOTHING;
"""


class Migration(migrations.Migration):

    dependencies = [
        ("audit", "0007_console_indexes_team_rollup"),
    ]

    operations = [migrations.RunSQL(BACKFILL, reverse_sql=migrations.RunSQL.noop)]
