# sfl — sparse federated learning.  `make help` lists the targets.
#
#   make            build libsfl, programs (build/)
#   make test       unit tests, again under ASan+UBSan, e2e tests, 4 s per fuzzer
#                   (two suites, scripts or fuzzers at a time: SFL_JOBS)
#   make layers     every include of libsfl/, server/, ctl/, client-agent/, sim/
#                   checked against the layers (tests/layers.py; in make test)
#   make fuzz       every fuzzer for FUZZ_SECONDS (60) seconds
#   make test-docker the image built and the compose federation run for real
#   make docker-base the Dockerfile's base image made with debootstrap and
#                   imported, so docker-compose build needs no registry
#   make test-cross unit tests cross-built for arm64 and armhf, run under qemu
#   make test-monitoring the Grafana dashboard, scrape config and alerts
#                   (deploy/monitoring/) against a live coordinator, with prometheus
#   make demo       a coordinator and 8 agents on loopback, then simulations
#   make bench      micro and macro benchmarks (figures to stdout)
#   make soak       the coordinator killed -9 SOAK_KILLS (100) times mid-job, and the
#                   leading round master SOAK_HA_KILLS (50) times (ha_soak.sh)
#   make footprint  the arm64 agent's size and peak RSS (d = 1e5, under qemu)
#   make bench-peer Flower (FLOWER_SRC: its v1.10.0 tag) and sfl on the same
#                   job -> results/peer-flower.md
#   make reproduce  the papers' experiments -> results/REPORT.md
#   make install    PREFIX=/usr/local DESTDIR= (LIBDIR, UNITDIR, MANDIR, DOCDIR):
#                   programs, libsfl.so and .a, headers, sfl.pc (docs/library.md)
#
# V=1 shows full command lines. Cross builds for a Raspberry Pi, programs in
# build/<triplet>/ (deploy/raspberrypi/README.md):
#   make CROSS=aarch64-linux-gnu-   64-bit OS: Pi 3, 4, 5, Zero 2 W
#                                   -> build/aarch64-linux-gnu/sfl-agent
#   make CROSS=arm-linux-gnueabihf- 32-bit OS on ARMv7 and later: Pi 2, 3, 4,
#                                   Zero 2 W -> build/arm-linux-gnueabihf/sfl-agent
# Both link against a Debian bookworm sysroot, build/sysroot-<arch>, that
# mk/sysroot.sh unpacks from the archive; the host's packages stay as they are.

CROSS   ?=
CC      := $(CROSS)gcc
AR      := $(CROSS)ar
PREFIX  ?= /usr/local
DESTDIR ?=
BUILD   ?= build
PYTHON  ?= /usr/bin/python3

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS  ?= -O2 -g
# _FILE_OFFSET_BITS=64: 64-bit off_t and inode numbers on 32-bit targets
# (armhf), so data files over 2 GiB open and readdir works on file systems
# with 64-bit directory cookies (ext4 seen by an armhf process under
# qemu-user); no effect on 64-bit targets. time_t stays 32-bit on bookworm
# armhf: its libraries are built that way (docs: deploy/raspberrypi).
ALL_CFLAGS := -std=c11 -D_POSIX_C_SOURCE=200809L -D_FILE_OFFSET_BITS=64 $(WARN) -MMD -MP \
              -Ilibsfl/include -Ilibsfl/src $(CFLAGS)
# SFL_LIBS: what libsfl itself links (libsfl.so's NEEDED, sfl.pc); the
# programs add the coordinator's store.
SFL_LIBS := -linih -luv -lnghttp2 -lssl -lcrypto -lsodium -lprotobuf-c \
            -llapacke -llapack -lblas -lz -lm
LDLIBS  := -lsqlite3 -lpq $(SFL_LIBS)

ifeq ($(SAN),1)
ifneq ($(CROSS),)
$(error SAN=1 with CROSS: the sanitizers' runtimes do not run under qemu-user; use one or the other)
endif
# clang, with libFuzzer's coverage hooks (-fsanitize=fuzzer-no-link), so the
# fuzzers (mk/fuzz.mk) link against these same libraries: one sanitized
# build of the tree, not two (make test on a busy 2-core machine: the
# fuzzers' own build of it took 80-90 s). Without libFuzzer linked the hooks
# call the sanitizer runtime's empty defaults; they make CPU-bound suites
# slower (test_bcfw 1 s -> 3 s), not different.
SAN_CC  ?= clang
CC      := $(SAN_CC)
BUILD   := build/asan
ALL_CFLAGS += -O1 -fsanitize=address,undefined -fno-omit-frame-pointer \
              -fno-sanitize-recover=all -fsanitize=fuzzer-no-link
LDFLAGS += -fsanitize=address,undefined
endif

ifeq ($(V),1)
Q :=
else
Q := @
endif

# Debian packages (DESIGN.md section 2). Build needs the first list, tests the
# second, `make reproduce` the third, `make install` the fourth (man pages),
# `make footprint` the fifth.
BUILD_PKGS := build-essential pkg-config libprotobuf-c-dev protobuf-c-compiler \
              libuv1-dev libssl-dev libnghttp2-dev libsodium-dev libsqlite3-dev libpq-dev \
              libinih-dev libopenblas-dev liblapacke-dev zlib1g-dev
TEST_PKGS  := libcmocka-dev postgresql-15 openssl python3-grpcio python3-protobuf python3-cryptography python3-numpy python3-h2 iproute2 docker-compose \
              protobuf-compiler protobuf-compiler-grpc chromium python3-pil gnuplot-nox
REPRO_PKGS := gnuplot-nox python3-sklearn
INSTALL_PKGS := help2man
FOOTPRINT_PKGS := time
# SAN=1 builds (and the fuzzers: mk/fuzz.mk) need clang and its runtimes.
SAN_PKGS := clang libclang-rt-14-dev
ifeq ($(SAN),1)
BUILD_PKGS += $(SAN_PKGS)
endif
# bench/peer/flower.sh: Flower 1.10.0's imports and the nftables counters.
PEER_PKGS := python3-numpy python3-grpcio python3-protobuf python3-cryptography \
             python3-pycryptodome python3-tomli nftables

# Cross builds: Debian's cross gcc (gcc-<triplet>, a host package) with
# --sysroot=$(SYSROOT), a root that mk/sysroot.sh unpacks from Debian
# bookworm's packages of that one architecture (CROSS_LIBS and libcmocka-dev,
# with their dependencies) through a private apt configuration. Its versions
# come from one Release of one architecture, so they agree with each other
# whatever the host has; the host's dpkg architectures and packages are not
# touched (no multiarch: a mirror whose armhf libssl-dev lagged the native
# one made that fail). The .debs stay in $(SYSROOT).apt/, and a sysroot that
# is up to date costs nothing; SYSROOT_UPDATE=1 fetches the indexes again.
# SYSROOT=DIR uses a root you made yourself (a Raspberry Pi OS image, say)
# as it is.
# BLAS/LAPACK: the reference liblapacke-dev, liblapack-dev and libblas-dev
# (same sonames as OpenBLAS's, so on the device libopenblas0 can replace
# libblas3 and liblapack3 at run time through the alternatives). protoc-c
# runs on the host.
# Objects go to build/<triplet>, apart from native ones; unit tests run under
# qemu-user-static, invoked explicitly (no binfmt_misc needed), with the
# sysroot's loader and libraries (QEMU_LD_PREFIX, default $(SYSROOT)).
CROSS_ARCH_aarch64-linux-gnu   := arm64
CROSS_ARCH_arm-linux-gnueabihf := armhf
CROSS_QEMU_aarch64-linux-gnu   := qemu-aarch64-static
CROSS_QEMU_arm-linux-gnueabihf := qemu-arm-static
CROSS_LIBS := libc6-dev libinih-dev libsqlite3-dev libpq-dev libuv1-dev libnghttp2-dev libssl-dev \
              libsodium-dev libprotobuf-c-dev liblapacke-dev liblapack-dev libblas-dev \
              zlib1g-dev
SYSROOT_PKGS := $(CROSS_LIBS) libcmocka-dev
sysroot_of = build/sysroot-$(CROSS_ARCH_$(1))
# Seconds one unit suite may take under emulation before it counts as failed
# (CROSS_TIMEOUT overrides): only a hang should reach it, so ten times the
# slowest suite on a loaded 2-core machine (load 7), test_secagg: 122 s
# under qemu-aarch64, 661 s under qemu-arm (32-bit limbs in libsodium's
# X25519, 5 times arm64's work; 16 s natively).
CROSS_TIMEOUT_aarch64-linux-gnu   := 1200
CROSS_TIMEOUT_arm-linux-gnueabihf := 7200

ifneq ($(CROSS),)
TRIPLET  := $(patsubst %-,%,$(CROSS))
DEB_ARCH := $(CROSS_ARCH_$(TRIPLET))
QEMU     := $(CROSS_QEMU_$(TRIPLET))
ifeq ($(DEB_ARCH),)
$(error CROSS=$(CROSS): unknown target; known: aarch64-linux-gnu- arm-linux-gnueabihf-)
endif
ifeq ($(origin BUILD),file)
BUILD    := build/$(TRIPLET)
endif
ifeq ($(origin SYSROOT),undefined)
SYSROOT  := $(call sysroot_of,$(TRIPLET))
SYSROOT_STAMP := $(SYSROOT)/.sfl-sysroot
endif
CC       := $(CROSS)gcc --sysroot=$(abspath $(SYSROOT))
QEMU_LD_PREFIX ?= $(abspath $(SYSROOT))
CROSS_TIMEOUT ?= $(CROSS_TIMEOUT_$(TRIPLET))
BUILD_PKGS := make gcc-$(TRIPLET) protobuf-c-compiler
# What mk/sysroot.sh runs (and the archive's key it checks Release with).
SYSROOT_TOOLS := apt dpkg coreutils debian-archive-keyring
# The unit suites under qemu call host tools (openssl, python3); the e2e
# tests' browser, plotter and compose are not needed there.
TEST_PKGS  := $(filter-out libcmocka-dev chromium python3-pil gnuplot-nox docker-compose,$(TEST_PKGS)) \
              qemu-user-static
NATIVE_ONLY := $(filter test e2e demo bench soak reproduce,$(MAKECMDGOALS))
ifneq ($(NATIVE_ONLY),)
$(error make $(NATIVE_ONLY) runs native programs; with CROSS use make test-cross)
endif
endif

# Algorithm plug-ins: EXTRA_ALGOS=FILE.c ... builds more algorithms into
# libsfl and so into every program (each file defines its sfl_algo_t
# tables as `const sfl_algo_t sfl_algo_NAME = {`; docs/design.md section 3),
# in a build directory of their own so the plain build stays as it is.
# Only the registry (algo.c) and the plug-ins differ between the two: every
# other object is the plain build's (OBJ), so a plug-in build compiles
# those files and links.
EXTRA_ALGOS ?=
OBJ := $(BUILD)
ifneq ($(strip $(EXTRA_ALGOS)),)
override BUILD := $(BUILD)/extra
endif
ALGO_INC := $(BUILD)/gen-algo/algos_extra.inc

# libsfl's layers are its header folders, libsfl/include/sfl/LAYER/ (and
# libsfl/src/LAYER/); tests/layers.py holds which may include which (one
# table, LIBSFL_BELOW, that must name exactly these folders) and checks it,
# with the programs' folders, from the -I flags these rules give each file.
SFL_LAYERS := $(patsubst libsfl/include/sfl/%/,%,$(wildcard libsfl/include/sfl/*/))
ALGO_SRC := libsfl/src/algo/algo.c
LIB_SRC  := $(sort $(wildcard libsfl/src/*/*.c)) $(EXTRA_ALGOS)
LIB_OBJ  := $(patsubst %.c,$(OBJ)/%.o,$(filter-out $(ALGO_SRC) $(EXTRA_ALGOS),$(LIB_SRC))) \
            $(patsubst %.c,$(BUILD)/%.o,$(ALGO_SRC) $(EXTRA_ALGOS))
LIB      := $(BUILD)/libsfl.a

# Wire messages: protoc-c turns proto/sfl/v1/*.proto into C under
# $(OBJ)/gen (per build directory, so a SAN=1 build never races a plain
# one), compiled into libsfl. Only libsfl/src/wire/ includes the generated
# headers (STYLE rule 1), so only those objects wait for generation and see
# -I$(GEN). Generated files are never committed.
PROTOC_C  ?= protoc-c
GEN       := $(OBJ)/gen
PROTO_SRC := $(sort $(wildcard proto/sfl/v1/*.proto))
PROTO_C   := $(PROTO_SRC:proto/%.proto=$(GEN)/%.pb-c.c)
PROTO_H   := $(PROTO_C:.c=.h)
PROTO_OBJ := $(PROTO_C:.c=.o)
WIRE_OBJ  := $(filter $(OBJ)/libsfl/src/wire/%,$(LIB_OBJ))

SIM      := $(BUILD)/sfl-sim
SIM_SRC  := $(sort $(wildcard sim/*.c))
SIM_OBJ  := $(SIM_SRC:%.c=$(OBJ)/%.o)

# Program modules: everything in server/ (and its folders), ctl/ (sflctl) and
# client-agent/ except the mains (main_*.c) is a library the unit tests
# link too. Server headers are named from server/ ("job/round.h").
# server/job/ is the coordinator's pure job logic (spec, [job] sections,
# model and aggregator, round machine), a library of its own that sflctl
# links too (its job files are checked as CreateJob would).
JOB_SRC := $(sort $(wildcard server/job/*.c))
JOB_OBJ := $(JOB_SRC:%.c=$(OBJ)/%.o)
JOB_LIB := $(BUILD)/libjob.a
COORD_SRC := $(filter-out server/main_%.c $(JOB_SRC),$(sort $(wildcard server/*.c server/*/*.c)))
COORD_OBJ := $(COORD_SRC:%.c=$(OBJ)/%.o)
COORD_LIB := $(BUILD)/libcoord.a
CTL_SRC := $(filter-out ctl/main_%.c,$(sort $(wildcard ctl/*.c)))
CTL_OBJ := $(CTL_SRC:%.c=$(OBJ)/%.o)
CTL_LIB := $(BUILD)/libctl.a
AGENT_SRC := $(filter-out client-agent/main_%.c,$(sort $(wildcard client-agent/*.c)))
AGENT_OBJ := $(AGENT_SRC:%.c=$(OBJ)/%.o)
AGENT_LIB := $(BUILD)/libagent.a
PROG_LIBS := $(if $(CTL_SRC),$(CTL_LIB)) $(if $(COORD_SRC),$(COORD_LIB)) $(if $(JOB_SRC),$(JOB_LIB)) \
             $(if $(AGENT_SRC),$(AGENT_LIB))

UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
UNIT_HELPERS := $(filter-out $(UNIT_SRC),$(wildcard tests/unit/*.c))

BENCH_SRC := $(sort $(wildcard bench/bench_*.c))
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

AGENT_BIN  := $(BUILD)/sfl-agent
AGENT_MAIN := $(wildcard client-agent/main_agent.c)
AGENT_MAIN_OBJ := $(AGENT_MAIN:%.c=$(OBJ)/%.o)

COORD_BIN := $(BUILD)/sfl-coordinator
COORD_MAIN_OBJ := $(OBJ)/server/main_coordinator.o

CTL_BIN := $(BUILD)/sflctl
CTL_MAIN_OBJ := $(OBJ)/ctl/main_sflctl.o

PROGRAMS := $(if $(SIM_SRC),$(SIM)) $(if $(AGENT_MAIN),$(AGENT_BIN)) $(COORD_BIN) $(CTL_BIN)

.PHONY: all deps deps-test deps-repro deps-install deps-footprint test unit unit-asan \
        test-cross unit-cross unit-asan e2e layers demo bench bench-peer soak footprint reproduce install man \
        clean help
.DEFAULT_GOAL := all

# Objects wait for deps (order-only), so `make -j` on a fresh machine installs
# the packages before the first compiler runs.
all: deps $(LIB) $(PROGRAMS)

help:
	@sed -n '2,/^$$/p' Makefile | sed 's/^# \{0,1\}//'

deps: $(SYSROOT_STAMP)
	@./mk/deps.sh $(BUILD_PKGS)
deps-test: deps
	@./mk/deps.sh $(TEST_PKGS)
deps-repro: deps
	@./mk/deps.sh $(REPRO_PKGS)
deps-install:
	@./mk/deps.sh $(INSTALL_PKGS)
deps-footprint:
	@./mk/deps.sh $(FOOTPRINT_PKGS)

# The cross sysroot is remade only when its package list changes or on
# SYSROOT_UPDATE=1 (mk/sysroot.sh returns at once otherwise and leaves the
# stamp as it was); when it is, everything compiled against it is rebuilt.
ifneq ($(SYSROOT_STAMP),)
$(SYSROOT_STAMP): FORCE
	@./mk/deps.sh $(SYSROOT_TOOLS)
	@./mk/sysroot.sh $(DEB_ARCH) $(SYSROOT) $(SYSROOT_PKGS)
endif

define compile
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<
endef
$(BUILD)/%.o: %.c $(SYSROOT_STAMP) | deps
	$(compile)
ifneq ($(OBJ),$(BUILD))
$(OBJ)/%.o: %.c $(SYSROOT_STAMP) | deps
	$(compile)
endif

# The store's PostgreSQL backend: libpq's headers (in the sysroot when
# cross-compiling).
$(OBJ)/server/store/db_pg.o: ALL_CFLAGS += -isystem $(if $(CROSS),$(SYSROOT))/usr/include/postgresql

# One protoc-c run writes every file (grouped target).
$(PROTO_C) $(PROTO_H) &: $(PROTO_SRC) | deps
	@mkdir -p $(GEN)
	@$(if $(Q),echo "  PROTOC  $(GEN)")
	$(Q)$(PROTOC_C) --c_out=$(GEN) -Iproto $(PROTO_SRC)

$(GEN)/%.pb-c.o: $(GEN)/%.pb-c.c $(SYSROOT_STAMP) | $(PROTO_H)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -I$(GEN) -c -o $@ $<

# The coordinator's modules name their headers from server/ ("round/driver.h");
# sflctl's job files are read by the coordinator's job definitions
# (server/job/jobdef.h: tests/layers.py lets ctl/ include server/job/ alone).
$(COORD_OBJ) $(COORD_MAIN_OBJ) $(JOB_OBJ): ALL_CFLAGS += -Iserver
$(OBJ)/ctl/jobfile.o: ALL_CFLAGS += -Iserver

$(WIRE_OBJ): ALL_CFLAGS += -I$(GEN)
$(WIRE_OBJ): | $(PROTO_H)

# The registry (algo.c) lists the plug-ins' tables after the built-in ones;
# the list is rewritten only when it changes.
$(ALGO_INC): FORCE
	@mkdir -p $(@D)
	@for f in $(EXTRA_ALGOS); do \
	    sed -n 's/^const sfl_algo_t \(sfl_algo_[a-z0-9_]*\) = {.*/SFL_EXTRA_ALGO(\1)/p' $$f; \
	 done > $@.tmp && { cmp -s $@.tmp $@ || mv $@.tmp $@; } && rm -f $@.tmp
$(BUILD)/libsfl/src/algo/algo.o: ALL_CFLAGS += -I$(BUILD)/gen-algo
$(BUILD)/libsfl/src/algo/algo.o: $(ALGO_INC)
.PHONY: FORCE
FORCE:

$(LIB): $(LIB_OBJ) $(PROTO_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && $(AR) rcs $@ $^

# ---- libsfl.so, the version, sfl-pki (issue 24 items 5, 8) -----------------
# The version is defined once, in libsfl/include/sfl/core/version.h: the soname
# (libsfl.so.MAJOR), the file name, sfl.pc, the man pages and sfl-pki's
# --version read it from there.
VERSION_H := libsfl/include/sfl/core/version.h
sfl_ver    = $(shell sed -n 's/^\#define SFL_VERSION_$(1) \([0-9]*\)$$/\1/p' $(VERSION_H))
SFL_MAJOR := $(call sfl_ver,MAJOR)
VERSION   := $(SFL_MAJOR).$(call sfl_ver,MINOR).$(call sfl_ver,PATCH)
SONAME    := libsfl.so.$(SFL_MAJOR)
SHLIB     := $(BUILD)/libsfl.so.$(VERSION)
SFL_MAP   := libsfl/libsfl.map

# libsfl's objects are position-independent, so one set serves libsfl.a
# (linked into the programs) and libsfl.so; -fno-semantic-interposition
# lets the compiler inline and call directly inside the library as it does
# without -fPIC (nobody interposes sfl_ functions). Cost measured in
# docs/library.md: within noise. The programs' own objects are unchanged.
$(LIB_OBJ) $(PROTO_OBJ): ALL_CFLAGS += -fPIC -fno-semantic-interposition
# Objects compiled before they were -fPIC (a build directory older than
# this rule) are rebuilt once: the stamp is newer than they are.
$(LIB_OBJ) $(PROTO_OBJ): $(OBJ)/.pic-objects
$(OBJ)/.pic-objects:
	@mkdir -p $(@D) && touch $@

# The ABI: only the public sfl_ names, in the version node of $(SFL_MAP);
# -z defs: every symbol the library uses resolves in SFL_LIBS.
$(SHLIB): $(LIB_OBJ) $(PROTO_OBJ) $(SFL_MAP)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared $(LDFLAGS) -Wl,-soname,$(SONAME) -Wl,--version-script=$(SFL_MAP) \
	    -Wl,-z,defs -Wl,--as-needed -o $@ $(LIB_OBJ) $(PROTO_OBJ) $(SFL_LIBS)
	$(Q)ln -sf $(@F) $(@D)/$(SONAME) && ln -sf $(SONAME) $(@D)/libsfl.so

# sfl-pki with the version written in (in the source tree it reads
# version.h itself): what make install and the image install.
$(BUILD)/sfl-pki: deploy/pki/sfl-pki $(VERSION_H)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  GEN     $@")
	$(Q)sed 's/^SFL_VERSION=$$/SFL_VERSION=$(VERSION)/' $< > $@.tmp && chmod 755 $@.tmp && mv $@.tmp $@

# Bash completion of every program, generated from its --help
# (deploy/completion/gen.sh), so what --help lists is completed; native
# builds only, as the man pages (the programs must run).
COMPLETIONS := $(if $(CROSS),,$(patsubst %,$(BUILD)/completion/%,$(notdir $(PROGRAMS)) sfl-pki))
$(BUILD)/completion/%: $(BUILD)/% deploy/completion/gen.sh deploy/completion/sfl-complete.bash
	@mkdir -p $(@D)
	@$(if $(Q),echo "  GEN     $@")
	$(Q)$< --help > $@.help && sh deploy/completion/gen.sh $* < $@.help > $@.tmp && \
	    mv $@.tmp $@ && rm -f $@.help

all: $(SHLIB) $(BUILD)/sfl-pki $(COMPLETIONS)
# ---- end libsfl.so ------------------------------------------------------------

$(COORD_LIB): $(COORD_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(JOB_LIB): $(JOB_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(CTL_LIB): $(CTL_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(AGENT_LIB): $(AGENT_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(SIM): $(SIM_OBJ) $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(SIM_OBJ) $(LIB) $(LDLIBS)

$(AGENT_BIN): $(AGENT_MAIN_OBJ) $(AGENT_LIB) $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(AGENT_MAIN_OBJ) $(AGENT_LIB) $(LIB) $(LDLIBS)

$(COORD_BIN): $(COORD_MAIN_OBJ) $(COORD_LIB) $(JOB_LIB) $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(COORD_MAIN_OBJ) $(COORD_LIB) $(JOB_LIB) $(LIB) $(LDLIBS)

$(CTL_BIN): $(CTL_MAIN_OBJ) $(CTL_LIB) $(JOB_LIB) $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(CTL_MAIN_OBJ) $(CTL_LIB) $(JOB_LIB) $(LIB) $(LDLIBS)

# The suites' helpers and fixtures are compiled once, not into each suite.
UNIT_CFLAGS = $(ALL_CFLAGS) -Itests/unit -Itests/unit/coordfx -Itests/unit/grpcfx \
    -Itests/unit/storefx -Iserver -Ictl -Iclient-agent
UNIT_HELPER_OBJ := $(UNIT_HELPERS:tests/unit/%.c=$(BUILD)/tests/obj/%.o)

$(BUILD)/tests/obj/%.o: tests/unit/%.c $(SYSROOT_STAMP) | deps
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(UNIT_CFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/unit/%.c $(LIB) $(PROG_LIBS) $(UNIT_HELPER_OBJ)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  TEST    $@")
	$(Q)$(CC) $(UNIT_CFLAGS) $(LDFLAGS) -o $@ $< $(UNIT_HELPER_OBJ) $(UNIT_EXTRA) $(PROG_LIBS) \
	    $(LIB) -lcmocka $(LDLIBS)

# The suites of the coordinator's modules that run it in-process share a
# fixture (tests/unit/coordfx/), linked into those only.
COORDFX_TESTS := test_coord test_agentsvc test_fleetsvc test_submit test_driver test_admin test_quarantine test_subs \
    test_coordmetrics test_vround
$(COORDFX_TESTS:%=$(BUILD)/tests/%): $(BUILD)/tests/obj/coordfx/coordfx.o
$(COORDFX_TESTS:%=$(BUILD)/tests/%): UNIT_EXTRA := $(BUILD)/tests/obj/coordfx/coordfx.o
# The gRPC suites share an in-memory session pair (tests/unit/grpcfx/).
GRPCFX_TESTS := test_grpc test_grpcadmit
$(GRPCFX_TESTS:%=$(BUILD)/tests/%): $(BUILD)/tests/obj/grpcfx/grpcfx.o
$(GRPCFX_TESTS:%=$(BUILD)/tests/%): UNIT_EXTRA := $(BUILD)/tests/obj/grpcfx/grpcfx.o
# The store's suites share its fixtures (tests/unit/storefx/).
STOREFX_TESTS := test_store test_backup
$(STOREFX_TESTS:%=$(BUILD)/tests/%): $(BUILD)/tests/obj/storefx/storefx.o
$(STOREFX_TESTS:%=$(BUILD)/tests/%): UNIT_EXTRA := $(BUILD)/tests/obj/storefx/storefx.o
$(BUILD)/tests/obj/storefx/storefx.o: ALL_CFLAGS += -isystem $(if $(CROSS),$(SYSROOT))/usr/include/postgresql

# A SAN=1 build directory whose objects gcc compiled (before SAN=1 was
# clang's) is rebuilt once, as for .pic-objects above.
ifeq ($(SAN),1)
$(LIB_OBJ) $(PROTO_OBJ) $(SIM_OBJ) $(JOB_OBJ) $(COORD_OBJ) $(CTL_OBJ) $(AGENT_OBJ) \
$(UNIT_HELPER_OBJ) $(foreach f,coordfx grpcfx storefx,$(BUILD)/tests/obj/$(f)/$(f).o): $(OBJ)/.san-clang
$(OBJ)/.san-clang:
	@mkdir -p $(@D) && touch $@
endif

# test_coord's master/standby case edits the leader row with libpq.
$(BUILD)/tests/test_coord $(BUILD)/asan/tests/test_coord: ALL_CFLAGS += -isystem $(if $(CROSS),$(SYSROOT))/usr/include/postgresql

# bench_writer measures the coordinator's store and writer: it links them.
$(BUILD)/bench/bench_writer: bench/bench_writer.c $(LIB) $(COORD_LIB) $(JOB_LIB)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  BENCH   $@")
	$(Q)$(CC) $(ALL_CFLAGS) -Iserver $(LDFLAGS) -o $@ $< $(COORD_LIB) $(JOB_LIB) $(LIB) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(LIB)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  BENCH   $@")
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# Unit suites, the same suites under ASan+UBSan, e2e, then each fuzzer for
# 4 s (mk/fuzz.mk): every stage
# runs even after a failure (tests/run.sh prints a line per suite and records
# it), and the last line is "N passed, N failed, N skipped". A stage whose
# build fails counts as one failure. `make unit`, `make e2e` alone work too.
SFL_RESULTS ?= $(abspath build/test-results)
export SFL_RESULTS
TEST_STAGES := unit unit-asan e2e fuzz-quick
# Each stage's build runs twice as many jobs as the machine has cores, plus
# one: on a fresh clone the three builds (plain, ASan, fuzz) were about a
# third of `make test`, and on a machine whose cores are busy with other
# work more jobs get a larger share of them (the unit suites' plain build on
# 2 cores beside two `yes`: 79 s at -j5, 88 s at -j3; idle: 50 s and 49 s).
# The suites, e2e scripts and fuzzers then run SFL_JOBS
# (2) at a time (tests/run.sh, tests/lib-pool.sh): they mostly wait, so two
# at once take little longer than one; each still has its whole time (a
# fuzzer its 4 s), its own log, its own ports (e2e), and what it printed is
# shown whole in the serial order.
TEST_JOBS ?= $(shell echo $$((2 * $$(nproc 2>/dev/null || echo 1) + 1)))
SFL_JOBS ?= 2
export SFL_JOBS

test: deps-test
	@mkdir -p build && rm -f $(SFL_RESULTS)
	@for s in $(TEST_STAGES); do \
	    t0=$$(date +%s); echo "== $$s"; \
	    $(MAKE) --no-print-directory -j$(TEST_JOBS) $$s || true; \
	    echo "== $$s: $$(($$(date +%s) - t0)) s"; done
	@tests/run.sh summary

unit-asan:
	$(Q)$(MAKE) --no-print-directory SAN=1 unit

ifneq ($(CROSS),)
unit: unit-cross
else
unit:
	@if $(MAKE) --no-print-directory $(UNIT_BIN); then tests/run.sh unit $(UNIT_BIN); \
	 else tests/run.sh record FAIL "build of $(BUILD)/tests" "see the compiler output above"; exit 1; fi
endif

# The programs and unit suites of the cross builds, the suites run under
# qemu-user: `make test-cross` does arm64 then armhf (TEST_CROSS), with one
# summary line for both; CROSS=... just that one. Suites call host tools
# (openssl, python3) by exec, which qemu-user hands to the host kernel: they
# run natively.
# The host's foreign architectures and foreign-architecture packages are
# compared before and after: a cross build that changed them is a failure.
TEST_CROSS ?= aarch64-linux-gnu- arm-linux-gnueabihf-
HOST_FOREIGN = { dpkg --print-foreign-architectures; \
    dpkg-query -W -f='$${Architecture} $${Package}\n' | grep -Ev '^(all|$(shell dpkg --print-architecture)) '; } 2>/dev/null
test-cross:
	@mkdir -p build && rm -f $(SFL_RESULTS)
	@$(HOST_FOREIGN) > build/host-foreign.before || true
	@for c in $(or $(CROSS),$(TEST_CROSS)); do \
	    echo "== $$c"; $(MAKE) --no-print-directory CROSS=$$c unit-cross || true; done
	@$(HOST_FOREIGN) > build/host-foreign.after || true
	@if cmp -s build/host-foreign.before build/host-foreign.after; then \
	    tests/run.sh record PASS "host dpkg state unchanged"; \
	 else diff build/host-foreign.before build/host-foreign.after; \
	    tests/run.sh record FAIL "host dpkg state unchanged" \
	        "the cross builds changed the host's foreign architectures or packages (diff above)"; fi
	@tests/run.sh summary

ifneq ($(CROSS),)
unit-cross: deps-test $(LIB) $(PROGRAMS) $(UNIT_BIN)
	@SFL_JOBS=1 SFL_TIMEOUT=$(CROSS_TIMEOUT) SFL_WRAP="$(QEMU) -L $(QEMU_LD_PREFIX)" tests/run.sh unit $(UNIT_BIN)
else
unit-cross:
	@echo "unit-cross needs CROSS=<triplet>- (or run make test-cross)"; exit 2
endif

# Programs that act as agents through client-agent's library: sfl-replay
# replays, re-targets and tampers with real updates (tests/e2e/replay.sh);
# loadgen holds 1000 agents for bench/bench_load.sh.
# sfl-hostile is a real agent that tampers with its own secure-aggregation
# answers (tests/e2e/sa_hostile.sh).
REPLAY_BIN  := $(BUILD)/tests/e2e/sfl-replay
HOSTILE_BIN := $(BUILD)/tests/e2e/sfl-hostile
LOADGEN_BIN := $(BUILD)/bench/loadgen

$(REPLAY_BIN): tests/e2e/replay_tool.c
$(HOSTILE_BIN): tests/e2e/hostile_tool.c
$(LOADGEN_BIN): bench/loadgen.c
$(REPLAY_BIN) $(HOSTILE_BIN) $(LOADGEN_BIN): $(AGENT_LIB) $(LIB)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_CFLAGS) -Iserver -Iclient-agent $(LDFLAGS) -o $@ $(filter %.c,$^) $(AGENT_LIB) $(LIB) $(LDLIBS)

# The include check alone (make test runs it as tests/e2e/layers.sh, with
# planted violations it must catch).
layers:
	@$(PYTHON) tests/layers.py

# ha_soak.sh is make soak's (50 kills: minutes).
E2E_SCRIPTS := $(filter-out tests/e2e/lib% tests/e2e/ha_soak.sh,$(sort $(wildcard tests/e2e/*.sh)))
e2e:
	@if $(MAKE) --no-print-directory all $(REPLAY_BIN) $(HOSTILE_BIN); then \
	    env -u MAKEFLAGS -u MFLAGS SFL_BIN=$(BUILD) tests/run.sh e2e $(BUILD) $(E2E_SCRIPTS); \
	 else tests/run.sh record FAIL "build of the e2e programs" "see the compiler output above"; exit 1; fi

demo: all deps-test
	$(Q)./deploy/demo-federation.sh $(BUILD)
	$(Q)./sim/demo.sh $(SIM)

# tests/e2e/crash.sh with 100 kills instead of make test's 10, and the
# round master's failover soak, tests/e2e/ha_soak.sh, with 50 (a few
# minutes each).
SOAK_KILLS ?= 100
SOAK_HA_KILLS ?= 50
soak: all deps-test
	$(Q)SFL_BIN=$(BUILD) SFL_KILLS=$(SOAK_KILLS) SFL_HA_KILLS=$(SOAK_HA_KILLS) \
	    tests/run.sh e2e $(BUILD) tests/e2e/crash.sh tests/e2e/ha_soak.sh

bench: all $(BENCH_BIN) $(LOADGEN_BIN)
	$(Q)./bench/run.sh $(BUILD)
	$(Q)$(MAKE) --no-print-directory footprint

# Flower beside sfl on the same FedAvg job; Flower's source is obtained
# beforehand (bench/peer/flower.sh says how) and never fetched here.
bench-peer:
	$(Q)if [ -z "$(FLOWER_SRC)" ]; then \
	    echo "bench-peer: skipped: FLOWER_SRC is not set (a checkout of Flower's tag v1.10.0:" \
	         "git clone --depth 1 --branch v1.10.0 https://github.com/adap/flower.git DIR;" \
	         "then make bench-peer FLOWER_SRC=DIR)"; \
	 else $(MAKE) --no-print-directory all && ./mk/deps.sh $(PEER_PKGS) && \
	    FLOWER_SRC="$(FLOWER_SRC)" sh bench/peer/flower.sh $(BUILD); fi

# The agent's size and peak RSS for d = 1e5 and 10,000 local samples: a
# native coordinator, the cross-built agent under qemu, then the native agent.
FOOTPRINT_CROSS := $(or $(CROSS),aarch64-linux-gnu-)
footprint: deps-footprint
	$(Q)$(MAKE) --no-print-directory CROSS= all
	$(Q)$(MAKE) --no-print-directory CROSS=$(FOOTPRINT_CROSS) all deps-test
	$(Q)sh bench/footprint.sh build build/$(patsubst %-,%,$(FOOTPRINT_CROSS)) \
	    $(CROSS_QEMU_$(patsubst %-,%,$(FOOTPRINT_CROSS))) \
	    $(or $(QEMU_LD_PREFIX),$(abspath $(call sysroot_of,$(patsubst %-,%,$(FOOTPRINT_CROSS)))))

reproduce: all deps-repro
	$(Q)./sim/reproduce.sh $(SIM)

# make install: programs, sfl-pki, libsfl (shared: libsfl.so.VERSION and
# its soname and dev links; static: libsfl.a), headers, sfl.pc, bash
# completion, systemd units (their /usr/local/bin and /usr/local/share/doc/sfl
# paths rewritten to BINDIR and DOCDIR), example configs, docs and, for
# native builds, man pages made by help2man from each program's --help.
# LIBDIR is PREFIX/lib, on the loader's and pkg-config's default paths for
# /usr/local; a package for /usr sets the multiarch one
# (LIBDIR=/usr/lib/x86_64-linux-gnu); sfl.pc goes to LIBDIR/pkgconfig.
BINDIR  ?= $(PREFIX)/bin
LIBDIR  ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
COMPLETIONDIR ?= $(PREFIX)/share/bash-completion/completions
DATADIR ?= $(PREFIX)/share/sfl
DOCDIR  ?= $(PREFIX)/share/doc/sfl
MANDIR  ?= $(PREFIX)/share/man
UNITDIR ?= $(PREFIX)/lib/systemd/system
UNITS   := $(wildcard deploy/systemd/sfl-coordinator.service deploy/raspberrypi/sfl-agent.service)
PKI_BIN := deploy/pki/sfl-pki
MAN_PAGES := $(if $(CROSS),,$(patsubst %,$(BUILD)/man/%.1,$(notdir $(PROGRAMS) $(PKI_BIN))))
# sfl.pc's paths relative to ${prefix} where they are under PREFIX.
pc_path = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))
MAN_NAME_sfl-coordinator := the sfl federation coordinator daemon
MAN_NAME_sfl-agent := the sfl federated learning agent
MAN_NAME_sflctl    := admin client of the sfl coordinator
MAN_NAME_sfl-sim   := simulator of sparse federated learning algorithms
MAN_NAME_sfl-pki   := the sfl federation CA and its certificates

man: $(MAN_PAGES)

# help2man reads --help and --version (every program has it, sfl-pki as
# $(BUILD)/sfl-pki) through a wrapper that capitalises the first "usage:"
# (help2man only knows "Usage:", and makes it the SYNOPSIS).
$(BUILD)/man/%.1: $(BUILD)/% | deps-install
	@mkdir -p $(@D)/wrap
	@$(if $(Q),echo "  MAN     $@")
	$(Q)printf '#!/bin/sh\n"%s" "$$@" | sed "1s/^usage:/Usage:/"\n' "$(abspath $<)" > $(@D)/wrap/$*
	$(Q)chmod 755 $(@D)/wrap/$*
	$(Q)help2man --no-info --name="$(MAN_NAME_$*)" --output=$@ $(@D)/wrap/$*

install: all $(MAN_PAGES)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR) \
	    $(DESTDIR)$(INCLUDEDIR)/sfl $(DESTDIR)$(DATADIR)/experiments $(DESTDIR)$(DOCDIR)
	for d in $(SFL_LAYERS); do install -d $(DESTDIR)$(INCLUDEDIR)/sfl/$$d && \
	    install -m 644 $$(find libsfl/include/sfl/$$d -maxdepth 1 -name '*.h' -o -name '*.def') \
	        $(DESTDIR)$(INCLUDEDIR)/sfl/$$d/ || exit 1; done
	install -m 755 $(PROGRAMS) $(BUILD)/sfl-pki $(DESTDIR)$(BINDIR)/
	install -m 644 $(LIB) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(SHLIB) $(DESTDIR)$(LIBDIR)/
	ln -sf $(notdir $(SHLIB)) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libsfl.so
	install -m 644 libsfl/include/sfl/sfl.h $(DESTDIR)$(INCLUDEDIR)/sfl/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(call pc_path,$(LIBDIR))|' \
	    -e 's|@INCLUDEDIR@|$(call pc_path,$(INCLUDEDIR))|' -e 's|@VERSION@|$(VERSION)|' \
	    -e 's|@LIBS_PRIVATE@|$(filter-out -luv,$(SFL_LIBS))|' libsfl/sfl.pc.in \
	    > $(DESTDIR)$(PKGCONFIGDIR)/sfl.pc && chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/sfl.pc
	install -m 644 sim/experiments/*.ini $(DESTDIR)$(DATADIR)/experiments/
	install -m 644 $(wildcard deploy/*.ini.example) $(DESTDIR)$(DATADIR)/
	install -d $(DESTDIR)$(DATADIR)/monitoring $(DESTDIR)$(DOCDIR)/img
	install -m 644 deploy/monitoring/* $(DESTDIR)$(DATADIR)/monitoring/
	install -m 644 docs/img/* $(DESTDIR)$(DOCDIR)/img/
	install -m 644 README.md docs/*.md $(DESTDIR)$(DOCDIR)/
	install -m 644 deploy/raspberrypi/README.md $(DESTDIR)$(DOCDIR)/raspberrypi.md
	install -d $(DESTDIR)$(DOCDIR)/examples/sfl-hello
	install -m 644 examples/sfl-hello/* $(DESTDIR)$(DOCDIR)/examples/sfl-hello/
ifneq ($(UNITS),)
	install -d $(DESTDIR)$(UNITDIR)
	for u in $(UNITS); do \
	    sed -e 's|/usr/local/bin/|$(BINDIR)/|g' -e 's|/usr/local/share/doc/sfl/|$(DOCDIR)/|g' \
	        $$u > $(DESTDIR)$(UNITDIR)/$${u##*/} && \
	    chmod 644 $(DESTDIR)$(UNITDIR)/$${u##*/} || exit 1; done
endif
ifneq ($(MAN_PAGES),)
	install -d $(DESTDIR)$(MANDIR)/man1
	install -m 644 $(MAN_PAGES) $(DESTDIR)$(MANDIR)/man1/
endif
ifneq ($(COMPLETIONS),)
	install -d $(DESTDIR)$(COMPLETIONDIR)
	install -m 644 $(COMPLETIONS) $(DESTDIR)$(COMPLETIONDIR)/
endif
	@# The loader's cache learns the new soname; not for a staged install
	@# (DESTDIR) nor without root.
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig > /dev/null; then \
	    echo ldconfig; ldconfig; fi

include mk/fuzz.mk

clean:
	rm -rf build

include mk/docker.mk
include mk/monitoring.mk

-include $(LIB_OBJ:.o=.d) $(PROTO_OBJ:.o=.d) $(SIM_OBJ:.o=.d) $(COORD_OBJ:.o=.d) $(JOB_OBJ:.o=.d) $(CTL_OBJ:.o=.d) $(AGENT_OBJ:.o=.d)
-include $(AGENT_MAIN_OBJ:.o=.d)
-include $(COORD_MAIN_OBJ:.o=.d)
-include $(CTL_MAIN_OBJ:.o=.d)
-include $(REPLAY_BIN).d $(HOSTILE_BIN).d $(LOADGEN_BIN).d
-include $(UNIT_HELPER_OBJ:.o=.d) $(wildcard $(BUILD)/tests/obj/*/*.d)
