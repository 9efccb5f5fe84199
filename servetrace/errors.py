"""Exception hierarchy and process exit codes (DESIGN §7).

Every user-facing failure is a ``ServetraceError`` carrying a one-line message and an
optional hint; the CLI prints them as ``error:`` / ``hint:`` lines and exits with the
code attached to the exception class. Anything else reaching the CLI is a bug (exit 4).
"""

from __future__ import annotations

import errno
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    CHECK_FAILED = 1
    USAGE = 2
    UNREADABLE_INPUT = 3
    INTERNAL = 4


class ServetraceError(Exception):
    """A failure the user can fix; never shown with a traceback."""

    exit_code: ExitCode = ExitCode.INTERNAL

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class InputError(ServetraceError):
    """The input cannot be read or is not a trace (exit 3)."""

    exit_code = ExitCode.UNREADABLE_INPUT


class UsageError(ServetraceError):
    """A flag or rule is malformed (exit 2)."""

    exit_code = ExitCode.USAGE


# What a write reports when the device, not servetrace, is the problem.
FULL_DEVICE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


def unwritable(where: str, error: OSError) -> UsageError:
    """The one-line error for an output that cannot be written (exit 2, as an output in a
    missing directory): ``where`` is the flag and path, or ``stdout``."""
    return UsageError(f"{where}: cannot write: {error.strerror or error}")


def first_line(error: BaseException, fallback: str | None = None) -> str:
    """The first line of ``error``'s message, what a one-line report quotes of a library's
    error; ``fallback`` (else the exception's type name) when the message is empty."""
    lines = str(error).strip().splitlines()
    if lines:
        return lines[0]
    return type(error).__name__ if fallback is None else fallback
