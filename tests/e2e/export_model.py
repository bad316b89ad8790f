#!/usr/bin/python3
"""Exports a job's latest model through Admin.ExportModel with a stock gRPC
client and writes it like `sfl-sim --model-out`: '# sfl model dim=D' then
'index value' (1-based) per nonzero. Decodes the spcodec bytes itself (f64,
every layout of spcodec.h: an independent reading of its format).

    export_model.py STUBS_DIR HOST:PORT SERVER_NAME PKI_DIR ADMIN_NAME JOB_ID OUT"""
import struct
import sys

from interop import channel


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def rice_gaps(b, i, n, k):
    """n Rice codes with parameter k from bit stream b[i:] (LSB first);
    returns the values and the index of the byte after the padding."""
    pos, out = i * 8, []
    bit = lambda p: (b[p >> 3] >> (p & 7)) & 1
    for _ in range(n):
        q = 0
        while bit(pos) == 0:
            q += 1
            pos += 1
        pos += 1
        low = 0
        for j in range(k):
            low |= bit(pos) << j
            pos += 1
        out.append((q << k) | low)
    return out, (pos + 7) // 8


def positions(gaps):
    idx, last = [], -1
    for g in gaps:
        last = last + g + 1
        idx.append(last)
    return idx


def decode(b):
    """spcodec bytes (libsfl/include/sfl/wire/spcodec.h), f64 values only."""
    dim, i = varint(b, 0)
    nnz, i = varint(b, i)
    enc, layout = b[i] & 3, b[i] >> 2
    i += 1
    if enc != 0:
        raise ValueError(f"encoding {enc}: only f64 is decoded here")
    if layout == 0:
        gaps = []
        for _ in range(nnz):
            g, i = varint(b, i)
            gaps.append(g)
        idx = positions(gaps)
    elif layout == 1:
        idx = list(range(dim))
    elif layout == 2:
        idx = [p for p in range(dim) if (b[i + p // 8] >> (p % 8)) & 1]
        i += (dim + 7) // 8
    elif 3 <= layout < 33:
        gaps, i = rice_gaps(b, i, nnz, layout - 3)
        idx = positions(gaps)
    elif 33 <= layout < 63:
        gaps, i = rice_gaps(b, i, dim - nnz, layout - 33)
        zero = set(positions(gaps))
        idx = [p for p in range(dim) if p not in zero]
    else:
        raise ValueError(f"layout {layout} refused")
    if len(idx) != nnz:
        raise ValueError(f"layout {layout}: {len(idx)} indices for nnz {nnz}")
    vals = struct.unpack_from(f"<{nnz}d", b, i)
    if i + 8 * nnz != len(b):
        raise ValueError("trailing or missing bytes")
    return dim, idx, vals


def main():
    stubs, target, server_name, pki, admin, job, out = sys.argv[1:8]
    sys.path.insert(0, stubs)
    from sfl.v1 import admin_pb2, admin_pb2_grpc
    with channel(target, server_name, pki, "admin", admin) as ch:
        r = admin_pb2_grpc.AdminStub(ch).ExportModel(
            admin_pb2.ExportModelRequest(job_id=int(job)), timeout=10)
    dim, idx, vals = decode(r.model.data)
    with open(out, "w") as f:
        f.write(f"# sfl model dim={dim}\n")
        for j, v in zip(idx, vals):
            if v != 0:
                f.write(f"{j + 1} {v!r}\n")
    print(f"exported job {job} round {r.round}: {len(idx)} nonzeros")
    return 0


if __name__ == "__main__":
    sys.exit(main())
