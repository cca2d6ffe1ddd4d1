"""The bundle format's name: what ``ledger.bundle`` writes and ``ledger.verify`` reads."""

BUNDLE_FORMAT = "kernelindex-bundle/v2"
