"""The ledger's persistence: the event table and the ledger's own tables, and nothing above.

- ``event_store``: the one typed door the rest of ``ledger`` (and ``projections``) uses to
  reach the database: transactions, the engine, the event table.
- ``read_only``: eventsourcing persistence for commands that never append (fast to start).
- ``schema``: the tables, created and upgraded explicitly (``kernelindex db upgrade``).
- ``transparency_log``: the log's leaves, nodes and checkpoints, sequenced in the events'
  transaction; ``log_queries``: reads of it.
- ``artifacts``: content-addressed bytes (sources, workloads) named by manifests.
- ``group_index``: comparison-group membership as the log holds it (for heads).
- ``connections``: pooled connections that survive the database dropping them.
"""
