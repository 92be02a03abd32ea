/* Shared by test_stress.c and test_alloc_fail.c: the modules they run
 * (vm_test_modules.h's built-in ones plus the .vmfb files that
 * gen_stress_modules.py writes), deterministic arguments for any signature,
 * and a byte log of every outcome (status code and message, or every
 * result's dtype, shape and bytes) so that two runs can be compared
 * bit for bit, step by step.
 *
 * The log and the module bytes are allocated through RUNNER_REALLOC and
 * RUNNER_FREE, which test_alloc_fail.c points at the unwrapped allocator so
 * that only the runtime's allocations are counted. */
#ifndef KILN_MODULE_RUNNER_H_
#define KILN_MODULE_RUNNER_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/runtime.h"
#include "vm_test_modules.h"

#ifndef RUNNER_REALLOC
#define RUNNER_REALLOC realloc
#define RUNNER_FREE free
#endif

/* ---- modules ------------------------------------------------------------------ */

typedef struct runner_module {
  char name[32];
  const unsigned char* data;
  size_t size;
  char path[1024]; /* empty for built-in modules */
  unsigned char* owned;
} runner_module_t;

/* What gen_stress_modules.py writes; all required when a directory is given. */
static const char* const runner_file_modules[] = {"axpy", "kstress", "linear", "mlp_train",
                                                  "recurrent"};
#define RUNNER_MAX_MODULES 8

static int runner_read_file(const char* path, unsigned char** data, size_t* size) {
  FILE* f = fopen(path, "rb");
  long n;
  if (!f) return 0;
  if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return 0;
  }
  *data = RUNNER_REALLOC(NULL, (size_t)n);
  if (!*data || fread(*data, 1, (size_t)n, f) != (size_t)n) {
    RUNNER_FREE(*data);
    fclose(f);
    return 0;
  }
  fclose(f);
  *size = (size_t)n;
  return 1;
}

/* The built-in modules, then (dir != NULL) every file module; 0 on a missing file. */
static int runner_load_modules(const char* dir, runner_module_t* out, size_t* count) {
  size_t i, n = 0;
  memset(out, 0, sizeof *out * RUNNER_MAX_MODULES);
  snprintf(out[n].name, sizeof out[n].name, "vmtest");
  out[n].data = kiln_vm_test_good;
  out[n++].size = sizeof kiln_vm_test_good;
  snprintf(out[n].name, sizeof out[n].name, "vmrows");
  out[n].data = kiln_vm_test_rows;
  out[n++].size = sizeof kiln_vm_test_rows;
  for (i = 0; dir && i < sizeof runner_file_modules / sizeof *runner_file_modules; ++i) {
    runner_module_t* m = &out[n++];
    snprintf(m->name, sizeof m->name, "%s", runner_file_modules[i]);
    snprintf(m->path, sizeof m->path, "%s/%s.vmfb", dir, runner_file_modules[i]);
    if (!runner_read_file(m->path, &m->owned, &m->size)) {
      fprintf(stderr, "cannot read %s (made by runtime-c/tests/gen_stress_modules.py)\n",
              m->path);
      *count = n - 1;
      return 0;
    }
    m->data = m->owned;
  }
  *count = n;
  return 1;
}

static void runner_free_modules(runner_module_t* modules, size_t count) {
  size_t i;
  for (i = 0; i < count; ++i) RUNNER_FREE(modules[i].owned);
}

/* ---- deterministic values ------------------------------------------------------ */

static uint64_t runner_next(uint64_t* state) { /* splitmix64 */
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Fills `n` elements of `dtype`: floats in [-1, 1] (multiples of 1/128),
 * integers in [0, 24) (loop counts and indices stay small), bools 0/1; complex
 * numbers have such a float for each part. */
static void runner_fill(kiln_dtype_t dtype, void* data, size_t n, uint64_t* rng) {
  static const uint16_t f16[] = {0x0000, 0x3c00, 0xbc00, 0x3800, 0x4000, 0xb400};
  static const uint16_t bf16[] = {0x0000, 0x3f80, 0xbf80, 0x3f00, 0x4000, 0xbe80};
  size_t i;
  for (i = 0; i < n; ++i) {
    uint64_t r = runner_next(rng);
    double f = (double)((int)(r % 257) - 128) / 128.0;
    int64_t k = (int64_t)(r % 24);
    switch (dtype) {
      case KILN_DTYPE_F32: ((float*)data)[i] = (float)f; break;
      case KILN_DTYPE_F64: ((double*)data)[i] = f; break;
      case KILN_DTYPE_I8: ((int8_t*)data)[i] = (int8_t)k; break;
      case KILN_DTYPE_I16: ((int16_t*)data)[i] = (int16_t)k; break;
      case KILN_DTYPE_I32: ((int32_t*)data)[i] = (int32_t)k; break;
      case KILN_DTYPE_I64: ((int64_t*)data)[i] = k; break;
      case KILN_DTYPE_U8: ((uint8_t*)data)[i] = (uint8_t)k; break;
      case KILN_DTYPE_U16: ((uint16_t*)data)[i] = (uint16_t)k; break;
      case KILN_DTYPE_U32: ((uint32_t*)data)[i] = (uint32_t)k; break;
      case KILN_DTYPE_U64: ((uint64_t*)data)[i] = (uint64_t)k; break;
      case KILN_DTYPE_BOOL: ((uint8_t*)data)[i] = (uint8_t)(r & 1); break;
      case KILN_DTYPE_F16: ((uint16_t*)data)[i] = f16[r % 6]; break;
      case KILN_DTYPE_BF16: ((uint16_t*)data)[i] = bf16[r % 6]; break;
      case KILN_DTYPE_C64:
        ((float*)data)[2 * i] = (float)f;
        ((float*)data)[2 * i + 1] = (float)((double)((int)(r >> 32) % 257) / 128.0);
        break;
      case KILN_DTYPE_C128:
        ((double*)data)[2 * i] = f;
        ((double*)data)[2 * i + 1] = (double)((int)(r >> 32) % 257) / 128.0;
        break;
    }
  }
}

/* A new view of the given type holding runner_fill values. */
static kiln_status_t runner_value(const kiln_value_info_t* info, uint64_t* rng,
                                  kiln_buffer_view_t** out) {
  kiln_status_t s = kiln_buffer_view_create(info->dtype, info->rank, info->shape, NULL, 0, out);
  if (s) return s;
  runner_fill(info->dtype, kiln_buffer_view_mutable_data(*out),
              kiln_buffer_view_element_count(*out), rng);
  return NULL;
}

#define RUNNER_MAX_ARGS 64

/* Arguments for `f` (none for more than RUNNER_MAX_ARGS); on error none are
 * left. */
static kiln_status_t runner_args(kiln_function_t f, uint64_t* rng, kiln_buffer_view_t** args,
                                 size_t* count) {
  size_t i, n = kiln_function_arg_count(f);
  kiln_status_t s = NULL;
  *count = 0;
  if (n > RUNNER_MAX_ARGS) return NULL; /* the call then fails on the count */
  for (i = 0; i < n && !s; ++i) {
    kiln_value_info_t info;
    if (!(s = kiln_function_arg_info(f, i, &info))) s = runner_value(&info, rng, &args[i]);
    if (!s) *count = i + 1;
  }
  if (s) {
    for (i = 0; i < *count; ++i) kiln_buffer_view_release(args[i]);
    *count = 0;
  }
  return s;
}

static void runner_release(kiln_buffer_view_t** views, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) kiln_buffer_view_release(views[i]);
}

/* ---- the outcome log ----------------------------------------------------------- */

typedef struct runner_log {
  unsigned char* data;
  size_t size, capacity;
  size_t* marks; /* marks[k]: where step k ends */
  size_t steps, marks_capacity;
  int oom; /* the log itself ran out of memory */
} runner_log_t;

static void runner_log_bytes(runner_log_t* log, const void* bytes, size_t n) {
  if (log->oom) return;
  if (log->size + n > log->capacity) {
    size_t cap = log->capacity ? log->capacity : 4096;
    unsigned char* grown;
    while (cap < log->size + n) cap *= 2;
    grown = RUNNER_REALLOC(log->data, cap);
    if (!grown) {
      log->oom = 1;
      return;
    }
    log->data = grown;
    log->capacity = cap;
  }
  if (n) memcpy(log->data + log->size, bytes, n);
  log->size += n;
}

static void runner_log_u64(runner_log_t* log, uint64_t v) { runner_log_bytes(log, &v, sizeof v); }

/* Ends a step. */
static void runner_log_mark(runner_log_t* log) {
  if (log->oom) return;
  if (log->steps == log->marks_capacity) {
    size_t cap = log->marks_capacity ? 2 * log->marks_capacity : 256;
    size_t* grown = RUNNER_REALLOC(log->marks, cap * sizeof *grown);
    if (!grown) {
      log->oom = 1;
      return;
    }
    log->marks = grown;
    log->marks_capacity = cap;
  }
  log->marks[log->steps++] = log->size;
}

static void runner_log_free(runner_log_t* log) {
  RUNNER_FREE(log->data);
  RUNNER_FREE(log->marks);
  memset(log, 0, sizeof *log);
}

/* Step k's bytes. */
static const unsigned char* runner_log_step(const runner_log_t* log, size_t k, size_t* n) {
  size_t begin = k ? log->marks[k - 1] : 0;
  *n = log->marks[k] - begin;
  return log->data + begin;
}

/* The status's code (0 for OK) and message. */
static void runner_log_status(runner_log_t* log, kiln_status_t s) {
  const char* message = kiln_status_message(s);
  runner_log_u64(log, (uint64_t)kiln_status_code(s));
  runner_log_u64(log, strlen(message));
  runner_log_bytes(log, message, strlen(message));
}

static void runner_log_view(runner_log_t* log, const kiln_buffer_view_t* v) {
  size_t rank = kiln_buffer_view_rank(v);
  runner_log_u64(log, (uint64_t)kiln_buffer_view_dtype(v));
  runner_log_u64(log, rank);
  runner_log_bytes(log, kiln_buffer_view_shape(v), rank * sizeof(int64_t));
  runner_log_u64(log, kiln_buffer_view_byte_size(v));
  runner_log_bytes(log, kiln_buffer_view_data(v), kiln_buffer_view_byte_size(v));
}

/* The status code a logged step starts with. */
static kiln_status_code_t runner_step_code(const unsigned char* step, size_t n) {
  uint64_t code = 0;
  if (n >= sizeof code) memcpy(&code, step, sizeof code);
  return (kiln_status_code_t)code;
}

/* Invokes `f` and logs the outcome (status, then every result); returns the
 * status's code (the status itself is freed). */
static kiln_status_code_t runner_invoke(kiln_context_t* c, kiln_function_t f,
                                        kiln_buffer_view_t* const* args, size_t n,
                                        runner_log_t* log) {
  kiln_buffer_view_t* results[RUNNER_MAX_ARGS];
  size_t i, count = kiln_function_result_count(f);
  kiln_status_t s;
  kiln_status_code_t code;
  memset(results, 0, sizeof results);
  s = kiln_context_invoke(c, f, args, n, results, RUNNER_MAX_ARGS);
  code = kiln_status_code(s);
  runner_log_status(log, s);
  kiln_status_free(s);
  for (i = 0; !code && i < count; ++i) runner_log_view(log, results[i]);
  if (!code) runner_release(results, count);
  return code;
}

/* Logs every global of the context by name (get_global), or the error. */
static kiln_status_code_t runner_log_globals(kiln_context_t* c, const kiln_module_t* m,
                                             runner_log_t* log) {
  size_t i;
  for (i = 0; i < kiln_module_global_count(m); ++i) {
    kiln_value_info_t info;
    kiln_buffer_view_t* v = NULL;
    kiln_status_t s = kiln_module_global_info(m, i, &info);
    if (!s) s = kiln_context_get_global(c, info.name, &v);
    runner_log_status(log, s);
    if (s) {
      kiln_status_code_t code = kiln_status_code(s);
      kiln_status_free(s);
      return code;
    }
    runner_log_view(log, v);
    kiln_buffer_view_release(v);
  }
  return KILN_OK;
}

/* Copies every global of `from` into `to` (get_global + set_global); logs the
 * first error. */
static kiln_status_code_t runner_copy_globals(kiln_context_t* from, kiln_context_t* to,
                                              const kiln_module_t* m, runner_log_t* log) {
  size_t i;
  kiln_status_t s = NULL;
  for (i = 0; i < kiln_module_global_count(m) && !s; ++i) {
    kiln_value_info_t info;
    kiln_buffer_view_t* v = NULL;
    if (!(s = kiln_module_global_info(m, i, &info)) &&
        !(s = kiln_context_get_global(from, info.name, &v)))
      s = kiln_context_set_global(to, info.name, v);
    kiln_buffer_view_release(v);
  }
  runner_log_status(log, s);
  {
    kiln_status_code_t code = kiln_status_code(s);
    kiln_status_free(s);
    return code;
  }
}

#endif
