"""The policies REST API (DRF): a virtual host's access policy and its simulator, the tenant's rate
limits and budgets (with the values in force and their current use), a host's tool costs, and its
interceptors (with a trial on sample content).

Views are thin: each checks the body's shape, calls one service or selector and shapes the answer.
A service's refusal answers 400 `{"detail": ...}` with its message; a host, limit or budget the
tenant does not have answers 404."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response

from apps.catalog.models import VirtualHost
from apps.kernel.costs import ToolCostSpec
from apps.kernel.interceptors import KINDS, MAX_INTERCEPTORS, interceptor_fields, interceptor_spec
from apps.kernel.policy import RuleSpec
from apps.policies import selectors
from apps.policies.models import Budget, RateLimit
from apps.policies.serializers import (
    AccessPolicySerializer,
    BudgetInputSerializer,
    BudgetSerializer,
    InterceptorSerializer,
    InterceptorTrialRequestSerializer,
    InterceptorTrialSerializer,
    RateLimitInputSerializer,
    RateLimitSerializer,
    SimulationRequestSerializer,
    SimulationSerializer,
    ToolCostSerializer,
)
from apps.policies.services import (
    UnmatchedTools,
    access_policy_clear,
    access_policy_set,
    budget_clear,
    budget_set,
    interceptors_set,
    rate_limit_clear,
    rate_limit_set,
    tool_costs_set,
)
from apps.tenants.api_base import TenantAPIView, problem, refused
from apps.tenants.models import ApiKey, Tenant


class PoliciesAPIView(TenantAPIView):
    parser_classes = [JSONParser]


def _host_or_404(tenant: Tenant, virtual_host_id: int) -> VirtualHost:
    host = selectors.policy_virtual_host_get(tenant=tenant, virtual_host_id=virtual_host_id)
    if host is None:
        raise Http404(f"no virtual host with id {virtual_host_id}")
    return host


def _shape_problem(given: serializers.Serializer) -> Response:
    """A body of the wrong shape, as 400 naming each field (`rules[1].tools: …`)."""
    return problem("; ".join(_error_lines(given.errors, "")))


def _error_lines(errors: Any, where: str) -> list[str]:
    if isinstance(errors, dict):
        lines = []
        for field, inner in errors.items():
            if field == "non_field_errors":
                inner_where = where
            elif isinstance(field, int):  # an item of a list
                inner_where = f"{where}[{field}]"
            else:
                inner_where = f"{where}.{field}" if where else str(field)
            lines += _error_lines(inner, inner_where)
        return lines
    if isinstance(errors, list) and not all(isinstance(e, str) for e in errors):
        return [line for i, inner in enumerate(errors) for line in _error_lines(inner, f"{where}[{i}]")]
    messages = errors if isinstance(errors, list) else [errors]
    return [f"{where}: {message}" if where else str(message) for message in messages]


def _policy_data(host: VirtualHost) -> dict[str, Any] | None:
    default, rules = selectors.access_rules_of(virtual_host=host)
    if default is None:
        return None
    return {
        "default": default,
        "rules": [
            {"id": r.id, "subject_kind": r.subject_kind, "subject_name": r.subject_name, "effect": r.effect,
             "tools": list(r.tools), "condition": r.condition}
            for r in rules
        ],
    }


class AccessPolicyView(PoliciesAPIView):
    """`/virtual-hosts/<id>/access-policy`: `GET` the host's policy (404 when it has none: every key
    of the tenant may then call everything); `PUT` replaces it whole, every rule checked first (400
    with the reason, the stored policy unchanged; a rule naming no tool the host is known to have
    is 400 with `warnings` unless the body says `"allow_unmatched": true`); `DELETE` removes it (204)."""

    @extend_schema(responses={200: AccessPolicySerializer, 404: OpenApiResponse(description="No policy.")})
    def get(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        data = _policy_data(_host_or_404(self.tenant, virtual_host_id))
        if data is None:
            raise Http404("the virtual host has no access policy")
        return Response(data)

    @extend_schema(request=AccessPolicySerializer, responses={200: AccessPolicySerializer})
    def put(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        host = _host_or_404(self.tenant, virtual_host_id)
        given = AccessPolicySerializer(data=request.data)
        if not given.is_valid():
            return _shape_problem(given)
        rules = [
            RuleSpec(r["id"], r["subject_kind"], r["subject_name"], r["effect"], tuple(r["tools"]), r["condition"])
            for r in given.validated_data["rules"]
        ]
        try:
            warnings = access_policy_set(virtual_host=host, default=given.validated_data["default"], rules=rules,
                                         allow_unmatched=given.validated_data["allow_unmatched"])
        except UnmatchedTools as exc:
            detail = f"not saved: {exc}; send \"allow_unmatched\": true to save it anyway"
            return Response({"detail": detail, "warnings": list(exc.warnings)}, status=status.HTTP_400_BAD_REQUEST)
        except ValidationError as exc:
            return refused(exc)
        return Response({**(_policy_data(_host_or_404(self.tenant, virtual_host_id)) or {}), "warnings": list(warnings)})

    @extend_schema(responses={204: None})
    def delete(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        access_policy_clear(virtual_host=_host_or_404(self.tenant, virtual_host_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class AccessSimulateView(PoliciesAPIView):
    """`POST /virtual-hosts/<id>/access-policy/simulate`: what the gateway would do with one call,
    from the configuration alone. A read: members may ask too."""

    members_write = True

    @extend_schema(request=SimulationRequestSerializer, responses={200: SimulationSerializer})
    def post(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        host = _host_or_404(self.tenant, virtual_host_id)
        given = SimulationRequestSerializer(data=request.data)
        if not given.is_valid():
            return _shape_problem(given)
        data = given.validated_data
        key = token = None
        if data["key"] is not None:
            key = ApiKey.objects.filter(tenant=self.tenant, pk=data["key"]).select_related("team").first()
            if key is None:
                return problem(f"key: tenant {self.tenant.slug!r} has no API key with id {data['key']}")
        else:
            raw = data["token"]
            team = raw["team"] or None
            if team is not None and not self.tenant.teams.filter(slug=team).exists():
                return problem(f"token.team: tenant {self.tenant.slug!r} has no team {team!r}")
            token = selectors.SimulatedToken(raw["subject"], team, tuple(raw["scopes"]))
        result = selectors.access_decision_simulate(
            virtual_host=host, key=key, token=token, tool=data["tool"], arguments=data["arguments"]
        )
        _, rules = selectors.access_rules_of(virtual_host=host)
        decided = result.rule or result.hidden_by
        position = next((i for i, rule in enumerate(rules, start=1) if rule.id == decided), None)
        return Response({
            "listed": result.listed, "allowed": result.allowed, "rule": decided, "rule_position": position,
            "reason": result.reason, "map_key": result.map_key, "upstream_name": result.upstream_name,
            "cost": result.cost, "tool_known": result.tool_known, "tools_note": result.tools_note,
            "condition_errors": [{"rule": e.rule, "message": e.message, "treated": e.treated}
                                 for e in result.condition_errors],
        })


def _rate_rows(limits: list[RateLimit]) -> list[dict[str, Any]]:
    usage = selectors.rate_limit_usage(limits=limits)
    return [
        {"scope": row.scope, "name": row.name, "limit": row.limit, "window_seconds": row.window_seconds,
         "usage": usage[row.pk]}
        for row in limits
    ]


def _budget_rows(tenant: Tenant, budgets: list[Budget]) -> list[dict[str, Any]]:
    effective = selectors.budgets_effective(tenant=tenant)
    usage = selectors.budget_usage(tenant=tenant, subjects=[(b.scope, b.name) for b in budgets])
    return [
        {"scope": b.scope, "name": b.name, "daily": b.daily, "monthly": b.monthly,
         "effective": effective.of(b.scope, b.name), "usage": usage[(b.scope, b.name)]}
        for b in budgets
    ]


class RateLimitListView(PoliciesAPIView, GenericAPIView):
    """`GET /rate-limits`: the tenant's rate limits by scope and name, each with its use now."""

    serializer_class = RateLimitSerializer

    @extend_schema(operation_id="tenants_rate_limits_list", responses=RateLimitSerializer(many=True))
    def get(self, request: Request, tenant: str) -> Response:
        page = self.paginate_queryset(selectors.rate_limit_list(tenant=self.tenant))
        return self.get_paginated_response(RateLimitSerializer(_rate_rows(list(page)), many=True).data)


class RateLimitDetailView(PoliciesAPIView):
    """`/rate-limits/<scope>/<name>` (scope `key` or `team`; name: the key's name or the team's
    slug): `GET` it, `PUT {limit, window_seconds}` sets or replaces it, `DELETE` removes it (204).
    Writes are refused (400) when the tenant's plan does not allow editing limits."""

    def _get(self, scope: str, name: str) -> RateLimit:
        row = selectors.rate_limit_list(tenant=self.tenant).filter(scope=scope, name=name).first()
        if row is None:
            raise Http404(f"no rate limit for {scope} {name!r}")
        return row

    @extend_schema(responses={200: RateLimitSerializer})
    def get(self, request: Request, tenant: str, scope: str, name: str) -> Response:
        return Response(RateLimitSerializer(_rate_rows([self._get(scope, name)])[0]).data)

    @extend_schema(request=RateLimitInputSerializer, responses={200: RateLimitSerializer})
    def put(self, request: Request, tenant: str, scope: str, name: str) -> Response:
        given = RateLimitInputSerializer(data=request.data)
        if not given.is_valid():
            return _shape_problem(given)
        try:
            rate_limit_set(tenant=self.tenant, scope=scope, name=name, **given.validated_data)
        except ValidationError as exc:
            return refused(exc)
        return Response(RateLimitSerializer(_rate_rows([self._get(scope, name)])[0]).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, tenant: str, scope: str, name: str) -> Response:
        self._get(scope, name)
        try:
            rate_limit_clear(tenant=self.tenant, scope=scope, name=name)
        except ValidationError as exc:
            return refused(exc)
        return Response(status=status.HTTP_204_NO_CONTENT)


class BudgetListView(PoliciesAPIView, GenericAPIView):
    """`GET /budgets`: the tenant's budgets by scope and name: as set, as in force after the plan's
    caps (`effective`), and spent this UTC day and month (`usage`)."""

    serializer_class = BudgetSerializer

    @extend_schema(operation_id="tenants_budgets_list", responses=BudgetSerializer(many=True))
    def get(self, request: Request, tenant: str) -> Response:
        page = self.paginate_queryset(selectors.budget_list(tenant=self.tenant))
        return self.get_paginated_response(BudgetSerializer(_budget_rows(self.tenant, list(page)), many=True).data)


class BudgetDetailView(PoliciesAPIView):
    """`/budgets/<scope>/<name>`: `GET` it, `PUT {daily, monthly}` (either may be null, not both)
    sets or replaces it, `DELETE` removes it (204). Writes are refused (400) when the tenant's plan
    does not allow editing limits."""

    def _get(self, scope: str, name: str) -> Budget:
        row = selectors.budget_list(tenant=self.tenant).filter(scope=scope, name=name).first()
        if row is None:
            raise Http404(f"no budget for {scope} {name!r}")
        return row

    def _answer(self, scope: str, name: str) -> Response:
        return Response(BudgetSerializer(_budget_rows(self.tenant, [self._get(scope, name)])[0]).data)

    @extend_schema(responses={200: BudgetSerializer})
    def get(self, request: Request, tenant: str, scope: str, name: str) -> Response:
        return self._answer(scope, name)

    @extend_schema(request=BudgetInputSerializer, responses={200: BudgetSerializer})
    def put(self, request: Request, tenant: str, scope: str, name: str) -> Response:
        given = BudgetInputSerializer(data=request.data)
        if not given.is_valid():
            return _shape_problem(given)
        try:
            budget_set(tenant=self.tenant, scope=scope, name=name, **given.validated_data)
        except ValidationError as exc:
            return refused(exc)
        return self._answer(scope, name)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, tenant: str, scope: str, name: str) -> Response:
        self._get(scope, name)
        try:
            budget_clear(tenant=self.tenant, scope=scope, name=name)
        except ValidationError as exc:
            return refused(exc)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ToolCostsView(PoliciesAPIView):
    """`/virtual-hosts/<id>/tool-costs`: `GET` the host's entries in order (the first naming a tool
    decides; a tool none names costs 1); `PUT` a list replaces them all (`[]`: every call costs 1).
    Refused (400) when an entry does not compile or the plan does not allow editing limits."""

    @extend_schema(responses={200: ToolCostSerializer(many=True)})
    def get(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        host = _host_or_404(self.tenant, virtual_host_id)
        specs = selectors.tool_costs_of(virtual_host=host)
        return Response([{"tools": list(spec.tools), "cost": spec.cost} for spec in specs])

    @extend_schema(request=ToolCostSerializer(many=True), responses={200: ToolCostSerializer(many=True)})
    def put(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        host = _host_or_404(self.tenant, virtual_host_id)
        given = ToolCostSerializer(data=request.data, many=True, max_length=200)
        if not given.is_valid():
            return _shape_problem(given)
        specs = [ToolCostSpec(tuple(entry["tools"]), entry["cost"]) for entry in given.validated_data]
        try:
            tool_costs_set(virtual_host=host, costs=specs)
        except ValidationError as exc:
            return refused(exc)
        return Response([{"tools": list(spec.tools), "cost": spec.cost} for spec in specs])


class InterceptorsView(PoliciesAPIView):
    """`/virtual-hosts/<id>/interceptors`: `GET` the host's interceptors in the order they run;
    `PUT` a list replaces them all (`[]`: none), each checked first (400 naming the first problem at
    `<position>.<field>`, 1-based; nothing changes). docs/interceptors.md."""

    @extend_schema(responses={200: InterceptorSerializer(many=True)})
    def get(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        host = _host_or_404(self.tenant, virtual_host_id)
        return Response([interceptor_fields(spec) for spec in selectors.interceptor_specs_list(virtual_host=host)])

    @extend_schema(request=InterceptorSerializer(many=True), responses={200: InterceptorSerializer(many=True)})
    def put(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        host = _host_or_404(self.tenant, virtual_host_id)
        given = InterceptorSerializer(data=request.data, many=True, max_length=MAX_INTERCEPTORS)
        if not given.is_valid():
            return _shape_problem(given)
        specs = []
        for number, fields in enumerate(given.validated_data, start=1):
            spec = interceptor_spec(fields)
            if spec is None:
                return problem(f"{number}.kind: kind must be one of: {', '.join(KINDS)}")
            specs.append(spec)
        try:
            interceptors_set(virtual_host=host, interceptors=specs)
        except ValidationError as exc:
            return problem("; ".join(f"{field}: {message}" for field, messages in exc.message_dict.items()
                                     for message in messages))
        return Response([interceptor_fields(spec) for spec in specs])


class InterceptorTrialView(PoliciesAPIView):
    """`POST /virtual-hosts/<id>/interceptors/try`: the host's stored interceptors run over sample
    content (`payload`: a request's params, or a JSON-RPC response) as a call on `method` naming
    `target` would meet them; what each decided and the content as they left it. Webhooks are not
    asked. Nothing is stored or forwarded."""

    @extend_schema(request=InterceptorTrialRequestSerializer, responses={200: InterceptorTrialSerializer})
    def post(self, request: Request, tenant: str, virtual_host_id: int) -> Response:
        host = _host_or_404(self.tenant, virtual_host_id)
        given = InterceptorTrialRequestSerializer(data=request.data)
        if not given.is_valid():
            return _shape_problem(given)
        data = given.validated_data
        if not isinstance(data["payload"], dict):
            return problem("payload: must be a JSON object (a request's params, or a JSON-RPC response)")
        trial = selectors.interceptors_trial(virtual_host=host, phase=data["phase"], method=data["method"],
                                             target=data["target"], value=data["payload"])
        return Response({
            "steps": [{"name": s.name, "kind": s.kind, "action": s.action, "findings": list(s.findings),
                       "reason": s.reason} for s in trial.steps],
            "payload": trial.payload, "refused_by": trial.refused_by,
        })
