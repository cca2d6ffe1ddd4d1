"""Solutions that run through PyTorch: SOL-ExecBench ``pytorch``/``python``/``triton`` (and the
``torch``-binding C++ ones, parsed and routed), FlashInfer-Bench ``python``/``triton``.

Why a package of its own: these solutions are submitted *Python*, so unlike the declarative
declarative kernels they must run inside a process, and that process must be treated as
hostile. Everything here is organised around that:

* ``spec.py`` parses the Solution document and says which kind it is (torch-free);
* ``routing.py`` decides whether this agent can run that kind on its backend (torch-free);
* ``task.py`` is what crosses into the case child: seeds, never the job's nonce (torch-free);
* ``sandbox.py`` scrubs the child's environment, argv, working directory and rlimits;
* ``job.py`` builds each case's task in the agent and is the child's torch-free entry
  point, run in the jail of ``gpu_agent/jail.py``; torch is imported only past it, by
* ``torch_runner.py`` (setup and loading) and ``torch_case.py`` (rounds, timing, verdict),
  with ``torch_io.py`` (tensors in and out), ``gpu_agent.checks`` (the one tolerance rule, as
  for the declarative path), ``defences.py`` and
  ``watch.py`` (the reward-hack defences) and ``timing.py`` (the timer and its cross-check).
"""
