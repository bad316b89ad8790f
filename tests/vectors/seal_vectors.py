#!/usr/bin/env python3
"""Golden vectors for libsfl/src/crypto/seal.c, computed independently of libsfl
with python3-cryptography (Ed25519) and hashlib (BLAKE2b-256) from the layout
documented in libsfl/include/sfl/crypto/seal.h. Run from the source root:
    python3 tests/vectors/seal_vectors.py
It rewrites tests/vectors/seal_*.bin / .key and prints the C arrays that
tests/unit/test_seal.c embeds."""
import hashlib
import struct

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

# RFC 8032 section 7.1, test 1.
SEED = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")


def h256(b):
    return hashlib.blake2b(b, digest_size=32).digest()


def detached_bytes(context, msg):
    c = context.encode()
    return bytes([len(c)]) + c + h256(msg)


def update_bytes(round_pk, job, rnd, nonce, agent_id, model_hash, payload):
    return (bytes([10]) + b"sfl-upd-v1" + round_pk + struct.pack("<Q", job) +
            struct.pack("<Q", rnd) + nonce + struct.pack("<Q", agent_id) + model_hash +
            h256(payload))


def c_array(name, b):
    lines = []
    for i in range(0, len(b), 12):
        lines.append("    " + ", ".join("0x%02x" % x for x in b[i:i + 12]) + ",")
    return "static const uint8_t %s[%d] = {\n%s\n};" % (name, len(b), "\n".join(lines))


def main():
    sk = Ed25519PrivateKey.from_private_bytes(SEED)
    pk = sk.public_key().public_bytes_raw()
    round_pk = bytes(range(32))
    nonce = bytes(0x40 + i for i in range(32))
    model_hash = h256(b"global model bytes")
    payload = b"sparse update payload"
    upd = update_bytes(round_pk, 0x0102030405060708, 42, nonce, 7, model_hash, payload)
    assert len(upd) == 163
    upd_sig = sk.sign(upd)
    task = detached_bytes("sfl-task-v1", b"task message")
    task_sig = sk.sign(task)
    keyfile = ("sfl-identity-v1\n" + SEED.hex() + "\n" + pk.hex() + "\n").encode()
    assert len(keyfile) == 146

    out = {"seal_upd_signed.bin": upd, "seal_upd_sig.bin": upd_sig,
           "seal_task_sig.bin": task_sig, "seal_identity_v1.key": keyfile}
    for name, b in out.items():
        with open("tests/vectors/" + name, "wb") as f:
            f.write(b)
    print(c_array("golden_model_hash", model_hash))
    print(c_array("golden_upd_signed", upd))
    print(c_array("golden_upd_sig", upd_sig))
    print(c_array("golden_task_sig", task_sig))


if __name__ == "__main__":
    main()
