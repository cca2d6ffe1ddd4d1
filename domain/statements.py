"""in-toto Statement v1 and the KernelIndex predicates (docs/design.md §5): the vocabulary.

The predicate types, the roles that may sign them, and the words a predicate may use live
here. The models that gate what signers put inside a DSSE envelope (msgspec Structs) live in
:mod:`domain.statement_models`, one module per predicate type, and are made on first use:
``from domain.statements import KeyPredicate`` (or :func:`parse_statement`) imports the
model's module then, so a process that reads the vocabulary only (a read command) never
makes them. What :func:`parse_statement`, :func:`parse_predicate` and
:func:`build_predicate` return are those Structs: admission and every verifier read one
definition. Like manifests, the statement is hashed and signed as the signer serialised it;
models never re-serialise it.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterator, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, TypeVar

from domain.errors import DomainError

if TYPE_CHECKING:
    from domain.rerun_words import (
        BUILD_LANGUAGES,
        CASE_REASONS,
        DEFENCE_NAMES,
        MAX_DEFENCES,
        RERUN_CLOCK_KEYS,
        REWARD_HACK,
        TIMER_REFERENCES,
        CaseReason,
        CaseStatus,
        Defence,
        DefenceOutcome,
        JobFailure,
        RoundLabel,
        StopRule,
        TimerName,
        is_case_reason,
        reward_hack,
    )
    from domain.statement_models.attestation import AttestationPredicate
    from domain.statement_models.common import SignedPredicate, StrictModel
    from domain.statement_models.ingestion import (
        AttachedManifests,
        AttachmentPredicate,
        IngestionPredicate,
        ManifestSet,
    )
    from domain.statement_models.keys import KeyDevice, KeyPredicate
    from domain.statement_models.lifecycle import LifecyclePredicate
    from domain.statement_models.rerun import (
        HardwareRequirement,
        LatencyStats,
        RerunBuild,
        RerunCase,
        RerunClaimPredicate,
        RerunDefence,
        RerunDevice,
        RerunEnvironment,
        RerunPredicate,
        RerunRequestPredicate,
        RerunSummary,
        TimerCrossCheck,
    )
    from domain.statement_models.statement import Statement, Subject

__all__ = [
    "BUILD_LANGUAGES",
    "CASE_REASONS",
    "DEFENCE_NAMES",
    "MAX_DEFENCES",
    "MAX_LEASE_SECONDS",
    "MAX_RERUN_SAMPLES",
    "MEASURING_BACKENDS",
    "MIN_LEASE_SECONDS",
    "PAYLOAD_TYPE",
    "PREDICATE_MODELS",
    "RERUN_CLOCK_KEYS",
    "REWARD_HACK",
    "SIGNER_ROLES",
    "STATEMENT_TYPE",
    "STORED",
    "TEST_BACKENDS",
    "TIMER_REFERENCES",
    "AttachedManifests",
    "AttachmentPredicate",
    "AttestationPredicate",
    "AttestationType",
    "CaseReason",
    "CaseStatus",
    "Defence",
    "DefenceOutcome",
    "HardwareRequirement",
    "IngestionPredicate",
    "JobFailure",
    "KeyAction",
    "KeyDevice",
    "KeyPredicate",
    "LatencyStats",
    "LifecycleAction",
    "LifecyclePredicate",
    "ManifestSet",
    "PredicateType",
    "ReportReason",
    "RerunBuild",
    "RerunCase",
    "RerunClaimPredicate",
    "RerunDefence",
    "RerunDevice",
    "RerunEnvironment",
    "RerunPredicate",
    "RerunRequestPredicate",
    "RerunSummary",
    "Role",
    "RoundLabel",
    "SignedPredicate",
    "Statement",
    "StatementError",
    "StopRule",
    "Subject",
    "TimerCrossCheck",
    "TimerName",
    "build_predicate",
    "is_case_reason",
    "make_statement",
    "parse_predicate",
    "parse_statement",
    "reward_hack",
    "validate_part",
]

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"


class PredicateType(StrEnum):
    INGESTION = "https://kernelindex.dev/ingestion/v1"
    ATTESTATION = "https://kernelindex.dev/attestation/v1"
    RERUN_REQUEST = "https://kernelindex.dev/rerun-request/v1"
    RERUN = "https://kernelindex.dev/rerun/v1"
    RERUN_CLAIM = "https://kernelindex.dev/rerun-claim/v1"
    LIFECYCLE = "https://kernelindex.dev/lifecycle/v1"
    KEY = "https://kernelindex.dev/key/v1"
    ATTACHMENT = "https://kernelindex.dev/attachment/v1"


class Role(StrEnum):
    ADMIN = "admin"
    INGESTER = "ingester"
    ATTESTER = "attester"
    AGENT = "agent"
    LOG = "log"


# Which role may sign which predicate. The log key signs checkpoints only, never events.
SIGNER_ROLES: dict[PredicateType, frozenset[Role]] = {
    PredicateType.INGESTION: frozenset({Role.INGESTER}),
    PredicateType.ATTESTATION: frozenset({Role.ATTESTER}),
    PredicateType.RERUN_REQUEST: frozenset({Role.ADMIN}),
    PredicateType.RERUN: frozenset({Role.AGENT}),
    PredicateType.RERUN_CLAIM: frozenset({Role.AGENT}),
    PredicateType.LIFECYCLE: frozenset({Role.ADMIN}),
    PredicateType.KEY: frozenset({Role.ADMIN}),
    # Adds a manifest the run already names by digest; like an ingestion, an importer's word.
    PredicateType.ATTACHMENT: frozenset({Role.INGESTER}),
}


class AttestationType(StrEnum):
    REPRODUCED = "reproduced"
    COULD_NOT_REPRODUCE = "could_not_reproduce"
    ENVIRONMENT_NOTE = "environment_note"
    REGRESSION_OBSERVED = "regression_observed"
    NOTE = "note"
    # A report that something about the run is wrong; like every attestation, it informs
    # and never moves the evidence level or the rank.
    ISSUE_REPORT = "issue_report"


class ReportReason(StrEnum):
    """Why a run is reported (KernelIndex's reasons)."""

    INCORRECT_RESULT = "incorrect_result"
    WRONG_ATTRIBUTION = "wrong_attribution"
    LICENSE = "license"
    COMPARABILITY = "comparability"
    OTHER = "other"


# The environment.backend values whose measurements may move evidence: "cuda" is a real GPU
# timed with CUDA events. Test backends (the "cpu-test" double) are on the record only.
MEASURING_BACKENDS = frozenset({"cuda"})
TEST_BACKENDS = frozenset({"cpu-test"})


class KeyAction(StrEnum):
    REGISTER = "register"
    REVOKE = "revoke"


class LifecycleAction(StrEnum):
    RETRACT = "retract"
    SUPERSEDE = "supersede"


MAX_RERUN_SAMPLES = 2_000
MIN_LEASE_SECONDS = 30
MAX_LEASE_SECONDS = 6 * 3600


STORED = "stored"  # validation context key: the predicate is read from the log, not admitted


class StatementError(DomainError):
    code = "schema-violation"


# --- the models, made on first use ------------------------------------------------------------

# Model → the module of ``domain.statement_models`` that makes it.
_MODEL_MODULES: Final = {
    name: module
    for module, names in (
        ("common", "SignedPredicate"),
        ("statement", "Statement Subject"),
        ("ingestion", "ManifestSet IngestionPredicate AttachedManifests AttachmentPredicate"),
        ("attestation", "AttestationPredicate"),
        ("keys", "KeyDevice KeyPredicate"),
        ("lifecycle", "LifecyclePredicate"),
        (
            "rerun",
            "HardwareRequirement RerunDevice RerunRequestPredicate RerunClaimPredicate "
            "LatencyStats RerunDefence TimerCrossCheck RerunCase RerunBuild RerunSummary "
            "RerunEnvironment RerunPredicate",
        ),
    )
    for name in names.split()
}

# Predicate type → (module, model): what admission and the verifier validate a predicate with.
_PREDICATE_MODELS: Final = {
    PredicateType.RERUN_REQUEST: ("rerun", "RerunRequestPredicate"),
    PredicateType.RERUN: ("rerun", "RerunPredicate"),
    PredicateType.RERUN_CLAIM: ("rerun", "RerunClaimPredicate"),
    PredicateType.INGESTION: ("ingestion", "IngestionPredicate"),
    PredicateType.ATTESTATION: ("attestation", "AttestationPredicate"),
    PredicateType.KEY: ("keys", "KeyPredicate"),
    PredicateType.LIFECYCLE: ("lifecycle", "LifecyclePredicate"),
    PredicateType.ATTACHMENT: ("ingestion", "AttachmentPredicate"),
}


def _made(module: str, name: str) -> Any:
    return getattr(importlib.import_module(f"domain.statement_models.{module}"), name)


class _PredicateModels(Mapping[PredicateType, "type[SignedPredicate]"]):
    """Predicate type → its model, the model's module imported when it is first looked up
    (verifying a run without reruns never makes the rerun models)."""

    def __init__(self) -> None:
        self._models: dict[PredicateType, type[SignedPredicate]] = {}

    def __getitem__(self, predicate_type: PredicateType) -> type[SignedPredicate]:
        model = self._models.get(predicate_type)
        if model is None:  # first use: every admission and verify looks a model up here
            module, name = _PREDICATE_MODELS[predicate_type]
            model = self._models[predicate_type] = _made(module, name)
        return model

    def __contains__(self, predicate_type: object) -> bool:  # without making the model
        return predicate_type in _PREDICATE_MODELS

    def __iter__(self) -> Iterator[PredicateType]:
        return iter(_PREDICATE_MODELS)

    def __len__(self) -> int:
        return len(_PREDICATE_MODELS)


PREDICATE_MODELS: Final[Mapping[PredicateType, type[SignedPredicate]]] = _PredicateModels()


# The rerun result's words (domain/rerun_words.py), imported when one is first asked for.
_WORDS: Final = frozenset(
    {
        "BUILD_LANGUAGES",
        "CASE_REASONS",
        "DEFENCE_NAMES",
        "MAX_DEFENCES",
        "RERUN_CLOCK_KEYS",
        "REWARD_HACK",
        "TIMER_REFERENCES",
        "CaseReason",
        "CaseStatus",
        "Defence",
        "DefenceOutcome",
        "JobFailure",
        "RoundLabel",
        "StopRule",
        "TimerName",
        "is_case_reason",
        "reward_hack",
    }
)


def __getattr__(name: str) -> object:
    """A model of ``domain.statement_models``, made on first use, or a word of the rerun
    vocabulary, imported on first use (PEP 562)."""
    if name in _WORDS:
        value: object = getattr(importlib.import_module("domain.rerun_words"), name)
    else:
        module = _MODEL_MODULES.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = _made(module, name)
    globals()[name] = value  # the next lookup finds it without calling this
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODEL_MODULES, *_WORDS})


def parse_statement(value: object) -> Statement:
    return _statement_reader()(value)


# The readers, imported with the models on first use. Not an import statement in each
# call: one run for every statement read costs ~1 µs (a package's ``fromlist`` is resolved
# in Python each time).
@functools.cache
def _statement_reader() -> Callable[[object], Statement]:
    from domain.statement_models.statement import parse_statement as read  # noqa: PLC0415

    return read


@functools.cache
def _predicate_reader() -> Callable[..., SignedPredicate]:
    from domain.statement_models.common import validate_predicate  # noqa: PLC0415

    return validate_predicate


def parse_predicate(statement: Statement, *, stored: bool = False) -> SignedPredicate:
    """``stored``: the statement was read from a log (verify, history), not offered for
    admission; rules added since it was admitted (the rerun vocabulary) do not apply."""
    # Read from JSON text: every value in it is a JSON value (no walk for that here).
    return _predicate_of(statement.predicateType, statement.predicate, stored=stored)


def build_predicate(
    predicate_type: PredicateType, fields: Mapping[str, Any], *, stored: bool = False
) -> SignedPredicate:
    """The predicate of a statement of ``predicate_type``, through its model: admission's
    check, and the one a client runs before signing (so it never signs what is refused).
    A Python caller's ``fields`` must be what JSON can say: msgspec's conversion would take
    a tuple, a set or a mapping proxy for a list or an object, which no JSON reader (so no
    admission, no verifier) ever meets; the manifests' gate refuses them alike."""
    from domain.manifests.models.schema_errors import first_non_json  # noqa: PLC0415

    found = first_non_json(fields)
    if found is not None:
        where, what = found
        raise StatementError(f"predicate {'.'.join(where) or '(root)'}: {what}")
    return _predicate_of(predicate_type, fields, stored=stored)


def _predicate_of(
    predicate_type: PredicateType, fields: Mapping[str, Any], *, stored: bool
) -> SignedPredicate:
    model = PREDICATE_MODELS.get(predicate_type)
    if model is None:
        raise StatementError(f"predicate type {predicate_type} is not accepted yet")
    return _predicate_reader()(model, fields, stored=stored)


Part = TypeVar("Part", bound="StrictModel")


def validate_part(model: type[Part], fields: object) -> Part:
    """``fields`` through one part of a predicate (``RerunBuild``...), as admission would
    check it inside a new predicate; its error as a :class:`StatementError`."""
    from domain.statement_models import common  # noqa: PLC0415 - loaded with the model

    return common.validate_part(model, fields)


def make_statement(
    subject_name: str, subject_digest: str, predicate_type: PredicateType, predicate: dict[str, Any]
) -> dict[str, Any]:
    """A statement as a plain JSON object, ready to be serialised and signed."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": subject_name, "digest": {"sha256": subject_digest.removeprefix("sha256:")}}
        ],
        "predicateType": str(predicate_type),
        "predicate": predicate,
    }
