/* Thread stress test, run under ThreadSanitizer by `make ctest-tsan` (and
 * plainly, and under ASan/LSan, by the other C test builds).
 *
 * Script threads: each thread has its own context on every module, on one of
 * three instances (3, 2 and 1 workers), so contexts of several threads share
 * each loaded module and each instance's thread pool. A thread runs a
 * deterministic script of calls to every exported function with generated
 * arguments (half of the calls with argument views shared by all threads),
 * checkpoints (every global read by name and copied into a fresh context
 * that replaces the old one) and fresh loads of a module. Every outcome
 * (results' bytes, or status code and message) must be bit-identical to a
 * single-threaded reference run of the same scripts on a 1-worker instance.
 *
 * Spinner threads make long calls (a bytecode loop of up to 200,000 steps,
 * loops of dispatches) while a canceller thread calls kiln_context_cancel on
 * their contexts at random moments: each call must give the reference result
 * or KILN_CANCELLED, both must happen, and a call after the canceller stops
 * must not be affected. Under LSan the cancelled calls must leak nothing.
 *
 *   test_stress [--threads=N] [--calls=N] [--spin-calls=N] [MODULE_DIR]
 *
 * MODULE_DIR holds gen_stress_modules.py's modules (kernels, kiln-exported
 * programs); without it only the kernel-less built-in modules run. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <time.h>

#include "module_runner.h"

static int failures = 0;
static pthread_mutex_t failure_lock = PTHREAD_MUTEX_INITIALIZER;

static void fail(const char* format, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char* format, ...) {
  va_list ap;
  pthread_mutex_lock(&failure_lock);
  failures++;
  va_start(ap, format);
  vfprintf(stderr, format, ap);
  va_end(ap);
  fputc('\n', stderr);
  pthread_mutex_unlock(&failure_lock);
}

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) fail("%s:%d: check failed: %s", __FILE__, __LINE__, #cond);     \
  } while (0)

#define OK(expr)                                                                 \
  do {                                                                           \
    kiln_status_t s_ = (expr);                                                   \
    if (s_) fail("%s:%d: %s failed: %s", __FILE__, __LINE__, #expr,              \
                 kiln_status_message(s_));                                       \
    kiln_status_free(s_);                                                        \
  } while (0)

#define INSTANCES 3
static const uint32_t instance_workers[INSTANCES] = {3, 2, 1};
#define MAX_FUNCTIONS 16

static runner_module_t modules[RUNNER_MAX_MODULES];
static size_t module_count;

/* Argument views made once and passed by every thread (read-only from then
 * on): concurrent retain/release and reads of one view, and global.store of
 * an argument seen by many contexts. */
static kiln_buffer_view_t* shared_args[RUNNER_MAX_MODULES][MAX_FUNCTIONS][RUNNER_MAX_ARGS];
static size_t shared_arg_count[RUNNER_MAX_MODULES][MAX_FUNCTIONS];

static size_t function_count(const kiln_module_t* m) {
  size_t n = kiln_module_function_count(m);
  return n < MAX_FUNCTIONS ? n : MAX_FUNCTIONS;
}

static kiln_status_t load(kiln_instance_t* inst, size_t j, int from_file, kiln_module_t** out) {
  if (from_file && modules[j].path[0])
    return kiln_module_load_file(inst, modules[j].path, out);
  return kiln_module_load_memory(inst, modules[j].data, modules[j].size, out);
}

/* ---- scripts ------------------------------------------------------------------ */

typedef struct script {
  int id;
  int steps;
  kiln_instance_t* instance;
  kiln_module_t** modules; /* module_count loaded modules */
  runner_log_t log;
  size_t calls, failed_calls; /* failed: an error status, the same as the reference's */
} script_t;

static void call_random(script_t* sc, kiln_context_t* c, const kiln_module_t* m, size_t j,
                        uint64_t r, uint64_t* rng) {
  kiln_function_t f;
  kiln_buffer_view_t* args[RUNNER_MAX_ARGS];
  size_t n = 0, fi = (size_t)(r >> 16) % function_count(m);
  int shared = (r >> 24) & 1;
  kiln_status_t s = kiln_module_function_at(m, fi, &f);
  if (!s && !shared) s = runner_args(f, rng, args, &n);
  if (s) {
    runner_log_status(&sc->log, s);
    kiln_status_free(s);
    return;
  }
  if (runner_invoke(c, f, shared ? shared_args[j][fi] : args,
                    shared ? shared_arg_count[j][fi] : n, &sc->log))
    sc->failed_calls++;
  sc->calls++;
  if (!shared) runner_release(args, n);
}

static void* run_script(void* arg) {
  script_t* sc = arg;
  kiln_context_t* ctx[RUNNER_MAX_MODULES];
  uint64_t rng = 0x5eed0000ull + (uint64_t)sc->id * 7919u;
  size_t j;
  int step;
  for (j = 0; j < module_count; ++j) {
    kiln_status_t s = kiln_context_create(sc->modules[j], &ctx[j]);
    runner_log_status(&sc->log, s);
    kiln_status_free(s);
    runner_log_mark(&sc->log);
  }
  for (step = 0; step < sc->steps; ++step) {
    uint64_t r = runner_next(&rng);
    unsigned op = (unsigned)((r >> 8) % 64);
    kiln_module_t* m = sc->modules[j = (size_t)(r % module_count)];
    if (!ctx[j]) {
      runner_log_u64(&sc->log, 0xdead);
    } else if (op == 0) {
      /* Checkpoint: a fresh context takes over the globals by name. */
      kiln_context_t* fresh = NULL;
      kiln_status_t s = kiln_context_create(m, &fresh);
      runner_log_status(&sc->log, s);
      kiln_status_free(s);
      if (fresh) {
        runner_log_globals(ctx[j], m, &sc->log);
        runner_copy_globals(ctx[j], fresh, m, &sc->log);
        kiln_context_release(ctx[j]);
        ctx[j] = fresh;
      }
    } else if (op == 1) {
      /* A fresh load of the module on this thread's instance, one call. */
      kiln_module_t* own = NULL;
      kiln_context_t* c = NULL;
      kiln_status_t s = load(sc->instance, j, (r >> 32) & 1, &own);
      if (!s) s = kiln_context_create(own, &c);
      runner_log_status(&sc->log, s);
      kiln_status_free(s);
      if (c) call_random(sc, c, own, j, r, &rng);
      kiln_context_release(c);
      kiln_module_release(own);
    } else {
      call_random(sc, ctx[j], m, j, r, &rng);
    }
    runner_log_mark(&sc->log);
  }
  for (j = 0; j < module_count; ++j) {
    if (ctx[j]) runner_log_globals(ctx[j], sc->modules[j], &sc->log);
    runner_log_mark(&sc->log);
    kiln_context_release(ctx[j]);
  }
  return NULL;
}

/* Step-by-step comparison with the reference; reports the first difference. */
static void compare_logs(const script_t* got, const script_t* want) {
  size_t k;
  if (got->log.oom || want->log.oom) {
    fail("thread %d: the outcome log ran out of memory", got->id);
    return;
  }
  if (got->log.steps != want->log.steps) {
    fail("thread %d: %zu steps logged, the reference has %zu", got->id, got->log.steps,
         want->log.steps);
    return;
  }
  for (k = 0; k < got->log.steps; ++k) {
    size_t n1, n2;
    const unsigned char* a = runner_log_step(&got->log, k, &n1);
    const unsigned char* b = runner_log_step(&want->log, k, &n2);
    if (n1 != n2 || memcmp(a, b, n1) != 0) {
      fail("thread %d: step %zu differs from the single-threaded reference", got->id, k);
      fprintf(stderr, "  status %s (reference %s)\n",
              kiln_status_code_name(runner_step_code(a, n1)),
              kiln_status_code_name(runner_step_code(b, n2)));
      return;
    }
  }
}

/* ---- cancellation ----------------------------------------------------------------- */

#define SPIN_KINDS 3
static const int64_t triangle_n[SPIN_KINDS] = {50, 5000, 200000};
static const int64_t spin_k[SPIN_KINDS] = {1, 20, 300};

typedef struct spinner {
  int id;
  int calls;
  kiln_context_t* tri;  /* vmtest: triangle */
  kiln_context_t* spin; /* kstress: spin (pure) and accumulate (stores globals) */
  kiln_module_t* good;
  kiln_module_t* kstress;
  size_t cancelled, completed;
} spinner_t;

static kiln_buffer_view_t* spin_x;         /* kstress's x, shared */
static kiln_buffer_view_t* spin_k_views[SPIN_KINDS];
static kiln_buffer_view_t* triangle_views[SPIN_KINDS];
static runner_log_t spin_reference[SPIN_KINDS]; /* spin(x, k) on one thread */
static atomic_int stop_cancelling;

static void* run_spinner(void* arg) {
  spinner_t* sp = arg;
  uint64_t rng = 0xc0ffeeull + (uint64_t)sp->id;
  int i;
  for (i = 0; i < sp->calls; ++i) {
    uint64_t r = runner_next(&rng);
    int kind = (int)((r >> 8) % SPIN_KINDS);
    int which = sp->spin ? (int)(r % 3) : 0;
    kiln_function_t f;
    kiln_buffer_view_t* out[2] = {NULL, NULL};
    kiln_buffer_view_t* args[2];
    kiln_context_t* c = which == 0 ? sp->tri : sp->spin;
    kiln_status_t s = kiln_module_lookup_function(
        which == 0 ? sp->good : sp->kstress,
        which == 0 ? "triangle" : which == 1 ? "spin" : "accumulate", &f);
    if (s) {
      OK(s);
      return NULL;
    }
    args[0] = which == 0 ? triangle_views[kind] : spin_x;
    args[1] = spin_k_views[kind];
    s = kiln_context_invoke(c, f, args, which == 0 ? 1 : 2, out, 2);
    if (kiln_status_code(s) == KILN_CANCELLED) {
      if (!strstr(kiln_status_message(s), "cancelled"))
        fail("spinner %d: CANCELLED without saying so: %s", sp->id, kiln_status_message(s));
      sp->cancelled++;
    } else if (s) {
      fail("spinner %d: call failed: %s", sp->id, kiln_status_message(s));
    } else {
      sp->completed++;
      if (which == 0) {
        int64_t v, n = triangle_n[kind];
        memcpy(&v, kiln_buffer_view_data(out[0]), sizeof v);
        if (v != n * (n + 1) / 2) fail("spinner %d: triangle(%lld) is wrong", sp->id, (long long)n);
      } else if (which == 1) {
        runner_log_t got;
        size_t n1, n2;
        const unsigned char *a, *b;
        memset(&got, 0, sizeof got);
        runner_log_view(&got, out[0]);
        runner_log_mark(&got);
        a = runner_log_step(&got, 0, &n1);
        b = runner_log_step(&spin_reference[kind], 0, &n2);
        if (got.oom || n1 != n2 || memcmp(a, b, n1) != 0)
          fail("spinner %d: spin(x, %lld) differs from the reference", sp->id,
               (long long)spin_k[kind]);
        runner_log_free(&got);
      }
      runner_release(out, which == 2 ? 2 : 1);
    }
    kiln_status_free(s);
  }
  return NULL;
}

static void* run_canceller(void* arg) {
  spinner_t* spinners = arg;
  uint64_t rng = 0xcafeull;
  size_t i;
  while (!atomic_load(&stop_cancelling)) {
    struct timespec pause = {0, 0};
    for (i = 0; spinners[i].calls >= 0; ++i) {
      kiln_context_cancel(spinners[i].tri);
      kiln_context_cancel(spinners[i].spin); /* NULL: ignored */
    }
    pause.tv_nsec = 20000 + (long)(runner_next(&rng) % 400000);
    nanosleep(&pause, NULL);
  }
  return NULL;
}

static kiln_buffer_view_t* scalar_i64(int64_t v) {
  kiln_buffer_view_t* view = NULL;
  OK(kiln_buffer_view_create(KILN_DTYPE_I64, 0, NULL, &v, sizeof v, &view));
  return view;
}

/* spin(x, k) for each k on a fresh context of a 1-worker instance. */
static void spin_references(kiln_module_t* kstress) {
  kiln_context_t* c = NULL;
  kiln_function_t f;
  int k;
  OK(kiln_context_create(kstress, &c));
  OK(kiln_module_lookup_function(kstress, "spin", &f));
  for (k = 0; c && k < SPIN_KINDS; ++k) {
    kiln_buffer_view_t* args[2] = {spin_x, spin_k_views[k]};
    kiln_buffer_view_t* out = NULL;
    OK(kiln_context_invoke(c, f, args, 2, &out, 1));
    if (out) runner_log_view(&spin_reference[k], out);
    runner_log_mark(&spin_reference[k]);
    kiln_buffer_view_release(out);
  }
  kiln_context_release(c);
}

/* A cancel with no call running does nothing: the next call runs. */
static void check_idle_cancel(kiln_module_t* good) {
  kiln_context_t* c = NULL;
  kiln_function_t f;
  kiln_buffer_view_t* out = NULL;
  OK(kiln_context_create(good, &c));
  OK(kiln_module_lookup_function(good, "triangle", &f));
  if (!c) return;
  kiln_context_cancel(c);
  kiln_context_cancel(c);
  OK(kiln_context_invoke(c, f, &triangle_views[0], 1, &out, 1));
  if (out) CHECK(*(const int64_t*)kiln_buffer_view_data(out) == 50 * 51 / 2);
  kiln_buffer_view_release(out);
  kiln_context_release(c);
}

/* After the canceller stopped: a call on each spinner's contexts runs. */
static void check_after_cancelling(spinner_t* sp) {
  kiln_function_t f;
  kiln_buffer_view_t* out[2] = {NULL, NULL};
  OK(kiln_module_lookup_function(sp->good, "triangle", &f));
  OK(kiln_context_invoke(sp->tri, f, &triangle_views[0], 1, out, 1));
  runner_release(out, 1);
  if (sp->spin) {
    kiln_buffer_view_t* args[2] = {spin_x, spin_k_views[0]};
    kiln_buffer_view_t* g = NULL;
    OK(kiln_module_lookup_function(sp->kstress, "accumulate", &f));
    OK(kiln_context_invoke(sp->spin, f, args, 2, out, 2));
    runner_release(out, out[1] ? 2 : 0);
    OK(kiln_context_get_global(sp->spin, "acc", &g));
    kiln_buffer_view_release(g);
  }
}

static double seconds(struct timespec a, struct timespec b) {
  return (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
}

/* ---- main ------------------------------------------------------------------------ */

static int find_module(const char* name) {
  size_t j;
  for (j = 0; j < module_count; ++j)
    if (strcmp(modules[j].name, name) == 0) return (int)j;
  return -1;
}

int main(int argc, char** argv) {
  int threads = 8, steps = 2500, spin_calls = 150, i;
  const char* dir = NULL;
  kiln_instance_t* instances[INSTANCES] = {NULL};
  kiln_module_t* loaded[INSTANCES][RUNNER_MAX_MODULES];
  kiln_instance_t* ref_instance = NULL;
  kiln_module_t* ref_modules[RUNNER_MAX_MODULES];
  script_t *scripts, *reference;
  pthread_t *tids, spin_tids[INSTANCES], canceller;
  spinner_t spinners[INSTANCES + 1];
  size_t j, calls = 0, failed_calls = 0, cancelled = 0, completed = 0;
  int good, kstress, started = 0;
  struct timespec t0, t1, t2;

  for (i = 1; i < argc; ++i) {
    if (strncmp(argv[i], "--threads=", 10) == 0) threads = atoi(argv[i] + 10);
    else if (strncmp(argv[i], "--calls=", 8) == 0) steps = atoi(argv[i] + 8);
    else if (strncmp(argv[i], "--spin-calls=", 13) == 0) spin_calls = atoi(argv[i] + 13);
    else dir = argv[i];
  }
  if (threads < 1 || steps < 1 || spin_calls < 1) {
    fprintf(stderr, "usage: %s [--threads=N] [--calls=N] [--spin-calls=N] [MODULE_DIR]\n",
            argv[0]);
    return 2;
  }
  if (!runner_load_modules(dir, modules, &module_count)) return 1;
  good = find_module("vmtest");
  kstress = find_module("kstress");

  memset(loaded, 0, sizeof loaded);
  memset(ref_modules, 0, sizeof ref_modules);
  for (i = 0; i < INSTANCES; ++i) {
    kiln_instance_options_t opts;
    kiln_instance_options_initialize(&opts);
    opts.worker_count = instance_workers[i];
    OK(kiln_instance_create(&opts, &instances[i]));
    for (j = 0; instances[i] && j < module_count; ++j)
      OK(load(instances[i], j, i == 0, &loaded[i][j]));
  }
  {
    kiln_instance_options_t opts;
    kiln_instance_options_initialize(&opts);
    opts.worker_count = 1;
    OK(kiln_instance_create(&opts, &ref_instance));
    for (j = 0; ref_instance && j < module_count; ++j)
      OK(load(ref_instance, j, 0, &ref_modules[j]));
  }
  if (failures) return 1;

  /* Shared arguments, one set per function. */
  for (j = 0; j < module_count; ++j) {
    size_t fi;
    for (fi = 0; fi < function_count(ref_modules[j]); ++fi) {
      kiln_function_t f;
      uint64_t rng = 0xa5a5ull + j * 131 + fi;
      OK(kiln_module_function_at(ref_modules[j], fi, &f));
      OK(runner_args(f, &rng, shared_args[j][fi], &shared_arg_count[j][fi]));
    }
  }
  for (i = 0; i < SPIN_KINDS; ++i) {
    spin_k_views[i] = scalar_i64(spin_k[i]);
    triangle_views[i] = scalar_i64(triangle_n[i]);
  }
  if (kstress >= 0) {
    int64_t shape[1] = {1024};
    kiln_value_info_t info = {"x", KILN_DTYPE_F32, 1, shape, 0};
    uint64_t rng = 77;
    OK(runner_value(&info, &rng, &spin_x));
    spin_references(ref_modules[kstress]);
  }
  check_idle_cancel(ref_modules[good]);

  /* The reference: every script in turn on one thread, 1-worker instance. */
  scripts = calloc((size_t)threads, sizeof *scripts);
  reference = calloc((size_t)threads, sizeof *reference);
  tids = calloc((size_t)threads, sizeof *tids);
  if (!scripts || !reference || !tids) return 1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (i = 0; i < threads; ++i) {
    reference[i].id = scripts[i].id = i;
    reference[i].steps = scripts[i].steps = steps;
    reference[i].instance = ref_instance;
    reference[i].modules = ref_modules;
    scripts[i].instance = instances[i % INSTANCES];
    scripts[i].modules = loaded[i % INSTANCES];
    run_script(&reference[i]);
  }

  clock_gettime(CLOCK_MONOTONIC, &t1);

  /* Everything at once: scripts, spinners and the canceller. */
  memset(spinners, 0, sizeof spinners);
  for (i = 0; i < INSTANCES; ++i) {
    spinner_t* sp = &spinners[i];
    sp->id = i;
    sp->calls = spin_calls;
    sp->good = loaded[i][good];
    OK(kiln_context_create(sp->good, &sp->tri));
    if (kstress >= 0) {
      sp->kstress = loaded[i][kstress];
      OK(kiln_context_create(sp->kstress, &sp->spin));
    }
  }
  spinners[INSTANCES].calls = -1; /* end of the canceller's list */
  if (failures) return 1;
  atomic_init(&stop_cancelling, 0);
  for (i = 0; i < threads; ++i)
    started += !pthread_create(&tids[i], NULL, run_script, &scripts[i]);
  for (i = 0; i < INSTANCES; ++i)
    started += !pthread_create(&spin_tids[i], NULL, run_spinner, &spinners[i]);
  started += !pthread_create(&canceller, NULL, run_canceller, spinners);
  if (started != threads + INSTANCES + 1) {
    fprintf(stderr, "cannot start the test's threads\n");
    return 1;
  }
  for (i = 0; i < threads; ++i) pthread_join(tids[i], NULL);
  for (i = 0; i < INSTANCES; ++i) pthread_join(spin_tids[i], NULL);
  atomic_store(&stop_cancelling, 1);
  pthread_join(canceller, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t2);

  for (i = 0; i < threads; ++i) {
    compare_logs(&scripts[i], &reference[i]);
    calls += scripts[i].calls;
    failed_calls += scripts[i].failed_calls;
    runner_log_free(&scripts[i].log);
    runner_log_free(&reference[i].log);
  }
  for (i = 0; i < INSTANCES; ++i) {
    check_after_cancelling(&spinners[i]);
    cancelled += spinners[i].cancelled;
    completed += spinners[i].completed;
    kiln_context_release(spinners[i].tri);
    kiln_context_release(spinners[i].spin);
  }
  /* Both outcomes must have happened for the test to mean anything. */
  if (cancelled == 0 || completed == 0)
    fail("cancellation: %zu calls cancelled, %zu completed (expected both)", cancelled,
         completed);

  for (j = 0; j < module_count; ++j) {
    size_t fi;
    for (fi = 0; fi < MAX_FUNCTIONS; ++fi)
      runner_release(shared_args[j][fi], shared_arg_count[j][fi]);
    for (i = 0; i < INSTANCES; ++i) kiln_module_release(loaded[i][j]);
    kiln_module_release(ref_modules[j]);
  }
  for (i = 0; i < SPIN_KINDS; ++i) {
    kiln_buffer_view_release(spin_k_views[i]);
    kiln_buffer_view_release(triangle_views[i]);
    runner_log_free(&spin_reference[i]);
  }
  kiln_buffer_view_release(spin_x);
  for (i = 0; i < INSTANCES; ++i) kiln_instance_release(instances[i]);
  kiln_instance_release(ref_instance);
  runner_free_modules(modules, module_count);
  free(scripts);
  free(reference);
  free(tids);

  printf("test_stress: %d threads x %d steps on %d instances, %zu modules: %zu calls "
         "(%zu of them errors by design), bit-identical to the single-threaded reference%s; "
         "cancellation: %d threads x %d calls, %zu cancelled, %zu completed; reference "
         "%.2f s, concurrent %.2f s\n",
         threads, steps, INSTANCES, module_count, calls, failed_calls,
         failures ? " (NOT)" : "",
         INSTANCES, spin_calls, cancelled, completed, seconds(t0, t1), seconds(t1, t2));
  if (failures) fprintf(stderr, "%d failures\n", failures);
  return failures != 0;
}
