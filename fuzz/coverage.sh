#!/usr/bin/env bash
# Line coverage of runtime-c/src by the fuzz corpora (docs/testing.md, "Fuzzing").
#
#   fuzz/coverage.sh        (after fuzz/run.sh: needs build/fuzz/seeds and corpora)
#
# Builds the targets once more with clang's source-based coverage (sanitizers
# kept: they make huge allocations fail as in the fuzzing build) in
# build/fuzz-cov, replays build/fuzz/seeds and
# build/fuzz/corpus/<target> through each target (-runs=0: every input once)
# and prints llvm-cov's per-file report of the two runs together.
set -euo pipefail

cd "$(dirname "$0")/.."
fuzz=${FUZZ_BUILD:-build/fuzz}
cov=${FUZZ_COV_BUILD:-build/fuzz-cov}
bash fuzz/setup.sh
major=$(clang --version | sed -n 's/.*clang version \([0-9][0-9]*\).*/\1/p' | head -n 1)
profdata=$(command -v "llvm-profdata-$major" || command -v llvm-profdata)
llvmcov=$(command -v "llvm-cov-$major" || command -v llvm-cov)

flags="-fprofile-instr-generate -fcoverage-mapping"
CC=clang cmake -S fuzz -B "$cov" -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" >/dev/null
cmake --build "$cov" --parallel 2 >/dev/null
rm -f "$cov"/*.profraw
for t in load invoke print; do
  mkdir -p "$fuzz/corpus/$t"
  LLVM_PROFILE_FILE="$cov/$t.profraw" KILN_FUZZ_SEEDS="$fuzz/seeds" \
    "$cov/fuzz_$t" -runs=0 "$fuzz/corpus/$t" "$fuzz/seeds" >"$cov/$t.log" 2>&1
done
"$profdata" merge -o "$cov/all.profdata" "$cov"/load.profraw "$cov"/invoke.profraw "$cov"/print.profraw
"$llvmcov" report "$cov/fuzz_invoke" -object "$cov/fuzz_load" -object "$cov/fuzz_print" \
  -instr-profile="$cov/all.profdata" runtime-c/src
