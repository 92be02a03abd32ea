#!/usr/bin/env bash
# Builds and runs the kiln fuzz targets (docs/testing.md, "Fuzzing").
#
#   fuzz/run.sh --seconds N [--ci] [--jobs J] [--targets "load invoke print"]
#
# Steps: install clang if missing (fuzz/setup.sh); build build/fuzz with CMake;
# write the seed modules (fuzz/make_seeds.py, host-specific) to
# build/fuzz/seeds; replay fuzz/regressions/*.vmfb through every target; then
# fuzz each target for N seconds, one process at a time. Corpora grow in
# build/fuzz/corpus/<target> across runs; --ci starts from the seeds alone in
# build/fuzz/corpus-ci/<target>, so a CI run takes the same time every time
# (fuzz_print, the debug.print formatter alone at ~1000 inputs/s, gets at
# most 4 s of it).
# --jobs J > 1 runs J fuzzing processes per target (libFuzzer's -fork=J)
# sharing the corpus: for long runs on a machine with cores to spare.
# A finding stops the run with a non-zero status; the input is saved as
# build/fuzz/artifacts/<target>-crash-* (or leak-*, timeout-*, oom-*).
#
# Environment: PYTHON (default .venv/bin/python), FUZZ_BUILD (default build/fuzz).
set -euo pipefail

cd "$(dirname "$0")/.."
seconds=60
ci=0
jobs=1
targets="load invoke print"
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --ci) ci=1; shift ;;
    --jobs) jobs="$2"; shift 2 ;;
    --targets) targets="$2"; shift 2 ;;
    *) echo "usage: fuzz/run.sh --seconds N [--ci] [--jobs J] [--targets \"load invoke print\"]" >&2
       exit 2 ;;
  esac
done

python=${PYTHON:-.venv/bin/python}
build=${FUZZ_BUILD:-build/fuzz}

bash fuzz/setup.sh
CC=clang cmake -S fuzz -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --parallel 2 >/dev/null
"$python" fuzz/make_seeds.py "$build/seeds"

mkdir -p "$build/artifacts" "$build/logs"

# Inputs that once found a bug: each target must get through all of them.
shopt -s nullglob
regressions=(fuzz/regressions/*.vmfb)
if [ ${#regressions[@]} -gt 0 ]; then
  for t in $targets; do
    "$build/fuzz_$t" -runs=1 "${regressions[@]}" >"$build/logs/$t-regressions.log" 2>&1 || {
      tail -n 40 "$build/logs/$t-regressions.log"
      echo "fuzz_$t: a regression input fails (log: $build/logs/$t-regressions.log)" >&2
      exit 1
    }
    echo "fuzz_$t: ${#regressions[@]} regression inputs pass"
  done
fi

for t in $targets; do
  corpus="$build/corpus/$t"
  if [ "$ci" = 1 ]; then
    corpus="$build/corpus-ci/$t"
    rm -rf "$corpus"
  fi
  mkdir -p "$corpus"
  # invoke: fewer stacked mutations per input, so more mutants still load and run.
  extra=()
  [ "$t" = invoke ] && extra=(-mutate_depth=2)
  [ "$jobs" -gt 1 ] && extra+=(-fork="$jobs")
  log="$build/logs/$t.log"
  t_seconds=$seconds
  [ "$ci" = 1 ] && [ "$t" = print ] && [ "$seconds" -gt 4 ] && t_seconds=4
  set +e
  "$build/fuzz_$t" -max_total_time="$t_seconds" -timeout=25 -rss_limit_mb=3072 \
    -max_len=131072 -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" \
    "${extra[@]}" "$corpus" "$build/seeds" 2>&1 |
    grep -v --line-buffered 'WARNING: AddressSanitizer failed to allocate' >"$log"
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" != 0 ]; then
    tail -n 60 "$log"
    echo "fuzz_$t: FINDING (exit $rc; log: $log; input: $build/artifacts/$t-*)" >&2
    exit 1
  fi
  if [ "$jobs" -gt 1 ]; then
    # fork mode: the parent's last status line ("#runs: cov: ... exec/s: ...")
    grep -E '^#[0-9]+: cov:' "$log" | tail -n 1 | sed "s/^/fuzz_$t ($jobs jobs): /"
    echo "fuzz_$t: no finding"
  else
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    cov=$(grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*/[0-9a-zA-Z]*' "$log" | tail -n 1)
    echo "fuzz_$t: ${runs} runs in ${t_seconds} s (${rate}/s), ${cov}, no finding"
    grep '^fuzz_invoke: [0-9]* inputs' "$log" || true
  fi
done
