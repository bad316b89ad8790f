#!/usr/bin/python3
"""Exports a job's latest model through Admin.ExportModel with a stock gRPC
client and writes it like `sfl-sim --model-out`: '# sfl model dim=D' then
'index value' (1-based) per nonzero. Decodes the spcodec bytes itself (f64).

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


def decode(b):
    dim, i = varint(b, 0)
    nnz, i = varint(b, i)
    enc = b[i]
    i += 1
    if enc != 0:
        raise ValueError(f"encoding {enc}: only f64 is decoded here")
    idx, last = [], -1
    for _ in range(nnz):
        gap, i = varint(b, i)
        last = gap if last < 0 else last + gap + 1
        idx.append(last)
    vals = struct.unpack_from(f"<{nnz}d", b, i)
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
