"""Other people's witnesses and verifiers, started for the interop tests.

- ``gowitness`` (this folder): a tlog-witness and a cosignature checker written over Go's
  reference ``golang.org/x/mod/sumdb/note`` and ``tlog``, built offline from Debian's
  packages in GOPATH mode (no module proxy), as ``tests/interop/tlogcheck`` is.
- ``aics-witness`` and ``aics-tlog`` (PyPI, Python >= 3.12), from a venv of their own: the
  one named by ``KERNELINDEX_AICS_VENV``, else ``build/aics-venv`` in the repository.

Each is skipped with a message saying how to install it, unless ``KERNELINDEX_REQUIRE_GO=1``
or ``KERNELINDEX_REQUIRE_AICS=1`` (``.ci/run``) makes its absence a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ledger.witness.client import WitnessEndpoint
from ledger.witness.cosignature import parse_cosigner_key

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
GOPATHS = ("/usr/share/gocode", str(Path.home() / "go"))
AICS_VENV_DEFAULT = REPO / "build" / "aics-venv"


def _missing(variable: str, why: str) -> None:
    if os.environ.get(variable) == "1":
        pytest.fail(why)
    pytest.skip(why)


def build_gowitness(out_dir: Path) -> Path:
    go = shutil.which("go")
    gopath = next(
        (p for p in GOPATHS if (Path(p) / "src/golang.org/x/mod/sumdb/tlog").is_dir()), None
    )
    if go is None or gopath is None:
        _missing(
            "KERNELINDEX_REQUIRE_GO",
            "the Go witness needs the go toolchain and golang.org/x/mod "
            "(apt-get install golang-go golang-golang-x-mod-dev; .ci/run does)",
        )
    assert go is not None and gopath is not None
    out = out_dir / "gowitness"
    env = os.environ | {
        "GO111MODULE": "off",
        "GOPATH": gopath,
        "GOCACHE": str(out_dir / "cache"),
        "GOFLAGS": "",
    }
    build = subprocess.run(
        [go, "build", "-o", str(out), "."],
        cwd=HERE / "gowitness",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    return out


def aics_python() -> Path:
    venv = Path(os.environ.get("KERNELINDEX_AICS_VENV") or AICS_VENV_DEFAULT)
    python = venv / "bin" / "python"
    probe = (
        subprocess.run(
            [str(python), "-c", "import aics_witness, aics_tlog"],
            capture_output=True,
            check=False,
            timeout=60,
        )
        if python.exists()
        else None
    )
    if probe is None or probe.returncode != 0:
        _missing(
            "KERNELINDEX_REQUIRE_AICS",
            f"aics-witness and aics-tlog need a Python >= 3.12 venv at {venv} "
            "(python3.12 -m venv build/aics-venv && build/aics-venv/bin/pip install "
            "aics-witness aics-tlog; or set KERNELINDEX_AICS_VENV; .ci/run does)",
        )
    return python


@dataclass(frozen=True)
class Other:
    """A witness run by another implementation."""

    endpoint: WitnessEndpoint
    process: subprocess.Popen[str]

    @property
    def url(self) -> str:
        return self.endpoint.url


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextmanager
def go_witness(binary: Path, name: str, follow: list[str]) -> Iterator[Other]:
    """``gowitness serve`` on a free loopback port, following ``ORIGIN=VKEY`` logs."""
    seed = os.urandom(32).hex()
    args = [str(binary), "serve", "-name", name, "-seed", seed, "-listen", "127.0.0.1:0"]
    for f in follow:
        args += ["-log", f]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        vkey = process.stdout.readline().removeprefix("vkey ").strip()
        url = process.stdout.readline().removeprefix("listening ").strip()
        assert url.startswith("http://"), process.stderr.read() if process.stderr else ""
        yield Other(WitnessEndpoint(url, parse_cosigner_key(vkey)), process)
    finally:
        _stop(process)


def go_check(binary: Path, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``gowitness check``: one result per {note, log, witnesses} item."""
    run = subprocess.run(
        [str(binary), "check"],
        input=json.dumps({"items": items}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    results: list[dict[str, Any]] = json.loads(run.stdout)
    return results


_LISTENING = re.compile(r"listening on (http://\S+?)(?: |$)")


@contextmanager
def aics_witness(python: Path, state: Path, name: str, origin: str, vkey: str) -> Iterator[Other]:
    """``aics-witness`` initialised in ``state``, following one log, on a free port."""
    config = state / "witness.json"
    state.mkdir(parents=True, exist_ok=True)
    cli = [str(python), "-m", "aics_witness"]
    init = subprocess.run(
        [*cli, "init", "--config", str(config), "--name", name, "--listen", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert init.returncode == 0, init.stderr
    witness_vkey = init.stdout.strip().splitlines()[-1]
    added = subprocess.run(
        [*cli, "add-log", "--config", str(config), "--origin", origin, "--vkey", vkey],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert added.returncode == 0, added.stderr
    process = subprocess.Popen(
        [*cli, "serve", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        seen = []
        for line in process.stderr:
            seen.append(line)
            match = _LISTENING.search(line)
            if match:
                url = match.group(1)
                break
        else:
            raise AssertionError("aics-witness did not start:\n" + "".join(seen))
        yield Other(WitnessEndpoint(url, parse_cosigner_key(witness_vkey)), process)
    finally:
        _stop(process)


_AICS_CHECK = """
import json, sys
from aics_tlog import parse_note, parse_vkey, verify_checkpoint
out = []
for item in json.load(sys.stdin)["items"]:
    try:
        r = verify_checkpoint(parse_note(item["note"]), parse_vkey(item["log"]),
                              [parse_vkey(w) for w in item["witnesses"]], quorum=item["quorum"])
        out.append({"ok": r.ok, "error": r.error, "cosigned": r.witnesses,
                    "timestamps": r.timestamps, "size": r.size})
    except ValueError as exc:
        out.append({"ok": False, "error": str(exc), "cosigned": [], "timestamps": {}})
json.dump(out, sys.stdout)
"""


def aics_check(python: Path, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """aics-tlog's ``verify_checkpoint`` on each {note, log, witnesses, quorum} item."""
    run = subprocess.run(
        [str(python), "-c", _AICS_CHECK],
        input=json.dumps({"items": items}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    results: list[dict[str, Any]] = json.loads(run.stdout)
    return results


def go_proofs(binary: Path, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``gowitness proof``: one result per {proof, log, witnesses} item (a tlog-proof file)."""
    run = subprocess.run(
        [str(binary), "proof"],
        input=json.dumps({"items": items}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    results: list[dict[str, Any]] = json.loads(run.stdout)
    return results


# The tlog-proof file read here from the specification (not by our parser), then handed to
# aics-tlog's offline bundle verifier: it hashes the extra data as the leaf, opens the
# checkpoint under the log key and the witnesses' keys with the quorum, and checks inclusion.
_AICS_PROOF = """
import base64, json, sys
from aics_tlog import parse_vkey
from aics_tlog.bundle import Bundle, verify_bundle
out = []
for item in json.load(sys.stdin)["items"]:
    head, _, note = item["proof"].partition("\\n\\n")
    lines = head.split("\\n")
    assert lines[0] == "c2sp.org/tlog-proof@v1"
    extra = base64.b64decode(lines[1].removeprefix("extra "))
    index = int(lines[2].removeprefix("index "))
    path = tuple(base64.b64decode(h) for h in lines[3:])
    bundle = Bundle(extra, index, path, note)
    r = verify_bundle(bundle, parse_vkey(item["log"]), [parse_vkey(w) for w in item["witnesses"]],
                      item["quorum"], expected_origin=item["origin"])
    out.append({"ok": r.ok, "error": r.error, "index": r.index, "size": r.size})
json.dump(out, sys.stdout)
"""


def aics_proofs(python: Path, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """aics-tlog's ``verify_bundle`` on each {proof, log, witnesses, quorum, origin} item."""
    run = subprocess.run(
        [str(python), "-c", _AICS_PROOF],
        input=json.dumps({"items": items}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    results: list[dict[str, Any]] = json.loads(run.stdout)
    return results
