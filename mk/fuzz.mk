# libFuzzer targets (tests/fuzz/README.md), included by the Makefile.
#
#   make fuzz [FUZZ_SECONDS=60]   every fuzzer for FUZZ_SECONDS over its corpus
#   make fuzz-quick               every fuzzer for 4 s, two at a time (SFL_JOBS;
#                                 part of make test)
#   make fuzz-build               only build them
#   make fuzz-capture             re-record the seeds taken from real exchanges
#
# Every tests/fuzz/fuzz_*.c is one fuzzer (a wildcard, so new ones need no
# edit here), built by clang with -fsanitize=fuzzer,address,undefined into
# build/fuzz/bin/ and linked against the SAN=1 build's libraries in
# build/asan (libsfl, libjob, libcoord, libctl, libagent: clang with
# -fsanitize=fuzzer-no-link,address,undefined, the build the unit suites
# run under ASan+UBSan from). tests/fuzz/run.sh runs them: committed seeds in
# tests/fuzz/corpus/<fuzzer>/ are read, new inputs go to
# build/fuzz/corpus/<fuzzer>/, crashing inputs to build/fuzz/crashes/.

FUZZ_PKGS    := $(SAN_PKGS)
FUZZ_CC      ?= clang
FUZZ_DIR     := build/fuzz
FUZZ_LIBDIR  := build/asan
FUZZ_SECONDS ?= 60
# UB must stop the run (libFuzzer then keeps the input), not just print.
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_SRC     := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN     := $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_DIR)/bin/%)
FUZZ_LIBS    := $(FUZZ_LIBDIR)/libagent.a $(FUZZ_LIBDIR)/libctl.a $(FUZZ_LIBDIR)/libcoord.a \
                $(FUZZ_LIBDIR)/libjob.a $(FUZZ_LIBDIR)/libsfl.a
FUZZ_CAPTURE := $(FUZZ_DIR)/bin/capture

.PHONY: deps-fuzz fuzz fuzz-quick fuzz-build fuzz-capture fuzz-libs fuzz-bins

ifneq ($(BUILD),$(FUZZ_LIBDIR))
deps-fuzz: deps
	@./mk/deps.sh $(FUZZ_PKGS)

# Two sub-makes: the libraries of the SAN=1 build (up to date after make
# test's ASan stage), then the fuzzers against them, so a fuzzer relinks
# only when a library really changed.
fuzz-build: deps-fuzz
	$(Q)$(MAKE) --no-print-directory CROSS= SAN=1 fuzz-libs
	$(Q)$(MAKE) --no-print-directory CROSS= SAN= fuzz-bins

$(FUZZ_DIR)/bin/%: tests/fuzz/%.c $(FUZZ_LIBS)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZ    $@")
	$(Q)$(FUZZ_CC) $(ALL_CFLAGS) -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer \
	    -Iserver -Ictl -Iclient-agent -Itests/unit -o $@ $< $(FUZZ_LIBS) $(LDLIBS)

fuzz-bins: $(FUZZ_BIN)
	@:

fuzz: fuzz-build
	$(Q)FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_DIR=$(FUZZ_DIR) sh tests/fuzz/run.sh $(FUZZ_BIN)

# A stage of make test: a build failure is recorded as one failure.
fuzz-quick:
	@if $(MAKE) --no-print-directory fuzz-build; then \
	    FUZZ_JOBS=$(SFL_JOBS) FUZZ_SECONDS=4 FUZZ_DIR=$(FUZZ_DIR) sh tests/fuzz/run.sh $(FUZZ_BIN); \
	 else tests/run.sh record FAIL "build of the fuzzers" "see the compiler output above"; exit 1; fi

# A real in-memory gRPC session, real messages, a real sealed update: their
# bytes become seeds (tests/fuzz/capture.c). Not run by the targets above.
$(FUZZ_CAPTURE): tests/fuzz/capture.c $(FUZZ_LIBS)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(FUZZ_CC) $(ALL_CFLAGS) -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link \
	    -Iserver -Ictl -Iclient-agent -o $@ $< $(FUZZ_LIBS) $(LDLIBS)

fuzz-capture: fuzz-build
	$(Q)$(MAKE) --no-print-directory CROSS= SAN= $(FUZZ_CAPTURE)
	$(Q)$(FUZZ_CAPTURE) tests/fuzz/corpus

-include $(FUZZ_BIN:=.d) $(FUZZ_CAPTURE).d
else
# Inside the sub-make that builds the libraries (SAN=1: BUILD=build/asan).
fuzz-libs: $(FUZZ_LIBS)
	@:
endif
