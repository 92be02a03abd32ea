/* Contexts (a module's mutable globals) and the interpreter that runs them. */
#ifndef KILN_CONTEXT_INTERNAL_H_
#define KILN_CONTEXT_INTERNAL_H_

#include <stdatomic.h>

#include "kiln/runtime.h"
#include "memory.h"
#include "module_internal.h"

#define KILN_VM_MAX_CALL_DEPTH 64

struct kiln_context {
  kiln_module_t* module;
  kiln_buffer_view_t** globals; /* module->global_count current values */
  kiln_call_limits_t limits;
  /* Cancellation. `running`
   * is the number of the call in progress (0: none); kiln_context_cancel
   * copies it into `cancelled`, which the running call compares with its own
   * number at each check. Call numbers start at 1 and never repeat. */
  atomic_uint_fast64_t running;
  atomic_uint_fast64_t cancelled;
  uint64_t calls; /* calls started, for numbering them (serialized by the caller) */
  /* Per function: its transient arena (allocated on its first call, reused by
   * every later one; NULL before) and whether a call of it is using it now (a
   * nested call of the same function gets an arena of its own). */
  uint8_t** arenas; /* from kiln_memory_alloc(size, kiln_arena_mapped(size)) */
  uint8_t* arena_busy;
  /* Per function: 1 when arenas[i] is the caller's storage
   * (kiln_context_set_transient_storage), which the context never frees. */
  uint8_t* arena_is_callers;
  kiln_trace_t* trace; /* NULL: not tracing */
  kiln_dispatch_observer_t observer; /* NULL: none (kiln_context_set_dispatch_observer) */
  void* observer_data;
  kiln_print_callback_t print_callback; /* NULL: stdout (kiln_context_set_print_callback) */
  void* print_data;
  kiln_host_callback_t host_callback; /* NULL: debug.callback fails (kiln_context_set_host_callback) */
  void* host_data;
  /* During a kiln_context_invoke_host call with result destinations: where
   * alloc.result of that call's function (not of nested calls) places result
   * i (NULL: a new buffer), one per result. */
  void* const* result_memory;
};

/* Whether a context's arena of `size` bytes is a mapping (memory.h): it is
 * kept for every later call, so from one huge page up. */
static inline int kiln_arena_mapped(uint64_t size) {
  return kiln_memory_is_mapped((size_t)size, KILN_MAPPED_ARENA_MIN);
}

/* The state a call checks its limits against (see kiln_call_limits_t). */
typedef struct kiln_call_budget {
  kiln_context_t* context;
  uint64_t call;        /* this call's number */
  uint64_t deadline_ns; /* CLOCK_MONOTONIC; 0: none */
  uint64_t steps_left;  /* instructions; UINT64_MAX: no limit */
} kiln_call_budget_t;

/* CANCELLED or DEADLINE_EXCEEDED when the call must stop, naming `where`. */
kiln_status_t kiln_call_budget_check(const kiln_call_budget_t* budget, const char* where);

/* Runs function `ordinal` on already type-checked arguments; on success
 * stores result_count new references in `results`. */
kiln_status_t kiln_vm_invoke(kiln_context_t* context, uint32_t ordinal,
                             kiln_buffer_view_t* const* args,
                             kiln_buffer_view_t** results, kiln_call_budget_t* budget);

/* True when `view` has exactly the module type `type`. */
int kiln_view_has_module_type(const kiln_module_t* module, const kiln_buffer_view_t* view,
                              uint32_t type);

/* Formats a view's type as "2x3xf32". */
void kiln_format_view_type(const kiln_buffer_view_t* view, char* buf, size_t size);

#endif
