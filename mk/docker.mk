# make test-docker: the image built and the docker-compose federation run on
# a private Docker engine in a network namespace of its own
# (tests/docker/compose.sh, as root; about 2 minutes), then the fleet of
# docker-compose.fleet.yml (PostgreSQL, 2 masters, 3 front-ends; a few more).
# The engine and its tools come from Debian: docker.io (dockerd, containerd,
# runc), docker-compose 1.29 and debootstrap, which makes the base image when
# no registry can be reached, and prometheus, which scrapes the federation
# for the Grafana dashboard's queries. `make deps-docker` installs them only.
# The script ends with PASS, FAIL or SKIP (exit 77: the engine cannot run
# here, e.g. not root); a SKIP does not fail the target.
DOCKER_PKGS := docker.io docker-compose debootstrap prometheus
# Seconds the whole test may take (the script bounds each of its waits too).
DOCKER_TIMEOUT ?= 3600

# make docker-base: the Dockerfile's FROM image (debian:$DEBIAN_TAG) made
# with debootstrap and imported into the running engine under that name,
# so `docker-compose build` and `up` need no registry (root; the engine is
# the system's: DOCKER_HOST as usual; deploy/docker/base-image.sh).
.PHONY: deps-docker test-docker docker-base

deps-docker:
	@./mk/deps.sh $(DOCKER_PKGS)

docker-base:
	@./mk/deps.sh debootstrap
	$(Q)./deploy/docker/base-image.sh

test-docker: deps-docker
	$(Q)rc=0; timeout --foreground -k 60 $(DOCKER_TIMEOUT) ./tests/docker/compose.sh || rc=$$?; \
	    [ $$rc -eq 0 ] || [ $$rc -eq 77 ]
