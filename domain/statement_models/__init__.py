"""Strict models (msgspec Structs) of the in-toto statement and the KernelIndex predicates.

One module per predicate type (:mod:`.ingestion`, :mod:`.attestation`, :mod:`.keys`,
:mod:`.lifecycle`, :mod:`.rerun`), the statement itself (:mod:`.statement`) and what they
share (:mod:`.common`). Reach them through :mod:`domain.statements`, which imports a model's
module when the model is first named or a statement first parsed: verifying a run without
reruns never makes the rerun models.
"""
