"""The console's icon: every page links it, and `/favicon.ico` (what a browser asks for by itself)
leads to it rather than answering 404."""

from __future__ import annotations

from xml.etree import ElementTree

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

pytestmark = pytest.mark.django_db


def test_favicon_ico_leads_to_the_icon_every_page_links(client: Client) -> None:
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/favicon.svg"
    icon = finders.find("favicon.svg")
    assert icon is not None
    assert ElementTree.parse(icon).getroot().tag == "{http://www.w3.org/2000/svg}svg"
    login = client.get("/console/login/").content.decode()
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in login
