"""The job's seccomp filter, compiled once in the trusted parent to BPF bytes (libseccomp through
pyseccomp). The server never loads libseccomp: each job child installs the bytes with two prctl
calls. Default allow; the calls below fail with EPERM (``clone3`` with ENOSYS, so that glibc falls
back to ``clone`` and threads keep working).
"""

from __future__ import annotations

import errno
import os
import tempfile

# Processes, signals and other processes' memory; namespaces and mounts; network; System V and
# POSIX IPC (a channel between concurrent jobs); kernel surfaces a pure function never needs.
DENIED = (
    "execve", "execveat", "fork", "vfork", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    "kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open", "pidfd_send_signal",
    "pidfd_getfd", "process_madvise", "setsid", "setpgid",
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "mount_setattr", "move_mount", "open_tree",
    "fsopen", "fsmount", "fsconfig", "fspick", "sethostname", "setdomainname",
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    "shmget", "shmat", "shmctl", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semtimedop", "semctl",
    "mq_open", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_unlink",
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "name_to_handle_at", "open_by_handle_at", "fanotify_init",
    "init_module", "finit_module", "delete_module", "kexec_load", "reboot", "swapon", "swapoff", "acct",
    "quotactl", "lookup_dcookie", "personality",
    # Lock and watch state on the shared read-only files would be a channel between concurrent jobs.
    "flock", "inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_mark",
    # Memory that RLIMIT_AS does not count once unmapped (630 MiB held against a 512 MiB limit).
    "memfd_create", "memfd_secret",
)
_CLONE_THREAD = 0x00010000
_F_SETOWN, _F_SETSIG, _F_SETOWN_EX = 8, 10, 15  # fcntl: route SIGIO (or any signal) to a pid
_F_LOCKS = (5, 6, 7, 36, 37, 38)  # F_GETLK, F_SETLK, F_SETLKW and the OFD variants
_FIOSETOWN, _SIOCSPGRP = 0x8901, 0x8902  # ioctl forms of F_SETOWN


def compile_filter(optimize: bool = True) -> tuple[bytes | None, str]:
    """(BPF program bytes, "") or (None, why it is unavailable). ``optimize``: as a binary tree."""
    try:
        import pyseccomp as sc
    except Exception as e:  # noqa: BLE001 - libseccomp or pyseccomp missing
        return None, f"libseccomp/pyseccomp unavailable ({type(e).__name__}: {str(e)[:80]})"
    try:
        f = sc.SyscallFilter(sc.ALLOW)
        if optimize:
            # A binary tree of syscall numbers instead of a list of ~100 compares: loading the filter
            # makes the kernel run it once per syscall number (the allow-cache, under the signal lock),
            # which was ~8% of a short job's CPU; the tree cost 40% less to load, same decisions
            # (tests/verification/test_job_cost.py compares both programs on every syscall).
            try:
                f.set_attr(sc.Attr.CTL_OPTIMIZE, 2)
            except Exception:  # noqa: BLE001 - libseccomp before 2.5: the plain list
                pass
        eperm = sc.ERRNO(errno.EPERM)
        for name in DENIED:
            try:
                f.add_rule(eperm, name)
            except Exception:  # noqa: BLE001 - a syscall this architecture does not have
                pass
        f.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))  # processes, not threads
        f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
        for cmd in (_F_SETOWN, _F_SETSIG, _F_SETOWN_EX, *_F_LOCKS):
            f.add_rule(eperm, "fcntl", sc.Arg(1, sc.EQ, cmd))
        for cmd in (_FIOSETOWN, _SIOCSPGRP):
            f.add_rule(eperm, "ioctl", sc.Arg(1, sc.EQ, cmd))
        with tempfile.TemporaryFile() as tmp:
            f.export_bpf(tmp)
            tmp.seek(0)
            bpf = tmp.read()
    except Exception as e:  # noqa: BLE001
        return None, f"libseccomp could not build the filter ({type(e).__name__}: {str(e)[:80]})"
    if not bpf or len(bpf) % 8:
        return None, "libseccomp produced no filter"
    return bpf, ""


_cache: list = []


def job_filter() -> tuple[bytes | None, str]:
    """compile_filter(), once per process."""
    if not _cache:
        _cache.append(compile_filter())
    return _cache[0]


def _selftest() -> None:  # pragma: no cover - a manual check: python -m evolve.verification.sandbox.seccomp
    bpf, why = compile_filter()
    print(len(bpf) if bpf else why, os.uname().machine)


if __name__ == "__main__":
    _selftest()
