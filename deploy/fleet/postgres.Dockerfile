# sfl-postgres: PostgreSQL 15 from Debian 12's own packages, for the fleet's
# shared store (docker-compose.fleet.yml; docs/operations.md, "A fleet on
# PostgreSQL"). The FROM is the same locally made Debian base as the sfl
# image's (make docker-base: no registry).
#
#   docker-compose -f docker-compose.fleet.yml build postgres
#
# The server runs as the user postgres with uid/gid 10001 (the sfl image's
# uid), made before the package is installed so the package keeps it: the
# certificate and password the pki service writes (mode 0600, owner 10001)
# are readable here. Its entrypoint (deploy/fleet/postgres-entrypoint.sh)
# runs initdb into the volume on the first start and only ever accepts
# TLS connections with a SCRAM password from the network.
ARG DEBIAN_TAG=12.11-slim
FROM debian:${DEBIAN_TAG}
# hadolint ignore=DL3008
RUN groupadd --gid 10001 postgres \
 && useradd --uid 10001 --gid postgres --home-dir /var/lib/postgresql --create-home \
        --shell /bin/sh postgres \
 && apt-get update \
 && apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && install -d -o postgres -g postgres -m 0700 /var/lib/postgresql/data \
 && install -d -o postgres -g postgres -m 2775 /run/postgresql
COPY deploy/fleet/postgres-entrypoint.sh /usr/local/bin/sfl-postgres
ENV PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data/pgdata \
    SFL_PG_SECRET_DIR=/pgsecret \
    SFL_PKI_DIR=/pki
USER 10001:10001
WORKDIR /var/lib/postgresql
EXPOSE 5432
HEALTHCHECK --interval=5s --timeout=5s --start-period=30s --retries=5 \
    CMD ["sfl-postgres", "health"]
ENTRYPOINT ["sfl-postgres"]
CMD ["run"]
