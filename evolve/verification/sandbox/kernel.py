"""The libc calls a sandboxed process makes on itself: prctl (no_new_privs, the seccomp filter the
parent compiled), capset, mounts, namespaces. Standard library only: concatenated into the
fork-server's source after keeper.py (client.server_source), and copied as a plain module into the
repo-fix runner's read-only view, whose launcher loads the same filter (evolve/repo/launch.py).
"""

import os

_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP = 1, 4, 38, 22
_PR_SET_CHILD_SUBREAPER = 36
_SYS = {"x86_64": {"capset": 126, "mount_setattr": 442}, "aarch64": {"capset": 91, "mount_setattr": 442}}


class _Kernel:
    """libc calls bound once in the server (children inherit them; no dlopen per job)."""

    def __init__(self, bpf_hex):
        import ctypes

        self.c = ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        self.prctl = libc.prctl
        self.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
        self.mount = libc.mount
        self.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
        self.syscall = libc.syscall
        self.syscall.restype = ctypes.c_long
        self.unshare_fn = libc.unshare
        self.unshare_fn.argtypes = [ctypes.c_int]
        self.setns_fn = libc.setns
        self.setns_fn.argtypes = [ctypes.c_int, ctypes.c_int]
        self.umount2 = libc.umount2
        self.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        self.nr = _SYS.get(os.uname().machine, {})
        self.hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
        self.caps = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable x 2: all zero
        self.attr = (ctypes.c_uint64 * 4)(1, 0, 0, 0)  # struct mount_attr: MOUNT_ATTR_RDONLY
        self.bpf = None
        if bpf_hex:
            raw = bytes.fromhex(bpf_hex)

            class _Prog(ctypes.Structure):
                _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

            self._buf = ctypes.create_string_buffer(raw, len(raw))
            self._prog = _Prog(len(raw) // 8, ctypes.addressof(self._buf))
            self.bpf = ctypes.byref(self._prog)

    def err(self, what):
        e = self.c.get_errno()
        return OSError(e, f"{what}: {os.strerror(e)}")

    def unshare(self, flags):
        if self.unshare_fn(flags) != 0:
            raise self.err("unshare")

    def setns(self, fd, flags):
        if self.setns_fn(fd, flags) != 0:
            raise self.err("setns")

    def mount_fs(self, src, target, fstype, flags, data):
        if self.mount(src, target, fstype, flags, data) != 0:
            raise self.err(f"mount {target!r}")

    def read_only_root(self):
        # mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, {RDONLY}): every mount below / at once.
        if self.syscall(self.nr["mount_setattr"], -100, b"/", 0x8000, self.attr, 32) != 0:
            raise self.err("mount_setattr")

    def drop_caps(self):
        if self.syscall(self.nr["capset"], self.hdr, self.caps) != 0:
            raise self.err("capset")

    def seccomp(self):
        if self.prctl(_PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0 or self.prctl(_PR_SET_SECCOMP, 2, self.bpf, 0, 0):
            raise self.err("seccomp")
