"""The metrics' declared shape (evolve/metrics.py) stays true to what writes them. The loop's own
output is checked against it in test_loop_e2e.py (``test_recorded_metrics_have_the_declared_shape``)."""

from __future__ import annotations

from dataclasses import fields

from loop_helpers import typed_keys as keys

from evolve.metrics import UpdateRecord
from evolve.policy.stats import UpdateStats


def test_update_record_declares_every_update_stats_field():
    """``update`` is ``UpdateStats.to_dict()`` plus the rule's record: a field added to UpdateStats
    must be declared in UpdateRecord, or the readers' key checks would not see it."""
    assert {f.name for f in fields(UpdateStats)} <= keys(UpdateRecord)
    assert set(UpdateStats().to_dict()) <= keys(UpdateRecord)
