# sfl: one image for sfl-coordinator, sfl-agent, sflctl and sfl-sim; the
# command picks the role (coordinator, agent, pki, data, ctl, sim; see
# deploy/docker/entrypoint.sh and docs/docker.md).
#
#   sudo make docker-base      (debian:$DEBIAN_TAG without a registry)
#   docker-compose build       (or: docker build -t sfl:local .)
#   docker-compose up -d --scale agent=8
#
# Base: Debian 12 (bookworm), the distribution the Makefile's package lists
# are written for. The tag is pinned to a point release; bump it together
# with the package lists.
ARG DEBIAN_TAG=12.11-slim

# ---- build: the Makefile's BUILD_PKGS, then `make` (the tests are not run here)
FROM debian:${DEBIAN_TAG} AS build
# Versions are not pinned: bookworm's security updates should reach the image.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        build-essential pkg-config libprotobuf-c-dev protobuf-c-compiler \
        libuv1-dev libssl-dev libnghttp2-dev libsodium-dev libsqlite3-dev libpq-dev \
        libinih-dev libopenblas-dev liblapacke-dev zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN make all \
 && install -d /out \
 && install -m 0755 -s build/sfl-coordinator build/sfl-agent build/sflctl build/sfl-sim /out/ \
 && install -m 0755 build/sfl-pki /out/sfl-pki \
 && install -m 0755 deploy/docker/entrypoint.sh /out/sfl-entrypoint

# ---- runtime: the shared libraries the programs link (ldd, dpkg -S), openssl
# for sfl-pki, and nothing else; bash and coreutils come with the base.
FROM debian:${DEBIAN_TAG}
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        libuv1 libssl3 libnghttp2-14 libsodium23 libprotobuf-c1 libsqlite3-0 libpq5 \
        libinih1 libopenblas0-pthread liblapacke zlib1g openssl \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 sfl \
 && useradd --uid 10001 --gid sfl --home-dir /var/lib/sfl --no-create-home \
        --shell /usr/sbin/nologin sfl \
 && install -d -o sfl -g sfl -m 0700 /var/lib/sfl /var/lib/sfl-agent /pki /data \
        /fleet /pgsecret
# Named and anonymous volumes mounted on these directories start as copies of
# them, owned by sfl: the services never need root. /fleet and /pgsecret:
# the fleet's identity and PostgreSQL secrets (docker-compose.fleet.yml).
COPY --from=build /out/ /usr/local/bin/
ENV SFL_BIN_DIR=/usr/local/bin \
    SFL_PKI_DIR=/pki \
    SFL_DATA_DIR=/data \
    SFL_STATE_DIR=/var/lib/sfl \
    SFL_AGENT_STATE_DIR=/var/lib/sfl-agent
USER 10001:10001
WORKDIR /var/lib/sfl
# 7443: gRPC over mutual TLS; 7444: admin_listen (sflctl, mutual TLS);
# 9464: Prometheus /metrics (plain HTTP).
EXPOSE 7443 7444 9464
# The coordinator: GET /metrics answers; an agent: its shard lease is fresh;
# other roles: healthy. No curl in the image: the check uses bash's /dev/tcp.
HEALTHCHECK --interval=15s --timeout=6s --start-period=20s --retries=3 \
    CMD ["sfl-entrypoint", "health"]
ENTRYPOINT ["sfl-entrypoint"]
CMD ["help"]
