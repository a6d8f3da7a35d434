# Thin wrapper around CMake. The two commands a new user needs:
#   make demo   install dependencies, build, and show the bundled demo head
#   make test   install dependencies, build, and run every test
# and for developers:
#   make test-asan   the whole suite under AddressSanitizer + UndefinedBehaviorSanitizer

BUILD_DIR ?= build
ASAN_DIR  ?= build-asan
JOBS      ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all deps build build-asan test test-asan demo clean

all: build

deps:
	@bash deploy/deps.sh

build: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS)
	cmake --build $(BUILD_DIR) -j$(JOBS)

build-asan: deps
	cmake -S . -B $(ASAN_DIR) -DCMAKE_BUILD_TYPE=Debug -DDEFORMD_SANITIZE=ON $(CMAKE_ARGS)
	cmake --build $(ASAN_DIR) -j$(JOBS)

test: build
	@bash tests/run.sh $(BUILD_DIR)

test-asan: build-asan
	@bash tests/run.sh $(ASAN_DIR)

demo: build
	@bash deploy/demo.sh $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR)
