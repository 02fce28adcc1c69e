"""The base of the classes that own one library handle."""
from ._errors import Error, Status


class OwnedHandle:
    """Owns one handle, freed by the library function named by ``_FREE``.

    ``close()`` is idempotent, the object is a context manager, and ``__del__``
    closes it quietly (at interpreter shutdown modules may already be gone).
    Subclasses set ``self._lib`` and ``self._handle``.
    """

    _FREE = None        # e.g. "moestream_close"
    _KIND = "handle"    # for the "... is closed" error
    _handle = None

    def close(self):
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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
