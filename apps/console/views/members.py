"""The console's team and member pages. Every member of the tenant reads them; tenant admins
(and platform admins) change them. Teams and memberships are looked up within the URL's tenant.

Platform admins may also create a console user on the members page and add them at once."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.console.access import console_view
from apps.console.paging import page_of
from apps.console.refusals import refusal_show
from apps.tenants import selectors
from apps.tenants.models import Membership, Team, Tenant
from apps.tenants.services import console_user_create, membership_delete, membership_set, team_create, team_delete
from apps.tenants.validators import SLUG_MAX_LENGTH

_USERNAME_MAX = get_user_model()._meta.get_field("username").max_length


class TeamForm(forms.Form):
    # Its form is the service's (`team_check`); the browser is told the length.
    slug = forms.CharField(label="Team slug", strip=False, help_text="Lowercase letters, digits and inner hyphens.",
                           widget=forms.TextInput(attrs={"maxlength": str(SLUG_MAX_LENGTH)}))


class MemberAddForm(forms.Form):
    username = forms.CharField(label="Username", max_length=_USERNAME_MAX, help_text="An existing console user.")
    role = forms.ChoiceField(label="Role", choices=Membership.Role.choices, initial=Membership.Role.MEMBER)

    def clean_username(self) -> object:
        user = selectors.user_get_by_username(username=self.cleaned_data["username"])
        if user is None:
            raise ValidationError("There is no console user with this username.")
        return user


class UserCreateForm(forms.Form):
    new_username = forms.CharField(label="New username", max_length=_USERNAME_MAX)
    password = forms.CharField(label="Password", strip=False,
                               widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}))
    new_role = forms.ChoiceField(label="Role", choices=Membership.Role.choices, initial=Membership.Role.MEMBER)


class RoleForm(forms.Form):
    role = forms.ChoiceField(label="Role", choices=Membership.Role.choices)


def _team_or_404(tenant: Tenant, team_id: int) -> Team:
    team = selectors.team_get(tenant=tenant, team_id=team_id)
    if team is None:
        raise Http404(f"no team with id {team_id}")
    return team


def _membership_or_404(tenant: Tenant, membership_id: int) -> Membership:
    membership = selectors.membership_get(tenant=tenant, membership_id=membership_id)
    if membership is None:
        raise Http404(f"no membership with id {membership_id}")
    return membership


@require_http_methods(["GET", "POST"])
@console_view()
def team_list(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """The tenant's teams; POST creates one (tenant admins: `console_view` checks writes)."""
    form = TeamForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            team = team_create(tenant=tenant, **form.cleaned_data)
        except ValidationError as exc:
            refusal_show(form, exc)
        else:
            messages.success(request, f"Team {team.slug} created.")
            return redirect("console:team-list", tenant=tenant.slug)
    context = {"page_obj": page_of(request, selectors.team_list(tenant=tenant)), "form": form}
    return render(request, "console/keys/team_list.html", context, status=400 if form.errors else 200)


@require_http_methods(["GET", "POST"])
@console_view()
def team_delete_view(request: HttpRequest, tenant: Tenant, team_id: int) -> HttpResponse:
    team = _team_or_404(tenant, team_id)
    if request.method == "POST":
        team_delete(team=team)
        messages.success(request, f"Team {team.slug} deleted; its keys stay, without a team.")
        return redirect("console:team-list", tenant=tenant.slug)
    if not request.access.manages(tenant.pk):  # type: ignore[attr-defined]
        raise PermissionDenied("Only the tenant's admins may delete teams.")
    keys = team.api_keys.count()
    return render(request, "console/keys/confirm.html", {
        "title": f"Delete team {team.slug}?",
        "what": [f"The team {team.slug} is deleted.",
                 f"Its {keys} key{'s' if keys != 1 else ''} stay, without a team (and without the team's budget)."],
        "action": "Delete team",
        "back_url": reverse("console:team-list", kwargs={"tenant": tenant.slug}),
    })


def _members_page(request: HttpRequest, tenant: Tenant, *, add_form: MemberAddForm | None = None,
                  user_form: UserCreateForm | None = None) -> HttpResponse:
    add_form = add_form or MemberAddForm()
    user_form = user_form or UserCreateForm()
    context = {
        "page_obj": page_of(request, selectors.membership_list(tenant=tenant)),
        "add_form": add_form,
        "user_form": user_form,
        "roles": Membership.Role.choices,
    }
    return render(request, "console/keys/member_list.html", context,
                  status=400 if add_form.errors or user_form.errors else 200)


@require_GET
@console_view()
def member_list(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    return _members_page(request, tenant)


@require_POST
@console_view()
def member_add(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """Give an existing user a role in the tenant (replacing the role they had)."""
    form = MemberAddForm(request.POST)
    if form.is_valid():
        membership = membership_set(tenant=tenant, user=form.cleaned_data["username"], role=form.cleaned_data["role"])
        messages.success(request, f"{membership.user.get_username()} is now {membership.get_role_display().lower()}.")
        return redirect("console:member-list", tenant=tenant.slug)
    return _members_page(request, tenant, add_form=form)


@require_POST
@console_view()
def member_create_user(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """Platform admins only: create a console user and add them to the tenant, both or neither."""
    if not request.access.platform_admin:  # type: ignore[attr-defined]
        raise PermissionDenied("Only platform admins may create console users.")
    form = UserCreateForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            with transaction.atomic():
                user = console_user_create(username=data["new_username"], password=data["password"])
                membership_set(tenant=tenant, user=user, role=data["new_role"])
        except ValidationError as exc:
            if hasattr(exc, "error_dict"):
                for field, errors in exc.message_dict.items():
                    form.add_error("new_username" if field == "username" else None, errors)
            else:
                form.add_error("password", exc)
        else:
            messages.success(request, f"User {user.get_username()} created and added.")
            return redirect("console:member-list", tenant=tenant.slug)
    return _members_page(request, tenant, user_form=form)


@require_POST
@console_view()
def member_role(request: HttpRequest, tenant: Tenant, membership_id: int) -> HttpResponse:
    membership = _membership_or_404(tenant, membership_id)
    form = RoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose a role: admin or member.")
    else:
        membership_set(tenant=tenant, user=membership.user, role=form.cleaned_data["role"])
        messages.success(request, f"{membership.user.get_username()}'s role saved.")
    return redirect("console:member-list", tenant=tenant.slug)


@require_http_methods(["GET", "POST"])
@console_view()
def member_remove(request: HttpRequest, tenant: Tenant, membership_id: int) -> HttpResponse:
    membership = _membership_or_404(tenant, membership_id)
    username = membership.user.get_username()
    if request.method == "POST":
        membership_delete(membership=membership)
        messages.success(request, f"{username} removed from the tenant.")
        return redirect("console:member-list", tenant=tenant.slug)
    if not request.access.manages(tenant.pk):  # type: ignore[attr-defined]
        raise PermissionDenied("Only the tenant's admins may remove members.")
    return render(request, "console/keys/confirm.html", {
        "title": f"Remove {username}?",
        "what": [f"{username} loses access to the tenant {tenant.slug}.",
                 "The keys they issued keep working; an admin may revoke them."],
        "action": "Remove member",
        "back_url": reverse("console:member-list", kwargs={"tenant": tenant.slug}),
    })


urls = [
    path("teams/", team_list, name="team-list"),
    path("teams/<int:team_id>/delete/", team_delete_view, name="team-delete"),
    path("members/", member_list, name="member-list"),
    path("members/add/", member_add, name="member-add"),
    path("members/new-user/", member_create_user, name="member-create-user"),
    path("members/<int:membership_id>/role/", member_role, name="member-role"),
    path("members/<int:membership_id>/remove/", member_remove, name="member-remove"),
]
