/* Small helpers of the fuzz targets (header-only: each target is one binary). */
#ifndef KILN_FUZZ_COMMON_H_
#define KILN_FUZZ_COMMON_H_

#include <stdio.h>
#include <stdlib.h>

#include "kiln/runtime.h"
#include "kiln_fuzz.h"

/* A damaged type can ask for a huge buffer: let malloc fail (the runtime
 * reports OUT_OF_MEMORY) instead of aborting, and keep each allocation small
 * enough that libFuzzer's RSS limit is not the first thing to trip. New
 * allocations are not filled with a fixed byte (max_malloc_fill_size=0), so
 * memory the runtime hands out unwritten holds stale data that differs from
 * run to run, which fuzz_invoke's two-run comparison then sees. */
const char* __asan_default_options(void);
const char* __asan_default_options(void) {
  return "allocator_may_return_null=1:max_allocation_size_mb=256:detect_leaks=1:"
         "max_malloc_fill_size=0";
}

/* One single-threaded instance for the whole run (dispatches run on the
 * calling thread, so a run is deterministic). */
static inline kiln_instance_t* kf_instance(void) {
  static kiln_instance_t* instance;
  if (!instance) {
    kiln_instance_options_t options;
    kiln_status_t s;
    kiln_instance_options_initialize(&options);
    options.worker_count = 1;
    if ((s = kiln_instance_create(&options, &instance))) {
      fprintf(stderr, "kiln_instance_create: %s\n", kiln_status_message(s));
      abort();
    }
  }
  return instance;
}

/* A failed call must say what failed, with a known code. Frees `s`. */
static inline void kf_check_status(kiln_status_t s, const char* what) {
  kiln_status_code_t code = kiln_status_code(s);
  const char* message = kiln_status_message(s);
  if (code == KILN_OK || code > KILN_DEADLINE_EXCEEDED || !message || !message[0]) {
    fprintf(stderr, "%s: status code %d with message '%s'\n", what, (int)code,
            message ? message : "(null)");
    abort();
  }
  kiln_status_free(s);
}

#endif
