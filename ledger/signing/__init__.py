"""Keys and signatures: the only part of ``ledger`` a client (``gpu_agent``) imports.

- ``keys``: Ed25519 keys, PEM files, key ids.
- ``dsse``: DSSE envelopes over in-toto statements (PAE, parsing, fail-closed verification).
- ``authoring``: building and signing the statements users, importers and agents send.
- ``trust``: the trust root (origin, log key, admin keys) a ledger and its verifiers start from.
"""
