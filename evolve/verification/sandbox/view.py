"""What the sandbox can see: the bubblewrap command line (a filesystem view holding only the
interpreter, its standard library and the system libraries) and the isolation levels.

Nothing of the project, the virtualenv, the task files, /etc, /home or /root is visible: the
harness source travels on the command line, the seccomp filter as bytes in the config. The whole
view is read-only: a job can write no file anywhere (an empty /tmp exists for programs that look).
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig

# Levels, strongest first. "bwrap+seccomp" is the default and the training loop's minimum.
LEVELS = ("bwrap+seccomp", "seccomp", "rlimits")
FULL = LEVELS[0]
MODE_OF = {"bwrap": "bwrap+seccomp", "bwrap+seccomp": "bwrap+seccomp", "seccomp": "seccomp", "rlimits": "rlimits"}


def rank(level: str) -> int:
    """Higher is stronger; -1 for an unknown or missing level."""
    return len(LEVELS) - LEVELS.index(level) if level in LEVELS else -1


def interpreter() -> str:
    # The real binary, not a venv shim: the venv is not in the sandbox's view.
    return os.path.realpath(sys.executable)


def _python_paths() -> tuple[list[str], list[str]]:
    """(paths to bind read-only, paths to cover with an empty tmpfs) for the interpreter."""
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    binds = [interpreter(), stdlib]
    libdir, ldlib = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
    if libdir and ldlib and os.path.exists(os.path.join(libdir, ldlib)):
        binds.append(os.path.realpath(os.path.join(libdir, ldlib)))
    masks = [p for p in (os.path.join(stdlib, "site-packages"), os.path.join(stdlib, "dist-packages"),
                         os.path.join(stdlib, "test")) if os.path.isdir(p)]
    return binds, masks


def namespaces(*extra: str) -> list[str]:
    """bwrap with every namespace new, uid/gid 65534, ``extra`` options, an empty environment."""
    return ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--uid", "65534", "--gid", "65534",
            *extra, "--clearenv"]


def system_view() -> list[str]:
    """The read-only part every sandbox shares: system libraries, /usr (minus /usr/local, /usr/share and
    system-wide Python packages), the interpreter and its standard library (minus site-packages and the
    test suite), the loader cache, and a /dev of 5 device nodes only (no /dev/shm, no ptys)."""
    cmd: list[str] = []
    for top in ("/lib", "/lib64", "/lib32", "/libx32", "/bin"):
        if os.path.islink(top):
            cmd += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top) and top != "/bin":
            cmd += ["--ro-bind", top, top]
    cmd += ["--ro-bind", "/usr", "/usr"]
    # Python packages installed system-wide are not needed (the server runs with -s -S).
    for p in ("/usr/local", "/usr/lib/python3/dist-packages", "/usr/share"):
        if os.path.isdir(p):
            cmd += ["--tmpfs", p]
    binds, masks = _python_paths()
    for p in binds:
        cmd += ["--ro-bind", p, p]
    for p in masks:
        cmd += ["--tmpfs", p]
    if os.path.exists("/etc/ld.so.cache"):
        cmd += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    cmd += ["--dir", "/dev"]
    for dev in ("null", "zero", "full", "random", "urandom"):
        cmd += ["--dev-bind", f"/dev/{dev}", f"/dev/{dev}"]
    return cmd


def bwrap_command() -> list[str]:
    """bwrap ... -- (the caller appends the interpreter command)."""
    # CAP_SYS_ADMIN inside the sandbox's own user namespace only: the server clones each job into fresh
    # pid, mount and IPC namespaces; every job drops all capabilities before it reads its payload.
    cmd = namespaces("--cap-add", "CAP_SYS_ADMIN") + ["--setenv", "PYTHONHASHSEED", "0"] + system_view()
    # No /proc at all (nothing of the server or of other jobs to look at) and no writable place: /tmp
    # is an empty folder of the read-only root, so no job can leave a file for another.
    # /proc is mounted only for the server to open /proc/sys/kernel (each job's pid_max, that is its
    # task limit) and is unmounted by the server before any job exists (jobenv.py, _sysctl_dir).
    cmd += ["--dir", "/tmp", "--proc", "/proc", "--remount-ro", "/", "--chdir", "/", "--"]
    return cmd


def have_bwrap() -> bool:
    return shutil.which("bwrap") is not None
