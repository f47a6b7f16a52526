"""One interceptor's check (`kernel.interceptors.interceptor_check`): what a caller controls is bounded."""

from __future__ import annotations

from apps.kernel.interceptors import InterceptorSpec, interceptor_check


def test_an_interceptor_scoped_to_too_many_targets_is_refused() -> None:
    [problem] = interceptor_check(InterceptorSpec("s", "secrets", targets=tuple(f"t{n}" for n in range(101))))
    assert (problem.field, problem.message) == ("targets", "at most 100 targets, each at most 500 characters")
    assert interceptor_check(InterceptorSpec("s", "secrets", targets=tuple(f"t{n}" for n in range(100)))) == []
