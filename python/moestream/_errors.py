"""Status codes and the exception every failing call raises."""
import enum


class Status(enum.IntEnum):
    """moestream_status values (include/moestream.h); they never change."""

    OK = 0
    INVALID_ARGUMENT = -1
    IO = -2
    BAD_FORMAT = -3
    UNSUPPORTED = -4
    OUT_OF_MEMORY = -5
    STATE_MISMATCH = -6
    CONTEXT_FULL = -7
    INTERNAL = -8
    BUSY = -9


class Error(Exception):
    """A failed moestream call.

    ``status`` is the int status code (compare with :class:`Status`),
    ``message`` the library's description (moestream_last_error).
    """

    def __init__(self, status, message):
        status = int(status)
        try:
            status = Status(status)
        except ValueError:
            pass
        self.status = status
        self.message = message
        super().__init__(status, message)

    @property
    def status_name(self):
        return self.status.name.lower() if isinstance(self.status, Status) else "unknown status"

    def __str__(self):
        return f"{self.message} [{self.status_name}]" if self.message else self.status_name
