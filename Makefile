# Thin wrapper around CMake. The two commands a new user needs:
#   make demo   install dependencies, build, and show the bundled demo head
#   make test   install dependencies, build (warnings as errors), and run every test
# and for developers:
#   make test-asan      the whole suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   make check-builds   Release builds with GCC and with clang, warnings as errors
#   make install        after `make`: programs, systemd units, example configs and docs under
#                       $(DESTDIR)$(PREFIX) (PREFIX=/usr/local by default; docs/operations.md)
#   make test BUILD_TYPE=Release   the suite on an -O3 build (default RelWithDebInfo)
#   make fuzz FUZZ_SECONDS=N       each libFuzzer target for N seconds (default 60), clang 14,
#                                  from the seed corpora in tests/fuzz/ (tests/fuzz/README.md)

BUILD_DIR  ?= build
ASAN_DIR   ?= build-asan
BUILD_TYPE ?= RelWithDebInfo
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
FUZZ_SECONDS ?= 60
CMAKE_ARGS ?=
PREFIX     ?= /usr/local
DESTDIR    ?=
BINDIR     := $(PREFIX)/bin
UNITDIR    := $(PREFIX)/lib/systemd/system

.PHONY: all deps build build-werror build-asan test test-asan demo check-builds fuzz clean install

all: build

deps:
	@bash deploy/deps.sh

# A user's build: warnings stay warnings.
build: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DDEFORMD_WERROR=OFF $(CMAKE_ARGS)
	cmake --build $(BUILD_DIR) -j$(JOBS)

# The suite's build: warnings are errors.
build-werror: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DDEFORMD_WERROR=ON $(CMAKE_ARGS)
	cmake --build $(BUILD_DIR) -j$(JOBS)

build-asan: deps
	cmake -S . -B $(ASAN_DIR) -DCMAKE_BUILD_TYPE=Debug -DDEFORMD_SANITIZE=ON -DDEFORMD_WERROR=ON $(CMAKE_ARGS)
	cmake --build $(ASAN_DIR) -j$(JOBS)

test: build-werror
	@bash tests/run.sh $(BUILD_DIR)

test-asan: build-asan
	@bash tests/run.sh $(ASAN_DIR)

demo: build
	@bash deploy/demo.sh $(BUILD_DIR)

check-builds: deps
	cmake -S . -B build-check-gcc -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=Release -DDEFORMD_WERROR=ON $(CMAKE_ARGS)
	cmake --build build-check-gcc -j$(JOBS)
	cmake -S . -B build-check-clang -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Release -DDEFORMD_WERROR=ON $(CMAKE_ARGS)
	cmake --build build-check-clang -j$(JOBS)

# The units name $(BINDIR)/deformd; the example configs go beside the docs, to be copied to
# /etc/deformd/ (ConfigurationDirectory of the units).
install:
	@test -x $(BUILD_DIR)/bin/deformd || { echo "make install: no $(BUILD_DIR)/bin/deformd: run make first"; exit 1; }
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(PREFIX)/share/deformd/examples \
	  $(DESTDIR)$(PREFIX)/share/doc/deformd
	install -m 0755 $(BUILD_DIR)/bin/deformd $(BUILD_DIR)/bin/deformctl $(DESTDIR)$(BINDIR)/
	for t in deform-bench deform-view; do \
	  if [ -x $(BUILD_DIR)/bin/$$t ]; then install -m 0755 $(BUILD_DIR)/bin/$$t $(DESTDIR)$(BINDIR)/; fi; done
	for u in deploy/systemd/*.service; do \
	  sed 's|@BINDIR@|$(BINDIR)|g' $$u > $(DESTDIR)$(UNITDIR)/$$(basename $$u) && chmod 0644 $(DESTDIR)$(UNITDIR)/$$(basename $$u); done
	install -m 0644 deploy/deformd.json deploy/relay.json $(DESTDIR)$(PREFIX)/share/deformd/examples/
	install -m 0644 README.md docs/*.md $(DESTDIR)$(PREFIX)/share/doc/deformd/

# libFuzzer targets built with clang in build-fuzz, each run for FUZZ_SECONDS.
fuzz: deps
	JOBS=$(JOBS) bash tests/fuzz/run.sh $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) build-check-gcc build-check-clang build-fuzz
