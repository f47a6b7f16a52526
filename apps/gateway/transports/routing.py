from django.urls import re_path

from apps.gateway.transports.consumers import McpConsumer

mcp_http_routes = [
    re_path(r"^mcp/(?P<tenant>[a-z0-9-]{1,64})/(?P<vhost>[a-z0-9-]{1,64})/?$", McpConsumer.as_asgi()),
]
