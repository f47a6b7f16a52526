"""JSON shapes of the policies REST API. Input shapes check types only: what a rule, a limit or a
cost may be, and the words that refuse it, are the services' (apps/policies/services.py), so that
the API refuses what the console and `gateway apply` refuse, as they do."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.kernel.policy import EFFECTS, SUBJECTS


@extend_schema_field({"$ref": "#/components/schemas/EffectEnum"})
class DefaultEffectField(serializers.ChoiceField):
    """allow | deny: in the schema, the same enum as a rule's `effect` (one name for one set)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(choices=EFFECTS, **kwargs)


class AccessRuleSerializer(serializers.Serializer):
    """One rule, in the configuration file's terms (`subject` names exactly one of tenant, team, key)."""

    id = serializers.CharField(allow_blank=True, trim_whitespace=False)
    subject_kind = serializers.ChoiceField(choices=SUBJECTS)
    subject_name = serializers.CharField()
    effect = serializers.ChoiceField(choices=EFFECTS)
    tools = serializers.ListField(child=serializers.CharField(allow_blank=True, trim_whitespace=False))
    condition = serializers.CharField(required=False, allow_blank=True, default="", trim_whitespace=False)


class AccessPolicySerializer(serializers.Serializer):
    """A host's policy: `default` decides when no rule does; rules in order. A rule written (new,
    or naming other tools) with a pattern that names no tool the host is known to have is refused
    (400, with `warnings`) unless `allow_unmatched` is true; then it is stored, and the answer's
    `warnings` say the same."""

    default = DefaultEffectField()
    rules = AccessRuleSerializer(many=True)
    allow_unmatched = serializers.BooleanField(
        required=False, default=False, write_only=True,
        help_text="Store rules whose tool patterns name no tool the host is known to have.",
    )
    warnings = serializers.ListField(
        child=serializers.CharField(), read_only=True,
        help_text="In the answer to a PUT: the rules stored that name no known tool of the host.",
    )


class SimulatedTokenSerializer(serializers.Serializer):
    subject = serializers.CharField(max_length=200)
    team = serializers.CharField(required=False, allow_null=True, default=None, max_length=64)
    scopes = serializers.ListField(child=serializers.CharField(max_length=200), required=False, default=list)


class SimulationRequestSerializer(serializers.Serializer):
    """Who calls — `key` (the id of one of the tenant's API keys) or `token` — which tool (as the
    host exposes it), with which arguments."""

    key = serializers.IntegerField(required=False, allow_null=True, default=None)
    token = SimulatedTokenSerializer(required=False, allow_null=True, default=None)
    tool = serializers.CharField(max_length=200)
    arguments = serializers.DictField(required=False, default=dict)

    def validate(self, attrs: dict) -> dict:
        if (attrs["key"] is None) == (attrs["token"] is None):
            raise serializers.ValidationError("give exactly one of key and token")
        return attrs


class ConditionErrorSerializer(serializers.Serializer):
    rule = serializers.CharField()
    message = serializers.CharField(help_text="Why the rule's condition could not be evaluated.")
    treated = serializers.CharField(help_text="How it counted: against the caller.")


class SimulationSerializer(serializers.Serializer):
    """What the gateway would do: `listed` (false: the caller does not see the tool, and a call
    answers as an unknown tool), `allowed`, the deciding `rule` (its id and 1-based `rule_position`;
    null: the default, or no policy) and `reason`; where it routes and what it would cost.
    `tool_known`: false for a tool the host does not expose (as the catalog knows its backends'
    tools), null when its backend's tools are not known (`tools_note` says why);
    `condition_errors`: the rules whose condition could not be evaluated with these arguments."""

    listed = serializers.BooleanField()
    allowed = serializers.BooleanField()
    rule = serializers.CharField(allow_null=True)
    rule_position = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField()
    map_key = serializers.CharField(allow_null=True)
    upstream_name = serializers.CharField(allow_null=True)
    cost = serializers.IntegerField()
    tool_known = serializers.BooleanField(allow_null=True)
    tools_note = serializers.CharField(allow_blank=True)
    condition_errors = ConditionErrorSerializer(many=True)


class RateUsageSerializer(serializers.Serializer):
    used = serializers.IntegerField(help_text="Calls counted now (GCRA).")
    full_in_seconds = serializers.FloatField(help_text="Seconds until a whole burst passes again.")
    checked = serializers.BooleanField(help_text="False: Redis could not be read.")


class RateLimitSerializer(serializers.Serializer):
    scope = serializers.CharField()
    name = serializers.CharField()
    limit = serializers.IntegerField()
    window_seconds = serializers.IntegerField()
    usage = RateUsageSerializer()


class RateLimitInputSerializer(serializers.Serializer):
    """Whole numbers; their range is the service's (`rate_limit_check`)."""

    limit = serializers.IntegerField()
    window_seconds = serializers.IntegerField()


class CapsSerializer(serializers.Serializer):
    daily = serializers.IntegerField(allow_null=True)
    monthly = serializers.IntegerField(allow_null=True)
    daily_plan = serializers.CharField(help_text="The plan whose cap this is; empty: the budget's own.")
    monthly_plan = serializers.CharField()


class BudgetUsageSerializer(serializers.Serializer):
    day = serializers.IntegerField(help_text="Units spent this UTC day.")
    month = serializers.IntegerField(help_text="Units spent this UTC month.")
    checked = serializers.BooleanField(help_text="False: Redis could not be read.")


class BudgetSerializer(serializers.Serializer):
    """A budget as set (`daily`, `monthly`), as in force after the plan's caps (`effective`), and
    what was spent (`usage`)."""

    scope = serializers.CharField()
    name = serializers.CharField()
    daily = serializers.IntegerField(allow_null=True)
    monthly = serializers.IntegerField(allow_null=True)
    effective = CapsSerializer(allow_null=True)
    usage = BudgetUsageSerializer()


class BudgetInputSerializer(serializers.Serializer):
    daily = serializers.IntegerField(required=False, allow_null=True, default=None)
    monthly = serializers.IntegerField(required=False, allow_null=True, default=None)


class ToolCostSerializer(serializers.Serializer):
    tools = serializers.ListField(child=serializers.CharField(allow_blank=True, trim_whitespace=False))
    cost = serializers.IntegerField()


class InterceptorSerializer(serializers.Serializer):
    """One interceptor's shape; its values are checked by `kernel.interceptors.interceptor_check`."""

    name = serializers.CharField(trim_whitespace=False)
    kind = serializers.CharField()
    phases = serializers.ListField(child=serializers.CharField(), required=False)
    methods = serializers.ListField(child=serializers.CharField(), required=False)
    targets = serializers.ListField(child=serializers.CharField(trim_whitespace=False), required=False)
    settings = serializers.DictField(required=False)
    enabled = serializers.BooleanField(required=False)


class InterceptorTrialRequestSerializer(serializers.Serializer):
    phase = serializers.ChoiceField(choices=["request", "result"])
    method = serializers.ChoiceField(choices=["tools/call", "resources/read", "prompts/get"], default="tools/call")
    target = serializers.CharField(allow_blank=True, default="")
    payload = serializers.JSONField(help_text="The request's params, or the JSON-RPC response.")


class InterceptorTrialStepSerializer(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.CharField()
    action = serializers.CharField()
    findings = serializers.ListField(child=serializers.CharField())
    reason = serializers.CharField()


class InterceptorTrialSerializer(serializers.Serializer):
    steps = InterceptorTrialStepSerializer(many=True)
    payload = serializers.JSONField(allow_null=True)
    refused_by = serializers.CharField(allow_null=True)
