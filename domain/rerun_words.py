"""The words of a rerun result (issue 32): what an agent may say, as codes it chooses.

Part of :mod:`domain.statements`' vocabulary, which re-exports every name here; kept apart
because only the rerun models and the agent use it, and its enums are most of what importing
the vocabulary costs (each member of a ``StrEnum`` is made at import), which the offline
verifier and the read commands pay on every start (issue 33). ``domain.statements`` imports
this module the first time one of these names is asked of it.
"""

from __future__ import annotations

from enum import StrEnum


class CaseStatus(StrEnum):
    PASSED = "passed"
    INCORRECT = "incorrect"
    ERROR = "error"
    TIMEOUT = "timeout"
    IMPOSSIBLE_TIME = "impossible_time"


class DefenceOutcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"  # not applicable here (e.g. needs a GPU); the detail says why


MAX_DEFENCES = 64


# --- what an agent may say in words (issue 32) ---------------------------------------------
# A rerun/v1 result is public and signed by the agent's key, so nothing the measured solution
# controls may be signed verbatim: an exception's message, a compiler's diagnostics, a name
# the solution chose. Every word a result carries is one of the codes below, chosen by the
# agent; what it measured goes in typed numeric fields. The agent builds nothing else and
# admission refuses anything else: one definition, both sides. Results admitted before the
# vocabulary carried free text; a reader of stored events (verify, history, pages) validates
# with ``stored=True`` (see :func:`parse_predicate`), which keeps the old shape readable.


class Defence(StrEnum):
    """The reward-hack defences an agent runs on a case (gpu_agent/python_solutions)."""

    SANDBOX = "sandbox"
    REFERENCE_BEFORE_SOLUTION = "reference-before-solution"
    HARNESS_INTEGRITY = "harness-integrity"
    CHILD_PROCESSES = "child-processes"
    RUNTIME_CODE_LOADING = "runtime-code-loading"
    SIDE_STREAM = "side-stream"
    THREAD_INJECTION = "thread-injection"
    STRICT_OUTPUT_TYPE = "strict-output-type"
    OUTPUT_POISONING = "output-poisoning"
    INPUT_MUTATION = "input-mutation"
    NON_FINITE_OUTPUT = "non-finite-output"
    SECRET_ROUND = "secret-round"  # noqa: S105 - a defence's name
    HIDDEN_WORKLOAD = "hidden-workload"
    POST_TIMING_ROUND = "post-timing-round"
    TIMING_AUDIT = "timing-audit"
    FRESH_INPUTS = "fresh-inputs"
    ROOFLINE_FLOOR = "roofline-floor"
    TIMER_CROSS_CHECK = "timer-cross-check"


class CaseReason(StrEnum):
    """Why a case did not pass. ``reward-hack:<defence>`` (:func:`reward_hack`) is the
    other form: the named :class:`Defence` caught the solution."""

    BUILD_FAILED = "build-failed"  # the kernel did not compile (diagnostics never signed)
    LAUNCH_FAILED = "launch-failed"  # the launch spec or the launch itself failed
    IMPORT_FAILED = "import-failed"  # the solution's module did not import
    SIGNATURE_MISMATCH = "signature-mismatch"  # its entry point takes other parameters
    SOLUTION_RAISED = "solution-raised"  # a call of the solution raised
    BAD_OUTPUT = "bad-output"  # not the declared outputs (count, type, shape, dtype)
    OUTPUT_MISMATCH = "output-mismatch"  # outside the workload's tolerance
    UNWRITTEN_OUTPUT = "unwritten-output"  # poisoned output elements left unwritten
    INPUT_MUTATION = "input-mutation"  # an input changed
    BELOW_ROOFLINE_FLOOR = "below-roofline-floor"  # an impossible time
    TIMEOUT = "timeout"  # the case child outlived the case's time limit
    CHILD_DIED = "child-died"  # the case child died before reporting (crash, device fault)
    INVALID_REPORT = "invalid-report"  # the case child's report was not the agent's shape
    JOB_FAILED = "job-failed"  # the one case of a job that could not be measured


REWARD_HACK = "reward-hack:"


def reward_hack(defence: Defence) -> str:
    """The case reason for a cheat that ``defence`` caught."""
    return REWARD_HACK + defence.value


DEFENCE_NAMES = frozenset(d.value for d in Defence)
CASE_REASONS = frozenset(
    {r.value for r in CaseReason} | {REWARD_HACK + d for d in sorted(DEFENCE_NAMES)}
)


def is_case_reason(text: str) -> bool:
    """Whether ``text`` is a word of the case-reason vocabulary."""
    return text in CASE_REASONS


class JobFailure(StrEnum):
    """Why a claimed job could not be measured (``outcome: failed``): always the agent's side
    or the job's documents, never a verdict on the solution."""

    UNSUPPORTED_SOLUTION = "unsupported-solution"  # a kind this agent cannot run here
    MISSING_DEPENDENCY = "missing-dependency"  # a package the solution needs, not installed
    INVALID_JOB = "invalid-job"  # the job's documents do not parse or do not fit together
    ARTIFACT_UNAVAILABLE = "artifact-unavailable"  # the ledger or network failed the fetch
    BACKEND_UNAVAILABLE = "backend-unavailable"  # the device could not be probed
    AGENT_FAULT = "agent-fault"  # the agent itself failed (a case child's agent error, a bug)


class RoundLabel(StrEnum):
    """The correctness rounds of a case (gpu_agent/inputs.py), as a failed case names one."""

    PUBLIC_0 = "public-0"
    PUBLIC_1 = "public-1"
    SECRET = "secret"  # noqa: S105 - a round's name
    HIDDEN_WORKLOAD = "hidden-workload"
    POST_TIMING = "post-timing"
    TIMING_AUDIT = "timing-audit"
    LAST_TIMED = "last-timed"  # the output of the last timed launch


class StopRule(StrEnum):
    """Which stop rule ended a case's timing (gpu_agent/stats.py)."""

    RSE = "rse"
    MAX_SAMPLES = "max-samples"
    TIME_BUDGET = "time-budget"


class TimerName(StrEnum):
    PERF_COUNTER_NS = "perf_counter_ns"
    CUDA_EVENTS = "cuda-events"


TIMER_REFERENCES = frozenset({"CLOCK_MONOTONIC_RAW around the synchronised call"})
# SOL's language names, and the declarative binding's: what ``build.language`` may list.
BUILD_LANGUAGES = frozenset(
    {
        "pytorch",
        "python",
        "triton",
        "cute_dsl",
        "cutile",
        "cudnn_frontend",
        "cuda_cpp",
        "cutlass",
        "cudnn",
        "cublas",
        'CUDA C++ (extern "C" kernel, declarative launch)',
    }
)


# environment.clocks keys: ``<clock>.<when>``, each a reading the agent names itself (a case
# child's clock names are never signed). start/end: the device fingerprint's clocks; timed:
# the range read during the timed batches.
RERUN_CLOCK_KEYS = frozenset(
    {f"{c}.{w}" for c in ("sm", "memory", "sm_max", "memory_max") for w in ("start", "end")}
    | {f"{c}.timed.{m}" for c in ("sm", "memory") for m in ("min", "max")}
)
