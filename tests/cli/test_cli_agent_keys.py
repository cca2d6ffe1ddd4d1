"""`kernelindex keys register --role agent --device ...`: an agent key is bound to the device
classes it names (issue 32), one key per backend."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_session import Cli


@pytest.fixture
def cli(tmp_path: Path, db_url: str) -> Cli:
    made = Cli(tmp_path / "home", db_url)
    made("init")
    return made


def _said(output: str) -> str:
    """The output as words (a usage error is boxed and wrapped)."""
    return " ".join(output.replace("│", " ").split())


def _key(cli: Cli, name: str) -> Path:
    path = cli.home.parent / f"{name}.pem"
    cli("keys", "generate", path)
    return path


def test_an_agent_key_is_registered_with_its_device_classes(cli: Cli) -> None:
    gpu, cpu = _key(cli, "gpu-agent"), _key(cli, "cpu-agent")
    cli("keys", "register", gpu, "--role", "agent", "--device", "NVIDIA B200/sm_100")
    cli("keys", "register", cpu, "--role", "agent", "--device", "cpu-test")
    agents = [k for k in cli.json("keys", "list")["items"] if "agent" in k["roles"]]
    assert sorted((k["devices"] for k in agents), key=str) == [
        [{"backend": "cpu-test"}],
        [{"backend": "cuda", "product": "NVIDIA B200", "architecture": "sm_100"}],
    ]


def test_an_agent_key_without_devices_or_with_both_kinds_is_refused(cli: Cli) -> None:
    agent = _key(cli, "agent")
    count = cli.event_count()
    bare = cli("keys", "register", agent, "--role", "agent", ok=False)
    assert bare.exit_code == 2
    assert "names the device classes it may measure on" in _said(bare.output)
    both = cli(
        "keys",
        "register",
        agent,
        "--role",
        "agent",
        "--device",
        "NVIDIA B200/sm_100",
        "--device",
        "cpu-test",
        ok=False,
    )
    assert both.exit_code == 1 and "error[schema-violation]" in both.output
    assert "never both" in _said(both.output)
    odd = cli("keys", "register", agent, "--role", "agent", "--device", "B200", ok=False)
    assert "error[bad-device-class]" in odd.output and "PRODUCT/ARCH" in _said(odd.output)
    attester = cli(
        "keys", "register", agent, "--role", "attester", "--self", "--device", "cpu-test", ok=False
    )
    assert attester.exit_code == 2 and "only an agent key" in _said(attester.output)
    assert cli.event_count() == count
