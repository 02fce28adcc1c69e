"""The base of the classes that own one library handle."""
import contextlib
import threading

from ._errors import Error, Status

# Guards every handle's in-flight count and the handle itself; held only to
# update them, never across a library call. Reentrant: building the BUSY
# error under it allocates, the collector may then run another handle's
# __del__ -> close() on this same thread.
_GUARD = threading.RLock()


class OwnedHandle:
    """Owns one handle, freed by the library function named by ``_FREE``.

    ``close()`` is idempotent, the object is a context manager, and ``__del__``
    closes it quietly (at interpreter shutdown modules may already be gone).
    Every call into the library holds the handle (``_claim``) while it runs;
    ``close()`` while a call is running, on another thread or from a log
    callback inside it, raises Error with status BUSY and leaves the handle
    open (freeing it would pull memory out from under the call); close it
    again once the call has returned. Subclasses set ``self._lib`` and
    ``self._handle``.
    """

    _FREE = None        # e.g. "moestream_close"
    _KIND = "handle"    # for the "... is closed" error
    _handle = None
    _calls = 0          # library calls in flight on this handle

    def close(self):
        with _GUARD:
            if self._calls:
                raise Error(Status.BUSY, f"the {self._KIND} is in use by a call in progress; "
                                         "close it once that call has returned")
            handle, self._handle = self._handle, None
        if handle:
            getattr(self._lib, self._FREE)(handle)

    @property
    def closed(self):
        return not self._handle

    def _h(self):
        if not self._handle:
            raise Error(Status.INVALID_ARGUMENT, f"{self._KIND} is closed")
        return self._handle

    @contextlib.contextmanager
    def _claim(self):
        """The handle, kept from being freed until the with-block ends."""
        with _GUARD:
            handle = self._h()
            self._calls += 1
        try:
            yield handle
        finally:
            with _GUARD:
                self._calls -= 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
