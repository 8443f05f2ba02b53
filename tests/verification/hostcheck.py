"""Looking at the sandbox from the host: its processes, their memory, files and strays.

These run as root on the test machine (as CI does); reading another process's memory needs it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def descendants(root: int) -> list[int]:
    """Every live process below ``root`` (host pids)."""
    parent = {int(p): _ppid(int(p)) for p in os.listdir("/proc") if p.isdigit()}
    out, frontier = [], {root}
    while frontier:
        kids = {p for p, pp in parent.items() if pp in frontier}
        out += sorted(kids)
        frontier = kids
    return out


def harness_pids(verifier) -> list[int]:
    """The server and its idle (forked-ahead) job processes, as host pids."""
    from evolve.verification.sandbox.view import interpreter

    root, exe = verifier.sandbox._proc.popen.pid, interpreter().encode()
    return [p for p in descendants(root) if _cmdline(p).split(b"\0")[0] == exe  # not bubblewrap's own
            and _has_memory(p)]  # nor a keeper still exiting after its report (its memory is already gone)


def _has_memory(pid: int) -> bool:
    try:
        return bool(Path(f"/proc/{pid}/maps").read_text().strip())
    except OSError:
        return False


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def memory_contains(pid: int, needle: bytes) -> bool:
    """Whether ``needle`` occurs anywhere in the readable memory of ``pid`` (not its command line)."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb", buffering=0)  # noqa: SIM115
    except OSError:
        return False
    with mem:
        for line in maps:
            addr, perms = line.split()[:2]
            if "r" not in perms or line.endswith(("[vvar]", "[vsyscall]", "[vvar_vclock]")):
                continue
            lo, hi = (int(x, 16) for x in addr.split("-"))
            try:
                mem.seek(lo)
                chunk = mem.read(hi - lo)
            except (OSError, OverflowError, ValueError):
                continue
            if chunk and needle in chunk:
                return True
    return False


def strays(marker: bytes) -> list[int]:
    """Host processes whose command line contains ``marker``."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and marker in _cmdline(int(p))]


class Canaries:
    """Files on the host that no job may write, truncate, chmod or unlink."""

    def __init__(self, paths: list[Path]):
        self.paths = paths
        for i, p in enumerate(paths):
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(f"canary {i}\n")
            p.chmod(0o644)
        self.before = [self._state(p) for p in paths]

    @staticmethod
    def _state(p: Path):
        try:
            st = p.stat()
            return p.read_text(), stat.S_IMODE(st.st_mode), st.st_mtime_ns
        except OSError as e:
            return repr(e)

    def unchanged(self) -> bool:
        return [self._state(p) for p in self.paths] == self.before

    def remove(self) -> None:
        for p in self.paths:
            try:
                p.unlink()
            except OSError:
                pass
