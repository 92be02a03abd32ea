/* Traces of calls: what a context did and when (kiln_trace_t, runtime.h).
 *
 * A context with a trace appends one event per call, dispatch, allocation and
 * global store; with none, each of those costs one pointer test. Events name
 * functions, kernels and globals by index into their module, which the trace
 * keeps alive until it is released, so a trace outlives the contexts that
 * wrote it. Appending takes the trace's mutex: contexts on several threads may
 * share one trace. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "module_internal.h"
#include "pool.h"
#include "status_internal.h"
#include "trace_internal.h"

struct kiln_trace {
  _Atomic int refs;
  pthread_mutex_t lock;
  kiln_trace_event_t* events;
  size_t count, capacity;
  uint64_t dropped; /* events lost to a failed allocation */
  const kiln_module_t** modules; /* retained, one reference each */
  size_t module_count, module_capacity;
  uint64_t origin_ns; /* timestamps are written relative to this */
};

uint64_t kiln_trace_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A small number per thread, for the trace's thread ids. */
static _Thread_local uint32_t t_thread_id;
static _Atomic uint32_t g_next_thread_id = 1;

uint32_t kiln_trace_thread_id(void) {
  if (!t_thread_id) t_thread_id = g_next_thread_id++;
  return t_thread_id;
}

kiln_status_t kiln_trace_create(kiln_trace_t** out) {
  if (!out) return kiln_make_status(KILN_INVALID_ARGUMENT, "trace_create: out is NULL");
  *out = NULL;
  kiln_trace_t* t = calloc(1, sizeof *t);
  if (!t) return kiln_make_status(KILN_OUT_OF_MEMORY, "allocating a trace");
  if (pthread_mutex_init(&t->lock, NULL) != 0) {
    free(t);
    return kiln_make_status(KILN_INTERNAL, "trace_create: pthread_mutex_init failed");
  }
  t->refs = 1;
  t->origin_ns = kiln_trace_now_ns();
  *out = t;
  return NULL;
}

void kiln_trace_retain(kiln_trace_t* trace) {
  if (trace) trace->refs++;
}

void kiln_trace_release(kiln_trace_t* trace) {
  if (!trace || --trace->refs > 0) return;
  for (size_t i = 0; i < trace->module_count; ++i)
    kiln_module_release((kiln_module_t*)(uintptr_t)trace->modules[i]);
  free(trace->modules);
  free(trace->events);
  pthread_mutex_destroy(&trace->lock);
  free(trace);
}

/* Keeps `module` alive for the trace; 0 when that failed (the event is dropped). */
static int hold_module(kiln_trace_t* t, const kiln_module_t* module) {
  for (size_t i = t->module_count; i-- > 0;)
    if (t->modules[i] == module) return 1;
  if (t->module_count == t->module_capacity) {
    size_t capacity = t->module_capacity ? 2 * t->module_capacity : 4;
    const kiln_module_t** grown = realloc(t->modules, capacity * sizeof *grown);
    if (!grown) return 0;
    t->modules = grown;
    t->module_capacity = capacity;
  }
  kiln_module_retain((kiln_module_t*)(uintptr_t)module);
  t->modules[t->module_count++] = module;
  return 1;
}

/* kiln_trace_record with the lock held. */
static void record_locked(kiln_trace_t* t, const kiln_trace_event_t* event) {
  if (t->count == t->capacity) {
    size_t capacity = t->capacity ? 2 * t->capacity : 256;
    kiln_trace_event_t* grown = realloc(t->events, capacity * sizeof *grown);
    if (!grown) {
      t->dropped++;
      return;
    }
    t->events = grown;
    t->capacity = capacity;
  }
  if (!hold_module(t, event->module)) {
    t->dropped++;
  } else {
    t->events[t->count] = *event;
    if (!event->thread) t->events[t->count].thread = kiln_trace_thread_id();
    t->count++;
  }
}

void kiln_trace_record(kiln_trace_t* t, const kiln_trace_event_t* event) {
  pthread_mutex_lock(&t->lock);
  record_locked(t, event);
  pthread_mutex_unlock(&t->lock);
}

void kiln_trace_record_dispatch(kiln_trace_t* t, const kiln_trace_event_t* dispatch,
                                const kiln_pool_slice_t* slices, uint32_t slice_count) {
  pthread_mutex_lock(&t->lock);
  record_locked(t, dispatch);
  for (uint32_t i = 0; i < slice_count; ++i) {
    const kiln_pool_slice_t* sl = &slices[i];
    kiln_trace_event_t e = {dispatch->module, sl->start_ns, sl->end_ns - sl->start_ns,
                            sl->first_workgroup, dispatch->index, sl->workgroups, sl->thread,
                            (uint16_t)sl->worker, KILN_TRACE_SLICE};
    record_locked(t, &e);
  }
  pthread_mutex_unlock(&t->lock);
}

size_t kiln_trace_event_count(const kiln_trace_t* trace) { return trace ? trace->count : 0; }

uint64_t kiln_trace_dropped_count(const kiln_trace_t* trace) { return trace ? trace->dropped : 0; }

static const char* event_name(const kiln_trace_event_t* e) {
  const kiln_module_t* m = e->module;
  switch (e->kind) {
    case KILN_TRACE_CALL: return m->functions[e->index].name;
    case KILN_TRACE_DISPATCH:
    case KILN_TRACE_SLICE: return m->kernels[e->index].name;
    case KILN_TRACE_GLOBAL_STORE: return m->globals[e->index].info.name;
    default: return "alloc";
  }
}

static const char* const kCategories[] = {"call", "dispatch", "alloc", "global.store",
                                          "workgroups"};

/* A JSON string: quotes, backslashes and control characters escaped; bytes
 * that are not ASCII printable written as \u00XX, so any name stays valid. */
static void write_json_string(FILE* f, const char* text) {
  fputc('"', f);
  for (const unsigned char* c = (const unsigned char*)text; *c; ++c) {
    if (*c == '"' || *c == '\\') fprintf(f, "\\%c", *c);
    else if (*c < 0x20 || *c >= 0x7f) fprintf(f, "\\u%04x", *c);
    else fputc(*c, f);
  }
  fputc('"', f);
}

/* A "thread_name" metadata event per thread of the trace: "kiln worker N" for
 * the pool's threads, "thread T" for the threads that called in (their slices
 * are the workgroups they ran themselves). With the trace's lock held. */
static void write_thread_names(FILE* f, const kiln_trace_t* t) {
  uint32_t* seen = NULL;
  size_t n = 0, capacity = 0;
  for (size_t i = 0; i < t->count; ++i) {
    const kiln_trace_event_t* e = &t->events[i];
    size_t k = 0;
    while (k < n && seen[k] != e->thread) ++k;
    if (k < n) continue;
    if (n == capacity) {
      size_t grown = capacity ? 2 * capacity : 16;
      uint32_t* g = realloc(seen, grown * sizeof *g);
      if (!g) break; /* out of memory: the tracks stay unnamed */
      seen = g;
      capacity = grown;
    }
    seen[n++] = e->thread;
    uint32_t worker = 0;
    for (size_t j = i; j < t->count && !worker; ++j)
      if (t->events[j].thread == e->thread && t->events[j].kind == KILN_TRACE_SLICE)
        worker = t->events[j].depth;
    fprintf(f, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %" PRIu32
            ", \"args\": {\"name\": \"", e->thread);
    if (worker) fprintf(f, "kiln worker %" PRIu32 "\"}}", worker);
    else fprintf(f, "thread %" PRIu32 "\"}}", e->thread);
  }
  free(seen);
}

kiln_status_t kiln_trace_write_json(kiln_trace_t* trace, const char* path) {
  if (!trace || !path)
    return kiln_make_status(KILN_INVALID_ARGUMENT, "trace_write_json: trace or path is NULL");
  FILE* f = fopen(path, "w");
  if (!f) return kiln_make_status(KILN_NOT_FOUND, "cannot write trace file '%s'", path);
  pthread_mutex_lock(&trace->lock);
  fputs("{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n", f);
  fputs("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": \"kiln\"}}", f);
  write_thread_names(f, trace);
  for (size_t i = 0; i < trace->count; ++i) {
    const kiln_trace_event_t* e = &trace->events[i];
    double ts = (double)(e->start_ns - trace->origin_ns) / 1e3;
    fputs(",\n{\"name\": ", f);
    write_json_string(f, event_name(e));
    fprintf(f, ", \"cat\": \"%s\", \"pid\": 1, \"tid\": %" PRIu32 ", \"ts\": %.3f",
            kCategories[e->kind], e->thread, ts);
    if (e->kind == KILN_TRACE_CALL || e->kind == KILN_TRACE_DISPATCH || e->kind == KILN_TRACE_SLICE)
      fprintf(f, ", \"ph\": \"X\", \"dur\": %.3f", (double)e->duration_ns / 1e3);
    else
      fputs(", \"ph\": \"i\", \"s\": \"t\"", f);
    fputs(", \"args\": {\"module\": ", f);
    write_json_string(f, e->module->name);
    if (e->kind != KILN_TRACE_SLICE) fprintf(f, ", \"bytes\": %" PRIu64, e->bytes);
    if (e->kind == KILN_TRACE_DISPATCH || e->kind == KILN_TRACE_SLICE)
      fprintf(f, ", \"workgroups\": %" PRIu32, e->workgroups);
    if (e->kind == KILN_TRACE_SLICE)
      fprintf(f, ", \"worker\": %u, \"first_workgroup\": %" PRIu64, (unsigned)e->depth,
              e->bytes);
    fputs("}}", f);
  }
  fputs("\n]}\n", f);
  pthread_mutex_unlock(&trace->lock);
  if (fclose(f) != 0) return kiln_make_status(KILN_INTERNAL, "writing trace file '%s' failed", path);
  return NULL;
}

size_t kiln_trace_kernel_stats(kiln_trace_t* trace, kiln_kernel_stats_t* out, size_t capacity) {
  size_t distinct = 0;
  if (!trace) return 0;
  pthread_mutex_lock(&trace->lock);
  /* First-seen order; a kernel is (module, index). Quadratic in the number of
   * distinct kernels, which is small; linear in the events. */
  const kiln_module_t** seen_module = NULL;
  uint32_t* seen_index = NULL;
  size_t seen_capacity = 0;
  for (size_t i = 0; i < trace->count; ++i) {
    const kiln_trace_event_t* e = &trace->events[i];
    if (e->kind != KILN_TRACE_DISPATCH) continue;
    size_t k = 0;
    while (k < distinct && !(seen_module[k] == e->module && seen_index[k] == e->index)) ++k;
    if (k == distinct) {
      if (distinct == seen_capacity) {
        size_t grown = seen_capacity ? 2 * seen_capacity : 16;
        const kiln_module_t** m2 = realloc(seen_module, grown * sizeof *m2);
        if (m2) seen_module = m2;
        uint32_t* i2 = m2 ? realloc(seen_index, grown * sizeof *i2) : NULL;
        if (i2) seen_index = i2;
        if (!m2 || !i2) break; /* out of memory: the statistics so far */
        seen_capacity = grown;
      }
      seen_module[distinct] = e->module;
      seen_index[distinct] = e->index;
      if (distinct < capacity) {
        out[distinct].name = e->module->kernels[e->index].name;
        out[distinct].dispatches = 0;
        out[distinct].total_ns = 0;
        out[distinct].bytes = 0;
        out[distinct].flops = 0;
      }
      distinct++;
    }
    if (k < capacity) {
      out[k].dispatches++;
      out[k].total_ns += e->duration_ns;
      out[k].bytes += e->bytes;
      out[k].flops += e->module->kernels[e->index].flops;
    }
  }
  free(seen_module);
  free(seen_index);
  pthread_mutex_unlock(&trace->lock);
  return distinct;
}

uint64_t kiln_trace_call_ns(kiln_trace_t* trace, uint64_t* calls) {
  uint64_t total = 0, n = 0;
  if (trace) {
    pthread_mutex_lock(&trace->lock);
    for (size_t i = 0; i < trace->count; ++i)
      if (trace->events[i].kind == KILN_TRACE_CALL && trace->events[i].depth == 0) {
        total += trace->events[i].duration_ns;
        n++;
      }
    pthread_mutex_unlock(&trace->lock);
  }
  if (calls) *calls = n;
  return total;
}
