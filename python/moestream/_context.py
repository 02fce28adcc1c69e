"""moestream.Context: one opened model with its KV cache and expert cache."""
import ctypes

from . import _convert as cv
from . import _ffi
from ._errors import Error, Status
from ._handle import OwnedHandle
from ._sampler import Sampler


class Context(OwnedHandle):
    """An opened model (moestream_context).

    One thread at a time may use a Context (a concurrent call raises Error with
    status BUSY where the library detects it); different Contexts are
    independent. ``step`` releases the GIL while the model runs. ``close()``
    while a call is running raises Error with status BUSY (OwnedHandle).
    """

    _FREE = "moestream_close"
    _KIND = "context"

    def __init__(self, model_path, *, memory_budget=0, n_threads=0, n_ctx=0, io_mode="auto",
                 prefetch="auto", cache_policy="auto", exact=False, packed_path=None,
                 profile_path=None, log=None, log_level="warn", lookahead_layers=0, numa="local",
                 max_batch=0):
        self._handle = None
        self._lib = _ffi.lib()
        self._log_callback = None  # kept alive as long as the handle exists
        self._info = None

        params = _ffi.Params()
        self._lib.moestream_params_init(ctypes.byref(params))
        params.model_path = cv.path_bytes(model_path, "model_path")
        cv.set_int(params, "memory_budget", memory_budget)
        cv.set_int(params, "n_threads", n_threads)
        cv.set_int(params, "n_ctx", n_ctx)
        params.io_mode = cv.enum_value(cv.IO_MODES, io_mode, "io_mode")
        params.prefetch = cv.enum_value(cv.PREFETCH_MODES, prefetch, "prefetch")
        params.cache_policy = cv.enum_value(cv.CACHE_POLICIES, cache_policy, "cache_policy")
        params.exact = 1 if exact else 0
        cv.set_int(params, "lookahead_layers", lookahead_layers)
        params.numa_placement = cv.enum_value(cv.NUMA_PLACEMENTS, numa, "numa")
        cv.set_int(params, "max_batch", max_batch)
        if packed_path is not None:
            params.packed_path = cv.path_bytes(packed_path, "packed_path")
        if profile_path is not None:
            params.profile_path = cv.path_bytes(profile_path, "profile_path")
        if log is not None:
            if not callable(log):
                raise TypeError(f"log must be callable as log(level_name, message), not {type(log).__name__}")
            self._log_callback = _make_log_callback(log)
            params.log_fn = self._log_callback
            params.log_level = cv.enum_value(cv.LOG_LEVELS, log_level, "log_level")

        handle = _ffi.ContextPtr()
        self._lib.moestream_open(ctypes.byref(params), ctypes.byref(handle))
        self._handle = handle

    # --- lifetime ---------------------------------------------------------

    def close(self):
        """Frees the context (drains I/O, writes the usage profile). Idempotent.
        Error with status BUSY while a call on the context is running."""
        super().close()
        self._log_callback = None

    # --- running ----------------------------------------------------------

    def step(self, tokens, *, logits=True):
        """Appends tokens and runs them; returns the last token's logits.

        The result is a numpy float32 array of n_vocab values (a list of floats
        without numpy), or None when ``logits=False``. On error nothing of this
        call is kept.
        """
        keep, ptr, n = cv.int32_buffer(tokens)
        out, out_ptr = (cv.new_logits(self.n_vocab) if logits else (None, None))
        with self._claim() as handle:
            self._lib.moestream_step(handle, ptr, n, out_ptr)
        del keep
        return cv.finish_logits(out) if logits else None

    def step_all_logits(self, tokens):
        """Appends tokens and runs them; returns every token's logits.

        A numpy float32 array of shape (len(tokens), n_vocab) (a list of rows
        without numpy); row i is what stepping the tokens one at a time gives
        after token i. Scoring text this way reads the weights once per chunk
        of tokens instead of once per token. On error nothing of this call is
        kept.
        """
        keep, ptr, n = cv.int32_buffer(tokens)
        n_vocab = self.n_vocab
        out, out_ptr = cv.new_logits_rows(n, n_vocab)
        with self._claim() as handle:
            self._lib.moestream_step_all_logits(handle, ptr, n, out_ptr)
        del keep
        return cv.finish_logits_rows(out, n_vocab)

    def reset(self):
        """Forgets all tokens; the expert cache stays warm."""
        with self._claim() as handle:
            self._lib.moestream_reset(handle)

    def truncate(self, n_keep):
        """Keeps the first n_keep tokens and forgets the rest; the next step
        continues at position n_keep. Models with sliding-window layers can go
        back only as far as their rings reach (moestream_truncate)."""
        n_keep = cv.checked_int(n_keep, ctypes.c_int32, "n_keep")
        with self._claim() as handle:
            self._lib.moestream_truncate(handle, n_keep)

    def save_state(self, path, sampler=None):
        """Saves tokens and KV cache atomically; with a Sampler, also its
        parameters and generator state (docs/state-format.md)."""
        _check_sampler(sampler)
        with self._claim() as handle:
            if sampler is None:
                self._lib.moestream_state_save(handle, cv.path_bytes(path))
            else:
                with sampler._claim() as sampler_handle:
                    self._lib.moestream_state_save_with_sampler(handle, sampler_handle, cv.path_bytes(path))

    def load_state(self, path, sampler=None):
        """Restores a saved state. With a Sampler, the file must hold a
        sampler section, and the sampler takes its parameters and generator
        state. On error neither the context nor the sampler changes."""
        _check_sampler(sampler)
        with self._claim() as handle:
            if sampler is None:
                self._lib.moestream_state_load(handle, cv.path_bytes(path))
            else:
                with sampler._claim() as sampler_handle:
                    self._lib.moestream_state_load_with_sampler(handle, sampler_handle, cv.path_bytes(path))
                sampler._refresh_params()

    def stats(self):
        """Engine counters as a dict (see moestream_stats in the header)."""
        s = _ffi.Stats()
        self._lib.moestream_stats_init(ctypes.byref(s))
        with self._claim() as handle:
            self._lib.moestream_stats_get(handle, ctypes.byref(s))
        return cv.stats_dict(s)

    def reset_stats(self):
        with self._claim() as handle:
            self._lib.moestream_stats_reset(handle)

    def start_read_log(self, capacity):
        """Logs the expert reads from now on, up to capacity (0 stops); see moestream_read_log_start."""
        capacity = cv.checked_int(capacity, ctypes.c_uint64, "capacity")
        with self._claim() as handle:
            self._lib.moestream_read_log_start(handle, capacity)

    def replay_read_log(self, queue_depth=0):
        """Replays the logged reads against the device (moestream_read_log_replay); a dict of the figures."""
        r = _ffi.ReadReplay()
        self._lib.moestream_read_replay_init(ctypes.byref(r))
        cv.set_int(r, "queue_depth", queue_depth)
        with self._claim() as handle:
            self._lib.moestream_read_log_replay(handle, ctypes.byref(r))
        return cv.struct_to_dict(r)

    # --- model facts --------------------------------------------------------

    @property
    def info(self):
        """The model's facts as a dict (moestream_model_info)."""
        if self._info is None:
            mi = _ffi.ModelInfo()
            self._lib.moestream_model_info_init(ctypes.byref(mi))
            with self._claim() as handle:
                self._lib.moestream_model_info_get(handle, ctypes.byref(mi))
            self._info = cv.model_info_dict(mi)
        return dict(self._info)

    @property
    def n_vocab(self):
        return self._int_query("moestream_n_vocab")

    @property
    def n_ctx(self):
        return self._int_query("moestream_n_ctx")

    @property
    def n_past(self):
        return self._int_query("moestream_n_past")

    @property
    def io_mode_reason(self):
        """Why experts are read the way they are and where the memory lives, in full."""
        with self._claim() as handle:
            return self._lib.moestream_io_mode_reason(handle).decode()

    def _int_query(self, name):
        with self._claim() as handle:
            value = getattr(self._lib, name)(handle)
        if value < 0:
            raise Error(Status.INTERNAL, f"{name} returned {value} for an open context")
        return value

    architecture = property(lambda self: self.info["architecture"])
    name = property(lambda self: self.info["name"])
    n_layer = property(lambda self: self.info["n_layer"])
    n_embd = property(lambda self: self.info["n_embd"])
    n_expert = property(lambda self: self.info["n_expert"])
    n_expert_used = property(lambda self: self.info["n_expert_used"])

    # --- tokenizer ----------------------------------------------------------

    def tokenize(self, text, *, add_special=True, parse_special=False):
        """Token ids of text (str, encoded as UTF-8, or bytes, bytearray, memoryview)."""
        if isinstance(text, str):
            data = text.encode("utf-8")
        elif isinstance(text, (bytes, bytearray, memoryview)):
            data = bytes(text)
        else:
            # bytes() would turn an int into that many NUL bytes and a list of ints into their bytes.
            raise TypeError(f"tokenize() takes str or bytes, not {type(text).__name__}")
        with self._claim() as handle:
            return self._tokenize(handle, data, add_special, parse_special)

    def _tokenize(self, handle, data, add_special, parse_special):
        raw = self._lib.raw("moestream_tokenize")
        capacity = len(data) + 16
        while True:
            buf = (ctypes.c_int32 * capacity)()
            n = ctypes.c_size_t(0)
            status = raw(handle, data, len(data), int(bool(add_special)), int(bool(parse_special)),
                         buf, capacity, ctypes.byref(n))
            if status == Status.INVALID_ARGUMENT and n.value > capacity:
                capacity = n.value
                continue
            if status < 0:
                raise self._lib.error(status)
            return list(buf[: n.value])

    def token_to_piece(self, token):
        """The bytes of one token's text."""
        token = cv.checked_int(token, ctypes.c_int32, "token")
        with self._claim() as handle:
            return self._token_to_piece(handle, token)

    def _token_to_piece(self, handle, token):
        raw = self._lib.raw("moestream_token_to_piece")
        capacity = 64
        while True:
            buf = ctypes.create_string_buffer(capacity)
            n = ctypes.c_size_t(0)
            status = raw(handle, token, buf, capacity, ctypes.byref(n))
            if status == Status.INVALID_ARGUMENT and n.value > capacity:
                capacity = n.value
                continue
            if status < 0:
                raise self._lib.error(status)
            return buf.raw[: n.value]

    def detokenize(self, tokens):
        """Text of a token sequence (invalid UTF-8 replaced)."""
        return b"".join(self.token_to_piece(t) for t in tokens).decode("utf-8", "replace")

    @property
    def bos_token(self):
        with self._claim() as handle:
            value = self._lib.moestream_token_bos(handle)
        return None if value < 0 else value

    @property
    def eos_token(self):
        with self._claim() as handle:
            value = self._lib.moestream_token_eos(handle)
        return None if value < 0 else value

    def __repr__(self):
        if self.closed:
            return "<moestream.Context closed>"
        try:
            return f"<moestream.Context {self.architecture} n_vocab={self.n_vocab} n_past={self.n_past}>"
        except Error:
            return "<moestream.Context>"


def _check_sampler(sampler):
    if sampler is not None and not isinstance(sampler, Sampler):
        raise TypeError(f"sampler must be a moestream.Sampler or None, not {type(sampler).__name__}")


_LEVEL_NAMES = {v: k for k, v in cv.LOG_LEVELS.items()}


def _make_log_callback(log):
    """Wraps log(level_name, message); exceptions in it are swallowed, never raised into C."""

    def trampoline(level, message, _user_data):
        try:
            log(_LEVEL_NAMES.get(level, str(level)), message.decode("utf-8", "replace") if message else "")
        except Exception:
            pass

    return _ffi.LOG_FN(trampoline)
