"""No setuid or setgid bits from a command: a seccomp filter built by libseccomp (stdlib + ctypes).

A root agent's command is uid 0 without capabilities, yet as the owner of what it creates
it could still ``chmod 4755`` a copy of a shell, and any local user running that file
outside the fence would get euid 0 (``nosuid`` mounts only help inside the command's own
namespace). So the launcher installs, just before exec, a filter that answers EPERM to
every call that would put S_ISUID or S_ISGID on a file: chmod, fchmod, fchmodat,
fchmodat2, and creating a file with such a mode (open, openat, creat, mknod, mknodat).
Calls whose mode the filter cannot see (openat2's struct, io_uring's queued opens) get
ENOSYS, which programs read as an older kernel and fall back from. Writing to a setuid
file the command does not own, or without CAP_FSETID, already clears the bits (kernel).

libseccomp (``libseccomp.so.2``, present wherever apt or systemd is) compiles the
filter, arch checks included (a 32-bit or x32 call on x86_64 is killed, not let through).
Loaded by path from the launcher; imports only the standard library.
"""

from __future__ import annotations

import ctypes
import errno
import os

S_ISUID, S_ISGID = 0o4000, 0o2000
_LIBRARY = "libseccomp.so.2"
_ALLOW = 0x7FFF0000
_CMP_MASKED_EQ = 7
# syscall -> index of its mode argument
MODE_ARG = {"chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2, "open": 2, "openat": 3,
            "creat": 1, "mknod": 1, "mknodat": 2}
_FCHMODAT2 = 452  # Linux 6.6, the same number everywhere; older libseccomp lacks the name
UNSEEN = ("openat2", "io_uring_setup")  # modes passed in memory: refused as absent


class _ArgCmp(ctypes.Structure):
    _fields_ = (("arg", ctypes.c_uint), ("op", ctypes.c_int),
                ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64))


def _errno_action(err: int) -> int:
    return 0x00050000 | (err & 0xFFFF)


_LOADED: list[ctypes.CDLL] = []


def load_library() -> ctypes.CDLL:
    """libseccomp (loaded once), or OSError saying it is missing."""
    if _LOADED:
        return _LOADED[0]
    lib = ctypes.CDLL(_LIBRARY, use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = (ctypes.c_uint32,)
    lib.seccomp_rule_add_array.argtypes = (ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.POINTER(_ArgCmp))
    lib.seccomp_syscall_resolve_name.argtypes = (ctypes.c_char_p,)
    lib.seccomp_load.argtypes = (ctypes.c_void_p,)
    lib.seccomp_release.argtypes = (ctypes.c_void_p,)
    _LOADED.append(lib)
    return lib


def _number(lib: ctypes.CDLL, name: str) -> int | None:
    nr = int(lib.seccomp_syscall_resolve_name(name.encode()))
    if nr >= 0:
        return nr
    return _FCHMODAT2 if name == "fchmodat2" else None  # not on this arch (open on arm64)


def forbid_setid_bits() -> None:
    """Install the filter on this thread (and what it execs); raises OSError on failure."""
    lib = load_library()
    ctx = lib.seccomp_init(_ALLOW)
    if not ctx:
        raise OSError(errno.ENOMEM, "seccomp_init failed")
    try:
        for name, arg in MODE_ARG.items():
            nr = _number(lib, name)
            if nr is None:
                continue
            for bit in (S_ISUID, S_ISGID):
                cmp = _ArgCmp(arg, _CMP_MASKED_EQ, bit, bit)
                _check(lib.seccomp_rule_add_array(ctx, _errno_action(errno.EPERM), nr, 1,
                                                  ctypes.byref(cmp)), f"rule for {name}")
        for name in UNSEEN:
            nr = _number(lib, name)
            if nr is not None:
                _check(lib.seccomp_rule_add_array(ctx, _errno_action(errno.ENOSYS), nr, 0, None),
                       f"rule for {name}")
        _check(lib.seccomp_load(ctx), "seccomp_load")
    finally:
        lib.seccomp_release(ctx)


def _check(result: int, what: str) -> None:
    if result < 0:  # libseccomp returns -errno
        raise OSError(-result, f"seccomp: {what}: {os.strerror(-result)}")
