"""``python -m api.cli``: the ``kernelindex`` command."""

from api.cli.main import main

main()
