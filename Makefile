# sfl — sparse federated learning.  `make help` lists the targets.
#
#   make            build libsfl, programs (build/)
#   make test       unit tests, unit tests again under ASan+UBSan, e2e tests
#   make demo       a coordinator and 8 agents on loopback, then simulations
#   make bench      micro and macro benchmarks (figures to stdout)
#   make reproduce  the papers' experiments -> results/REPORT.md
#   make install    PREFIX=/usr/local DESTDIR=
#
# V=1 shows full command lines. CROSS=aarch64-linux-gnu- cross-compiles.

CROSS   ?=
CC      := $(CROSS)gcc
AR      := $(CROSS)ar
PREFIX  ?= /usr/local
DESTDIR ?=
BUILD   ?= build
PYTHON  ?= /usr/bin/python3

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS  ?= -O2 -g
ALL_CFLAGS := -std=c11 -D_POSIX_C_SOURCE=200809L $(WARN) -MMD -MP \
              -Ilibsfl/include -Ilibsfl/src $(CFLAGS)
LDLIBS  := -linih -lsqlite3 -luv -lnghttp2 -lssl -lcrypto -lsodium -lprotobuf-c \
           -llapacke -llapack -lblas -lm

ifeq ($(SAN),1)
BUILD   := build/asan
ALL_CFLAGS += -O1 -fsanitize=address,undefined -fno-omit-frame-pointer \
              -fno-sanitize-recover=all
LDFLAGS += -fsanitize=address,undefined
endif

ifeq ($(V),1)
Q :=
else
Q := @
endif

# Debian packages (DESIGN.md section 2). Build needs the first list, tests the
# second, `make reproduce` the third.
BUILD_PKGS := build-essential pkg-config libprotobuf-c-dev protobuf-c-compiler \
              libuv1-dev libssl-dev libnghttp2-dev libsodium-dev libsqlite3-dev \
              libinih-dev libopenblas-dev liblapacke-dev
TEST_PKGS  := libcmocka-dev openssl python3-grpcio python3-protobuf python3-cryptography \
              protobuf-compiler protobuf-compiler-grpc
REPRO_PKGS := gnuplot-nox python3-sklearn

LIB_SRC  := $(sort $(wildcard libsfl/src/*/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
LIB      := $(BUILD)/libsfl.a

# Wire messages: protoc-c turns proto/sfl/v1/*.proto into C under
# $(BUILD)/gen (per build directory, so a SAN=1 build never races a plain
# one), compiled into libsfl. Only libsfl/src/wire/ includes the generated
# headers (STYLE rule 1), so only those objects wait for generation and see
# -I$(GEN). Generated files are never committed.
PROTOC_C  ?= protoc-c
GEN       := $(BUILD)/gen
PROTO_SRC := $(sort $(wildcard proto/sfl/v1/*.proto))
PROTO_C   := $(PROTO_SRC:proto/%.proto=$(GEN)/%.pb-c.c)
PROTO_H   := $(PROTO_C:.c=.h)
PROTO_OBJ := $(PROTO_C:.c=.o)
WIRE_OBJ  := $(filter $(BUILD)/libsfl/src/wire/%,$(LIB_OBJ))

SIM      := $(BUILD)/sfl-sim
SIM_SRC  := $(sort $(wildcard sim/*.c))
SIM_OBJ  := $(SIM_SRC:%.c=$(BUILD)/%.o)

# Program modules: everything in server/ and client-agent/ except the mains
# (main_*.c) is a library the unit tests link too.
COORD_SRC := $(filter-out server/main_%.c,$(sort $(wildcard server/*.c)))
COORD_OBJ := $(COORD_SRC:%.c=$(BUILD)/%.o)
COORD_LIB := $(BUILD)/libcoord.a
AGENT_SRC := $(filter-out client-agent/main_%.c,$(sort $(wildcard client-agent/*.c)))
AGENT_OBJ := $(AGENT_SRC:%.c=$(BUILD)/%.o)
AGENT_LIB := $(BUILD)/libagent.a
PROG_LIBS := $(if $(COORD_SRC),$(COORD_LIB)) $(if $(AGENT_SRC),$(AGENT_LIB))

UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
UNIT_HELPERS := $(filter-out $(UNIT_SRC),$(wildcard tests/unit/*.c))

BENCH_SRC := $(sort $(wildcard bench/bench_*.c))
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

AGENT_BIN  := $(BUILD)/sfl-agent
AGENT_MAIN := $(wildcard client-agent/main_agent.c)
AGENT_MAIN_OBJ := $(AGENT_MAIN:%.c=$(BUILD)/%.o)

COORD_BIN := $(BUILD)/sfl-coordinator
COORD_MAIN_OBJ := $(BUILD)/server/main_coordinator.o

CTL_BIN := $(BUILD)/sflctl
CTL_MAIN_OBJ := $(BUILD)/server/main_sflctl.o

PROGRAMS := $(if $(SIM_SRC),$(SIM)) $(if $(AGENT_MAIN),$(AGENT_BIN)) $(COORD_BIN) $(CTL_BIN)

.PHONY: all deps deps-test deps-repro test unit unit-asan e2e demo bench \
        reproduce install clean help
.DEFAULT_GOAL := all

all: deps $(LIB) $(PROGRAMS)

help:
	@sed -n '2,11p' Makefile | sed 's/^# \{0,1\}//'

deps:
	@./mk/deps.sh $(BUILD_PKGS)
deps-test: deps
	@./mk/deps.sh $(TEST_PKGS)
deps-repro: deps
	@./mk/deps.sh $(REPRO_PKGS)

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

# One protoc-c run writes every file (grouped target).
$(PROTO_C) $(PROTO_H) &: $(PROTO_SRC)
	@mkdir -p $(GEN)
	@$(if $(Q),echo "  PROTOC  $(GEN)")
	$(Q)$(PROTOC_C) --c_out=$(GEN) -Iproto $(PROTO_SRC)

$(GEN)/%.pb-c.o: $(GEN)/%.pb-c.c | $(PROTO_H)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -I$(GEN) -c -o $@ $<

$(WIRE_OBJ): ALL_CFLAGS += -I$(GEN)
$(WIRE_OBJ): | $(PROTO_H)

$(LIB): $(LIB_OBJ) $(PROTO_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(COORD_LIB): $(COORD_OBJ)
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

$(COORD_BIN): $(COORD_MAIN_OBJ) $(COORD_LIB) $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(COORD_MAIN_OBJ) $(COORD_LIB) $(LIB) $(LDLIBS)

$(CTL_BIN): $(CTL_MAIN_OBJ) $(COORD_LIB) $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(CTL_MAIN_OBJ) $(COORD_LIB) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(LIB) $(PROG_LIBS) $(UNIT_HELPERS)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  TEST    $@")
	$(Q)$(CC) $(ALL_CFLAGS) -Itests/unit -Iserver -Iclient-agent $(LDFLAGS) -o $@ $< \
	    $(UNIT_HELPERS) $(PROG_LIBS) $(LIB) -lcmocka $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(LIB)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  BENCH   $@")
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# Unit suites, then the same suites under ASan+UBSan, then e2e.
test: deps-test
	$(Q)$(MAKE) --no-print-directory unit
	$(Q)$(MAKE) --no-print-directory SAN=1 unit
	$(Q)$(MAKE) --no-print-directory e2e

unit: $(UNIT_BIN)
	@fail=0; for t in $(UNIT_BIN); do \
	    if ! SFL_TEST_DATA=../shared/data $$t >$$t.log 2>&1; then \
	        echo "FAIL    $$t"; cat $$t.log; fail=1; \
	    else echo "PASS    $$t"; fi; done; exit $$fail

e2e: all
	@fail=0; for t in tests/e2e/*.sh; do \
	    [ -e "$$t" ] || continue; \
	    if ! SFL_BIN=$(BUILD) timeout 600 sh $$t >$(BUILD)/$$(basename $$t).log 2>&1; then \
	        echo "FAIL    $$t"; cat $(BUILD)/$$(basename $$t).log; fail=1; \
	    else echo "PASS    $$t"; fi; done; exit $$fail

demo: all deps-test
	$(Q)./deploy/demo-federation.sh $(BUILD)
	$(Q)./sim/demo.sh $(SIM)

bench: all $(BENCH_BIN)
	$(Q)./bench/run.sh $(BUILD)

reproduce: all deps-repro
	$(Q)./sim/reproduce.sh $(SIM)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib \
	    $(DESTDIR)$(PREFIX)/include/sfl $(DESTDIR)$(PREFIX)/share/sfl/experiments
	install -m 755 $(PROGRAMS) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(LIB) $(DESTDIR)$(PREFIX)/lib/
	install -m 644 libsfl/include/sfl/*.h $(DESTDIR)$(PREFIX)/include/sfl/
	install -m 644 sim/experiments/*.ini $(DESTDIR)$(PREFIX)/share/sfl/experiments/
	install -m 644 deploy/agent.ini.example $(DESTDIR)$(PREFIX)/share/sfl/
	install -m 644 deploy/coordinator.ini.example $(DESTDIR)$(PREFIX)/share/sfl/

clean:
	rm -rf build

-include $(LIB_OBJ:.o=.d) $(PROTO_OBJ:.o=.d) $(SIM_OBJ:.o=.d) $(COORD_OBJ:.o=.d) $(AGENT_OBJ:.o=.d)
-include $(AGENT_MAIN_OBJ:.o=.d)
-include $(COORD_MAIN_OBJ:.o=.d)
-include $(CTL_MAIN_OBJ:.o=.d)
