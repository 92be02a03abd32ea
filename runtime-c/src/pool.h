/* The instance's worker threads, which run a dispatch's workgroups. */
#ifndef KILN_POOL_H_
#define KILN_POOL_H_

#include <stdint.h>

#include "kiln/kernel_abi.h"
#include "kiln/runtime.h"

typedef struct kiln_pool kiln_pool_t;

/* worker_count 0 means one per online core. The calling thread of a dispatch
 * also runs workgroups, so the pool starts worker_count - 1 threads. */
kiln_status_t kiln_pool_create(uint32_t worker_count, kiln_pool_t** out);
void kiln_pool_free(kiln_pool_t* pool);
uint32_t kiln_pool_worker_count(const kiln_pool_t* pool);

/* How many of the pool's threads sleep, waiting for a job (for tests: an
 * idle pool's threads spin for at most about 50 us, then all sleep). */
uint32_t kiln_pool_sleeping_workers(kiln_pool_t* pool);

/* Runs fn(args, id) for every id in [0, workgroup_count) across the workers
 * and the calling thread; returns when all are done. Safe to call from many
 * threads at once (concurrent contexts). A non-zero kernel return fails the
 * dispatch with a status naming `kernel_name` and the code. */
kiln_status_t kiln_pool_dispatch(kiln_pool_t* pool, const char* kernel_name,
                                 kiln_kernel_fn_t fn,
                                 const kiln_dispatch_args_t* args,
                                 uint32_t workgroup_count);

/* What one thread did for a traced dispatch: the workgroups it ran (not
 * necessarily consecutive ids: threads claim them from a shared counter) and
 * when it started the first and finished the last. */
typedef struct kiln_pool_slice {
  uint64_t start_ns, end_ns; /* kiln_trace_now_ns() */
  uint32_t thread;           /* kiln_trace_thread_id() of the thread */
  uint32_t worker;           /* 0: the dispatching thread, 1..: pool worker */
  uint32_t workgroups;       /* how many it ran (at least 1) */
  uint32_t first_workgroup;  /* the lowest id it ran */
} kiln_pool_slice_t;

/* kiln_pool_dispatch that also records, in `slices` (room for
 * kiln_pool_worker_count(pool) entries), one slice per thread that ran
 * workgroups, and their number in `*slice_count`. With slices NULL it is
 * kiln_pool_dispatch: the untraced path pays one predictable branch per
 * thread and dispatch. */
kiln_status_t kiln_pool_dispatch_traced(kiln_pool_t* pool, const char* kernel_name,
                                        kiln_kernel_fn_t fn,
                                        const kiln_dispatch_args_t* args,
                                        uint32_t workgroup_count,
                                        kiln_pool_slice_t* slices,
                                        uint32_t* slice_count);

#endif
