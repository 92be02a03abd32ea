/* The instance: settings and the thread pool that runs dispatches. */
#include <stdatomic.h>
#include <stdlib.h>

#include "gdb_jit.h"
#include "instance_internal.h"
#include "status_internal.h"

struct kiln_instance {
  atomic_size_t refcount;
  kiln_pool_t* pool;
  int perf_map;
  int gdb_jit;
};

void kiln_instance_options_initialize(kiln_instance_options_t* options) {
  if (!options) return;
  options->worker_count = 0;
  options->perf_map = 0;
  options->gdb_jit = 0;
}

int kiln_instance_perf_map(const kiln_instance_t* instance) { return instance->perf_map; }

int kiln_instance_gdb_jit(const kiln_instance_t* instance) { return instance->gdb_jit; }

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
