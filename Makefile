# The two commands of the README: `make run` and `make test`. Everything else is a building block.
BUILD_DIR ?= build
ASAN_DIR ?= build-asan
FUZZ_DIR ?= build-fuzz
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 60
MODEL ?= models/stories260K.gguf
PROMPT ?= Once upon a time
CMAKE_GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo Ninja || echo "Unix Makefiles")

.PHONY: deps build run test asan-test fuzz bench format clean

deps:
	@bash scripts/install-deps.sh

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) -G "$(CMAKE_GENERATOR)" -DCMAKE_BUILD_TYPE=Release

build: deps $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j $(JOBS)

# Generates a story greedily on the bundled model and traces every op into runs/<date-time>-<model>/.
run: build
	$(BUILD_DIR)/tensortrace run -m $(MODEL) -p "$(PROMPT)" -n 64 --temp 0

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# The whole suite under AddressSanitizer and UndefinedBehaviorSanitizer.
asan-test: deps
	cmake -S . -B $(ASAN_DIR) -G "$(CMAKE_GENERATOR)" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTT_SANITIZE=ON -DTT_WEB=OFF
	cmake --build $(ASAN_DIR) -j $(JOBS)
	cd $(ASAN_DIR) && ctest --output-on-failure -j $(JOBS)

# libFuzzer targets, each run for FUZZ_SECONDS (make fuzz FUZZ_SECONDS=600 for a longer local run).
fuzz: deps
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_DIR) -G "$(CMAKE_GENERATOR)" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTT_FUZZ=ON -DTT_WEB=OFF
	cmake --build $(FUZZ_DIR) -j $(JOBS) --target fuzz_gguf fuzz_trace fuzz_rundir
	bash fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS) gguf
	bash fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS) trace
	bash fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS) rundir

bench: build
	$(BUILD_DIR)/bench/tt_bench

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(FUZZ_DIR)
