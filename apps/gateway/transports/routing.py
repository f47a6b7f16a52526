from django.urls import re_path

mcp_http_routes: list = []
