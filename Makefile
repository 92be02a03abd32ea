# The README's two commands: `make demo` (export an example and run it in the
# standalone C runtime) and `make test` (every test: pytest, C tests, and the C
# tests plus module-corruption tests under AddressSanitizer and UBSan, the C
# tests under ThreadSanitizer, and the allocation-failure test).

PYTHON ?= python3
VENV := .venv

# Python writes its bytecode caches (__pycache__/, gitignored) even where the environment asks it not to
# (PYTHONDONTWRITEBYTECODE=1 is common in container images): the tests start hundreds of Python processes
# that import kiln (the CLI, benchmark workers, scripts), and without the caches each one compiles ~250
# modules from source again, about 0.45 s of CPU each (the benchmarks' quick run took twice the CPU time).
unexport PYTHONDONTWRITEBYTECODE
BIN := $(VENV)/bin
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
RUNTIME_BUILD := build/runtime-c
SANITIZE_BUILD := build/runtime-c-sanitize

.PHONY: demo test install runtime runtime-sanitize pytest ctest ctest-sanitize clean browser debugger

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# pip install -e builds the runtime with scikit-build-core and CMake (pyproject.toml) into
# build/editable; copy-installed then puts libkiln_runtime.so and kiln-run into vm/_native/,
# where the tests and kiln.vm._native look first. The distribution was called "kiln" before it
# became kiln-compiler: an editable install under the old name is removed first.
$(VENV)/.installed: $(BIN)/python pyproject.toml $(wildcard runtime-c/src/*.c runtime-c/src/*.h runtime-c/src/generated/*.h runtime-c/include/kiln/*.h runtime-c/tools/*.c runtime-c/tools/io/*.c runtime-c/tools/io/*.h runtime-c/CMakeLists.txt runtime-c/cmake/*)
	if $(BIN)/python -m pip show --quiet kiln >/dev/null 2>&1; then $(BIN)/python -m pip uninstall --quiet --yes kiln; fi
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m kiln.vm._native copy-installed >/dev/null
	touch $@

install: $(VENV)/.installed

runtime:
	cmake -S runtime-c -B $(RUNTIME_BUILD) -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=ON >/dev/null
	cmake --build $(RUNTIME_BUILD) --parallel $(JOBS)

runtime-sanitize:
	cmake -S runtime-c -B $(SANITIZE_BUILD) -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON \
		-DKILN_BUILD_TESTS=ON >/dev/null
	cmake --build $(SANITIZE_BUILD) --parallel $(JOBS)

demo: install runtime
	$(BIN)/kiln export examples/linear.py:Linear -o build/linear.vmfb
	$(RUNTIME_BUILD)/kiln-run --module=build/linear.vmfb --list
	$(RUNTIME_BUILD)/kiln-run --module=build/linear.vmfb --function=predict \
		--input=4x3xf32=0.5,-1,2,0,1,1,-2,0.25,3,1,1,1
	$(RUNTIME_BUILD)/kiln-run --module=build/linear.vmfb --function=predict_batch_mean \
		--input=4x3xf32=0.5,-1,2,0,1,1,-2,0.25,3,1,1,1

ctest: runtime
	ctest --test-dir $(RUNTIME_BUILD) --output-on-failure

ctest-sanitize: runtime-sanitize
	ctest --test-dir $(SANITIZE_BUILD) --output-on-failure

# Modules with kernels compiled for this host and kiln-exported programs, for
# test_stress and test_alloc_fail (remade every time: they follow the compiler).
TEST_MODULES := build/test-modules
TSAN_BUILD := build/runtime-c-tsan
ALLOC_FAIL_BUILD := build/runtime-c-alloc-fail
.PHONY: test-modules ctest-tsan ctest-alloc-fail
test-modules: install
	$(BIN)/python runtime-c/tests/gen_stress_modules.py $(TEST_MODULES)

# Every C test under ThreadSanitizer, the thread stress test with those modules.
# Run without address randomization where setarch can: TSan's shadow memory
# layout fails on kernels with high mmap entropy (vm.mmap_rnd_bits > 28).
NO_ASLR := $(shell setarch $$(uname -m) -R true >/dev/null 2>&1 && echo setarch $$(uname -m) -R)
ctest-tsan: test-modules
	cmake -S runtime-c -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_TSAN=ON -DKILN_BUILD_TESTS=ON \
		-DKILN_TEST_MODULES=$(abspath $(TEST_MODULES)) >/dev/null
	cmake --build $(TSAN_BUILD) --parallel $(JOBS)
	$(NO_ASLR) ctest --test-dir $(TSAN_BUILD) --output-on-failure

# The allocation-failure and stress tests with those modules under ASan+UBSan+LSan.
ctest-alloc-fail: test-modules
	cmake -S runtime-c -B $(ALLOC_FAIL_BUILD) -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON -DKILN_BUILD_TESTS=ON \
		-DKILN_TEST_MODULES=$(abspath $(TEST_MODULES)) >/dev/null
	cmake --build $(ALLOC_FAIL_BUILD) --parallel $(JOBS) --target test_alloc_fail test_stress
	ctest --test-dir $(ALLOC_FAIL_BUILD) --output-on-failure -R '^(alloc_fail|stress)$$'

# --durations: the 25 slowest tests at the end of every run's log, for keeping it within CI's budget.
pytest: install runtime-sanitize browser debugger
	KILN_SANITIZE_BUILD=$(abspath $(SANITIZE_BUILD)) $(BIN)/python -m pytest -q --durations=25

test: install ctest ctest-sanitize ctest-tsan ctest-alloc-fail fuzz-ci pytest

# Headless Chromium for the test that renders `kiln dump --html`'s page (installed when missing).
browser:
	bash tests/install_debian_package.sh chromium "chromium chromium-browser" "headless browser for the HTML page test"

# GDB, for the test that breaks inside a kernel registered through GDB's JIT interface (installed when missing).
debugger:
	bash tests/install_debian_package.sh gdb gdb "for the GDB JIT interface test"

clean:
	rm -rf build dist $(VENV)

# The source distribution and the wheel (kiln_compiler-VERSION-py3-none-PLATFORM.whl) in dist/,
# each built in an isolated environment from pyproject.toml's build requirements (scikit-build-core,
# and cmake when the machine has none >= 3.16), the wheel from the sdist.
.PHONY: dist
dist: install
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

# The differential suite (tests/test_differential.py) with the long hypothesis
# profile: many more generated examples than `make test` runs (docs/testing.md).
.PHONY: test-long
test-long: install
	KILN_HYPOTHESIS_PROFILE=long $(BIN)/python -m pytest -q tests/test_differential.py

# tests/programs' JAX programs in all three ways (eagerly, under kiln.jit, exported through kiln-run), the
# ones `make test` checks only eagerly (tests/test_programs.py's EAGER_ONLY) included; about 9 min on 2 cores.
.PHONY: test-programs
test-programs: install
	KILN_ALL_PROGRAMS=1 $(BIN)/python -m pytest -q tests/test_programs.py

# kiln check on the ten programs of tests/programs: no dispatch beyond tolerance, and each of their first
# elementwise kernels compiled wrong on purpose named at its first dispatch (docs/accuracy.md,
# "Checking a module's numerics"); about 1.5 min on 2 cores.
.PHONY: check-sweep
check-sweep: install
	$(BIN)/python tests/check_sweep.py

# float32 exp, log, log1p and tanh on every float32 input, for the x86-64-v4 build (the bits of v3, aarch64 and
# riscv64) and x86-64-v2 (no FMA), within the bounds of docs/accuracy.md; 10 to 30 min on 2 cores.
.PHONY: exhaustive-math
exhaustive-math: install
	$(BIN)/python tests/exhaustive_float32.py

# Fuzzing the C runtime with libFuzzer under ASan+UBSan (fuzz/, docs/testing.md
# "Fuzzing"). fuzz-ci fuzzes each target briefly from the seeds alone (part of
# `make test`); fuzz for a few minutes and fuzz-long for DURATION seconds per
# target, both growing the corpus kept in build/fuzz/corpus; FUZZ_JOBS > 1 runs
# that many processes per target. fuzz/setup.sh installs clang with libFuzzer
# when it is missing.
DURATION ?= 3600
FUZZ_JOBS ?= 1
.PHONY: fuzz fuzz-ci fuzz-long
fuzz-ci: install
	PYTHON=$(BIN)/python bash fuzz/run.sh --ci --seconds 12

fuzz: install
	PYTHON=$(BIN)/python bash fuzz/run.sh --seconds 90

fuzz-long: install
	PYTHON=$(BIN)/python bash fuzz/run.sh --seconds $(DURATION) --jobs $(FUZZ_JOBS)

# aarch64 verified by running (docs/targets.md, docs/testing.md): installs the cross compiler and qemu-user
# from Debian's packages when missing, cross-builds the runtime, its C tests and kiln-run, and runs under
# qemu the C tests, the relocation kernel, examples/linear.py, the MLP training loop in C and the op sweep
# (NEON on several CPU models, SVE at 128-2048 bit vectors), comparing with this machine's results.
# `make test` runs the short part (tests/test_cross_aarch64.py) when the tools are there or installable.
.PHONY: test-aarch64
test-aarch64: install
	bash tests/install_cross_tools.sh aarch64
	$(BIN)/python -m pytest -q tests/cross_suite.py -k aarch64 tests/test_cross_aarch64.py tests/compiler/test_link_aarch64.py

# riscv64 (rv64gc, rv64gcv) under qemu-riscv64: the C tests, the relocation kernel, examples/linear.py and the
# op sweep without and with the vector extension (128-512 bit vectors), against this machine's results.
.PHONY: test-riscv64
test-riscv64: install
	bash tests/install_cross_tools.sh riscv64
	$(BIN)/python -m pytest -q tests/cross_suite.py -k riscv64 tests/compiler/test_link_riscv64.py
