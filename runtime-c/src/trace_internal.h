/* Recording trace events from the interpreter (trace.c; the API is in runtime.h). */
#ifndef KILN_TRACE_INTERNAL_H_
#define KILN_TRACE_INTERNAL_H_

#include <stdint.h>

#include "kiln/runtime.h"

typedef enum {
  KILN_TRACE_CALL = 0,     /* a function call (index: function), with its duration */
  KILN_TRACE_DISPATCH = 1, /* a kernel dispatch (index: kernel), with its duration */
  KILN_TRACE_ALLOC = 2,    /* a buffer allocated for an intermediate or result */
  KILN_TRACE_GLOBAL_STORE = 3, /* a global replaced (index: global) */
  KILN_TRACE_SLICE = 4 /* the workgroups one thread ran for a dispatch (index: kernel) */
} kiln_trace_kind_t;

typedef struct kiln_trace_event {
  const kiln_module_t* module;
  uint64_t start_ns;    /* CLOCK_MONOTONIC */
  uint64_t duration_ns; /* calls and dispatches */
  uint64_t bytes;       /* dispatch: bytes of its bindings; alloc, global.store: the buffer's;
                         * slice: the lowest workgroup id the thread ran */
  uint32_t index;
  uint32_t workgroups;  /* dispatch: its count; slice: how many the thread ran */
  uint32_t thread; /* set by kiln_trace_record when 0 */
  uint16_t depth;  /* calls: 0 for the caller's call, 1+ for calls between functions;
                   * slice: the pool worker (0: the dispatching thread; at most
                   * KILN_MAX_WORKERS, 1024) */
  uint8_t kind;
} kiln_trace_event_t;

uint64_t kiln_trace_now_ns(void);

/* A small number for the calling thread (1, 2, ...), the trace's "tid". */
uint32_t kiln_trace_thread_id(void);

struct kiln_pool_slice;
/* Appends a dispatch event and, after it, one slice event per entry of
 * `slices` (what each thread ran: pool.h), on that thread's track. */
void kiln_trace_record_dispatch(kiln_trace_t* trace, const kiln_trace_event_t* dispatch,
                                const struct kiln_pool_slice* slices, uint32_t slice_count);

/* Appends a copy of `event` (keeping its module alive); an event that cannot be
 * stored is counted as dropped. */
void kiln_trace_record(kiln_trace_t* trace, const kiln_trace_event_t* event);

#endif
