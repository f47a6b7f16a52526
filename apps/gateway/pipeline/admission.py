"""What decides whether a call goes on: the stages (`calls.Stage`) of the access policy's refusal
(decided when the call was routed) and of the caller's rate limits and budgets, each refusing with
the call's error reply and noting why in its outcome; and the backend's concurrency slots, which
the forwarder holds around each exchange with the backend (`Slots`)."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

from apps.gateway.pipeline.calls import Call, Next, Outcome
from apps.gateway.pipeline.concurrency import BackendGates
from apps.gateway.pipeline.metrics import Counters
from apps.gateway.pipeline.ports import Admission, RateLimiter
from apps.gateway.pipeline.replies import Reply, error_reply
from apps.gateway.protocol.errors import PolicyDenied, RateLimited
from apps.gateway.protocol.jsonrpc import Kind
from apps.kernel.identity import Budget, Limit


class Denied:
    """A call refused before it is forwarded (`Call.denied`): by the access policy, -32003 naming
    the deciding rule (`Call.rule`); or its request's fault, such as a list cursor that does not fit."""

    def applies(self, call: Call) -> bool:
        return call.denied is not None

    async def __call__(self, call: Call, outcome: Outcome, then: Next) -> Reply:
        assert call.denied is not None
        reply = error_reply(call.message.id, call.denied, call.headers)
        outcome.answered("denied" if isinstance(call.denied, PolicyDenied) else "error", call.denied.code, len(reply.body))
        return reply


class Limits:
    """Charges an audited call to the caller's rate limits (one call each) and budgets (the call's
    cost each), all or nothing, or refuses it (-32005 with `data: {limit_scope, retry_after}`). A
    call is charged when it is admitted, so one that then fails (a tool error, an unreachable
    backend) has still cost its units."""

    def __init__(self, limiter: RateLimiter, counters: Counters) -> None:
        self._limiter = limiter
        self._counters = counters

    def applies(self, call: Call) -> bool:
        return call.audited

    async def __call__(self, call: Call, outcome: Outcome, then: Next) -> Reply:
        cost = call.price()
        limits = call.principal.limits
        budgets = call.principal.budgets if cost > 0 else ()  # a free call cannot overspend
        if not (limits or budgets):
            outcome.cost = cost
            return await then()
        admission = await self._limiter.admit(limits, budgets, cost)
        if not admission.checked:
            self._counters.increment("rate_limit_unchecked")
            if budgets:
                self._counters.increment("budget_unchecked")
        refused = admission.refused_by
        if refused is None:
            outcome.limit_state = "ok" if admission.checked else "unchecked"
            outcome.cost = cost  # when unchecked, what it would have been charged (the audit row says so)
            return await then()
        outcome.limit_state = "limited" if admission.checked else "unchecked"
        retry_after = math.ceil(admission.retry_after * 1000) / 1000
        error = RateLimited(
            _refusal(refused, admission, cost), data={"limit_scope": refused.scope, "retry_after": retry_after}
        )
        reply = error_reply(call.message.id, error, call.headers)
        if isinstance(refused, Budget):
            self._counters.increment("over_budget", scope=refused.scope, period=admission.period)
            outcome.answered("over_budget", error.code, len(reply.body))
        else:
            self._counters.increment("rate_limited", scope=refused.scope)
            outcome.answered("rate_limited", error.code, len(reply.body))
        return reply


def _refusal(refused: Limit | Budget, admission: Admission, cost: int) -> str:
    """The -32005 message: which rate limit or budget refused, and why."""
    subject = f"{refused.scope} {refused.name!r}"
    if not admission.checked:
        return f"Rate limits and budgets could not be checked for {subject}; try again later"
    if isinstance(refused, Limit):
        return f"Rate limit exceeded: {refused.limit} calls per {refused.window_seconds} s for {subject}"
    daily = admission.period == "day"
    cap = refused.daily if daily else refused.monthly
    plan = refused.daily_plan if daily else refused.monthly_plan
    budget = f"{'daily' if daily else 'monthly'} budget of {cap} units{f' (plan {plan!r})' if plan else ''}"
    resets = f"it resets at the start of the next UTC {'day' if daily else 'month'}"
    if cap is not None and cost > cap:
        return f"Over budget: this call costs {cost} units, more than the whole {budget} of {subject}"
    return f"Over budget: {subject} has spent its {budget}; this call costs {cost}, and {resets}"


class Slots:
    """A slot of the call's backend, held while one exchange with the backend runs (a streamed
    answer: until its stream closes); none free within the queue time raises BackendBusy (-32004).
    Not a stage: the slot covers the exchange only — not opening a backend session, not the wait
    between two tries, not a call continued from a request state (it reaches no backend) — so the
    forwarder takes it around each exchange (`hold`). A request to a backend the gateway answers
    itself takes one only for `tools/call` (it reaches the service); notifications never wait: a
    cancellation must not queue behind what it cancels."""

    def __init__(self, gates: BackendGates) -> None:
        self._gates = gates

    def applies(self, call: Call) -> bool:
        backend = call.backend
        return (
            backend.max_concurrency > 0
            and call.message.kind is Kind.REQUEST
            and (backend.server is None or call.message.method == "tools/call")
        )

    async def hold(self, call: Call, then: Callable[[], Awaitable[Reply]]) -> Reply:
        """`then()`'s reply, with a slot held for it where one applies."""
        if not self.applies(call):
            return await then()
        slot = await self._gates.enter(call.backend)
        try:
            reply = await then()
        except BaseException:
            slot.leave()
            raise
        return reply.after_stream(slot.leave)
