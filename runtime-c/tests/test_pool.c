/* The thread pool: many dispatches, concurrent dispatches from several
 * threads, failures, sizes; and the instance around it. */
#include <pthread.h>
#include <stdint.h>

#include <sched.h>
#include <sys/resource.h>
#include <stdatomic.h>
#include <time.h>

#include "instance_internal.h"
#include "pool.h"
#include "test_util.h"
#include "trace_internal.h"

/* out[id] += id + 1: a lost workgroup leaves 0, a repeated one 2*(id+1). */
static int32_t mark_kernel(const kiln_dispatch_args_t* args, uint32_t id) {
  int32_t* out = (int32_t*)args->bindings[0];
  out[id] += (int32_t)id + 1;
  return 0;
}

/* Fails in workgroup push[0] with code push[1]. */
static int32_t failing_kernel(const kiln_dispatch_args_t* args, uint32_t id) {
  return (int64_t)id == args->push_constants[0] ? (int32_t)args->push_constants[1] : 0;
}

static int run_marks(kiln_pool_t* pool, int32_t* out, uint32_t count) {
  memset(out, 0, count * sizeof(int32_t));
  void* bindings[1] = {out};
  kiln_dispatch_args_t args = {bindings, NULL, count, 0};
  kiln_status_t status = kiln_pool_dispatch(pool, "mark", mark_kernel, &args, count);
  if (status) {
    fprintf(stderr, "dispatch failed: %s\n", kiln_status_message(status));
    kiln_status_free(status);
    return 0;
  }
  for (uint32_t i = 0; i < count; ++i) {
    if (out[i] != (int32_t)i + 1) {
      fprintf(stderr, "workgroup %u of %u: expected %u, got %d\n", i, count, i + 1, out[i]);
      return 0;
    }
  }
  return 1;
}

typedef struct {
  kiln_pool_t* pool;
  int ok;
  int index;
} thread_arg_t;

static void* dispatcher(void* p) {
  thread_arg_t* t = p;
  int32_t out[257];
  t->ok = 1;
  for (int i = 0; i < 200 && t->ok; ++i) {
    uint32_t count = (uint32_t)(1 + (i * 7 + t->index * 13) % 257);
    t->ok = run_marks(t->pool, out, count);
  }
  /* Failures under concurrency name the right kernel and workgroup. */
  int64_t push[2] = {3 + t->index, 40 + t->index};
  kiln_dispatch_args_t args = {NULL, push, 64, 0};
  kiln_status_t s = kiln_pool_dispatch(t->pool, "fails", failing_kernel, &args, 64);
  char expected[64];
  snprintf(expected, sizeof(expected), "code %d in workgroup %d of 64",
           40 + t->index, 3 + t->index);
  if (!s || !strstr(kiln_status_message(s), expected)) t->ok = 0;
  kiln_status_free(s);
  return NULL;
}

/* Marks its workgroup; the first workgroup run waits (up to 10 s) until a
 * second thread has started one, so a traced dispatch has two threads' slices. */
static atomic_int g_started_threads;
static atomic_int g_round; /* a thread counts once per round */
static _Thread_local int t_counted;
/* The first workgroup a thread runs in a round waits (up to 10 s) until a
 * second thread has started one. */
static void meet(void) {
  if (t_counted != atomic_load(&g_round)) {
    t_counted = atomic_load(&g_round);
    if (atomic_fetch_add(&g_started_threads, 1) == 0) {
      struct timespec start, now;
      clock_gettime(CLOCK_MONOTONIC, &start);
      do {
        sched_yield();
        clock_gettime(CLOCK_MONOTONIC, &now);
      } while (atomic_load(&g_started_threads) < 2 && now.tv_sec - start.tv_sec < 10);
    }
  }
}

static int32_t meeting_kernel(const kiln_dispatch_args_t* args, uint32_t id) {
  int32_t* out = (int32_t*)args->bindings[0];
  out[id] += (int32_t)id + 1;
  meet();
  return 0;
}

/* Traced dispatches: one slice per thread that ran workgroups, together
 * covering every workgroup once, each inside the dispatch's time span; the
 * dispatching thread is worker 0, the pool's threads 1..3. */
static void test_traced_slices(kiln_pool_t* pool) {
  int32_t out[64];
  void* bindings[1] = {out};
  kiln_pool_slice_t slices[4];
  uint32_t n = 99;
  for (int round = 0; round < 20; ++round) {
    memset(out, 0, sizeof out);
    atomic_store(&g_started_threads, 0);
    atomic_store(&g_round, round + 1);
    kiln_dispatch_args_t args = {bindings, NULL, 64, 0};
    uint64_t before = kiln_trace_now_ns();
    CHECK_OK(kiln_pool_dispatch_traced(pool, "meet", meeting_kernel, &args, 64, slices, &n));
    uint64_t after = kiln_trace_now_ns();
    for (uint32_t i = 0; i < 64; ++i) CHECK(out[i] == (int32_t)i + 1);
    CHECK(n >= 2 && n <= 4);
    uint32_t total = 0, callers = 0;
    for (uint32_t i = 0; i < n && i < 4; ++i) {
      total += slices[i].workgroups;
      CHECK(slices[i].workgroups >= 1 && slices[i].first_workgroup < 64);
      CHECK(slices[i].worker <= 3);
      CHECK(before <= slices[i].start_ns && slices[i].start_ns <= slices[i].end_ns &&
            slices[i].end_ns <= after);
      for (uint32_t j = 0; j < i; ++j)
        CHECK(slices[j].thread != slices[i].thread && slices[j].worker != slices[i].worker);
      if (slices[i].worker == 0) {
        callers++;
        CHECK(slices[i].thread == kiln_trace_thread_id());
      }
    }
    CHECK(total == 64);
    CHECK(callers <= 1);
  }
  /* One workgroup: the dispatching thread alone. */
  kiln_dispatch_args_t one = {bindings, NULL, 1, 0};
  out[0] = 0;
  CHECK_OK(kiln_pool_dispatch_traced(pool, "mark", mark_kernel, &one, 1, slices, &n));
  CHECK(n == 1 && slices[0].worker == 0 && slices[0].workgroups == 1 &&
        slices[0].first_workgroup == 0 && out[0] == 1);
  /* Untraced: no slices, the count says so. */
  CHECK_OK(kiln_pool_dispatch_traced(pool, "mark", mark_kernel, &one, 1, NULL, &n));
  CHECK(n == 0);
}

/* Waits (up to 10 s) until all of the pool's threads sleep. */
static int all_asleep(kiln_pool_t* pool, uint32_t threads) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    if (kiln_pool_sleeping_workers(pool) == threads) return 1;
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while (now.tv_sec - start.tv_sec < 10);
  fprintf(stderr, "%u of %u workers sleep after 10 s\n", kiln_pool_sleeping_workers(pool), threads);
  return 0;
}

/* Idle workers stop spinning and sleep; a dispatch wakes them again: the
 * meeting kernel needs a second thread, which only a woken worker can be. */
static void test_sleep_and_wake(kiln_pool_t* pool) {
  int32_t out[64];
  void* bindings[1] = {out};
  kiln_pool_slice_t slices[4];
  uint32_t n = 0;
  for (int round = 0; round < 3; ++round) {
    CHECK(all_asleep(pool, kiln_pool_worker_count(pool) - 1));
    memset(out, 0, sizeof out);
    atomic_store(&g_started_threads, 0);
    atomic_store(&g_round, 100 + round);
    kiln_dispatch_args_t args = {bindings, NULL, 64, 0};
    CHECK_OK(kiln_pool_dispatch_traced(pool, "meet", meeting_kernel, &args, 64, slices, &n));
    for (uint32_t i = 0; i < 64; ++i) CHECK(out[i] == (int32_t)i + 1);
    CHECK(n >= 2 && n <= 4);
  }
  CHECK(all_asleep(pool, kiln_pool_worker_count(pool) - 1));
  CHECK(kiln_pool_sleeping_workers(NULL) == 0);
}

/* out[id]: the CPU a pool thread ran workgroup id on, -1 on the dispatching
 * thread; a pool thread takes part in every dispatch (the meeting). */
static _Thread_local int t_is_dispatcher;
static int32_t cpu_kernel(const kiln_dispatch_args_t* args, uint32_t id) {
  int32_t* out = (int32_t*)args->bindings[0];
  meet();
  out[id] = t_is_dispatcher ? -1 : sched_getcpu();
  return 0;
}

/* A worker that finds itself on its dispatching thread's CPU moves off it
 * before it runs a workgroup: with the dispatching thread pinned to one CPU
 * of at least two, no workgroup runs on a worker there, dispatch after
 * dispatch (Linux; with one CPU, the dispatches just work). */
static void test_worker_avoids_dispatcher_cpu(void) {
  kiln_pool_t* pool = NULL;
  CHECK_OK(kiln_pool_create(2, &pool)); /* its worker inherits this thread's CPU set */
  if (!pool) return;
  cpu_set_t saved, one;
  CHECK(sched_getaffinity(0, sizeof saved, &saved) == 0);
  int cpu = sched_getcpu();
  int pinned = CPU_COUNT(&saved) > 1 && cpu >= 0;
  if (pinned) {
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
  }
  t_is_dispatcher = 1;
  int32_t out[32];
  void* bindings[1] = {out};
  int worker_runs = 0;
  for (int round = 0; round < 20; ++round) {
    atomic_store(&g_started_threads, 0);
    atomic_store(&g_round, 200 + round);
    for (int i = 0; i < 32; ++i) out[i] = -2;
    kiln_dispatch_args_t args = {bindings, NULL, 32, 0};
    CHECK_OK(kiln_pool_dispatch(pool, "cpu", cpu_kernel, &args, 32));
    for (int i = 0; i < 32; ++i) {
      CHECK(out[i] != -2);
      if (out[i] >= 0) {
        worker_runs++;
        if (pinned) CHECK(out[i] != cpu);
      }
    }
    if (round == 10) { /* the worker asleep: a wake-up must not put it back */
      CHECK(all_asleep(pool, 1));
    }
  }
  CHECK(worker_runs >= 20); /* the worker met the dispatching thread each time */
  t_is_dispatcher = 0;
  if (pinned) CHECK(sched_setaffinity(0, sizeof saved, &saved) == 0);
  kiln_pool_free(pool);
}

/* An idle pool uses no CPU: over a sleep after dispatches, the process's CPU
 * time grows by far less than the sleep (workers spin ~50 us, then sleep). */
static double cpu_seconds(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

static void test_idle_pool_uses_no_cpu(void) {
  kiln_pool_t* pool = NULL;
  int32_t out[256];
  CHECK_OK(kiln_pool_create(4, &pool));
  if (!pool) return;
  for (int i = 0; i < 50; ++i) CHECK(run_marks(pool, out, 256));
  double before = cpu_seconds();
  struct timespec pause = {0, 300000000}; /* 0.3 s */
  nanosleep(&pause, NULL);
  double used = cpu_seconds() - before;
  if (used >= 0.1) fprintf(stderr, "idle pool used %.3f s of CPU over 0.3 s\n", used);
  CHECK(used < 0.1);
  kiln_pool_free(pool);
}

int main(void) {
  int32_t out[1024];

  /* One pool, many dispatches of many sizes. */
  kiln_pool_t* pool = NULL;
  CHECK_OK(kiln_pool_create(4, &pool));
  CHECK(pool && kiln_pool_worker_count(pool) == 4);
  if (pool) {
    int ok = 1;
    for (uint32_t i = 0; i < 500 && ok; ++i) ok = run_marks(pool, out, 1 + (i * 37) % 1024);
    CHECK(ok);
    CHECK(run_marks(pool, out, 1));
    CHECK(run_marks(pool, out, 1024));
    test_traced_slices(pool);
    test_sleep_and_wake(pool);

    /* Zero workgroups: nothing runs, no error. */
    kiln_dispatch_args_t args = {NULL, NULL, 0, 0};
    CHECK_OK(kiln_pool_dispatch(pool, "none", mark_kernel, &args, 0));

    /* A failing workgroup fails the dispatch with its code and the kernel name. */
    int64_t push[2] = {37, 9};
    kiln_dispatch_args_t fargs = {NULL, push, 100, 0};
    CHECK_ERROR(kiln_pool_dispatch(pool, "my_kernel", failing_kernel, &fargs, 100),
                KILN_INTERNAL, "'my_kernel'", "code 9", "workgroup 37 of 100");
    /* The pool is still fine afterwards. */
    CHECK(run_marks(pool, out, 333));
    CHECK_ERROR(kiln_pool_dispatch(pool, "k", NULL, &fargs, 1), KILN_INVALID_ARGUMENT, "'k'");

    /* Concurrent dispatches from several threads share the workers. */
    pthread_t threads[6];
    thread_arg_t targs[6];
    for (int i = 0; i < 6; ++i) {
      targs[i].pool = pool;
      targs[i].ok = 0;
      targs[i].index = i;
      pthread_create(&threads[i], NULL, dispatcher, &targs[i]);
    }
    for (int i = 0; i < 6; ++i) {
      pthread_join(threads[i], NULL);
      CHECK(targs[i].ok);
    }
    kiln_pool_free(pool);
  }

  test_worker_avoids_dispatcher_cpu();
  test_idle_pool_uses_no_cpu();

  /* A single worker is the calling thread alone. */
  CHECK_OK(kiln_pool_create(1, &pool));
  if (pool) {
    CHECK(kiln_pool_worker_count(pool) == 1);
    CHECK(run_marks(pool, out, 100));
    CHECK(kiln_pool_sleeping_workers(pool) == 0);
    int64_t push[2] = {0, -3};
    kiln_dispatch_args_t fargs = {NULL, push, 5, 0};
    CHECK_ERROR(kiln_pool_dispatch(pool, "single", failing_kernel, &fargs, 5),
                KILN_INTERNAL, "code -3", "workgroup 0 of 5");
    kiln_pool_free(pool);
  }

  /* 0 means one per core; creating and freeing repeatedly leaks nothing. */
  for (int i = 0; i < 20; ++i) {
    CHECK_OK(kiln_pool_create(0, &pool));
    CHECK(pool && kiln_pool_worker_count(pool) >= 1);
    if (pool && i % 2) CHECK(run_marks(pool, out, 64));
    kiln_pool_free(pool);
  }
  kiln_pool_free(NULL);
  CHECK_ERROR(kiln_pool_create(1000000, &pool), KILN_INVALID_ARGUMENT,
              "worker_count 1000000", "at most");

  /* The instance owns a pool. */
  kiln_instance_options_t options;
  kiln_instance_options_initialize(&options);
  CHECK(options.worker_count == 0);
  options.worker_count = 3;
  kiln_instance_t* instance = NULL;
  CHECK_OK(kiln_instance_create(&options, &instance));
  if (instance) {
    CHECK(kiln_instance_worker_count(instance) == 3);
    CHECK(kiln_instance_pool(instance) != NULL);
    CHECK(run_marks(kiln_instance_pool(instance), out, 300));
    kiln_instance_retain(instance);
    kiln_instance_release(instance);
    kiln_instance_release(instance);
  }
  CHECK_OK(kiln_instance_create(NULL, &instance));
  CHECK(instance && kiln_instance_worker_count(instance) >= 1);
  kiln_instance_release(instance);
  kiln_instance_release(NULL);
  options.worker_count = 5000;
  CHECK_ERROR(kiln_instance_create(&options, &instance), KILN_INVALID_ARGUMENT,
              "creating an instance", "worker_count 5000");
  CHECK(instance == NULL);

  /* The last-level cache size kernels get: sysfs's text, KILN_LAST_LEVEL_CACHE. */
  CHECK(kiln_parse_cache_size_kib("32768K\n") == 32768);
  CHECK(kiln_parse_cache_size_kib("2M") == 2048);
  CHECK(kiln_parse_cache_size_kib("1G") == 1048576);
  CHECK(kiln_parse_cache_size_kib("4096") == 4);
  CHECK(kiln_parse_cache_size_kib("1000") == 0);
  CHECK(kiln_parse_cache_size_kib("") == 0);
  CHECK(kiln_parse_cache_size_kib(NULL) == 0);
  CHECK(kiln_parse_cache_size_kib("-1M") == 0);
  CHECK(kiln_parse_cache_size_kib("12Q") == 0);
  CHECK(kiln_parse_cache_size_kib("99999999999999999999") == 0);
  CHECK(kiln_parse_cache_size_kib("8T") == 0);
  CHECK(kiln_instance_last_level_cache_kib(NULL) == 0);
  setenv("KILN_LAST_LEVEL_CACHE", "3M", 1);
  CHECK_OK(kiln_instance_create(NULL, &instance));
  CHECK(instance && kiln_instance_last_level_cache_kib(instance) == 3072);
  kiln_instance_release(instance);
  setenv("KILN_LAST_LEVEL_CACHE", "none", 1);
  CHECK_OK(kiln_instance_create(NULL, &instance));
  CHECK(instance && kiln_instance_last_level_cache_kib(instance) == 0);
  kiln_instance_release(instance);
  unsetenv("KILN_LAST_LEVEL_CACHE");
  TEST_MAIN_END();
}
