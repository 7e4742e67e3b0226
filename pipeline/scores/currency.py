"""The rule's currency in one sentence: what one of the 256 dynamics calls a step counts.

Every place that states the rule (README, ``review --help``, ``panel --help``, the audit's
panel table, docs/reference/protocol.md) says it in these words; tests/test_currency.py holds
them to it.
"""

from __future__ import annotations

__all__ = ["CALL"]

CALL = ("One call is one predicted transition of one candidate state: an expansion of four "
        "actions is four calls; a batch of B candidates rolled H steps is B×H calls.")
