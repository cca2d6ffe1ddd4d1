"""The ledger's event names, one registry: what every fold, verifier and view matches on.

They are the stored topics' class names (``ledger.aggregates``: ``Run.Attested`` is stored
under ``ledger.aggregates:Run.Attested``); ``tests/ledger/test_event_names.py`` holds the two
to each other. The domain folds runs by them, so the names live here, not in the ledger.
"""

from __future__ import annotations

from enum import StrEnum


class EventName(StrEnum):
    RUN_INGESTED = "Run.Ingested"
    RUN_ATTESTED = "Run.Attested"
    RUN_RETRACTED = "Run.Retracted"
    RUN_SUPERSEDED = "Run.Superseded"
    RUN_MANIFESTS_ATTACHED = "Run.ManifestsAttached"
    RUN_RERUN_REQUESTED = "Run.RerunRequested"
    RUN_RERUN_CLAIMED = "Run.RerunClaimed"
    RUN_RERUN_RECORDED = "Run.RerunRecorded"
    KEY_REGISTERED = "Principal.Registered"
    KEY_REVOKED = "Principal.Revoked"
