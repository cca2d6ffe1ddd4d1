"""The log's proofs, pure (no storage, no database code): what a verifier recomputes.

- ``merkle``: RFC 6962 hashing, inclusion and consistency proofs, compact ranges; one import
  for the small modules that hold them: ``hasher``, ``nodes``, ``reference``, ``proof``,
  ``compact``, ``verify`` and ``errors``.
- ``log_entries``: the bytes of a log leaf (what each event commits the log to).
- ``signed_note``: C2SP signed notes and checkpoints.
- ``heads``: group and run heads, signed at a checkpoint (what a bundle's completeness rests on).
"""
