"""Retention: rows past their age are deleted in batches; younger ones stay."""

from __future__ import annotations

import datetime

import pytest
from django.utils import timezone

from apps.audit.models import AuditRecord
from apps.audit.services import audit_records_prune
from apps.audit.writer import audit_records_write
from tests.audit.test_writer import _entry

pytestmark = pytest.mark.django_db


def test_old_rows_go_in_batches_and_recent_ones_stay() -> None:
    now = timezone.now()
    ages = [100, 95, 91, 89, 1]
    audit_records_write([_entry(at=(now - datetime.timedelta(days=d)).timestamp(), session_id=str(d)) for d in ages])
    assert audit_records_prune(older_than_days=90, batch=2) == 3
    assert sorted(AuditRecord.objects.values_list("session_id", flat=True)) == ["1", "89"]
    assert audit_records_prune(older_than_days=90) == 0


def test_a_retention_below_a_day_is_refused() -> None:
    with pytest.raises(ValueError):
        audit_records_prune(older_than_days=0)
