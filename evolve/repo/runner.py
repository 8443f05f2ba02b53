"""One sandboxed pytest run of a repository copy: the graded tree, the bubblewrap view, the outcomes.

The graded tree (``graded_tree``) is what EVERY test run sees, the agent's own runs and the hidden
final run alike, so package code cannot tell the grader from a practice run (same paths, command,
environment, interpreter flags): the pristine sdist, with the agent's edits to the package's own
existing source files laid over it. Edits to tests, ``conftest.py``, config files and every new file
stay in the agent's working copy (where reading and searching see them) and never reach a test run.
An edit of a package file reaches a run only when ``editcheck.check_edit`` admits it: read as the
interpreter reads it (BOM, coding cookie), it compiles, changes function bodies only, and each changed
body uses only its own function's names (plus pure builtins). Package code shares the process with
pytest and the results plugin, so this rule is what keeps the verdict out of its reach; what it
cannot catch is in docs/repo_tasks.md.

The view (``bwrap_argv``): the function sandbox's own read-only system view (``view.system_view``:
system libraries, the interpreter and its standard library, 5 device nodes), pytest and its few
dependencies and the results plugin, all read-only; the graded tree at ``/repo`` (a throwaway copy),
read-only too; one writable file (the results file, capped by RLIMIT_FSIZE) and a size-capped
``/tmp`` tmpfs that dies with the run; no /proc, no network (``--unshare-all``); no project, venv,
task file or sdist cache. Limits (``launch.py``, before pytest starts): the function sandbox's
seccomp filter, rlimits (CPU, address space, file size, open files), at most ~300 tasks in the run's
own pid namespace, no capabilities; the parent keeps at most ``OUTPUT_CAP`` bytes of output and stops
a run that prints more.
Runner configuration the agent cannot touch: ``-c`` an ini outside the tree, ``--rootdir /repo``,
``-p no:cacheprovider``, ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``, ``PYTHONDONTWRITEBYTECODE=1``, a fresh
nonce per run, and a run counts only with the plugin's closing line (``pytest_plugin.py``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from evolve.errors import EvolveError
from evolve.repo.editcheck import Refusal, check_edit
from evolve.verification.sandbox import seccomp, view

PLUGIN = Path(__file__).with_name("pytest_plugin.py")
# Copied into the read-only runner folder: the launcher and the two stdlib-only modules it shares
# with the verification server (the seccomp prctl calls, the pid namespace's task cap).
SANDBOX = Path(view.__file__).parent
RUNNER_FILES = {"evolve_repo_plugin.py": PLUGIN, "evolve_repo_launch.py": Path(__file__).with_name("launch.py"),
                "evolve_sandbox_kernel.py": SANDBOX / "kernel.py", "evolve_sandbox_jobenv.py": SANDBOX / "jobenv.py"}
RUNNER_DISTS = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "py.py")
CONFIG_FILES = {"conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", "setup.py",
                "sitecustomize.py", "usercustomize.py", "__main__.py"}
INI = "[pytest]\naddopts =\npython_files = test_*.py *_test.py tests.py\n"
TIMEOUT_S = 60.0
# The function sandbox's limits, sized for pytest (measured: benchmarks/repo_runner_cost.py runs every
# built task's selection under them). RLIMIT_NPROC is not among them: in the sandbox's user namespace
# it did not stop 1,000 threads here (the run's task cap is its pid namespace's pid_max, launch.py).
RLIMITS = {"RLIMIT_CPU": int(TIMEOUT_S), "RLIMIT_AS": 1 << 30, "RLIMIT_FSIZE": 16 << 20, "RLIMIT_NOFILE": 256,
           "RLIMIT_CORE": 0}
TMP_BYTES = 64 << 20  # the run's /tmp (pytest's capture files, tmp_path): a tmpfs of this size
OUTPUT_CAP = 1 << 20  # bytes of stdout+stderr the parent keeps; a run that prints more is stopped
ISOLATION = "bwrap+seccomp (repo-fix pytest view, rlimits)"


@dataclass
class RunResult:
    """Outcomes by node id; ``complete`` only when the plugin's closing line with the nonce arrived."""

    outcomes: dict[str, str] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)  # node id -> the assertion output
    complete: bool = False
    exit_code: int | None = None
    output: str = ""
    seconds: float = 0.0
    cpu_s: float = 0.0  # user + system CPU of the whole sandboxed run, including a run that was stopped
    hack: str | None = None  # an edit refused as a reach for the grader (editcheck.py): never run
    invalid: str | None = None  # an edit refused as not compiling or too large: never run
    stopped: str = ""  # why the parent stopped the run (time, output), "" when it ended by itself

    def passed(self, node_id: str) -> bool:
        return self.complete and self.outcomes.get(node_id) == "passed"


def is_test_path(rel: str) -> bool:
    """Tests, conftest and config files: always pristine in a graded run."""
    parts = Path(rel).parts
    name = parts[-1]
    return (name in CONFIG_FILES or name.startswith("test_") or name.endswith("_test.py")
            or any(p in ("tests", "test", "testing") for p in parts[:-1]))


def graded_tree(pristine: Path, work: Path | None, dest: Path, bug: tuple[str, bytes] | None = None) -> Refusal | None:
    """Build the tree test runs see at ``dest``; returns why an edit was refused, or None. ``bug``: the
    task's injected file (path, bytes), whose functions are admitted as they are."""
    shutil.copytree(pristine, dest, symlinks=False)
    if work is None:
        return None
    for path in sorted(work.rglob("*.py")):
        rel = path.relative_to(work).as_posix()
        orig = pristine / rel
        if path.is_symlink() or not orig.is_file() or is_test_path(rel):
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        refusal = check_edit(rel, orig.read_bytes(), data, bug[1] if bug and bug[0] == rel else None)
        if refusal is not None:
            return refusal
        (dest / rel).write_bytes(data)  # the very bytes the check compiled
    return None


def _runner_dir(root: Path) -> Path:
    """A read-only folder for the sandbox: pytest's packages (bound), the launcher, the results plugin
    and the modules they share with the verification server (copied), the limits and the filter."""
    bpf, why = seccomp.job_filter()
    if bpf is None:
        raise EvolveError(f"repo tasks need the sandbox's seccomp filter: {why}")
    site = root / "site"
    site.mkdir(parents=True)
    for name, src in RUNNER_FILES.items():
        shutil.copyfile(src, site / name)
    (root / "pytest.ini").write_text(INI)
    (root / "limits.json").write_text(json.dumps({"rlimits": RLIMITS, "bpf": bpf.hex(), "tasks": True}))
    for src, dst in _runner_binds():  # mount points must exist: the folder is read-only in the view
        point = site / Path(dst).name
        point.mkdir() if Path(src).is_dir() else point.touch()
    return site


def _runner_binds() -> list[tuple[str, str]]:
    binds = []
    for name in RUNNER_DISTS:
        spec = importlib.util.find_spec(name.removesuffix(".py"))
        if spec is None or spec.origin is None:
            if name in ("pytest", "_pytest", "pluggy"):
                raise EvolveError(f"repo tasks need {name} installed in the interpreter that runs evolve")
            continue
        src = Path(spec.origin).parent if spec.submodule_search_locations else Path(spec.origin)
        binds.append((str(src), f"/runner/site/{src.name}"))
    return binds


def bwrap_argv(tree: Path, runner: Path, out: Path, python_path: list[str]) -> list[str]:
    """The view: the function sandbox's system view, the tree at /repo, the runner at /runner."""
    if not view.have_bwrap():
        raise EvolveError("repo tasks need bubblewrap (bwrap); install it (scripts/setup.sh does as root)")
    # pid 1 of its own pid namespace, with CAP_SYS_ADMIN in the sandbox's user namespace only: the
    # launcher needs both to cap the namespace's tasks and unmount /proc, then drops every capability.
    cmd = view.namespaces("--cap-add", "CAP_SYS_ADMIN", "--as-pid-1") + view.system_view()
    cmd += ["--size", str(TMP_BYTES), "--tmpfs", "/tmp", "--proc", "/proc", "--ro-bind", str(runner), "/runner"]
    for src, dst in _runner_binds():
        cmd += ["--ro-bind", src, dst]
    cmd += ["--ro-bind", str(tree), "/repo", "--bind", str(out / "results.jsonl"), "/out/results.jsonl",
            "--remount-ro", "/", "--chdir", "/repo"]
    env = {"PYTHONPATH": ":".join(["/runner/site", *python_path]), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "HOME": "/tmp", "LANG": "C.UTF-8",
           "EVOLVE_REPO_OUT": "/out/results.jsonl"}
    for k, v in env.items():
        cmd += ["--setenv", k, v]
    return cmd


def pytest_argv(selection: list[str]) -> list[str]:
    """The runner command (identical for the agent's runs and the hidden run of the same selection)."""
    return [view.interpreter(), "-s", "-B", "-m", "evolve_repo_launch", "-p", "evolve_repo_plugin", "-p", "no:cacheprovider",
            "-c", "/runner/pytest.ini", "--rootdir", "/repo", "-q", "-rN", "--tb=short", "--color=no",
            "-o", "console_output_style=classic", *selection]


def run_tests(pristine: Path, work: Path | None, selection: list[str], python_path: list[str],
              timeout_s: float = TIMEOUT_S, bug: tuple[str, bytes] | None = None) -> RunResult:
    """Run ``selection`` (node ids or files) on the graded tree of ``work`` (None: pristine); ``bug``:
    the task's injected file (path, bytes), see ``graded_tree``."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="evolve-repo-run-") as tmp:
        root = Path(tmp)
        tree, runner, out = root / "repo", root / "runner", root / "out"
        refusal = graded_tree(pristine, work, tree, bug)
        if refusal is not None:
            return RunResult(output=refusal.message, hack=refusal.message if refusal.kind == "hack" else None,
                             invalid=refusal.message if refusal.kind != "hack" else None, seconds=time.monotonic() - t0)
        _runner_dir(runner)
        out.mkdir()
        (out / "results.jsonl").touch()
        nonce = secrets.token_hex(16)
        argv = bwrap_argv(tree, runner, out, python_path) + ["--setenv", "EVOLVE_REPO_NONCE", nonce, "--"]
        raw, code, note, cpu_s = _capped_run(argv + pytest_argv(selection), timeout_s, OUTPUT_CAP)
        output = raw.decode("utf-8", "replace") + note
        res = _parse(out / "results.jsonl", nonce)
    res.exit_code, res.output, res.seconds, res.stopped = code, output, time.monotonic() - t0, note.strip(" \n[]")
    res.cpu_s = cpu_s
    if code not in (0, 1, 5):  # 2 interrupted, 3 internal error, 4 usage error, None killed, else: a forced exit
        res.complete = False
    return res


def _capped_run(argv: list[str], timeout_s: float, cap: int) -> tuple[bytes, int | None, str, float]:
    """(first ``cap`` bytes of stdout+stderr, exit status or None, a note when the run was stopped, CPU
    seconds). The parent never holds more than ``cap`` bytes of a run's output: one that prints more, or
    runs past ``timeout_s``, is killed (bwrap ``--die-with-parent`` takes the sandbox with it). The CPU
    time is the run's whole tree as ``wait4`` reports it (the launcher, pid 1 in the sandbox, reaps every
    descendant), so a run stopped for time or output still shows what it burnt."""
    buf, note = bytearray(), ""
    deadline = time.monotonic() + timeout_s
    with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as proc:
        fd = proc.stdout.fileno()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                note = "\n[timed out]"
                break
            if not select.select([fd], [], [], left)[0]:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            room = cap - len(buf)
            buf += chunk[:room]
            if len(chunk) > room:
                note = f"\n[output truncated at {cap} bytes: the run was stopped]"
                break
        status = None if note else _reap(proc.pid, deadline)
        if status is None:
            note = note or "\n[timed out]"
            status = _stop(proc)
        code, usage = status
        proc.returncode = code  # reaped here: Popen must not wait for it again
    return bytes(buf), (None if note else code), note, usage.ru_utime + usage.ru_stime


def _stop(proc: subprocess.Popen):
    """Kill the sandbox's pid 1 (its only process: fork is denied there), not bwrap: bwrap reaps it, so
    the CPU it burnt is in bwrap's rusage. Killing bwrap first would lose it (the namespace dies
    unreaped). bwrap itself is killed only if it does not end within seconds."""
    try:
        kids = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    except OSError:
        kids = []
    for kid in kids:
        try:
            os.kill(int(kid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    status = _reap(proc.pid, time.monotonic() + 5) if kids else None
    if status is None:
        proc.kill()
        status = _reap(proc.pid, None)
    return status


def _reap(pid: int, deadline: float | None):
    """``(exit status, rusage)`` of ``pid`` once it ends; None if ``deadline`` passes first."""
    while True:
        done, status, usage = os.wait4(pid, 0 if deadline is None else os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), usage
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)


def _parse(path: Path, nonce: str) -> RunResult:
    """The plugin's rows with this run's nonce. The file is written from inside the sandbox, so a row
    is data to check, not to trust: anything but a JSON object with string fields is skipped."""
    res = RunResult()
    if not path.exists():
        return res
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stamp, _, rest = line.partition(" ")
        kind, _, payload = rest.partition(" ")
        if stamp != nonce:
            continue
        if kind == "END":
            res.complete = True
            continue
        row = _row(payload, ("id", "outcome", "text") if kind == "R" else ("id", "text"))
        if row is None:
            continue
        if kind == "R":
            prev = res.outcomes.get(row["id"])
            if prev in (None, "passed"):  # a failed setup/teardown outranks a passed call
                res.outcomes[row["id"]] = row["outcome"]
            if row["text"]:
                res.failures.setdefault(row["id"], row["text"])
        elif kind == "C":
            res.failures.setdefault(row["id"], row["text"])
    return res


def _row(payload: str, fields: tuple[str, ...]) -> dict | None:
    try:
        row = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    if not isinstance(row, dict) or not all(isinstance(row.get(f), str) for f in fields):
        return None
    return row
