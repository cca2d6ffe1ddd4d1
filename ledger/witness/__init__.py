"""Witnesses (C2SP tlog-witness, tlog-cosignature, tlog-policy): independent parties that
cosign a checkpoint only after checking that it extends the last one they cosigned, so that
no log operator can show two users two different logs.

- ``cosignature``: ``cosignature/v1`` keys, signing and verification (pure);
- ``policy``: tlog-policy files and the quorum rule (pure);
- ``witness``: the witness's checks and its SQLite state (a small, separate door);
- ``server``: the witness as a plain ASGI app, and ``serve``;
- ``client``: the log side, asking witnesses to cosign each new checkpoint.

Nothing here is imported by this package itself, so the pure parts load no database code.
"""
