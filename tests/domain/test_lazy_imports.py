"""The pure core imports cheaply: pydantic, the statement and manifest models and ruamel.yaml
load on first use, never because a domain module was imported (issue 33, fast commands).

Importing pydantic and making the models is most of what ``import ledger.verify`` cost, and
ruamel.yaml is needed only to read a YAML document. Each probe runs in a fresh interpreter,
so what it finds in ``sys.modules`` is what the imports themselves loaded.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import domain
import domain.statements as statements
from domain.documents import parse_yaml
from domain.errors import ParseError
from domain.statements import (
    PREDICATE_MODELS,
    PredicateType,
    StatementError,
    build_predicate,
    make_statement,
    parse_statement,
)

REPO = Path(__file__).resolve().parents[2]

# Loaded on first use only: the libraries, and the modules that make models or read YAML.
DEFERRED = ("pydantic", "pydantic_core", "ruamel")
DEFERRED_MODULES = ("domain.statement_models", "domain.manifests.models", "domain.yaml_reader")


def _deferred(name: str) -> bool:
    return name.split(".", maxsplit=1)[0] in DEFERRED or name.startswith(DEFERRED_MODULES)


# Every domain module but those that are deferred: what the offline verifier, the read
# commands and the writer import.
EAGER = sorted(
    m.name for m in pkgutil.walk_packages(domain.__path__, "domain.") if not _deferred(m.name)
)


def _probe(code: str) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter; what it prints (JSON) back."""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def _loaded_after(imports: list[str], then: str = "") -> dict[str, Any]:
    """Import each of ``imports`` in turn, then run ``then``: which import brought which
    deferred modules (``brought``), and all the deferred modules loaded at the end (``by``)."""
    return _probe(
        "import importlib, json, sys\n"
        "def deferred():\n"
        f"    return {{m for m in sys.modules if m.split('.')[0] in {DEFERRED!r}\n"
        f"            or m.startswith({DEFERRED_MODULES!r})}}\n"
        "brought = {}\n"
        f"for name in {imports!r}:\n"
        "    before = deferred()\n"
        "    importlib.import_module(name)\n"
        "    if deferred() - before:\n"
        "        brought[name] = sorted(deferred() - before)\n"
        f"{then}\n"
        "print(json.dumps({'brought': brought, 'by': sorted(deferred())}))\n"
    )


def test_the_domain_modules_import_neither_pydantic_nor_ruamel_nor_the_models() -> None:
    assert "domain.statements" in EAGER and "domain.documents" in EAGER
    brought = _loaded_after(EAGER)["brought"]
    assert brought == {}, (
        "make these imports lazy (the models and the YAML reader load on first use): "
        + "; ".join(f"{name} loads {', '.join(mods[:5])}" for name, mods in brought.items())
    )


def test_the_offline_verifiers_domain_modules_load_no_model_nor_yaml_reader() -> None:
    """The modules ``ledger.verify`` imports from the domain (the folds, the evidence policy,
    the rerun binding, the documents and the statements' vocabulary), by name: a module that
    moves out of the domain cannot take the check with it."""
    verifier = [
        "domain.statements",
        "domain.documents",
        "domain.rerun_binding",
        "domain.run_facts",
        "domain.evidence",
        "domain.ranking",
        "domain.manifests.manifest_set",
        "domain.manifests.registry",
        "domain.importers.records",
    ]
    assert _loaded_after(verifier)["by"] == []


def test_a_statement_loads_the_models_of_its_predicate_type_only() -> None:
    """Verifying keys and ingestions (a run without reruns) makes neither the rerun models nor
    the YAML reader."""
    statement = make_statement(
        "sol-run",
        "sha256:" + "ab" * 32,
        PredicateType.LIFECYCLE,
        {"issuedAt": "2026-01-02T03:04:05Z", "action": "retract", "reason": "wrong"},
    )
    found = _loaded_after(
        ["domain.statements"],
        then=(
            "from domain.statements import parse_predicate, parse_statement\n"
            f"parse_predicate(parse_statement({statement!r}))"
        ),
    )
    models = [m for m in found["by"] if m.startswith("domain.")]
    assert models == [
        "domain.statement_models",
        "domain.statement_models.common",
        "domain.statement_models.lifecycle",
        "domain.statement_models.statement",
    ]
    # The statement models are msgspec Structs: checking a statement never loads pydantic.
    assert "pydantic" not in found["by"] and "ruamel.yaml" not in found["by"]


def test_a_yaml_document_loads_the_yaml_reader() -> None:
    found = _loaded_after(
        ["domain.documents"],
        then="from domain.documents import parse_yaml\nassert parse_yaml(b'a: [1, x]') "
        "== {'a': [1, 'x']}",
    )
    assert "domain.yaml_reader" in found["by"] and "ruamel.yaml" in found["by"]
    assert "pydantic" not in found["by"]


def test_every_model_name_of_the_statements_module_is_a_model_or_field_type() -> None:
    """``from domain.statements import X`` reaches every model and field type it always
    offered, made on first use, and each predicate type has its model."""
    for name in statements.__all__:
        assert getattr(statements, name) is not None, name
    assert set(PREDICATE_MODELS) == set(PredicateType)
    for predicate_type, model in PREDICATE_MODELS.items():
        assert model.__name__.endswith("Predicate"), predicate_type
    as_text: Any = "https://kernelindex.dev/key/v1"  # looked up as the dict it was allowed
    assert PREDICATE_MODELS.get(as_text) is statements.KeyPredicate
    with pytest.raises(AttributeError, match="no attribute 'NotAModel'"):
        _ = statements.NotAModel


def test_a_refused_statement_reads_as_before() -> None:
    """The messages are the models' own, through the lazily loaded module."""
    with pytest.raises(StatementError) as refused:
        parse_statement({"_type": "x", "subject": [], "predicateType": "y", "predicate": {}})
    # msgspec stops at the first error (pydantic listed every one).
    assert refused.value.message == "statement _type: Invalid enum value 'x'"
    with pytest.raises(StatementError, match=r"^predicate\.reason: Field required$"):
        build_predicate(
            PredicateType.LIFECYCLE, {"issuedAt": "2026-01-02T03:04:05Z", "action": "retract"}
        )
    with pytest.raises(ParseError, match=r"YAML version 1\.1 is not accepted"):
        parse_yaml(b"%YAML 1.1\n---\na: 1\n")
