"""The ports of `apps.gateway.pipeline.ports` on real infrastructure, one file per port, named
`<what it runs on>_<the port's role>`: Redis (`redis_*`), the channel layer, PostgreSQL configuration
snapshots, the pooled HTTP/1.1 client, OpenTelemetry. `apps.gateway.wiring` plugs them in."""
