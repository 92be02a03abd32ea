/* The instance: settings and the thread pool that runs dispatches. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gdb_jit.h"
#include "instance_internal.h"
#include "status_internal.h"

struct kiln_instance {
  atomic_size_t refcount;
  kiln_pool_t* pool;
  int perf_map;
  int gdb_jit;
  uint32_t last_level_cache_kib;
};

void kiln_instance_options_initialize(kiln_instance_options_t* options) {
  if (!options) return;
  options->worker_count = 0;
  options->perf_map = 0;
  options->gdb_jit = 0;
}

int kiln_instance_perf_map(const kiln_instance_t* instance) { return instance->perf_map; }

int kiln_instance_gdb_jit(const kiln_instance_t* instance) { return instance->gdb_jit; }

uint32_t kiln_instance_last_level_cache_kib(const kiln_instance_t* instance) {
  return instance ? instance->last_level_cache_kib : 0;
}

/* "32768K", "2M", "512" (bytes) -> KiB, rounded down; 0 when the text is no size (or over 4 TiB). */
uint32_t kiln_parse_cache_size_kib(const char* text) {
  unsigned long long value = 0, scale = 1;
  const char* p = text;
  if (!p || *p < '0' || *p > '9') return 0;
  for (; *p >= '0' && *p <= '9'; ++p) {
    value = value * 10 + (unsigned long long)(*p - '0');
    if (value > (1ull << 42)) return 0;
  }
  if (*p == 'K' || *p == 'k') scale = 1ull << 10, ++p;
  else if (*p == 'M' || *p == 'm') scale = 1ull << 20, ++p;
  else if (*p == 'G' || *p == 'g') scale = 1ull << 30, ++p;
  while (*p == '\n' || *p == ' ') ++p;
  if (*p) return 0;
  value = value * scale / 1024;
  return value > 0xffffffffull ? 0 : (uint32_t)value;
}

/* The largest data or unified cache of CPU 0 (Linux sysfs), in KiB; 0 where unknown. */
static uint32_t detect_last_level_cache_kib(void) {
  uint32_t best = 0;
#if defined(__linux__)
  for (int i = 0; i < 16; ++i) {
    char path[96], text[64];
    FILE* f;
    size_t n;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
    if (!(f = fopen(path, "r"))) continue;
    n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    if (strncmp(text, "Instruction", 11) == 0) continue;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    if (!(f = fopen(path, "r"))) continue;
    n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    uint32_t kib = kiln_parse_cache_size_kib(text);
    if (kib > best) best = kib;
  }
#endif
  return best;
}

/* KILN_LAST_LEVEL_CACHE (bytes, or with a K/M/G suffix) overrides the detected size (a testing and tuning
 * aid; 0 or text that is no size: unknown). */
static uint32_t last_level_cache_kib(void) {
  const char* forced = getenv("KILN_LAST_LEVEL_CACHE");
  if (forced) return kiln_parse_cache_size_kib(forced);
  return detect_last_level_cache_kib();
}

kiln_status_t kiln_instance_create(const kiln_instance_options_t* options,
                                   kiln_instance_t** out) {
  if (!out) return kiln_make_status(KILN_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  kiln_instance_options_t defaults;
  kiln_instance_options_initialize(&defaults);
  if (!options) options = &defaults;

  kiln_instance_t* instance = calloc(1, sizeof(*instance));
  if (!instance) {
    return kiln_make_status(KILN_OUT_OF_MEMORY, "cannot allocate an instance");
  }
  atomic_init(&instance->refcount, 1);
  instance->perf_map = options->perf_map != 0;
  instance->gdb_jit = options->gdb_jit != 0 || kiln_gdb_jit_requested_by_environment();
  instance->last_level_cache_kib = last_level_cache_kib();
  kiln_status_t status = kiln_pool_create(options->worker_count, &instance->pool);
  if (status) {
    free(instance);
    return kiln_status_annotate(status, "creating an instance");
  }
  *out = instance;
  return NULL;
}

void kiln_instance_retain(kiln_instance_t* instance) {
  if (instance) atomic_fetch_add_explicit(&instance->refcount, 1, memory_order_relaxed);
}

void kiln_instance_release(kiln_instance_t* instance) {
  if (!instance) return;
  if (atomic_fetch_sub_explicit(&instance->refcount, 1, memory_order_acq_rel) != 1) {
    return;
  }
  kiln_pool_free(instance->pool);
  free(instance);
}

uint32_t kiln_instance_worker_count(const kiln_instance_t* instance) {
  return instance ? kiln_pool_worker_count(instance->pool) : 0;
}

kiln_pool_t* kiln_instance_pool(kiln_instance_t* instance) {
  return instance ? instance->pool : NULL;
}
