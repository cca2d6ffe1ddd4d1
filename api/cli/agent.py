"""`kernelindex agent`: the rerun agent, a client of a ledger server.

The agent's code (numpy, and PyCUDA on a GPU machine) is imported only when the command
runs, so the ledger's own install (`pip install -e .`) does not need those packages. This
process holds the key and runs no submitted code: every case runs in a jailed child
(gpu_agent/jail.py, bubblewrap), exec'd fresh.

One key per backend: the agent starts only with an active agent key whose registration binds
it to the probed device's class (``--device 'PRODUCT/ARCH'`` for a GPU, ``--device cpu-test``
for the CPU double), and stops with the ledger's code when the ledger refuses the agent itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from api.cli.common import err, fail, handles_errors, out
from api.cli.local import load_key
from domain.rerun_binding import describe_classes

AGENT_EXTRA_HINT = "install the agent's extra: pip install -e '.[gpu]' (or '.[agent]' on CPU)"


@handles_errors
def agent(
    server: Annotated[str, typer.Option("--server", help="The ledger's base URL.")],
    key: Annotated[
        Path,
        typer.Option(
            "--key",
            help="This agent's registered key (PEM), bound to this backend's device class: "
            "one key per backend.",
        ),
    ],
    once: Annotated[
        bool, typer.Option("--once", help="Take at most one job, then exit (0 if none).")
    ] = False,
    backend: Annotated[
        str | None,
        typer.Option(help="Measuring backend (default: the GPU's; cpu-test never verifies)."),
    ] = None,
    poll: Annotated[float, typer.Option(help="Seconds between polls when idle.")] = 10.0,
    lease: Annotated[int, typer.Option(help="Lease to ask for, in seconds.")] = 3600,
) -> None:
    """Poll the ledger for rerun jobs on this GPU, measure them and post signed results.

    One key per backend: the key must be registered as an agent key bound to this device's
    class (kernelindex keys register agent.pem --role agent --device 'NVIDIA B200/sm_100', or
    --device cpu-test for the CPU double, which runs submitted code on the CPU: never give
    that key a GPU). The agent checks this before it polls and refuses to run otherwise.
    """
    try:
        from gpu_agent.agent import Agent, LedgerApi  # noqa: PLC0415 - needs the agent extra
        from gpu_agent.backends.registry import BACKEND_NAMES, GPU_BACKEND  # noqa: PLC0415
        from gpu_agent.harness import HarnessConfig  # noqa: PLC0415
        from gpu_agent.jail import protect, unavailable  # noqa: PLC0415
    except ImportError as exc:
        raise fail("missing-extra", f"{exc}; {AGENT_EXTRA_HINT}") from None
    # No jail may mount a folder holding the key (its home and working directory neither).
    protect(key)
    backend = backend or GPU_BACKEND
    if backend not in BACKEND_NAMES:
        raise typer.BadParameter(f"unknown backend {backend!r} (known: {', '.join(BACKEND_NAMES)})")
    worker = Agent(
        LedgerApi(server),
        load_key(key),
        backend,
        HarnessConfig(),
        lease_seconds=lease,
        log=lambda line: err.print(line, markup=False),
    )
    # Before any poll: a key not bound to this device would have every claim refused.
    classes = worker.start()
    device = worker.device
    out.print(
        f"agent key {worker.key.key_id} is bound to {describe_classes(classes)} "
        "(one key per backend)"
    )
    out.print(
        f"agent {worker.key.key_id} on {device.product} ({device.architecture}, "
        f"backend {device.backend}) polling {server}"
    )
    # Probed once, here: without a working jail no submitted code runs, and every job this
    # agent claims ends as its own failure (never measured unjailed).
    refusal = unavailable()
    if refusal is None:
        out.print("submitted code runs jailed (bubblewrap: its own user, PID, mount and network)")
    else:
        err.print(
            f"WARNING: {refusal}. Every job this agent claims will end as the agent's "
            "failure; install bubblewrap (Debian: apt-get install bubblewrap).",
            markup=False,
        )
    if once:
        done = worker.run_once()
        if done is None:
            out.print("no open job for this device")
        return
    worker.run_forever(poll)


# What this module adds to `kernelindex` (api/cli/main.py lists it).
app = typer.Typer()
app.command("agent")(agent)
