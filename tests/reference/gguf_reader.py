"""Independent GGUF (v2/v3) reader over numpy.memmap.

    r = GGUFReader(path)
    r.metadata["general.architecture"]       -> python value (str/int/float/bool/list)
    r.value_types["general.architecture"]    -> (type id, element type id or None)
    r.tensors["blk.0.attn_q.weight"]         -> TensorInfo(name, ne, type, offset, nbytes)
    r.raw("blk.0.attn_q.weight")             -> uint8 view into the file
    r.tensor("blk.0.attn_q.weight")          -> float32 array, numpy shape = reversed ne
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from reference import dequant

# GGUF metadata value types
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, \
    T_UINT64, T_INT64, T_FLOAT64 = range(13)
_SCALAR = {T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h", T_UINT32: "<I", T_INT32: "<i",
           T_FLOAT32: "<f", T_BOOL: "<B", T_UINT64: "<Q", T_INT64: "<q", T_FLOAT64: "<d"}


class GGUFError(ValueError):
    pass


@dataclass
class TensorInfo:
    name: str
    ne: tuple
    type: int
    offset: int       # relative to the data section
    file_offset: int  # absolute
    nbytes: int

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.ne:
            n *= d
        return n


class _Cursor:
    def __init__(self, buf, path):
        self.buf = buf
        self.pos = 0
        self.path = path

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise GGUFError(f"{self.path}: truncated at byte {self.pos} (need {n} more)")
        b = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return b

    def unpack(self, fmt: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        n = self.unpack("<Q")
        return self.take(n).decode("utf-8")


class GGUFReader:
    def __init__(self, path):
        self.path = str(path)
        self.data = np.memmap(self.path, dtype=np.uint8, mode="r")
        c = _Cursor(self.data, self.path)
        if c.take(4) != b"GGUF":
            raise GGUFError(f"{self.path}: bad magic")
        self.version = c.unpack("<I")
        if self.version not in (2, 3):
            raise GGUFError(f"{self.path}: unsupported version {self.version}")
        n_tensors = c.unpack("<q")
        n_kv = c.unpack("<q")
        if n_tensors < 0 or n_kv < 0:
            raise GGUFError(f"{self.path}: negative counts")
        self.metadata: dict = {}
        self.value_types: dict = {}
        for _ in range(n_kv):
            key = c.string()
            if not key or key in self.metadata:
                raise GGUFError(f"{self.path}: empty or duplicate key {key!r}")
            vtype = c.unpack("<I")
            if vtype == T_ARRAY:
                etype = c.unpack("<I")
                count = c.unpack("<Q")
                self.metadata[key] = self._read_array(c, etype, count)
                self.value_types[key] = (T_ARRAY, etype)
            else:
                self.metadata[key] = self._read_scalar(c, vtype)
                self.value_types[key] = (vtype, None)
        self.alignment = 32
        if "general.alignment" in self.metadata:
            if self.value_types["general.alignment"][0] != T_UINT32:
                raise GGUFError(f"{self.path}: general.alignment must be UINT32")
            self.alignment = int(self.metadata["general.alignment"])
            if self.alignment == 0 or self.alignment & (self.alignment - 1):
                raise GGUFError(f"{self.path}: alignment {self.alignment} is not a power of two")
        infos = []
        for _ in range(n_tensors):
            name = c.string()
            n_dims = c.unpack("<I")
            if not 1 <= n_dims <= 4:
                raise GGUFError(f"{self.path}: tensor {name} has {n_dims} dims")
            ne = tuple(c.unpack("<q") for _ in range(n_dims))
            ttype = c.unpack("<I")
            offset = c.unpack("<Q")
            if ttype not in dequant.TYPES:
                raise GGUFError(f"{self.path}: tensor {name} has unsupported type {ttype}")
            n = 1
            for d in ne:
                if d < 0:
                    raise GGUFError(f"{self.path}: tensor {name} has a negative dimension")
                n *= d
            _, be, _ = dequant.TYPES[ttype]
            if ne[0] % be:
                raise GGUFError(f"{self.path}: tensor {name} ne0={ne[0]} not a multiple of block size {be}")
            infos.append((name, ne, ttype, offset, dequant.nbytes(ttype, n)))
        pos = c.pos
        self.data_offset = (pos + self.alignment - 1) // self.alignment * self.alignment if n_tensors else pos
        self.tensors: dict[str, TensorInfo] = {}
        expected = 0
        for name, ne, ttype, offset, nb in infos:
            if name in self.tensors:
                raise GGUFError(f"{self.path}: duplicate tensor {name}")
            if offset != expected:
                raise GGUFError(f"{self.path}: tensor {name} has offset {offset}, expected {expected}")
            if self.data_offset + offset + nb > len(self.data):
                raise GGUFError(f"{self.path}: tensor {name} extends past the end of the file")
            self.tensors[name] = TensorInfo(name, ne, ttype, offset, self.data_offset + offset, nb)
            expected = offset + (nb + self.alignment - 1) // self.alignment * self.alignment

    @staticmethod
    def _read_scalar(c: _Cursor, vtype: int):
        if vtype == T_STRING:
            return c.string()
        if vtype not in _SCALAR:
            raise GGUFError(f"{c.path}: invalid value type {vtype}")
        v = c.unpack(_SCALAR[vtype])
        return bool(v) if vtype == T_BOOL else v

    @staticmethod
    def _read_array(c: _Cursor, etype: int, count: int):
        if etype == T_STRING:
            return [c.string() for _ in range(count)]
        if etype not in _SCALAR:
            raise GGUFError(f"{c.path}: invalid array element type {etype}")
        size = struct.calcsize(_SCALAR[etype])
        arr = np.frombuffer(c.take(size * count), dtype=_SCALAR[etype])
        return [bool(v) for v in arr] if etype == T_BOOL else arr.tolist()

    # ---- accessors ---------------------------------------------------------------------------
    def get(self, key, default=None):
        return self.metadata.get(key, default)

    def raw(self, name: str) -> np.ndarray:
        info = self.tensors[name]
        return self.data[info.file_offset:info.file_offset + info.nbytes]

    def tensor(self, name: str, dtype=np.float32) -> np.ndarray:
        """Dequantised tensor with numpy shape = reversed ne (so [..., ne1, ne0])."""
        info = self.tensors[name]
        flat = dequant.dequantize(np.asarray(self.raw(name)), info.type, info.n_elements)
        return flat.reshape(tuple(reversed(info.ne))).astype(dtype, copy=False)

    def __contains__(self, name):
        return name in self.tensors
