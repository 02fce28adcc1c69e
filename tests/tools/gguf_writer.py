"""Minimal GGUF v3 writer for test models.

Usage (streaming; tensor data never has to be in memory all at once):

    w = GGUFWriter(path, alignment=32)
    w.add_string("general.architecture", "qwen3moe")
    w.add_uint32("qwen3moe.block_count", 2)
    w.add_array("tokenizer.ggml.tokens", ValueType.STRING, ["a", "b"])
    w.add_tensor_info("token_embd.weight", [64, 512], GgmlType.Q8_0)
    ...
    w.write_header()                       # KV pairs, tensor infos, padding
    w.write_tensor_data("token_embd.weight", raw_bytes)   # in declaration order
    ...
    w.close()

Layout rules (GGUF v3): little-endian; strings are u64 length + bytes; the data
section starts at the first multiple of `alignment` after the tensor infos;
tensor data are packed in info order, each starting on an `alignment` boundary
and zero-padded to it, so info.offset_i = sum_{j<i} pad(nbytes_j).
"""
from __future__ import annotations

import enum
import struct
from typing import Iterable, Sequence

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
DEFAULT_ALIGNMENT = 32


class ValueType(enum.IntEnum):
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


# struct format of each fixed-size scalar value type (little-endian)
_SCALAR_FMT = {
    ValueType.UINT8: "<B", ValueType.INT8: "<b", ValueType.UINT16: "<H", ValueType.INT16: "<h",
    ValueType.UINT32: "<I", ValueType.INT32: "<i", ValueType.FLOAT32: "<f", ValueType.BOOL: "<?",
    ValueType.UINT64: "<Q", ValueType.INT64: "<q", ValueType.FLOAT64: "<d",
}
_NUMPY_DTYPE = {
    ValueType.UINT8: "<u1", ValueType.INT8: "<i1", ValueType.UINT16: "<u2", ValueType.INT16: "<i2",
    ValueType.UINT32: "<u4", ValueType.INT32: "<i4", ValueType.FLOAT32: "<f4", ValueType.BOOL: "<u1",
    ValueType.UINT64: "<u8", ValueType.INT64: "<i8", ValueType.FLOAT64: "<f8",
}


class GgmlType(enum.IntEnum):
    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q2_K = 10
    Q3_K = 11
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    IQ4_NL = 20
    IQ4_XS = 23
    BF16 = 30
    MXFP4 = 39


# (elements per block, bytes per block)
BLOCK_GEOMETRY = {
    GgmlType.F32: (1, 4), GgmlType.F16: (1, 2), GgmlType.BF16: (1, 2),
    GgmlType.Q4_0: (32, 18), GgmlType.Q4_1: (32, 20), GgmlType.Q5_0: (32, 22),
    GgmlType.Q5_1: (32, 24), GgmlType.Q8_0: (32, 34),
    GgmlType.Q4_K: (256, 144), GgmlType.Q5_K: (256, 176), GgmlType.Q6_K: (256, 210),
    GgmlType.Q2_K: (256, 84), GgmlType.Q3_K: (256, 110), GgmlType.IQ4_NL: (32, 18), GgmlType.IQ4_XS: (256, 136),
    GgmlType.MXFP4: (32, 17),
}


def tensor_nbytes(ne: Sequence[int], ggml_type: int) -> int:
    block_elems, block_bytes = BLOCK_GEOMETRY[GgmlType(ggml_type)]
    if ne[0] % block_elems:
        raise ValueError(f"ne0={ne[0]} is not a multiple of the {GgmlType(ggml_type).name} block size {block_elems}")
    n = (ne[0] // block_elems) * block_bytes
    for d in ne[1:]:
        n *= d
    return n


def pad_to(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def _pack_string(s) -> bytes:
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def _pack_scalar(vtype: ValueType, value) -> bytes:
    if vtype == ValueType.STRING:
        return _pack_string(value)
    return struct.pack(_SCALAR_FMT[vtype], value)


def _pack_array(elem_type: ValueType, values) -> bytes:
    if elem_type == ValueType.ARRAY:
        raise ValueError("nested arrays are not valid GGUF")
    if elem_type == ValueType.STRING:
        parts = [struct.pack("<IQ", elem_type, len(values))]
        parts.extend(_pack_string(v) for v in values)
        return b"".join(parts)
    arr = np.asarray(values)
    if elem_type == ValueType.BOOL:
        arr = arr.astype(bool)
    return struct.pack("<IQ", elem_type, len(arr)) + arr.astype(_NUMPY_DTYPE[elem_type]).tobytes()


class GGUFWriter:
    def __init__(self, path, alignment: int = DEFAULT_ALIGNMENT, write_alignment_key: bool = False):
        if alignment <= 0 or alignment & (alignment - 1):
            raise ValueError("alignment must be a non-zero power of two")
        self.path = str(path)
        self.alignment = alignment
        self._kv: list[tuple[str, bytes]] = []
        self._keys: set[str] = set()
        self._tensors: list[dict] = []  # name, ne, type, nbytes, offset
        self._by_name: dict[str, dict] = {}
        self._next_tensor = 0
        self._file = None
        self._data_offset = None
        if write_alignment_key or alignment != DEFAULT_ALIGNMENT:
            self.add_uint32("general.alignment", alignment)

    # ---- metadata --------------------------------------------------------------------------
    def add_kv(self, key: str, vtype: ValueType, value, elem_type: ValueType | None = None):
        """Adds one KV pair. For ARRAY pass elem_type and a sequence as value."""
        if self._file is not None:
            raise RuntimeError("metadata must be added before write_header()")
        if not key or key in self._keys:
            raise ValueError(f"empty or duplicate key {key!r}")
        vtype = ValueType(vtype)
        body = _pack_string(key) + struct.pack("<I", vtype)
        if vtype == ValueType.ARRAY:
            body += _pack_array(ValueType(elem_type), value)
        else:
            body += _pack_scalar(vtype, value)
        self._keys.add(key)
        self._kv.append((key, body))

    def add_uint8(self, k, v): self.add_kv(k, ValueType.UINT8, v)
    def add_int8(self, k, v): self.add_kv(k, ValueType.INT8, v)
    def add_uint16(self, k, v): self.add_kv(k, ValueType.UINT16, v)
    def add_int16(self, k, v): self.add_kv(k, ValueType.INT16, v)
    def add_uint32(self, k, v): self.add_kv(k, ValueType.UINT32, v)
    def add_int32(self, k, v): self.add_kv(k, ValueType.INT32, v)
    def add_uint64(self, k, v): self.add_kv(k, ValueType.UINT64, v)
    def add_int64(self, k, v): self.add_kv(k, ValueType.INT64, v)
    def add_float32(self, k, v): self.add_kv(k, ValueType.FLOAT32, v)
    def add_float64(self, k, v): self.add_kv(k, ValueType.FLOAT64, v)
    def add_bool(self, k, v): self.add_kv(k, ValueType.BOOL, bool(v))
    def add_string(self, k, v): self.add_kv(k, ValueType.STRING, v)

    def add_array(self, key: str, elem_type: ValueType, values):
        self.add_kv(key, ValueType.ARRAY, values, elem_type=elem_type)

    # ---- tensors ---------------------------------------------------------------------------
    def add_tensor_info(self, name: str, ne: Sequence[int], ggml_type: int):
        """Declares a tensor; ne is in GGUF order (ne[0] contiguous)."""
        if self._file is not None:
            raise RuntimeError("tensors must be declared before write_header()")
        if name in self._by_name:
            raise ValueError(f"duplicate tensor {name}")
        if len(name.encode()) >= 64:
            raise ValueError(f"tensor name too long: {name}")
        ne = [int(d) for d in ne]
        if not 1 <= len(ne) <= 4:
            raise ValueError(f"{name}: 1..4 dims required")
        nbytes = tensor_nbytes(ne, ggml_type)
        offset = 0
        if self._tensors:
            last = self._tensors[-1]
            offset = last["offset"] + pad_to(last["nbytes"], self.alignment)
        info = dict(name=name, ne=ne, type=int(ggml_type), nbytes=nbytes, offset=offset, written=0)
        self._tensors.append(info)
        self._by_name[name] = info

    def write_header(self):
        self._file = open(self.path, "wb")
        f = self._file
        f.write(GGUF_MAGIC)
        f.write(struct.pack("<IQQ", GGUF_VERSION, len(self._tensors), len(self._kv)))
        for _, body in self._kv:
            f.write(body)
        for t in self._tensors:
            f.write(_pack_string(t["name"]))
            f.write(struct.pack("<I", len(t["ne"])))
            f.write(struct.pack(f"<{len(t['ne'])}q", *t["ne"]))
            f.write(struct.pack("<IQ", t["type"], t["offset"]))
        pos = f.tell()
        if self._tensors:
            f.write(b"\0" * (pad_to(pos, self.alignment) - pos))
        self._data_offset = f.tell()

    def write_tensor_data(self, name: str, data):
        """Writes (part of) the data of the next tensor in declaration order.

        May be called several times per tensor with consecutive chunks; padding is
        added automatically once the tensor is complete."""
        if self._file is None:
            raise RuntimeError("write_header() first")
        if self._next_tensor >= len(self._tensors):
            raise RuntimeError(f"no more declared tensors (got {name})")
        info = self._tensors[self._next_tensor]
        if info["name"] != name:
            raise RuntimeError(f"tensor data out of order: expected {info['name']}, got {name}")
        buf = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
        if info["written"] + len(buf) > info["nbytes"]:
            raise ValueError(f"{name}: {info['written'] + len(buf)} bytes written, tensor has {info['nbytes']}")
        self._file.write(buf)
        info["written"] += len(buf)
        if info["written"] == info["nbytes"]:
            pad = pad_to(info["nbytes"], self.alignment) - info["nbytes"]
            self._file.write(b"\0" * pad)
            self._next_tensor += 1

    def close(self):
        if self._file is None:
            self.write_header()
        if self._next_tensor != len(self._tensors):
            missing = self._tensors[self._next_tensor]["name"]
            self._file.close()
            raise RuntimeError(f"tensor {missing} (and maybe later ones) never written")
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None and self._file is not None:
            self._file.close()
            return False
        self.close()
        return False

    @property
    def tensors(self):
        return list(self._tensors)
