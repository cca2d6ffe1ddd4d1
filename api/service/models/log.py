"""Replies of the transparency log and of writes: checkpoints, proofs, entries, receipts."""

from __future__ import annotations

from typing import Literal

from msgspec import UNSET, UnsetType

from api.service.models import ApiModel
from api.service.models.runs import RunSummary


class InclusionProof(ApiModel, kw_only=True):
    """Leaf ``leafIndex`` is in the tree of ``treeSize`` leaves whose root is ``rootHash``
    (RFC 6962 audit path; hashes in base64)."""

    leaf_index: int
    tree_size: int
    root_hash: str
    hashes: list[str]


class ConsistencyProof(ApiModel, kw_only=True):
    """The tree of ``size2`` leaves extends the tree of ``size1`` (RFC 6962)."""

    size1: int
    size2: int
    root1: str
    root2: str
    hashes: list[str]


class LogEntry(ApiModel, kw_only=True):
    leaf_index: int
    position: int  # the event the leaf logs
    leaf_hash: str


class CosignedCheckpoint(ApiModel, kw_only=True):
    """A checkpoint of the log cosigned by witnesses: ``note`` is the log's signed note with
    the witnesses' ``cosignature/v1`` lines appended; ``witnesses`` names them."""

    size: int
    root_hash: str
    note: str
    witnesses: list[str]


class Checkpoint(ApiModel, kw_only=True):
    """The log's signed checkpoint; ``note`` is the C2SP signed note itself.

    A ledger with witnesses adds what they cosigned: ``cosigned`` (null until a witness has
    cosigned anything) is the newest checkpoint that meets the ledger's witness policy (else
    the newest with the most cosignatures), ``witnessLag`` how many leaves it trails ``size``
    by (null with nothing cosigned), ``newestByWitness`` the largest size each witness
    (``name+keyid``) has cosigned. A ledger without witnesses leaves the three out."""

    origin: str
    size: int
    root_hash: str
    note: str
    signed_at: str
    cosigned: CosignedCheckpoint | UnsetType | None = UNSET
    witness_lag: int | UnsetType | None = UNSET
    newest_by_witness: dict[str, int] | UnsetType = UNSET


class PublicKeyRef(ApiModel, kw_only=True):
    key_id: str
    public_key: str  # base64 of the raw Ed25519 public key


class TrustRootDocument(ApiModel, kw_only=True):
    """What an offline verifier starts from: the admin keys and the log key."""

    version: int
    origin: str
    created_at: str
    admin_keys: list[PublicKeyRef]
    log_key: PublicKeyRef


class Receipt(ApiModel, kw_only=True):
    """An accepted write (201), or the original one for an envelope already stored (200)."""

    position: int
    aggregate_id: str
    version: int
    event: str
    subject_digest: str
    envelope_digest: str
    received_at: str
    duplicate: bool
    signer: str  # the key id whose signature admitted the event
    log: InclusionProof | None


class Health(ApiModel, kw_only=True):
    status: Literal["ok"]
    origin: str
    tree_size: int
    database: str  # the SQL dialect: sqlite or postgresql


class BundleSummary(ApiModel, kw_only=True):
    """What an export wrote: its events, the tree size its proofs are against, the runs and
    keys of its scope (null: the whole log) and the cosigned checkpoint it carries."""

    events: int
    tree_size: int
    runs: int | None
    keys: int | None
    cosigned_size: int | None
    cosignatures: int


class RegistryCheckpoint(ApiModel, kw_only=True):
    """The checkpoint a registry export was read at (its signed note travels beside it)."""

    size: int
    root_hash: str


class RegistryLine(ApiModel, kw_only=True):
    """One line of the registry as JSON Lines: a run as the runs list shows it
    (``GET /v1/runs``), with the checkpoint of the log it was read at."""

    checkpoint: RegistryCheckpoint
    run: RunSummary


class WitnessedCheckpoint(ApiModel, kw_only=True):
    """How a ledger's witnesses stand: the log's newest checkpoint ``size``, the newest one
    cosigned under the witness policy (else the most cosigned; null: none yet), how many
    leaves it trails by, and the largest size each witness (``name+keyid``) has cosigned."""

    origin: str
    size: int
    cosigned: CosignedCheckpoint | None
    witness_lag: int | None
    newest_by_witness: dict[str, int]
