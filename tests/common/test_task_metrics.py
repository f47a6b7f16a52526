"""Index build durations kept in Redis by the workers, read back as the gateway exports them."""

from __future__ import annotations

import pytest

from apps.common.redis import redis_client
from apps.common.task_metrics import TASK_BUCKETS, TASK_DURATIONS_KEY, task_durations_parse, task_timed

pytestmark = pytest.mark.usefixtures("clean_redis")


def test_runs_are_recorded_by_outcome_and_bucket() -> None:
    redis_client().delete(TASK_DURATIONS_KEY)
    with task_timed("spec_compile"):
        pass
    with pytest.raises(ValueError), task_timed("spec_compile"):
        raise ValueError("a spec that does not compile")
    parsed = task_durations_parse(redis_client().hgetall(TASK_DURATIONS_KEY))
    ok, _ = parsed.histograms[("spec_compile", "ok")]
    failed, _ = parsed.histograms[("spec_compile", "error")]
    assert len(ok) == len(TASK_BUCKETS) + 1 and ok[0] == 1 and sum(ok) == 1 and sum(failed) == 1
    assert set(parsed.last_success) == {"spec_compile"}  # a failure is not a success


def test_fields_that_do_not_parse_are_skipped() -> None:
    parsed = task_durations_parse({b"a|ok|0": b"2", b"a|ok|99": b"1", b"a|ok|sum": b"0.5", b"junk": b"1",
                                   b"a|ok|1": b"NaNx", b"a|last_success": b"17"})
    assert parsed.histograms == {("a", "ok"): ([2.0] + [0.0] * len(TASK_BUCKETS), 0.5)}
    assert parsed.last_success == {"a": 17.0}
