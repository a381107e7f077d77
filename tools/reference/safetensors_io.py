"""tools/reference/safetensors_io.py — safetensors read/write with struct + json.

torch 1.13 (Debian bookworm's python3-torch) has no safetensors package; this is the
format of core/safetensors.h: 8-byte little-endian header length, JSON header
{name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, then the data.
Only the dtypes tessera uses: F32, I32, U8, BF16. numpy has no bfloat16: BF16 tensors are
read as float32 (exact) and written from float32 arrays named in `bf16` (rounded to
nearest even, as kernels/dtype.h does).
"""
import json
import struct

import numpy as np

DTYPES = {"F32": np.float32, "I32": np.int32, "U8": np.uint8, "BF16": np.uint16}
NAMES = {np.dtype(v): k for k, v in DTYPES.items()}


def read(path):
    """Returns ({name: numpy array}, {key: str}); raises ValueError on a bad file."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        raise ValueError(f"{path}: header size {n} exceeds the file")
    header = json.loads(blob[8:8 + n])
    data = memoryview(blob)[8 + n:]
    meta = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, e in header.items():
        dt = np.dtype(DTYPES[e["dtype"]])
        b, en = e["data_offsets"]
        shape = tuple(e["shape"])
        if en > len(data) or en - b != int(np.prod(shape, dtype=np.int64)) * dt.itemsize:
            raise ValueError(f"{path}: tensor {name}: bad data_offsets")
        a = np.frombuffer(data[b:en], dtype=dt).reshape(shape).copy()
        if e["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = a
    return tensors, meta


def to_bf16_bits(a):
    """float32 array -> uint16 bf16 bit patterns, round to nearest even (NaN stays NaN)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def write(path, tensors, meta=None, bf16=()):
    """Writes {name: numpy array} (float32, int32, uint8) and {key: str} metadata; the
    float32 arrays named in bf16 are stored as BF16."""
    header, chunks, off = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        dtype = NAMES[a.dtype]
        if name in bf16:
            a, dtype = to_bf16_bits(a), "BF16"
        raw = a.tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape),
                        "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    if meta:
        header["__metadata__"] = {str(k): str(v) for k, v in meta.items()}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for c in chunks:
            f.write(c)
