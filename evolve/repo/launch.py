"""The first code of a sandboxed pytest run (``python -m evolve_repo_launch PYTEST-ARGS``), before
pytest and any package code: the limits of the function sandbox, then pytest in this same process.

It runs as pid 1 of the run's own pid namespace (bwrap ``--as-pid-1``), holding CAP_SYS_ADMIN in the
sandbox's own user namespace only, with /proc mounted, and in this order:
1. caps the namespace's tasks (threads) through its own ``pid_max`` and unmounts /proc, so no test
   sees /proc (the environment the run started with, other processes) - jobenv.py, shared with the
   verification server;
2. drops every capability;
3. sets the rlimits of ``/runner/limits.json`` (CPU, address space, file size, open files, no core);
4. sets no_new_privs and loads the seccomp filter the parent compiled (verification/sandbox/seccomp.py,
   the same filter as the function sandbox's jobs; kernel.py does the two prctl calls);
then runs pytest as ``python -m pytest`` would. It imports nothing from evolve: it and the two shared
modules are copied into the read-only runner folder.
"""

import json
import os
import resource
import runpy
import sys


def _isolate(cfg: dict) -> None:
    # Imported here, not at the top: the modules exist under these names only in the runner folder.
    from evolve_sandbox_jobenv import _limit_tasks, _per_ns_pid_max, _sysctl_dir
    from evolve_sandbox_kernel import _Kernel

    kern = _Kernel(cfg.get("bpf"))
    dfd = _sysctl_dir({"ns": True, "in_bwrap": True}, kern)  # opens /proc/sys/kernel, then unmounts /proc
    if cfg.get("tasks") and _per_ns_pid_max():
        if dfd is None:
            raise OSError("cannot open /proc/sys/kernel to cap the run's tasks")
        _limit_tasks({"_sysk": dfd})
    if dfd is not None:
        os.close(dfd)
    kern.drop_caps()
    for name, value in cfg["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))
    if kern.bpf is not None:
        kern.seccomp()


def main() -> None:
    with open("/runner/limits.json", encoding="utf-8") as f:
        cfg = json.load(f)
    _isolate(cfg)
    sys.argv = ["pytest", *sys.argv[1:]]
    runpy.run_module("pytest", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
