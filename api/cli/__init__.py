"""The ``kernelindex`` command line (``api.cli.main``), one module per feature.

Each feature module holds its commands on a ``typer.Typer`` named ``app``; ``api.cli.main``
lists them and imports only the module of the command that runs.
"""
