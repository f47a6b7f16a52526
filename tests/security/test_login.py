"""Every sign-in form shares one throttle: the console's lock holds at `/admin/login/`, and wrong
passwords at the admin count toward it (CONSOLE_LOGIN_* settings)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from apps.common.redis import redis_client

pytestmark = pytest.mark.django_db

CONSOLE, ADMIN = "/console/login/", "/admin/login/?next=/admin/"


@pytest.fixture(autouse=True)
def _no_failures_counted() -> None:
    for key in redis_client().scan_iter("gw:login-fail*"):
        redis_client().delete(key)


@pytest.fixture
def admin_user(django_user_model: Any, settings: Any) -> Any:
    settings.CONSOLE_LOGIN_FAILURES_PER_USER = 5
    return django_user_model.objects.create_superuser(username="admin", password="the-right-password")


def _sign_in(form: str, password: str, username: str = "admin") -> tuple[Any, Client]:
    client = Client()
    return client.post(form, {"username": username, "password": password}), client


def _signed_in(response: Any, client: Client) -> bool:
    return response.status_code == 302 and bool(client.session.get("_auth_user_id"))


def test_the_admin_signs_staff_in_while_nothing_is_locked(admin_user: Any) -> None:
    assert _signed_in(*_sign_in(ADMIN, "the-right-password"))


def test_a_username_locked_by_the_console_is_refused_at_the_admin(admin_user: Any) -> None:
    for _ in range(5):
        assert not _signed_in(*_sign_in(CONSOLE, "wrong"))
    for _ in range(20):  # the admin neither checks these nor lets them reset anything
        _sign_in(ADMIN, "still-wrong")
    response, client = _sign_in(ADMIN, "the-right-password")
    assert not _signed_in(response, client)
    assert response.status_code == 200 and "Too many failed sign-ins" in response.content.decode()


def test_wrong_passwords_at_the_admin_lock_the_console(admin_user: Any) -> None:
    for _ in range(5):
        response, _ = _sign_in(ADMIN, "wrong")
        assert response.status_code == 200 and "Please enter the correct username" in response.content.decode()
    response, client = _sign_in(CONSOLE, "the-right-password")
    assert not _signed_in(response, client)
    assert "Too many failed sign-ins" in response.content.decode()
    response, client = _sign_in(ADMIN, "the-right-password")
    assert not _signed_in(response, client) and "Too many failed sign-ins" in response.content.decode()


def test_failures_at_both_forms_add_up_to_one_lock(admin_user: Any) -> None:
    for form in (ADMIN, CONSOLE, ADMIN, CONSOLE, ADMIN):
        _sign_in(form, "wrong")
    assert "Too many failed sign-ins" in _sign_in(CONSOLE, "the-right-password")[0].content.decode()


def test_many_usernames_from_one_address_lock_the_address_at_the_admin(admin_user: Any, settings: Any) -> None:
    settings.CONSOLE_LOGIN_FAILURES_PER_ADDRESS = 4
    for number in range(4):
        _sign_in(ADMIN, "wrong", username=f"guess-{number}")
    response, client = _sign_in(ADMIN, "the-right-password")
    assert not _signed_in(response, client) and "Too many failed sign-ins" in response.content.decode()


def test_a_right_password_for_a_non_staff_user_is_refused_without_counting(django_user_model: Any,
                                                                          settings: Any) -> None:
    settings.CONSOLE_LOGIN_FAILURES_PER_USER = 2
    django_user_model.objects.create_user(username="member", password="members-password")
    for _ in range(3):
        response, client = _sign_in(ADMIN, "members-password", username="member")
        assert not _signed_in(response, client)
    # Not a guess: the console still lets the member in.
    assert _signed_in(*_sign_in(CONSOLE, "members-password", username="member"))
