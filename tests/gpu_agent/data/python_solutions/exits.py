"""Calls sys.exit() from its entry point: the solution's error, never the agent's fault."""

import sys


def run(hidden_states, weight, output):
    sys.exit(0)
