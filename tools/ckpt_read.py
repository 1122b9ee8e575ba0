#!/usr/bin/env python3
"""Reads a vdnn checkpoint (format: docs/checkpoint.md) into a dict of NumPy arrays."""
import struct
import sys
import zlib

import numpy as np


# dtype codes: the parameters are float32; the table of algorithms in use is int32
DTYPES = {0: "<f4", 1: "<i4"}


def read_checkpoint(path):
    data = open(path, "rb").read()
    if data[:8] != b"VDNNCKPT":
        raise ValueError(f"{path}: not a vdnn checkpoint")
    version, header_bytes = struct.unpack_from("<II", data, 8)
    if version != 1:
        raise ValueError(f"{path}: version {version}, this script reads 1")
    if zlib.crc32(data[:-4]) != struct.unpack_from("<I", data, len(data) - 4)[0]:
        raise ValueError(f"{path}: checksum mismatch")
    step, epoch, index, seed, batch, count = struct.unpack_from("<QQQQII", data, 16)
    meta = dict(step=step, epoch=epoch, index=index, seed=seed, batch=batch)
    pos, tensors = 16 + header_bytes, {}
    for _ in range(count):
        (name_len,) = struct.unpack_from("<I", data, pos)
        name = data[pos + 4:pos + 4 + name_len].decode()
        pos += 4 + name_len
        dtype, ndim = struct.unpack_from("<II", data, pos)
        dims = struct.unpack_from(f"<{ndim}I", data, pos + 8)
        (nbytes,) = struct.unpack_from("<Q", data, pos + 8 + 4 * ndim)
        pos += 16 + 4 * ndim
        if dtype not in DTYPES:
            raise ValueError(f"{path}: tensor {name} has dtype {dtype} (0 float32 and 1 int32 exist)")
        tensors[name] = np.frombuffer(data, DTYPES[dtype], nbytes // 4, pos).reshape(dims)
        pos += nbytes
    return meta, tensors


if __name__ == "__main__":
    meta, tensors = read_checkpoint(sys.argv[1])
    print(meta)
    for name, t in tensors.items():
        print(f"{name:32s} {str(t.shape):20s} mean {t.mean():+.5f} std {t.std():.5f}")
