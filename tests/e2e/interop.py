#!/usr/bin/python3
"""Interop: a stock gRPC client (python3-grpcio) with stubs generated from
proto/ by protoc's Python and gRPC plugins calls Join and Admin.Status on a
running sfl-coordinator over mutual TLS.

grpcio cannot export TLS keying material (RFC 8446 section 7.5), so it
cannot make Join's proof of possession (JoinRequest.join_proof): its Join,
presenting a public key alone, must be refused with PERMISSION_DENIED naming
join_proof, which is also what a caller that copied an agent's public key
gets (docs/security.md, "Binding and revocation").

    interop.py STUBS_DIR HOST:PORT SERVER_NAME PKI_DIR AGENT_NAME ADMIN_NAME

Exits 0 on success; prints what failed and exits 1 otherwise."""
import os
import sys

import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat


def channel(target, server_name, pki, kind, name):
    def read(p):
        with open(os.path.join(pki, p), "rb") as f:
            return f.read()
    creds = grpc.ssl_channel_credentials(
        root_certificates=read("ca.crt"),
        private_key=read(f"{kind}/{name}.key"),
        certificate_chain=read(f"{kind}/{name}.crt"))
    opts = [("grpc.ssl_target_name_override", server_name)]
    return grpc.secure_channel(target, creds, options=opts)


def main():
    stubs, target, server_name, pki, agent, admin = sys.argv[1:7]
    sys.path.insert(0, stubs)
    from sfl.v1 import admin_pb2, admin_pb2_grpc, common_pb2, coordinator_pb2
    from sfl.v1 import coordinator_pb2_grpc

    key = Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    with channel(target, server_name, pki, "agent", agent) as ch:
        stub = coordinator_pb2_grpc.CoordinatorStub(ch)
        try:
            reply = stub.Join(coordinator_pb2.JoinRequest(
                identity_key=key, conditions=["mains_power"], protocol_version=2,
                agent_version="interop.py",
                dataset=common_pb2.DatasetSummary(samples=10, dimension=5)), timeout=10)
            print(f"FAIL: a Join without join_proof was accepted: {reply}")
            return 1
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.PERMISSION_DENIED or "join_proof" not in e.details():
                print(f"FAIL: Join without join_proof: {e.code()} {e.details()}")
                return 1
            print(f"Join without join_proof: {e.code().name} {e.details()!r}")
        # The admin service refuses an agent certificate.
        try:
            admin_pb2_grpc.AdminStub(ch).Status(admin_pb2.StatusRequest(), timeout=10)
            print("FAIL: Admin.Status allowed with an agent certificate")
            return 1
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.PERMISSION_DENIED:
                print(f"FAIL: Admin.Status as agent: {e.code()} {e.details()}")
                return 1
    with channel(target, server_name, pki, "admin", admin) as ch:
        st = admin_pb2_grpc.AdminStub(ch).Status(admin_pb2.StatusRequest(), timeout=10)
        print(f"Admin.Status: version={st.version!r} connected_agents={st.connected_agents}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
