/* Contexts: a module's globals, invocation with signature checks, and global
 * access by name. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buffer_internal.h"
#include "context_internal.h"
#include "status_internal.h"

int kiln_view_has_module_type(const kiln_module_t* module, const kiln_buffer_view_t* view,
                              uint32_t type) {
  const kiln_type_info_t* t = &module->types[type];
  return kiln_buffer_view_has_type(view, t->dtype, t->rank, t->shape);
}

void kiln_format_view_type(const kiln_buffer_view_t* view, char* buf, size_t size) {
  kiln_format_type(kiln_buffer_view_dtype(view), kiln_buffer_view_rank(view),
                   kiln_buffer_view_shape(view), buf, size);
}

static void release_module(void* module) { kiln_module_release(module); }

/* A global's initial value: the module's bytes used in place, or zeros. */
static kiln_status_t initial_value(kiln_module_t* m, uint32_t index,
                                   kiln_buffer_view_t** out) {
  const kiln_global_info_t* g = &m->globals[index];
  const kiln_type_info_t* t = &m->types[g->type];
  kiln_status_t s;
  if (!g->data)
    return kiln_buffer_view_create(t->dtype, t->rank, t->shape, NULL, 0, out);
  kiln_module_retain(m);
  s = kiln_buffer_view_wrap(t->dtype, t->rank, t->shape, (void*)(uintptr_t)g->data,
                            t->byte_size, release_module, m, out);
  if (s) kiln_module_release(m);
  return s;
}

kiln_status_t kiln_context_create(kiln_module_t* module, kiln_context_t** out) {
  kiln_context_t* c;
  uint32_t i;
  if (!out) return kiln_make_status(KILN_INVALID_ARGUMENT, "context_create: out is NULL");
  *out = NULL;
  if (!module)
    return kiln_make_status(KILN_INVALID_ARGUMENT, "context_create: module is NULL");
  c = calloc(1, sizeof *c);
  if (!c) return kiln_make_status(KILN_OUT_OF_MEMORY, "allocating a context");
  c->globals = calloc(module->global_count ? module->global_count : 1, sizeof *c->globals);
  c->arenas = calloc(module->function_count ? module->function_count : 1, sizeof *c->arenas);
  c->arena_busy = calloc(module->function_count ? module->function_count : 1, 1);
  c->arena_is_callers = calloc(module->function_count ? module->function_count : 1, 1);
  if (!c->globals || !c->arenas || !c->arena_busy || !c->arena_is_callers) {
    free(c->globals);
    free(c->arenas);
    free(c->arena_busy);
    free(c->arena_is_callers);
    free(c);
    return kiln_make_status(KILN_OUT_OF_MEMORY, "allocating %u globals and %u arenas",
                            (unsigned)module->global_count, (unsigned)module->function_count);
  }
  kiln_module_retain(module);
  c->module = module;
  atomic_init(&c->running, 0);
  atomic_init(&c->cancelled, 0);
  for (i = 0; i < module->global_count; ++i) {
    kiln_status_t s = initial_value(module, i, &c->globals[i]);
    if (s) {
      kiln_context_release(c);
      return kiln_status_annotate(s, "initializing global '%s'",
                                  module->globals[i].info.name);
    }
  }
  *out = c;
  return NULL;
}

void kiln_context_release(kiln_context_t* context) {
  uint32_t i;
  if (!context) return;
  for (i = 0; i < context->module->global_count; ++i)
    kiln_buffer_view_release(context->globals[i]);
  free(context->globals);
  if (context->arenas)
    for (i = 0; i < context->module->function_count; ++i)
      if (!context->arena_is_callers[i])
        kiln_memory_free(context->arenas[i],
                         kiln_arena_mapped(context->module->functions[i].transient_size));
  free(context->arenas);
  free(context->arena_busy);
  free(context->arena_is_callers);
  kiln_trace_release(context->trace);
  kiln_module_release(context->module);
  free(context);
}

kiln_status_t kiln_context_set_transient_storage(kiln_context_t* context, kiln_function_t function,
                                               void* data, size_t byte_size) {
  const kiln_function_info_t* f;
  uint32_t k;
  if (!context)
    return kiln_make_status(KILN_INVALID_ARGUMENT, "set_transient_storage: context is NULL");
  if (function.module != context->module || function.ordinal >= context->module->function_count)
    return kiln_make_status(KILN_INVALID_ARGUMENT, "set_transient_storage: the function does not "
                            "belong to this context's module '%s'", context->module->name);
  k = function.ordinal;
  f = &context->module->functions[k];
  if (context->arena_busy[k])
    return kiln_make_status(KILN_FAILED_PRECONDITION, "set_transient_storage: '%s' is running on "
                            "this context (its transient arena is in use)", f->name);
  if (data) {
    if ((uintptr_t)data % KILN_BUFFER_ALIGNMENT)
      return kiln_make_status(KILN_INVALID_ARGUMENT, "set_transient_storage: '%s': storage at %p "
                              "is not aligned to %u bytes", f->name, data,
                              (unsigned)KILN_BUFFER_ALIGNMENT);
    if ((uint64_t)byte_size < f->transient_size)
      return kiln_make_status(KILN_INVALID_ARGUMENT, "set_transient_storage: '%s' needs %llu bytes "
                              "of transient storage, got %zu", f->name,
                              (unsigned long long)f->transient_size, byte_size);
  }
  if (!context->arena_is_callers[k])
    kiln_memory_free(context->arenas[k], kiln_arena_mapped(f->transient_size));
  /* A function without an arena never reads it; storage for it is accepted and unused. */
  context->arenas[k] = f->transient_size ? (uint8_t*)data : NULL;
  context->arena_is_callers[k] = context->arenas[k] != NULL;
  return NULL;
}

static uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

kiln_status_t kiln_call_budget_check(const kiln_call_budget_t* budget, const char* where) {
  kiln_context_t* c = budget->context;
  if (atomic_load_explicit(&c->cancelled, memory_order_relaxed) == budget->call)
    return kiln_make_status(KILN_CANCELLED, "call cancelled before %s",
                            where);
  if (budget->deadline_ns && monotonic_ns() >= budget->deadline_ns)
    return kiln_make_status(KILN_DEADLINE_EXCEEDED,
                            "call ran past its timeout of %.3f s before %s",
                            (double)c->limits.timeout_ns / 1e9, where);
  return NULL;
}

void kiln_context_set_trace(kiln_context_t* context, kiln_trace_t* trace) {
  if (!context) return;
  kiln_trace_retain(trace);
  kiln_trace_release(context->trace);
  context->trace = trace;
}

/* Runs a call with its number published for kiln_context_cancel and its
 * limits armed. */
static kiln_status_t invoke_bounded(kiln_context_t* c, uint32_t ordinal,
                                    kiln_buffer_view_t* const* args,
                                    kiln_buffer_view_t** results) {
  kiln_call_budget_t budget;
  kiln_status_t s;
  /* A call made from one of this context's callbacks (a host or print
   * callback calling into the runtime) runs inside the outer call: when it
   * returns, the outer call is the running one again (kiln_context_cancel). */
  uint64_t outer = atomic_load_explicit(&c->running, memory_order_relaxed);
  budget.context = c;
  budget.call = ++c->calls;
  budget.deadline_ns = c->limits.timeout_ns ? monotonic_ns() + c->limits.timeout_ns : 0;
  budget.steps_left = c->limits.max_steps ? c->limits.max_steps : UINT64_MAX;
  atomic_store_explicit(&c->running, budget.call, memory_order_release);
  s = kiln_vm_invoke(c, ordinal, args, results, &budget);
  atomic_store_explicit(&c->running, outer, memory_order_release);
  return s;
}

/* A call into a module whose kernels need 64-byte aligned bindings (format
 * before 2.1): each argument whose data is less aligned (caller memory that
 * kiln_buffer_view_wrap accepted at its element alignment) is replaced by an
 * aligned copy for the call. */
static kiln_status_t invoke_aligned(kiln_context_t* c, uint32_t ordinal,
                                    kiln_buffer_view_t* const* args, size_t arg_count,
                                    kiln_buffer_view_t** results) {
  kiln_buffer_view_t* small[16];
  kiln_buffer_view_t** local = small;
  kiln_status_t s = NULL;
  size_t i, copies = 0;
  for (i = 0; i < arg_count; ++i)
    copies += ((uintptr_t)kiln_buffer_view_data(args[i]) % KILN_BUFFER_ALIGN) != 0;
  if (!copies) return invoke_bounded(c, ordinal, args, results);
  if (arg_count > 16 && !(local = calloc(arg_count, sizeof *local)))
    return kiln_make_status(KILN_OUT_OF_MEMORY, "%s: allocating %zu arguments",
                            c->module->functions[ordinal].name, arg_count);
  for (i = 0; i < arg_count; ++i) local[i] = NULL;
  for (i = 0; i < arg_count && !s; ++i) {
    const kiln_buffer_view_t* a = args[i];
    if (((uintptr_t)kiln_buffer_view_data(a) % KILN_BUFFER_ALIGN) == 0) continue;
    s = kiln_buffer_view_create(kiln_buffer_view_dtype(a), kiln_buffer_view_rank(a),
                                kiln_buffer_view_shape(a), kiln_buffer_view_data(a),
                                kiln_buffer_view_byte_size(a), &local[i]);
    if (s)
      s = kiln_status_annotate(s, "%s: aligning argument %zu '%s' for kernels compiled before "
                               "format 2.1", c->module->functions[ordinal].name, i,
                               c->module->functions[ordinal].args[i].name);
  }
  if (!s) {
    for (i = 0; i < arg_count; ++i)
      if (!local[i]) local[i] = args[i];
    s = invoke_bounded(c, ordinal, local, results);
  }
  for (i = 0; i < arg_count; ++i)
    if (local[i] && local[i] != args[i]) kiln_buffer_view_release(local[i]);
  if (local != small) free(local);
  return s;
}

void kiln_call_limits_initialize(kiln_call_limits_t* limits) {
  if (limits) memset(limits, 0, sizeof *limits);
}

kiln_status_t kiln_context_set_call_limits(kiln_context_t* context,
                                           const kiln_call_limits_t* limits) {
  if (!context)
    return kiln_make_status(KILN_INVALID_ARGUMENT, "set_call_limits: context is NULL");
  if (limits) context->limits = *limits;
  else kiln_call_limits_initialize(&context->limits);
  return NULL;
}

void kiln_context_cancel(kiln_context_t* context) {
  uint64_t call;
  if (!context) return;
  call = atomic_load_explicit(&context->running, memory_order_acquire);
  if (call) atomic_store_explicit(&context->cancelled, call, memory_order_relaxed);
}

/* The function a call names, once it is known to belong to the context's
 * module and to take `arg_count` arguments. */
static kiln_status_t called_function(kiln_context_t* context, kiln_function_t function,
                                     size_t arg_count, const kiln_function_info_t** out) {
  const kiln_function_info_t* f;
  if (!context)
    return kiln_make_status(KILN_INVALID_ARGUMENT, "invoke: context is NULL");
  if (function.module != context->module || function.ordinal >= context->module->function_count)
    return kiln_make_status(KILN_INVALID_ARGUMENT,
                            "invoke: the function does not belong to this context's "
                            "module '%s'", context->module->name);
  f = &context->module->functions[function.ordinal];
  if (arg_count != f->arg_count)
    return kiln_make_status(KILN_INVALID_ARGUMENT, "%s: expects %u arguments, got %zu",
                            f->name, (unsigned)f->arg_count, arg_count);
  *out = f;
  return NULL;
}

/* Runs a call on type-checked arguments, aligning them for a module that
 * needs it. */
static kiln_status_t invoke_checked(kiln_context_t* c, uint32_t ordinal,
                                    kiln_buffer_view_t* const* args, size_t arg_count,
                                    kiln_buffer_view_t** results) {
  if (!c->module->element_aligned_bindings)
    return invoke_aligned(c, ordinal, args, arg_count, results);
  return invoke_bounded(c, ordinal, args, results);
}

kiln_status_t kiln_context_invoke(kiln_context_t* context, kiln_function_t function,
                                  kiln_buffer_view_t* const* args, size_t arg_count,
                                  kiln_buffer_view_t** results, size_t result_capacity) {
  const kiln_function_info_t* f = NULL;
  size_t i;
  kiln_status_t s = called_function(context, function, arg_count, &f);
  if (s) return s;
  if (result_capacity < f->result_count || (f->result_count && !results))
    return kiln_make_status(KILN_INVALID_ARGUMENT,
                            "%s: returns %u results, result capacity is %zu", f->name,
                            (unsigned)f->result_count, results ? result_capacity : 0);
  if (arg_count && !args)
    return kiln_make_status(KILN_INVALID_ARGUMENT, "%s: args is NULL", f->name);
  for (i = 0; i < arg_count; ++i) {
    char want[128], got[128];
    if (!args[i])
      return kiln_make_status(KILN_INVALID_ARGUMENT, "%s: argument %zu '%s' is NULL",
                              f->name, i, f->args[i].name);
    if (kiln_view_has_module_type(context->module, args[i], f->arg_types[i])) continue;
    kiln_format_type_info(&context->module->types[f->arg_types[i]], want, sizeof want);
    kiln_format_view_type(args[i], got, sizeof got);
    return kiln_make_status(KILN_INVALID_ARGUMENT, "%s: argument %zu '%s' expects %s, got %s",
                            f->name, i, f->args[i].name, want, got);
  }
  return invoke_checked(context, function.ordinal, args, arg_count, results);
}

/* ---- calls on host memory (kiln_context_invoke_host) -------------------- */

static void release_view(void* view) { kiln_buffer_view_release(view); }

/* Whether host argument `a` of type `t` is read in place (wrapped) rather
 * than copied: its data is aligned to its elements. */
static int host_in_place(const kiln_type_info_t* t, const kiln_host_buffer_t* a) {
  return ((uintptr_t)a->data % kiln_dtype_alignment(t->dtype)) == 0;
}

static kiln_status_t host_argument_view(const kiln_type_info_t* t, const kiln_host_buffer_t* a,
                                        kiln_buffer_view_t** out) {
  kiln_status_t s;
  if (!host_in_place(t, a))
    return kiln_buffer_view_create(t->dtype, t->rank, t->shape, a->data, a->byte_size, out);
  if (!a->owner)
    return kiln_buffer_view_wrap(t->dtype, t->rank, t->shape, a->data, a->byte_size, NULL,
                                 NULL, out);
  kiln_buffer_view_retain(a->owner);
  s = kiln_buffer_view_wrap(t->dtype, t->rank, t->shape, a->data, a->byte_size, release_view,
                            a->owner, out);
  if (s) kiln_buffer_view_release(a->owner);
  return s;
}

/* Whether `data` lies in the caller's memory of an argument read in place. */
static int in_borrowed_argument(const kiln_module_t* m, const kiln_function_info_t* f,
                                const kiln_host_buffer_t* args, const void* data) {
  uint32_t i;
  for (i = 0; i < f->arg_count; ++i) {
    const char* start = args[i].data;
    if (!args[i].owner && host_in_place(&m->types[f->arg_types[i]], &args[i]) && start &&
        (const char*)data >= start && (const char*)data < start + args[i].byte_size)
      return 1;
  }
  return 0;
}

/* Checks the sizes of a host call's arguments and result destinations. */
static kiln_status_t check_host_buffers(const kiln_module_t* m, const kiln_function_info_t* f,
                                        const kiln_host_buffer_t* args,
                                        const kiln_host_buffer_t* results) {
  char want[128];
  uint32_t i;
  for (i = 0; i < f->arg_count; ++i) {
    const kiln_type_info_t* t = &m->types[f->arg_types[i]];
    if (args[i].byte_size == t->byte_size && (args[i].data || !t->byte_size)) continue;
    kiln_format_type_info(t, want, sizeof want);
    if (args[i].byte_size == t->byte_size)
      return kiln_make_status(KILN_INVALID_ARGUMENT, "%s: argument %zu '%s' (%s): data is NULL",
                              f->name, (size_t)i, f->args[i].name, want);
    return kiln_make_status(KILN_INVALID_ARGUMENT,
                            "%s: argument %zu '%s' expects %s (%zu bytes), got %zu bytes",
                            f->name, (size_t)i, f->args[i].name, want, t->byte_size,
                            args[i].byte_size);
  }
  for (i = 0; results && i < f->result_count; ++i) {
    const kiln_type_info_t* t = &m->types[f->result_types[i]];
    if (!results[i].data || results[i].byte_size == t->byte_size) continue;
    kiln_format_type_info(t, want, sizeof want);
    return kiln_make_status(KILN_INVALID_ARGUMENT,
                            "%s: result %zu '%s' is %s (%zu bytes), its destination holds "
                            "%zu bytes", f->name, (size_t)i, f->results[i].name, want,
                            t->byte_size, results[i].byte_size);
  }
  return NULL;
}

static int overlaps(const char* a, size_t a_size, const char* b, size_t b_size) {
  return a && b && a < b + b_size && b < a + a_size;
}

/* The destinations alloc.result may let kernels write directly (NULL for the
 * others): aligned as the module's kernels need, and sharing no byte with an
 * argument or another destination (a kernel could read what it overwrites). */
static void direct_destinations(const kiln_module_t* m, const kiln_function_info_t* f,
                                const kiln_host_buffer_t* args,
                                const kiln_host_buffer_t* results, void** out) {
  uint32_t i, j;
  for (i = 0; i < f->result_count; ++i) {
    const kiln_type_info_t* t = &m->types[f->result_types[i]];
    size_t align = m->element_aligned_bindings ? kiln_dtype_alignment(t->dtype)
                                               : KILN_BUFFER_ALIGNMENT;
    const char* d = results ? results[i].data : NULL;
    out[i] = NULL;
    if (!d || !t->byte_size || (uintptr_t)d % align) continue;
    for (j = 0; j < f->arg_count; ++j)
      if (overlaps(d, t->byte_size, args[j].data, args[j].byte_size)) break;
    if (j < f->arg_count) continue;
    for (j = 0; j < f->result_count; ++j)
      if (j != i && overlaps(d, t->byte_size, results[j].data, results[j].byte_size)) break;
    if (j == f->result_count) out[i] = (void*)(uintptr_t)d;
  }
}

/* Copies results into their destinations, and out of borrowed argument
 * memory into views of their own. */
static kiln_status_t deliver_host_results(const kiln_module_t* m, const kiln_function_info_t* f,
                                          const kiln_host_buffer_t* args,
                                          const kiln_host_buffer_t* results,
                                          kiln_buffer_view_t** views) {
  uint32_t i;
  for (i = 0; i < f->result_count; ++i) {
    kiln_buffer_view_t* v = views[i];
    kiln_buffer_view_t* copy = NULL;
    size_t size = kiln_buffer_view_byte_size(v);
    kiln_status_t s;
    if (results && results[i].data) {
      /* (a kernel wrote it there already when alloc.result placed it) */
      if (size && kiln_buffer_view_data(v) != results[i].data)
        memcpy(results[i].data, kiln_buffer_view_data(v), size);
      views[i] = NULL;
      kiln_buffer_view_release(v);
      continue;
    }
    if (!in_borrowed_argument(m, f, args, kiln_buffer_view_data(v))) continue;
    s = kiln_buffer_view_create(kiln_buffer_view_dtype(v), kiln_buffer_view_rank(v),
                                kiln_buffer_view_shape(v), kiln_buffer_view_data(v), size,
                                &copy);
    if (s)
      return kiln_status_annotate(s, "%s: copying result %u '%s' out of an argument's memory",
                                  f->name, (unsigned)i, f->results[i].name);
    views[i] = copy;
    kiln_buffer_view_release(v);
  }
  return NULL;
}

kiln_status_t kiln_context_invoke_host(kiln_context_t* context, kiln_function_t function,
                                       const kiln_host_buffer_t* args, size_t arg_count,
                                       const kiln_host_buffer_t* results,
                                       kiln_buffer_view_t** result_views,
                                       size_t result_count) {
  const kiln_function_info_t* f = NULL;
  const kiln_module_t* m;
  kiln_buffer_view_t* small[16] = {0}; /* zeroed: riscv64 GCC 12 warns (maybe-uninitialized) */
  kiln_buffer_view_t** views = small;
  void* direct_small[16];
  void** direct = direct_small;
  kiln_status_t s;
  size_t i, made = 0;
  if (result_views)
    for (i = 0; i < result_count; ++i) result_views[i] = NULL;
  if ((s = called_function(context, function, arg_count, &f))) return s;
  m = context->module;
  if (result_count != f->result_count || (result_count && !result_views))
    return kiln_make_status(KILN_INVALID_ARGUMENT,
                            "%s: returns %u results, result count is %zu", f->name,
                            (unsigned)f->result_count, result_views ? result_count : 0);
  if (arg_count && !args)
    return kiln_make_status(KILN_INVALID_ARGUMENT, "%s: args is NULL", f->name);
  if ((s = check_host_buffers(m, f, args, results))) return s;
  if (arg_count > 16 && !(views = calloc(arg_count, sizeof *views)))
    return kiln_make_status(KILN_OUT_OF_MEMORY, "%s: allocating %zu arguments", f->name,
                            arg_count);
  for (; made < arg_count && !s; ++made) {
    s = host_argument_view(&m->types[f->arg_types[made]], &args[made], &views[made]);
    if (s)
      s = kiln_status_annotate(s, "%s: argument %zu '%s'", f->name, made, f->args[made].name);
  }
  if (!s && results) {
    if (f->result_count > 16 && !(direct = calloc(f->result_count, sizeof *direct)))
      s = kiln_make_status(KILN_OUT_OF_MEMORY, "%s: allocating %u result destinations",
                           f->name, (unsigned)f->result_count);
    else
      direct_destinations(m, f, args, results, direct);
  }
  if (!s) {
    context->result_memory = results ? direct : NULL;
    s = invoke_checked(context, function.ordinal, views, arg_count, result_views);
    context->result_memory = NULL;
  }
  if (!s) s = deliver_host_results(m, f, args, results, result_views);
  for (i = 0; i < made; ++i)
    if (views[i]) kiln_buffer_view_release(views[i]);
  if (views != small) free(views);
  if (direct != direct_small) free(direct);
  if (s)
    for (i = 0; i < result_count; ++i) {
      kiln_buffer_view_release(result_views[i]);
      result_views[i] = NULL;
    }
  return s;
}

static kiln_status_t find_global(kiln_context_t* context, const char* name, uint32_t* out,
                                 const char* what) {
  uint32_t i;
  if (!context || !name)
    return kiln_make_status(KILN_INVALID_ARGUMENT, "%s: context or name is NULL", what);
  for (i = 0; i < context->module->global_count; ++i) {
    if (strcmp(context->module->globals[i].info.name, name) == 0) {
      *out = i;
      return NULL;
    }
  }
  return kiln_make_status(KILN_NOT_FOUND, "%s: module '%s' has no global '%s'", what,
                          context->module->name, name);
}

kiln_status_t kiln_context_get_global(kiln_context_t* context, const char* name,
                                      kiln_buffer_view_t** out) {
  uint32_t i = 0;
  kiln_status_t s;
  if (!out) return kiln_make_status(KILN_INVALID_ARGUMENT, "get_global: out is NULL");
  *out = NULL;
  if ((s = find_global(context, name, &i, "get_global"))) return s;
  kiln_buffer_view_retain(context->globals[i]);
  *out = context->globals[i];
  return NULL;
}

kiln_status_t kiln_context_set_global(kiln_context_t* context, const char* name,
                                      const kiln_buffer_view_t* value) {
  uint32_t i = 0;
  kiln_status_t s;
  kiln_buffer_view_t* copy = NULL;
  const kiln_global_info_t* g;
  if ((s = find_global(context, name, &i, "set_global"))) return s;
  g = &context->module->globals[i];
  if (!value)
    return kiln_make_status(KILN_INVALID_ARGUMENT, "set_global '%s': value is NULL", name);
  if (!kiln_view_has_module_type(context->module, value, g->type)) {
    char want[128], got[128];
    kiln_format_type_info(&context->module->types[g->type], want, sizeof want);
    kiln_format_view_type(value, got, sizeof got);
    return kiln_make_status(KILN_INVALID_ARGUMENT, "set_global '%s': expects %s, got %s",
                            name, want, got);
  }
  s = kiln_buffer_view_create(kiln_buffer_view_dtype(value), kiln_buffer_view_rank(value),
                              kiln_buffer_view_shape(value), kiln_buffer_view_data(value),
                              kiln_buffer_view_byte_size(value), &copy);
  if (s) return kiln_status_annotate(s, "set_global '%s'", name);
  kiln_buffer_view_release(context->globals[i]);
  context->globals[i] = copy;
  return NULL;
}
