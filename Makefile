# Convenience wrapper over CMake. `make run` and `make test` do all set-up.
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)
MODEL ?= models/SmolLM2-135M-Instruct.Q4_1.gguf
PROMPT ?= The three most important things about the ocean are
CMAKE_FLAGS ?=

.PHONY: all setup build run test test-asan install clean model

all: build

setup:
	@bash scripts/setup.sh

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

model:
	@bash scripts/fetch_model.sh

run: setup build model
	./$(BUILD)/tallow run -m $(MODEL) -p "$(PROMPT)" -n 128 --temp 0

# Every test: the release build's suite, the sanitizer build's suite, and
# the CUDA compile check when nvcc is present; ends with one summary line.
test: setup
	@bash scripts/test.sh

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-cuda-ci build-fuzz
