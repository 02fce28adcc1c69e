"""Conversions between the C structs/enums and plain Python values."""
import ctypes
import numbers
import os

from . import _ffi
from ._errors import Error, Status

try:
    import numpy as np
except ImportError:  # the binding works without numpy, returning lists
    np = None

IO_MODES = {"auto": 0, "mmap": 1, "direct": 2, "pread": 3}
PREFETCH_MODES = {"auto": 0, "off": 1, "previous_token": 2, "lookahead": 3, "both": 4}
CACHE_POLICIES = {"auto": 0, "lru": 1, "lfu_decay": 2, "pinned_hot": 3, "reuse_aware": 4}
LOG_LEVELS = {"error": 0, "warn": 1, "info": 2, "debug": 3}
NUMA_PLACEMENTS = {"local": 0, "interleave": 1}


def _without_nul(data, value, what):
    """data, the C string of value; a NUL byte in it is a ValueError naming
    `what`: C would end the string there and take another path or name."""
    if b"\0" in data:
        raise ValueError(f"{what} holds a NUL byte: {value!r}")
    return data


def path_bytes(path, what="path"):
    """A path (str, bytes or os.PathLike) as the bytes the C API takes. A NUL
    byte is a ValueError, as in open(): C would read, or write, another file."""
    return _without_nul(os.fsencode(os.fspath(path)), path, what)


def name_bytes(name, what):
    """A name (str) the C API takes as a C string, UTF-8 encoded; a NUL byte
    is a ValueError as in a path (preset="tiny\0huge" was the tiny preset),
    anything but a str a TypeError naming `what`."""
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str, not {type(name).__name__}")
    return _without_nul(name.encode(), name, what)


def whole_number(value, what):
    """value as an int: an integer (bool and numpy integers included) or a
    real number without a fraction (8e9). Anything else is a TypeError naming
    `what`: int() would cut 1.5 to 1 and read the text "12" as 12."""
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and float(value).is_integer():
        return int(value)
    if isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a whole number, got {value!r}")
    raise TypeError(f"{what} must be an integer, not {type(value).__name__}")


def real_number(value, what):
    """float(value) for a real number (int, float, numpy scalars); anything
    else is a TypeError naming `what`: float() would read the text "0.5"."""
    if not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a number, not {type(value).__name__}")
    return float(value)


def checked_int(value, ctype, what):
    """whole_number(value), or Error(INVALID_ARGUMENT) naming `what` when the C
    integer type cannot hold it: ctypes would silently keep only the low bits."""
    number = whole_number(value, what)
    bits = 8 * ctypes.sizeof(ctype)
    if ctype(-1).value < 0:
        low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    else:
        low, high = 0, (1 << bits) - 1
    if not low <= number <= high:
        raise Error(Status.INVALID_ARGUMENT, f"{what} {number} is outside {low}..{high}")
    return number


def set_int(struct, field, value, what=None):
    """Sets an integer field of a ctypes struct through checked_int."""
    setattr(struct, field, checked_int(value, dict(struct._fields_)[field], what or field))


def enum_value(table, value, what):
    """A C enum value from its name (as in the table) or its int."""
    if isinstance(value, str):
        key = value.lower().replace("-", "_")
        if key in table:
            return table[key]
        raise Error(Status.INVALID_ARGUMENT,
                    f"{what} {value!r} is not one of {', '.join(table)}")
    if isinstance(value, int) and not isinstance(value, bool) and value in table.values():
        return value
    raise Error(Status.INVALID_ARGUMENT, f"{what} {value!r} is not one of {', '.join(table)}")


def enum_name(table, value):
    for name, v in table.items():
        if v == value:
            return name
    return str(value)


def text(raw):
    return raw.decode("utf-8", "replace")


def struct_to_dict(struct, skip=("struct_size",)):
    out = {}
    for name, ctype in struct._fields_:
        if name in skip:
            continue
        value = getattr(struct, name)
        if isinstance(value, bytes):
            value = text(value)
        elif isinstance(value, ctypes.Array):
            value = list(value)
        out[name] = value
    return out


def model_info_dict(info):
    d = struct_to_dict(info)
    counts = d.pop("tensor_count_by_type")
    lib = _ffi.lib()
    by_type = {}
    for type_id, count in enumerate(counts):
        if count:
            name = text(lib.moestream_type_name(type_id)) if lib.has("moestream_type_name") else str(type_id)
            by_type[name] = count
    d["tensor_count_by_type"] = by_type
    d["io_mode"] = enum_name(IO_MODES, d["io_mode"])
    return d


def stats_dict(stats):
    d = struct_to_dict(stats)
    n = max(0, min(stats.n_layer, _ffi.MAX_LAYERS))
    d["layer_hits"] = d["layer_hits"][:n]
    d["layer_misses"] = d["layer_misses"][:n]
    d["io_mode"] = enum_name(IO_MODES, d["io_mode"])
    return d


def float_buffer(values):
    """(keepalive, pointer, n) for a row of floats, without copying numpy float32 input."""
    if np is not None:
        # asarray, not ascontiguousarray: that makes a scalar (None, 2.0) a row of one.
        arr = np.asarray(values, dtype=np.float32)
        if arr.ndim != 1:
            raise Error(Status.INVALID_ARGUMENT, f"expected a 1-D row of floats, got shape {arr.shape}")
        arr = np.ascontiguousarray(arr)
        return arr, arr.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), int(arr.shape[0])
    values = list(values)
    buf = (ctypes.c_float * len(values))(*values)
    return buf, ctypes.cast(buf, ctypes.POINTER(ctypes.c_float)), len(values)


def int32_buffer(values):
    """(keepalive, pointer, n) for token ids; ids outside int32 are an Error."""
    if np is not None and isinstance(values, np.ndarray):
        values = values.tolist()
    elif isinstance(values, numbers.Integral):
        values = [values]
    elif isinstance(values, (str, bytes, bytearray, memoryview)):
        # Text would step its characters or bytes as ids: tokenize() makes ids of text.
        raise TypeError(f"token ids must be a sequence of integers, not {type(values).__name__}")
    values = [whole_number(v, "token id") for v in values]
    for v in values:
        if not -2**31 <= v < 2**31:
            raise Error(Status.INVALID_ARGUMENT, f"token id {v} does not fit in int32")
    buf = (ctypes.c_int32 * len(values))(*values)
    return buf, ctypes.cast(buf, ctypes.POINTER(ctypes.c_int32)), len(values)


def new_logits(n):
    """(result, pointer) for an output row of n floats."""
    if np is not None:
        arr = np.empty(n, dtype=np.float32)
        return arr, arr.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    buf = (ctypes.c_float * n)()
    return buf, ctypes.cast(buf, ctypes.POINTER(ctypes.c_float))


def new_logits_rows(rows, n):
    """(result, pointer) for rows output rows of n floats each, one after another."""
    if np is not None:
        arr = np.empty((rows, n), dtype=np.float32)
        return arr, arr.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    buf = (ctypes.c_float * (rows * n))()
    return buf, ctypes.cast(buf, ctypes.POINTER(ctypes.c_float))


def finish_logits(result):
    return result if np is not None else list(result)


def finish_logits_rows(result, n):
    if np is not None:
        return result
    flat = list(result)
    return [flat[i:i + n] for i in range(0, len(flat), n)]
