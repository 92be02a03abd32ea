/* The instance's worker threads.
 *
 * A dispatch is a job on the caller's stack. The caller links it into the
 * pool's queue, wakes up to (workgroup_count - 1) workers, and then claims
 * workgroup ids itself from the job's atomic counter, as do the workers that
 * picked the job up. When the ids run out the job leaves the queue; the
 * caller returns once no worker still runs one of its workgroups. Many
 * threads may dispatch at once: each job is independent, and idle workers
 * take whichever job is at the head of the queue.
 *
 * A failing workgroup (non-zero return) records the first failure and stops
 * the job's remaining workgroups from starting.
 *
 * Waiting: an idle worker spins for up to KILN_SPIN_NS on a flag that says a
 * job is queued, then sleeps on the pool's condition variable; a dispatching
 * thread whose ids ran out spins as long for its workers, then sleeps on the
 * job's. Neither yields the CPU while it spins: on a loaded machine a
 * yielding thread loses its CPU to other processes for a whole time slice (a
 * yielding worker missed the next dispatch: a 2-workgroup MLP training
 * step's median doubled; a yielding dispatching thread came back long after
 * its worker's last workgroup ended). A worker never waits on its
 * dispatching thread's CPU (kiln_affinity_avoid), so the spin does not keep
 * it from its CPU. A worker woken for a job that was done before it got
 * there sleeps again at once. The dispatching thread signals only workers
 * that sleep, after it released the mutex, so a woken worker does not block
 * on it. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "pool.h"
#include "status_internal.h"
#include "trace_internal.h"

typedef struct kiln_job {
  struct kiln_job* prev;
  struct kiln_job* next;
  kiln_kernel_fn_t fn;
  const kiln_dispatch_args_t* args;
  uint32_t workgroup_count;
  int dispatcher_cpu; /* the CPU the dispatching thread queued it from; -1: unknown */
  atomic_uint_fast64_t next_id;
  atomic_int failed;           /* 0 until a workgroup fails */
  int32_t failed_code;         /* written by the thread that set `failed` */
  uint32_t failed_workgroup;
  /* Written with the pool mutex held; workers_running is also read without
   * it while the dispatching thread spins. */
  int queued;
  atomic_int workers_running;
  pthread_cond_t idle; /* signalled when workers_running drops to 0 */
  /* Traced dispatches only (NULL otherwise): one slot per thread that runs
   * workgroups, claimed from slice_count; read by the dispatching thread
   * after every worker left the job (the pool mutex orders the writes). */
  kiln_pool_slice_t* slices;
  uint32_t slice_capacity;
  atomic_uint slice_count;
} kiln_job_t;

struct kiln_pool {
  uint32_t worker_count; /* including the dispatching thread */
  uint32_t thread_count; /* worker_count - 1 */
  pthread_t* threads;
  pthread_mutex_t mutex;
  pthread_cond_t work; /* signalled when a job is queued or at shutdown */
  kiln_job_t* head;
  kiln_job_t* tail;
  int shutdown;
  uint32_t sleeping; /* workers waiting on `work` (with the mutex held) */
  /* Mirrors for spinning without the mutex. */
  atomic_uint queued_jobs;
  atomic_int stopping;
  atomic_uint started; /* workers numbered 1.. as they start */
};

/* How long a thread spins before it sleeps (a time, not a count of pause
 * instructions, whose cost differs tenfold between CPUs): dispatches that
 * follow each other within it find the workers awake, and an idle worker
 * spends at most this much CPU time after its last job. */
#define KILN_SPIN_NS 50000
#define KILN_SPIN_BURST 16 /* pauses between clock reads */

static inline void kiln_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __asm__ __volatile__("pause");
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static inline uint64_t kiln_spin_clock_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The CPU the calling thread runs on, -1 where unknown (glibc reads it from
 * the thread's rseq area: a load, no system call). */
static inline int kiln_current_cpu(void) {
#if defined(__linux__)
  return sched_getcpu();
#else
  return -1;
#endif
}

/* A worker's CPU affinity: the set it started with (inherited from the
 * thread that created the pool), the CPU it keeps off now (-1: none), and
 * whether it may change it. */
typedef struct kiln_worker_affinity {
#if defined(__linux__)
  cpu_set_t home;
#endif
  int avoided;
  int usable; /* 0: one CPU only, or sched_setaffinity failed */
} kiln_worker_affinity_t;

static void kiln_affinity_init(kiln_worker_affinity_t* a) {
  a->avoided = -1;
  a->usable = 0;
#if defined(__linux__)
  CPU_ZERO(&a->home);
  if (sched_getaffinity(0, sizeof a->home, &a->home) == 0 && CPU_COUNT(&a->home) > 1) {
    a->usable = 1;
  }
#endif
}

/* Called by a worker that picked up a job: it keeps off the CPU the job's
 * dispatching thread queued it from. When no CPU is idle, Linux puts a woken
 * thread on its waker's CPU, where the two cannot run at once: the worker,
 * woken with scheduling credit, preempted the dispatching thread, ran the
 * whole job alone and then spun out its wait with the dispatching thread
 * queued behind it (a loaded 2-core machine ran 2-worker calls at 1-worker
 * speed, or slower, call after call). The worker sets its starting CPU set
 * minus that CPU (sched_setaffinity on the calling thread migrates it before
 * returning) on its first job, and again whenever it finds itself on the CPU
 * of a later job's dispatching thread: no system call while dispatching
 * threads stay where they are, nor for one that moved to a CPU this worker
 * is not on (several dispatching threads on different CPUs do not make it
 * change its affinity on every job). */
static void kiln_affinity_avoid(kiln_worker_affinity_t* a, int dispatcher_cpu) {
#if defined(__linux__)
  if (!a->usable || dispatcher_cpu == a->avoided || dispatcher_cpu < 0 ||
      dispatcher_cpu >= CPU_SETSIZE || !CPU_ISSET(dispatcher_cpu, &a->home)) {
    return;
  }
  if (a->avoided >= 0 && kiln_current_cpu() != dispatcher_cpu) return;
  cpu_set_t rest = a->home;
  CPU_CLR(dispatcher_cpu, &rest);
  if (sched_setaffinity(0, sizeof rest, &rest) != 0) {
    a->usable = 0;
    return;
  }
  a->avoided = dispatcher_cpu;
#else
  (void)a;
  (void)dispatcher_cpu;
#endif
}

/* Spins until `done` holds (returns 1) or KILN_SPIN_NS passed (returns 0). */
#define KILN_SPIN_UNTIL(done)                                           \
  ({                                                                    \
    int kiln_spin_ok_ = 0;                                              \
    uint64_t kiln_spin_start_ = kiln_spin_clock_ns();                   \
    for (;;) {                                                          \
      int kiln_spin_i_;                                                 \
      for (kiln_spin_i_ = 0; kiln_spin_i_ < KILN_SPIN_BURST; ++kiln_spin_i_) { \
        if (done) break;                                                \
        kiln_cpu_relax();                                               \
      }                                                                 \
      if (kiln_spin_i_ < KILN_SPIN_BURST) {                             \
        kiln_spin_ok_ = 1;                                              \
        break;                                                          \
      }                                                                 \
      uint64_t kiln_spin_spent_ = kiln_spin_clock_ns() - kiln_spin_start_; \
      if (kiln_spin_spent_ >= KILN_SPIN_NS) break;                      \
    }                                                                   \
    kiln_spin_ok_;                                                      \
  })

static inline __attribute__((always_inline)) int kiln_job_run_one(kiln_job_t* job, uint64_t id) {
  int32_t rc = job->fn(job->args, (uint32_t)id);
  if (rc == 0) return 1;
  int expected = 0;
  if (atomic_compare_exchange_strong(&job->failed, &expected, 1)) {
    job->failed_code = rc;
    job->failed_workgroup = (uint32_t)id;
  }
  return 0;
}

/* kiln_job_run for a traced dispatch: the same loop, timed, and a slice
 * recorded when this thread ran at least one workgroup. */
__attribute__((noinline, cold)) static void kiln_job_run_traced(kiln_job_t* job, uint32_t worker) {
  kiln_pool_slice_t slice = {kiln_trace_now_ns(), 0, kiln_trace_thread_id(), worker, 0,
                             UINT32_MAX};
  for (;;) {
    if (atomic_load_explicit(&job->failed, memory_order_relaxed)) break;
    uint64_t id = atomic_fetch_add_explicit(&job->next_id, 1, memory_order_relaxed);
    if (id >= job->workgroup_count) break;
    if (id < slice.first_workgroup) slice.first_workgroup = (uint32_t)id;
    slice.workgroups++;
    if (!kiln_job_run_one(job, id)) break;
  }
  if (!slice.workgroups) return;
  slice.end_ns = kiln_trace_now_ns();
  unsigned slot = atomic_fetch_add_explicit(&job->slice_count, 1, memory_order_relaxed);
  if (slot < job->slice_capacity) job->slices[slot] = slice;
}

/* Runs workgroups of `job` until its ids run out or it fails. `worker` is 0
 * on the dispatching thread, 1.. on the pool's threads. */
static inline __attribute__((always_inline)) void kiln_job_run(kiln_job_t* job, uint32_t worker) {
  if (__builtin_expect(job->slices != NULL, 0)) {
    kiln_job_run_traced(job, worker);
    return;
  }
  for (;;) {
    if (atomic_load_explicit(&job->failed, memory_order_relaxed)) return;
    uint64_t id = atomic_fetch_add_explicit(&job->next_id, 1, memory_order_relaxed);
    if (id >= job->workgroup_count) return;
    if (!kiln_job_run_one(job, id)) return;
  }
}

static int kiln_job_exhausted(kiln_job_t* job) {
  return atomic_load_explicit(&job->failed, memory_order_relaxed) ||
         atomic_load_explicit(&job->next_id, memory_order_relaxed) >=
             job->workgroup_count;
}

/* Both with the pool mutex held. */
static void kiln_queue_push(kiln_pool_t* pool, kiln_job_t* job) {
  job->prev = pool->tail;
  job->next = NULL;
  if (pool->tail) pool->tail->next = job; else pool->head = job;
  pool->tail = job;
  job->queued = 1;
  atomic_fetch_add_explicit(&pool->queued_jobs, 1, memory_order_release);
}

static void kiln_queue_remove(kiln_pool_t* pool, kiln_job_t* job) {
  if (!job->queued) return;
  if (job->prev) job->prev->next = job->next; else pool->head = job->next;
  if (job->next) job->next->prev = job->prev; else pool->tail = job->prev;
  job->prev = job->next = NULL;
  job->queued = 0;
  atomic_fetch_sub_explicit(&pool->queued_jobs, 1, memory_order_relaxed);
}

static void* kiln_worker_main(void* arg) {
  kiln_pool_t* pool = arg;
  uint32_t worker = atomic_fetch_add_explicit(&pool->started, 1, memory_order_relaxed) + 1;
  kiln_worker_affinity_t affinity;
  kiln_affinity_init(&affinity);
  int spin = 1; /* 0 after a wake-up that found no work */
  pthread_mutex_lock(&pool->mutex);
  for (;;) {
    if (spin && !pool->shutdown && !pool->head) {
      /* Spin a little before sleeping. */
      pthread_mutex_unlock(&pool->mutex);
      (void)KILN_SPIN_UNTIL(atomic_load_explicit(&pool->queued_jobs, memory_order_acquire) ||
                                atomic_load_explicit(&pool->stopping, memory_order_relaxed));
      pthread_mutex_lock(&pool->mutex);
    }
    while (!pool->shutdown && !pool->head) {
      pool->sleeping++;
      pthread_cond_wait(&pool->work, &pool->mutex);
      pool->sleeping--;
      spin = 0;
    }
    if (!pool->head) break; /* shutdown with nothing left to do */
    kiln_job_t* job = pool->head;
    if (kiln_job_exhausted(job)) {
      kiln_queue_remove(pool, job);
      continue;
    }
    atomic_fetch_add_explicit(&job->workers_running, 1, memory_order_relaxed);
    int dispatcher_cpu = job->dispatcher_cpu;
    pthread_mutex_unlock(&pool->mutex);

    kiln_affinity_avoid(&affinity, dispatcher_cpu);
    kiln_job_run(job, worker);
    spin = 1;

    pthread_mutex_lock(&pool->mutex);
    kiln_queue_remove(pool, job); /* its ids ran out (or it failed) */
    /* The last touch of `job`, under the mutex: the dispatching thread takes
     * the mutex before its job (on its stack) goes away. */
    if (atomic_fetch_sub_explicit(&job->workers_running, 1, memory_order_release) == 1) {
      pthread_cond_signal(&job->idle);
    }
  }
  pthread_mutex_unlock(&pool->mutex);
  return NULL;
}

static uint32_t kiln_online_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) return 1;
  if (n > KILN_MAX_WORKERS) return KILN_MAX_WORKERS;
  return (uint32_t)n;
}

kiln_status_t kiln_pool_create(uint32_t worker_count, kiln_pool_t** out) {
  if (!out) return kiln_make_status(KILN_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (worker_count > KILN_MAX_WORKERS) {
    return kiln_make_status(KILN_INVALID_ARGUMENT,
                            "worker_count %u is too large: expected at most %d",
                            worker_count, KILN_MAX_WORKERS);
  }
  if (worker_count == 0) worker_count = kiln_online_cores();

  kiln_pool_t* pool = calloc(1, sizeof(*pool));
  if (!pool) return kiln_make_status(KILN_OUT_OF_MEMORY, "cannot allocate a thread pool");
  pool->worker_count = worker_count;
  atomic_init(&pool->queued_jobs, 0);
  atomic_init(&pool->stopping, 0);
  atomic_init(&pool->started, 0);
  if (pthread_mutex_init(&pool->mutex, NULL) != 0) {
    free(pool);
    return kiln_make_status(KILN_INTERNAL, "pthread_mutex_init failed");
  }
  if (pthread_cond_init(&pool->work, NULL) != 0) {
    pthread_mutex_destroy(&pool->mutex);
    free(pool);
    return kiln_make_status(KILN_INTERNAL, "pthread_cond_init failed");
  }
  uint32_t wanted = worker_count - 1;
  if (wanted > 0) {
    pool->threads = calloc(wanted, sizeof(pthread_t));
    if (!pool->threads) {
      kiln_pool_free(pool);
      return kiln_make_status(KILN_OUT_OF_MEMORY,
                              "cannot allocate %u worker thread handles", wanted);
    }
  }
  /* Workers start with every signal blocked (they inherit the mask), so that
   * the application's handlers run on its own threads only. */
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  for (uint32_t i = 0; i < wanted; ++i) {
    int rc = pthread_create(&pool->threads[i], NULL, kiln_worker_main, pool);
    if (rc != 0) {
      pthread_sigmask(SIG_SETMASK, &saved, NULL);
      kiln_pool_free(pool); /* joins the threads started so far */
      return kiln_make_status(KILN_INTERNAL,
                              "cannot start worker thread %u of %u: %s", i + 1,
                              wanted, strerror(rc));
    }
    pool->thread_count = i + 1;
  }
  pthread_sigmask(SIG_SETMASK, &saved, NULL);
  *out = pool;
  return NULL;
}

void kiln_pool_free(kiln_pool_t* pool) {
  if (!pool) return;
  pthread_mutex_lock(&pool->mutex);
  pool->shutdown = 1;
  atomic_store(&pool->stopping, 1);
  pthread_cond_broadcast(&pool->work);
  pthread_mutex_unlock(&pool->mutex);
  for (uint32_t i = 0; i < pool->thread_count; ++i) {
    pthread_join(pool->threads[i], NULL);
  }
  free(pool->threads);
  pthread_cond_destroy(&pool->work);
  pthread_mutex_destroy(&pool->mutex);
  free(pool);
}

uint32_t kiln_pool_worker_count(const kiln_pool_t* pool) {
  return pool ? pool->worker_count : 0;
}

uint32_t kiln_pool_sleeping_workers(kiln_pool_t* pool) {
  if (!pool) return 0;
  pthread_mutex_lock(&pool->mutex);
  uint32_t n = pool->sleeping;
  pthread_mutex_unlock(&pool->mutex);
  return n;
}

static kiln_status_t kiln_job_status(const kiln_job_t* job, const char* kernel_name) {
  if (!atomic_load(&job->failed)) return NULL;
  return kiln_make_status(KILN_INTERNAL,
                          "kernel '%s' failed with code %d in workgroup %u of %u",
                          kernel_name ? kernel_name : "<unnamed>",
                          (int)job->failed_code, job->failed_workgroup,
                          job->workgroup_count);
}

/* The end of a dispatch: its status, and its slice count when traced. */
static kiln_status_t kiln_job_dispatched(kiln_job_t* job, const char* kernel_name,
                                         uint32_t* slice_count) {
  if (job->slices) {
    unsigned n = atomic_load_explicit(&job->slice_count, memory_order_acquire);
    *slice_count = n < job->slice_capacity ? n : job->slice_capacity;
  }
  return kiln_job_status(job, kernel_name);
}

/* Both entry points, inlined into each: in kiln_pool_dispatch `slices` and
 * `slice_count` are constant NULLs and their code folds away. */
static inline __attribute__((always_inline)) kiln_status_t
dispatch(kiln_pool_t* pool, const char* kernel_name, kiln_kernel_fn_t fn,
         const kiln_dispatch_args_t* args, uint32_t workgroup_count, kiln_pool_slice_t* slices,
         uint32_t* slice_count) {
  if (slice_count) *slice_count = 0;
  if (!pool || !fn || !args) {
    return kiln_make_status(KILN_INVALID_ARGUMENT,
                            "dispatch of kernel '%s': pool, function and "
                            "arguments must not be NULL",
                            kernel_name ? kernel_name : "<unnamed>");
  }
  if (workgroup_count == 0) return NULL; /* nothing to run */

  kiln_job_t job;
  /* Every field but `idle`, which pthread_cond_init sets when workers join
   * (no memset of the whole job: it is on every dispatch's path). */
  job.prev = job.next = NULL;
  job.fn = fn;
  job.args = args;
  job.workgroup_count = workgroup_count;
  job.dispatcher_cpu = -1;
  atomic_init(&job.next_id, 0);
  atomic_init(&job.failed, 0);
  job.failed_code = 0;
  job.failed_workgroup = 0;
  job.queued = 0;
  atomic_init(&job.workers_running, 0);
  job.slices = slices && slice_count ? slices : NULL;
  job.slice_capacity = job.slices ? pool->worker_count : 0;
  atomic_init(&job.slice_count, 0);

  if (pool->thread_count == 0 || workgroup_count == 1) {
    kiln_job_run(&job, 0);
    return kiln_job_dispatched(&job, kernel_name, slice_count);
  }

  if (pthread_cond_init(&job.idle, NULL) != 0) {
    /* Still correct, just single-threaded. */
    kiln_job_run(&job, 0);
    return kiln_job_dispatched(&job, kernel_name, slice_count);
  }

  job.dispatcher_cpu = kiln_current_cpu();
  pthread_mutex_lock(&pool->mutex);
  kiln_queue_push(pool, &job);
  /* Workers that spin see the job by themselves; wake sleeping ones, up to
   * one per workgroup beyond the first, once the mutex is free for them. A
   * worker that falls asleep after this sees the job before it sleeps. */
  uint32_t helpers = workgroup_count - 1, sleeping = pool->sleeping;
  pthread_mutex_unlock(&pool->mutex);
  if (sleeping && helpers >= sleeping) {
    pthread_cond_broadcast(&pool->work);
  } else {
    for (uint32_t i = 0; i < helpers && i < sleeping; ++i) pthread_cond_signal(&pool->work);
  }

  kiln_job_run(&job, 0);

  /* Helpers still running our workgroups usually finish within microseconds. */
  (void)KILN_SPIN_UNTIL(atomic_load_explicit(&job.workers_running, memory_order_acquire) == 0);
  pthread_mutex_lock(&pool->mutex);
  kiln_queue_remove(pool, &job);
  while (atomic_load_explicit(&job.workers_running, memory_order_acquire) > 0) {
    pthread_cond_wait(&job.idle, &pool->mutex);
  }
  pthread_mutex_unlock(&pool->mutex);
  pthread_cond_destroy(&job.idle);
  return kiln_job_dispatched(&job, kernel_name, slice_count);
}

kiln_status_t kiln_pool_dispatch(kiln_pool_t* pool, const char* kernel_name,
                                 kiln_kernel_fn_t fn,
                                 const kiln_dispatch_args_t* args,
                                 uint32_t workgroup_count) {
  return dispatch(pool, kernel_name, fn, args, workgroup_count, NULL, NULL);
}

kiln_status_t kiln_pool_dispatch_traced(kiln_pool_t* pool, const char* kernel_name,
                                        kiln_kernel_fn_t fn,
                                        const kiln_dispatch_args_t* args,
                                        uint32_t workgroup_count,
                                        kiln_pool_slice_t* slices,
                                        uint32_t* slice_count) {
  return dispatch(pool, kernel_name, fn, args, workgroup_count, slices, slice_count);
}
