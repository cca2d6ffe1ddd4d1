"""The ledger's persistence: the event table and the ledger's own tables, and nothing above.

- ``event_store``: the one typed door the rest of ``ledger`` (and ``projections``) uses to
  reach the database: transactions, the engine, the event table.
- ``read_only``: eventsourcing persistence for commands that never append (fast to start).
- ``schema``: the tables, created and upgraded explicitly (``kernelindex db upgrade``).
- ``transparency_log``: the log's sequencer, tree and proofs, sequenced in the events'
  transaction, each commit signing the tree it grew; its tables (``log_tables``), signed
  checkpoints (``signed_checkpoints``), node reads (``tree_nodes``) and the head a process
  last saw (``log_watch``); ``log_queries``: reads of it, which never write.
- ``artifacts``: content-addressed bytes (sources, workloads) named by manifests.
- ``group_index``: comparison-group membership as the log holds it (for heads).
- ``connections``: pooled connections that survive the database dropping them.
"""
