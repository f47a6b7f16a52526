from django.urls import re_path

from apps.gateway.transports.consumers import McpConsumer

mcp_http_routes = [
    # Streamable HTTP, also spelled with `/mcp` at the end: clients and tools that go by a URL's last
    # segment take that for Streamable HTTP (docs/sessions.md).
    re_path(r"^mcp/(?P<tenant>[a-z0-9-]{1,64})/(?P<vhost>[a-z0-9-]{1,64})(?:/mcp)?/?$", McpConsumer.as_asgi()),
    # HTTP+SSE (2024-11-05): the event stream and the endpoint its messages are posted to.
    re_path(r"^mcp/(?P<tenant>[a-z0-9-]{1,64})/(?P<vhost>[a-z0-9-]{1,64})/(?P<endpoint>sse|messages)/?$",
            McpConsumer.as_asgi()),
]
