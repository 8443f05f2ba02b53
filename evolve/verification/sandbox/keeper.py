"""A slot keeper's small helpers, and the server's process clean-up. Standard library only:
concatenated into the fork-server's source before server.py (see client.server_source), never
imported by the sandboxed side from the package. See server.py for the keeper protocol.
"""

import os
import sys


def _await_job(ctl, pidfd, gen, buf, select, sigkill):
    """Wait for the job process to end; kill it when the server asks for this ``gen``. True if killed."""
    import signal

    stopped = False
    while True:
        r, _, _ = select([ctl, pidfd], [], [])
        if pidfd in r:
            return stopped
        chunk = os.read(ctl, 4096)
        if not chunk:  # the server is gone: so is this slot
            signal.pidfd_send_signal(pidfd, sigkill)
            os._exit(0)
        *lines, buf[0] = (buf[0] + chunk).split(b"\n")
        for line in lines:
            if line == b"kill %d" % gen and not stopped:
                stopped = True
                try:
                    signal.pidfd_send_signal(pidfd, sigkill)
                except OSError:
                    pass


def _pipe_unread(fd):
    """Whether bytes wait in a pipe (FIONREAD: a count only, no data read). False when it cannot be
    told: the slot then goes on as before this check (the parent still retires it, as the job never
    acked); True would leave a slot that the parent keeps using without a process."""
    import fcntl

    try:
        import termios

        req = termios.FIONREAD
    except (ImportError, AttributeError):
        req = 0x541B  # Linux's FIONREAD on x86 and arm
    buf = bytearray(4)
    try:
        fcntl.ioctl(fd, req, buf)
    except OSError:
        return False
    return int.from_bytes(buf, sys.byteorder) > 0


def _close_except(keep):
    lo = 3
    for fd in sorted(f for f in keep if f >= 3):
        os.closerange(lo, fd)
        lo = fd + 1
    os.closerange(lo, 1 << 16)


def _group_alive(pgid):
    """SIGKILL a process group; True when it still existed (the fallback without a pid namespace)."""
    import signal

    try:
        os.killpg(pgid, signal.SIGKILL)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _kill(pid):
    """SIGKILL a keeper's process group (the keeper and, in a pid namespace, its job) and the keeper;
    True when the group still existed."""
    import signal

    alive = False
    for fn in (os.killpg, os.kill):
        try:
            fn(pid, signal.SIGKILL)
            alive = True
        except (ProcessLookupError, PermissionError):
            pass
    return alive


def _reap_orphans(slots):
    """Reap re-parented grandchildren (the fallback without a pid namespace; we are their subreaper),
    never one of the slots' own children (those are reaped through their pidfds)."""
    ours = {s.pid for s in slots}
    for _ in range(64):
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None or info.si_pid in ours:
            return
        try:
            os.waitpid(info.si_pid, os.WNOHANG)
        except ChildProcessError:
            return
