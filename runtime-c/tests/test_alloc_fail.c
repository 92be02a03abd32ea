/* Allocation-failure test: every allocation the runtime makes is made to fail
 * in turn, over instance create + module load + context create + calls +
 * checkpoint + release of each test module. Run under ASan/LSan by
 * `make ctest-alloc-fail` and `make ctest-sanitize`.
 *
 * The executable is linked with -Wl,--wrap=malloc,... (tests/CMakeLists.txt),
 * so the runtime's calls to the allocators, mmap, mprotect and pthread_create
 * go through the counters below; the runtime's sources are unchanged. Only
 * calls made on the thread running the scenario are counted (the pool's
 * workers allocate nothing; libc's own internals are not wrapped).
 *
 * For each module, a clean run counts the scenario's P allocation points and
 * logs every step's outcome. Then, for N = 1, 2, ..., P + 1, two runs:
 * "single" fails only the Nth call, "persistent" the Nth and every later one
 * (so error paths that allocate, such as building a status, fail too). In
 * each run every step must give the clean run's outcome until the step in
 * which the first failure was injected; that step may instead fail with
 * OUT_OF_MEMORY, or with the clean run's code, or with the status that names
 * the failing step (IO for a failed mmap of the file, FAILED_PRECONDITION for
 * mprotect, INTERNAL for a worker thread that cannot start); the scenario then
 * stops and releases everything. After each run no allocation or mapping
 * made through the wrappers may be left (and LSan checks at exit). Run
 * N = P + 1 injects nothing and must equal the clean run in full.
 *
 *   test_alloc_fail [MODULE_DIR]
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* The log and module bytes use the real allocator: not counted, never failed. */
void* __real_realloc(void* p, size_t n);
void __real_free(void* p);
#define RUNNER_REALLOC __real_realloc
#define RUNNER_FREE __real_free
#include "module_runner.h"
#include "buffer_internal.h" /* kiln_buffer_view_allocate */
#include "memory.h"          /* kiln_memory_is_mapped */
#include "module_internal.h" /* kiln_module_disassemble */

/* ---- the wrappers ------------------------------------------------------------ */

enum {
  K_MALLOC, K_CALLOC, K_REALLOC, K_ALIGNED_ALLOC, K_POSIX_MEMALIGN, K_STRDUP, K_STRNDUP,
  K_MMAP, K_MPROTECT, K_PTHREAD_CREATE, K_COUNT
};
static const char* const kind_names[K_COUNT] = {
    "malloc", "calloc", "realloc", "aligned_alloc", "posix_memalign", "strdup", "strndup",
    "mmap", "mprotect", "pthread_create"};

static _Thread_local int armed;     /* count this thread's calls */
static long calls;                  /* calls counted in this run */
static long kind_calls[K_COUNT];    /* of them, by kind */
static long fail_at;                /* 1-based; 0: inject nothing */
static int persistent;              /* fail every call after fail_at too */
static long injected;               /* failures injected in this run */
static int injected_kind;           /* the kind of the first one */
static atomic_long live_blocks, live_maps; /* live_maps: bytes, in whole pages */

/* Distinct return addresses of the counted calls: the allocation sites. */
#define MAX_SITES 1024
static void* sites[MAX_SITES];
static size_t site_count;

static void note_site(void* at) {
  size_t i;
  for (i = 0; i < site_count; ++i)
    if (sites[i] == at) return;
  if (site_count < MAX_SITES) sites[site_count++] = at;
}

/* Counts the call; 1 when it must fail. */
static int inject(int kind, void* site) {
  if (!armed) return 0;
  calls++;
  kind_calls[kind]++;
  note_site(site);
  if (fail_at && (calls == fail_at || (persistent && calls > fail_at))) {
    if (injected++ == 0) injected_kind = kind;
    return 1;
  }
  return 0;
}

#define SITE __builtin_return_address(0)

void* __real_malloc(size_t n);
void* __real_calloc(size_t n, size_t size);
void* __real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void** out, size_t align, size_t n);
char* __real_strdup(const char* s);
char* __real_strndup(const char* s, size_t n);
void* __real_mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off);
int __real_munmap(void* addr, size_t len);
int __real_mprotect(void* addr, size_t len, int prot);
int __real_pthread_create(pthread_t* t, const pthread_attr_t* attr, void* (*fn)(void*),
                          void* arg);

void* __wrap_malloc(size_t n);
void* __wrap_calloc(size_t n, size_t size);
void* __wrap_realloc(void* p, size_t n);
void* __wrap_aligned_alloc(size_t align, size_t n);
int __wrap_posix_memalign(void** out, size_t align, size_t n);
char* __wrap_strdup(const char* s);
char* __wrap_strndup(const char* s, size_t n);
void __wrap_free(void* p);
void* __wrap_mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off);
int __wrap_munmap(void* addr, size_t len);
int __wrap_mprotect(void* addr, size_t len, int prot);
int __wrap_pthread_create(pthread_t* t, const pthread_attr_t* attr, void* (*fn)(void*),
                          void* arg);

static void* track(void* p) {
  if (p) atomic_fetch_add(&live_blocks, 1);
  return p;
}

void* __wrap_malloc(size_t n) {
  return inject(K_MALLOC, SITE) ? NULL : track(__real_malloc(n));
}
void* __wrap_calloc(size_t n, size_t size) {
  return inject(K_CALLOC, SITE) ? NULL : track(__real_calloc(n, size));
}
void* __wrap_realloc(void* p, size_t n) {
  void* q;
  if (inject(K_REALLOC, SITE)) return NULL;
  q = __real_realloc(p, n);
  if (!p && q) atomic_fetch_add(&live_blocks, 1);
  if (p && !q && n == 0) atomic_fetch_sub(&live_blocks, 1);
  return q;
}
void* __wrap_aligned_alloc(size_t align, size_t n) {
  return inject(K_ALIGNED_ALLOC, SITE) ? NULL : track(__real_aligned_alloc(align, n));
}
int __wrap_posix_memalign(void** out, size_t align, size_t n) {
  int rc;
  if (inject(K_POSIX_MEMALIGN, SITE)) return ENOMEM;
  rc = __real_posix_memalign(out, align, n);
  if (rc == 0) track(*out);
  return rc;
}
char* __wrap_strdup(const char* s) {
  return inject(K_STRDUP, SITE) ? NULL : track(__real_strdup(s));
}
char* __wrap_strndup(const char* s, size_t n) {
  return inject(K_STRNDUP, SITE) ? NULL : track(__real_strndup(s, n));
}
void __wrap_free(void* p) {
  if (p) atomic_fetch_sub(&live_blocks, 1);
  __real_free(p);
}
static size_t page_bytes(size_t len) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return (len + page - 1) / page * page;
}

void* __wrap_mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  void* p;
  if (inject(K_MMAP, SITE)) {
    errno = ENOMEM;
    return MAP_FAILED;
  }
  p = __real_mmap(addr, len, prot, flags, fd, off);
  if (p != MAP_FAILED) atomic_fetch_add(&live_maps, (long)page_bytes(len));
  return p;
}
/* Counted in bytes: the runtime unmaps the ends of a mapping it trims (memory.c). */
int __wrap_munmap(void* addr, size_t len) {
  int rc = __real_munmap(addr, len);
  if (rc == 0) atomic_fetch_sub(&live_maps, (long)page_bytes(len));
  return rc;
}
int __wrap_mprotect(void* addr, size_t len, int prot) {
  if (inject(K_MPROTECT, SITE)) {
    errno = ENOMEM;
    return -1;
  }
  return __real_mprotect(addr, len, prot);
}
int __wrap_pthread_create(pthread_t* t, const pthread_attr_t* attr, void* (*fn)(void*),
                          void* arg) {
  if (inject(K_PTHREAD_CREATE, SITE)) return EAGAIN;
  return __real_pthread_create(t, attr, fn, arg);
}

/* ---- the scenario -------------------------------------------------------------- */

static int failures = 0;

typedef struct run {
  runner_log_t log;
  const runner_log_t* reference; /* NULL: the clean run */
  int stopped;                   /* a step failed because of an injected failure */
  long injected_before_step;
} run_t;

/* Judges the step just logged against the reference; 0 to stop the scenario. */
static int end_step(run_t* r, const runner_module_t* m) {
  size_t k, n, want_n;
  const unsigned char *got, *want;
  kiln_status_code_t code, want_code;
  runner_log_mark(&r->log);
  if (r->log.oom) {
    fprintf(stderr, "%s: the outcome log ran out of memory\n", m->name);
    failures++;
    return 0;
  }
  if (!r->reference) return 1;
  k = r->log.steps - 1;
  got = runner_log_step(&r->log, k, &n);
  if (k >= r->reference->steps) {
    fprintf(stderr, "%s: step %zu is past the clean run's %zu steps\n", m->name, k,
            r->reference->steps);
    failures++;
    return 0;
  }
  want = runner_log_step(r->reference, k, &want_n);
  if (n == want_n && memcmp(got, want, n) == 0) {
    r->injected_before_step = injected;
    return 1;
  }
  code = runner_step_code(got, n);
  want_code = runner_step_code(want, want_n);
  {
    /* The message of the logged status: code, length, bytes. */
    uint64_t len = 0;
    const char* message = "";
    if (n >= 16) {
      memcpy(&len, got + 8, sizeof len);
      message = (const char*)got + 16;
    }
    if (r->injected_before_step == 0 && injected > 0 && len > 0 && code != KILN_OK &&
        (code == KILN_OUT_OF_MEMORY || code == want_code ||
         (injected_kind == K_MMAP && code == KILN_IO &&
          memmem(message, len, "cannot map", 10)) ||
         (injected_kind == K_MPROTECT && code == KILN_FAILED_PRECONDITION &&
          memmem(message, len, "mprotect", 8)) ||
         (injected_kind == K_PTHREAD_CREATE && code == KILN_INTERNAL &&
          memmem(message, len, "worker thread", 13)))) {
      r->stopped = 1;
      return 0;
    }
    fprintf(stderr,
            "%s: fail_at=%ld (%s) %s: step %zu gave %s '%.*s', the clean run %s "
            "(injected %ld failures, %ld before this step)\n",
            m->name, fail_at, injected ? kind_names[injected_kind] : "none",
            persistent ? "persistent" : "single", k, kiln_status_code_name(code),
            (int)(len < 400 ? len : 400), message, kiln_status_code_name(want_code), injected,
            r->injected_before_step);
    failures++;
    return 0;
  }
}

/* Logs a status as one step; returns end_step's verdict (0: stop). */
static int status_step(run_t* r, const runner_module_t* m, kiln_status_t s) {
  runner_log_status(&r->log, s);
  kiln_status_free(s);
  return end_step(r, m);
}

/* Calls function `index` with generated arguments (the generation is a step's
 * part: creating a view allocates). */
static int call_step(run_t* r, const runner_module_t* m, kiln_context_t* c,
                     const kiln_module_t* module, size_t index, uint64_t* rng) {
  kiln_function_t f;
  kiln_buffer_view_t* args[RUNNER_MAX_ARGS];
  size_t n = 0;
  kiln_status_t s = kiln_module_function_at(module, index, &f);
  if (!s) s = runner_args(f, rng, args, &n);
  if (s) return status_step(r, m, s);
  runner_invoke(c, f, args, n, &r->log);
  runner_release(args, n);
  return end_step(r, m);
}

/* Calls function `index` with its arguments in caller memory that is aligned to
 * their elements but not to 64 bytes (kiln_buffer_view_wrap; the memory itself
 * comes from the real allocator). A module without element_aligned_bindings
 * gets a 64-byte aligned copy of each (kiln_context_invoke): when the one
 * failure of a "single" run is injected into the first copy, the error must
 * say so. */
static long copy_failures_checked;

static int unaligned_call_step(run_t* r, const runner_module_t* m, kiln_context_t* c,
                               const kiln_module_t* module, size_t index, uint64_t* rng) {
  kiln_function_t f;
  kiln_buffer_view_t *owned[RUNNER_MAX_ARGS], *args[RUNNER_MAX_ARGS], *results[RUNNER_MAX_ARGS];
  char* memory[RUNNER_MAX_ARGS];
  size_t i, n = 0, wrapped = 0, count;
  long before;
  kiln_status_t s = kiln_module_function_at(module, index, &f);
  if (!s) s = runner_args(f, rng, owned, &n);
  for (i = 0; !s && i < n; ++i) {
    kiln_dtype_t dtype = kiln_buffer_view_dtype(owned[i]);
    size_t bytes = kiln_buffer_view_byte_size(owned[i]);
    char* at;
    memory[i] = __real_realloc(NULL, bytes + 128);
    if (!memory[i]) abort();
    at = memory[i] + (64 - (uintptr_t)memory[i] % 64) % 64 + kiln_dtype_alignment(dtype);
    memcpy(at, kiln_buffer_view_data(owned[i]), bytes);
    s = kiln_buffer_view_wrap(dtype, kiln_buffer_view_rank(owned[i]),
                              kiln_buffer_view_shape(owned[i]), at, bytes, NULL, NULL, &args[i]);
    wrapped = i + (s ? 0 : 1);
    if (s) __real_free(memory[i]);
  }
  if (!s) {
    memset(results, 0, sizeof results);
    count = kiln_function_result_count(f);
    before = calls;
    s = kiln_context_invoke(c, f, args, n, results, RUNNER_MAX_ARGS);
    if (s && !module->element_aligned_bindings && n && fail_at == before + 1 && !persistent) {
      copy_failures_checked++;
      if (!strstr(kiln_status_message(s), "aligning argument 0 '")) {
        fprintf(stderr, "%s: a failed argument copy gave '%s'\n", m->name, kiln_status_message(s));
        failures++;
      }
    }
    runner_log_status(&r->log, s);
    for (i = 0; !s && i < count; ++i) runner_log_view(&r->log, results[i]);
    if (!s) runner_release(results, count);
    kiln_status_free(s);
  } else {
    runner_log_status(&r->log, s);
    kiln_status_free(s);
  }
  runner_release(args, wrapped);
  runner_release(owned, n);
  for (i = 0; i < wrapped; ++i) __real_free(memory[i]);
  return end_step(r, m);
}

/* Calls function `index` through kiln_context_invoke_host with its arguments
 * in host memory (every other one with its view as owner; 0-d i64 arguments
 * are 1, so that row indices are in range and a row of caller memory comes
 * back as a copy); in functions of odd index the first result is copied into
 * a destination, every other result comes back as a view. */
static int host_call_step(run_t* r, const runner_module_t* m, kiln_context_t* c,
                          const kiln_module_t* module, size_t index, uint64_t* rng) {
  kiln_function_t f;
  kiln_buffer_view_t *owned[RUNNER_MAX_ARGS], *views[RUNNER_MAX_ARGS];
  kiln_host_buffer_t args[RUNNER_MAX_ARGS], results[RUNNER_MAX_ARGS];
  unsigned char* first = NULL;
  size_t i, n = 0, count = 0;
  kiln_status_t s = kiln_module_function_at(module, index, &f);
  if (!s) s = runner_args(f, rng, owned, &n);
  if (!s) count = kiln_function_result_count(f);
  memset(results, 0, sizeof results);
  if (!s && count && index % 2) {
    kiln_value_info_t info;
    s = kiln_function_result_info(f, 0, &info);
    if (!s) {
      size_t bytes = kiln_dtype_size(info.dtype);
      for (i = 0; i < info.rank; ++i) bytes *= (size_t)info.shape[i];
      first = __real_realloc(NULL, bytes + 1);
      if (!first) abort();
      results[0] = (kiln_host_buffer_t){first, bytes, NULL};
    }
  }
  if (s) return status_step(r, m, s);
  for (i = 0; i < n; ++i) {
    void* data = kiln_buffer_view_mutable_data(owned[i]);
    if (kiln_buffer_view_dtype(owned[i]) == KILN_DTYPE_I64 && !kiln_buffer_view_rank(owned[i]))
      *(int64_t*)data = 1;
    args[i] = (kiln_host_buffer_t){data, kiln_buffer_view_byte_size(owned[i]),
                                   i % 2 ? owned[i] : NULL};
  }
  s = kiln_context_invoke_host(c, f, args, n, results, views, count);
  runner_log_status(&r->log, s);
  for (i = 0; !s && i < count; ++i) {
    if (first && i == 0) runner_log_bytes(&r->log, first, results[0].byte_size);
    else runner_log_view(&r->log, views[i]);
  }
  if (!s) runner_release(views, count);
  kiln_status_free(s);
  runner_release(owned, n);
  __real_free(first);
  return end_step(r, m);
}

static void log_text(void* log, const char* text) {
  runner_log_bytes(log, text, strlen(text));
}

/* The module's bytes in a memfd sealed against writing and resizing, as
 * /proc/self/fd/N: a file the loader maps in place instead of copying. */
static char memfd_path[64];

static int sealed_memfd(const runner_module_t* m) {
  int fd = memfd_create("kiln_alloc_fail", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0 || write(fd, m->data, m->size) != (ssize_t)m->size ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    fprintf(stderr, "%s: cannot make a sealed memfd\n", m->name);
    if (fd >= 0) close(fd);
    return -1;
  }
  snprintf(memfd_path, sizeof memfd_path, "/proc/self/fd/%d", fd);
  return fd;
}

/* Instance, load (from memory, or from the file), context, every function
 * twice, a checkpoint into a fresh context, a call with arguments in caller
 * memory that is not 64-byte aligned, every function through
 * kiln_context_invoke_host, two calls that fail by design, a
 * second load from a sealed memfd (mapped) with a call, the disassembly of
 * every function, release. */
static void scenario(run_t* r, const runner_module_t* m) {
  kiln_instance_options_t opts;
  kiln_instance_t* inst = NULL;
  kiln_module_t *module = NULL, *mapped = NULL;
  kiln_context_t *c = NULL, *fresh = NULL, *c2 = NULL;
  kiln_function_t f;
  uint64_t rng = 0x0a110cull;
  size_t i, round;
  armed = 1;
  kiln_instance_options_initialize(&opts);
  opts.worker_count = 2;
  if (!status_step(r, m, kiln_instance_create(&opts, &inst))) goto out;
  if (!status_step(r, m, m->path[0] ? kiln_module_load_file(inst, m->path, &module)
                                    : kiln_module_load_memory(inst, m->data, m->size,
                                                              &module)))
    goto out;
  if (!status_step(r, m, kiln_context_create(module, &c))) goto out;
  for (round = 0; round < 2; ++round)
    for (i = 0; i < kiln_module_function_count(module); ++i)
      if (!call_step(r, m, c, module, i, &rng)) goto out;
  runner_log_globals(c, module, &r->log);
  if (!end_step(r, m)) goto out;
  if (!status_step(r, m, kiln_context_create(module, &fresh))) goto out;
  runner_copy_globals(c, fresh, module, &r->log);
  if (!end_step(r, m)) goto out;
  kiln_context_release(c); /* the fresh context carries on */
  c = NULL;
  if (!call_step(r, m, fresh, module, 0, &rng)) goto out;
  if (!unaligned_call_step(r, m, fresh, module, 0, &rng)) goto out;
  for (i = 0; i < kiln_module_function_count(module); ++i)
    if (!host_call_step(r, m, fresh, module, i, &rng)) goto out;
  if (!status_step(r, m, kiln_module_lookup_function(module, "no_such_function", &f)))
    goto out;
  if (!status_step(r, m, kiln_module_function_at(module, 0, &f))) goto out;
  if (!status_step(r, m, kiln_context_invoke(fresh, f, NULL, kiln_function_arg_count(f) + 1,
                                             NULL, 0)))
    goto out;
  if (!status_step(r, m, kiln_module_load_file(inst, memfd_path, &mapped))) goto out;
  if (!status_step(r, m, kiln_context_create(mapped, &c2))) goto out;
  if (!call_step(r, m, c2, mapped, 0, &rng)) goto out;
  for (i = 0; i < kiln_module_function_count(module); ++i) {
    kiln_status_t s = kiln_module_function_at(module, i, &f);
    if (!s) s = kiln_module_disassemble(module, f.ordinal, log_text, &r->log);
    if (!status_step(r, m, s)) goto out;
  }
out:
  kiln_context_release(c2);
  kiln_module_release(mapped);
  kiln_context_release(fresh);
  kiln_context_release(c);
  kiln_module_release(module);
  kiln_instance_release(inst);
  armed = 0;
}

/* Large allocations (runtime-c/src/memory.h), each a mapping of its own in
 * huge pages: a 32 MiB buffer (written at both ends), then vmarena's `wide`
 * (gen_vm_test_modules.py) called with 1: its context's 32 MiB arena and the
 * nested call's own, then with 0 (the context's arena again). */
static void large_scenario(run_t* r, const runner_module_t* m) {
  kiln_instance_options_t opts;
  kiln_instance_t* inst = NULL;
  kiln_module_t* module = NULL;
  kiln_context_t* c = NULL;
  kiln_buffer_view_t* big = NULL;
  kiln_function_t wide;
  const int64_t shape[1] = {(int64_t)32 << 20};
  int64_t x;
  kiln_status_t s;
  armed = 1;
  s = kiln_buffer_view_allocate(KILN_DTYPE_U8, 1, shape, &big);
  if (!s) {
    unsigned char* data = kiln_buffer_view_mutable_data(big);
    data[0] = 1;
    data[shape[0] - 1] = 2;
    runner_log_bytes(&r->log, data, 1);
    runner_log_bytes(&r->log, data + shape[0] - 1, 1);
    kiln_buffer_view_release(big);
  }
  if (!status_step(r, m, s)) goto out;
  kiln_instance_options_initialize(&opts);
  opts.worker_count = 1;
  if (!status_step(r, m, kiln_instance_create(&opts, &inst))) goto out;
  if (!status_step(r, m, kiln_module_load_memory(inst, kiln_vm_test_arena,
                                                 sizeof kiln_vm_test_arena, &module)))
    goto out;
  if (!status_step(r, m, kiln_module_lookup_function(module, "wide", &wide))) goto out;
  if (!status_step(r, m, kiln_context_create(module, &c))) goto out;
  for (x = 1; x >= 0; --x) {
    kiln_buffer_view_t* arg = NULL;
    s = kiln_buffer_view_create(KILN_DTYPE_I64, 0, NULL, &x, sizeof x, &arg);
    if (s) {
      if (!status_step(r, m, s)) goto out;
      continue;
    }
    runner_invoke(c, wide, &arg, 1, &r->log);
    kiln_buffer_view_release(arg);
    if (!end_step(r, m)) goto out;
  }
out:
  kiln_context_release(c);
  kiln_module_release(module);
  kiln_instance_release(inst);
  armed = 0;
}

/* debug.print and debug.callback (format 2.8): vmprint's functions
 * (gen_vm_test_modules.py: a 2-d f32, a spec'd i64 and a bool printed, a
 * spec on an array refused, host callback 7) called twice on a context whose
 * print sink and host callback log what they get, so a failure inside the
 * formatter must stop the call with OUT_OF_MEMORY and no line, leaking
 * nothing. */
static int log_print(void* user, const char* text, size_t length) {
  runner_log_bytes(user, text, length);
  return 0;
}

static int log_host(void* user, uint32_t number, const kiln_buffer_view_t* const* values,
                    size_t count) {
  size_t j;
  runner_log_u64(user, number);
  for (j = 0; j < count; ++j) runner_log_view(user, values[j]);
  return 0;
}

/* call_step with what the callbacks got (kept in `seen` during the call) logged
 * after the call's status, where runner_step_code does not look. */
static int print_call_step(run_t* r, const runner_module_t* m, kiln_context_t* c,
                           const kiln_module_t* module, size_t index, uint64_t* rng,
                           runner_log_t* seen) {
  kiln_function_t f;
  kiln_buffer_view_t* args[RUNNER_MAX_ARGS];
  size_t n = 0;
  kiln_status_t s = kiln_module_function_at(module, index, &f);
  if (!s) s = runner_args(f, rng, args, &n);
  if (s) return status_step(r, m, s);
  seen->size = 0;
  runner_invoke(c, f, args, n, &r->log);
  runner_release(args, n);
  runner_log_bytes(&r->log, seen->data, seen->size);
  return end_step(r, m);
}

static void print_scenario(run_t* r, const runner_module_t* m) {
  kiln_instance_options_t opts;
  kiln_instance_t* inst = NULL;
  kiln_module_t* module = NULL;
  kiln_context_t* c = NULL;
  uint64_t rng = 0x9e1a7ull;
  size_t i, round;
  runner_log_t seen;
  memset(&seen, 0, sizeof seen);
  armed = 1;
  kiln_instance_options_initialize(&opts);
  opts.worker_count = 1;
  if (!status_step(r, m, kiln_instance_create(&opts, &inst))) goto out;
  if (!status_step(r, m, kiln_module_load_memory(inst, kiln_vm_test_print,
                                                 sizeof kiln_vm_test_print, &module)))
    goto out;
  if (!status_step(r, m, kiln_context_create(module, &c))) goto out;
  kiln_context_set_print_callback(c, log_print, &seen);
  kiln_context_set_host_callback(c, log_host, &seen);
  for (round = 0; round < 2; ++round)
    for (i = 0; i < kiln_module_function_count(module); ++i)
      if (!print_call_step(r, m, c, module, i, &rng, &seen)) goto out;
out:
  runner_log_free(&seen);
  kiln_context_release(c);
  kiln_module_release(module);
  kiln_instance_release(inst);
  armed = 0;
}

/* One run of the scenario; checks that nothing is left allocated. */
static void (*current_scenario)(run_t*, const runner_module_t*) = scenario;

static void run_once(run_t* r, const runner_module_t* m) {
  long blocks = atomic_load(&live_blocks), maps = atomic_load(&live_maps);
  calls = 0;
  injected = 0;
  r->stopped = 0;
  r->injected_before_step = 0;
  memset(kind_calls, 0, sizeof kind_calls);
  current_scenario(r, m);
  if (atomic_load(&live_blocks) != blocks || atomic_load(&live_maps) != maps) {
    fprintf(stderr, "%s: fail_at=%ld (%s) %s: %ld allocations and %ld bytes of mappings leaked\n",
            m->name, fail_at, injected ? kind_names[injected_kind] : "none",
            persistent ? "persistent" : "single", atomic_load(&live_blocks) - blocks,
            atomic_load(&live_maps) - maps);
    failures++;
  }
}

int main(int argc, char** argv) {
  runner_module_t modules[RUNNER_MAX_MODULES], large, printing;
  size_t j, module_count = 0;
  long total = 0, runs = 0, stopped = 0, n, by_kind[K_COUNT];
  struct timespec t0, t1;
  int k;
  if (argc > 2) {
    fprintf(stderr, "usage: %s [MODULE_DIR]\n", argv[0]);
    return 2;
  }
  if (!runner_load_modules(argc > 1 ? argv[1] : NULL, modules, &module_count)) return 1;
  memset(by_kind, 0, sizeof by_kind);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  /* Every module through the scenario, then the large allocations. */
  memset(&large, 0, sizeof large);
  snprintf(large.name, sizeof large.name, "large allocations");
  memset(&printing, 0, sizeof printing);
  snprintf(printing.name, sizeof printing.name, "debug.print");
  for (j = 0; j <= module_count + 1 && !failures; ++j) {
    const runner_module_t* m = j < module_count ? &modules[j] : j == module_count ? &large
                                                                                  : &printing;
    run_t clean;
    long points;
    int fd = -1;
    if (m == &large) {
      current_scenario = large_scenario;
    } else if (m == &printing) {
      current_scenario = print_scenario;
    } else if ((fd = sealed_memfd(m)) < 0) {
      failures++;
      break;
    }
    memset(&clean, 0, sizeof clean);
    fail_at = 0;
    run_once(&clean, m);
    points = calls;
    for (k = 0; k < K_COUNT; ++k) by_kind[k] += kind_calls[k];
    /* The buffer, the context's arena and the nested call's arena are mappings. */
    if (m == &large && kiln_memory_is_mapped(1, 1) && kind_calls[K_MMAP] != 3) {
      fprintf(stderr, "large allocations: %ld mmap calls, expected 3\n", kind_calls[K_MMAP]);
      failures++;
    }
    if (failures) break;
    for (n = 1; n <= points + 1 && !failures; ++n) {
      for (persistent = 0; persistent < 2; ++persistent) {
        run_t r;
        memset(&r, 0, sizeof r);
        r.reference = &clean.log;
        fail_at = n;
        run_once(&r, m);
        runs++;
        stopped += r.stopped;
        if (n == points + 1 && (injected || r.log.steps != clean.log.steps)) {
          fprintf(stderr, "%s: the run past the last allocation point differs\n", m->name);
          failures++;
        }
        if (n <= points && !injected) {
          fprintf(stderr, "%s: allocation point %ld was not reached again\n", m->name, n);
          failures++;
        }
        runner_log_free(&r.log);
      }
    }
    printf("%s: %ld allocation points, %zu steps\n", m->name, points, clean.log.steps);
    total += points;
    runner_log_free(&clean.log);
    if (fd >= 0) close(fd);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  runner_free_modules(modules, module_count);
  printf("test_alloc_fail: %zu modules, %ld allocation points (", module_count, total);
  for (k = 0, n = 0; k < K_COUNT; ++k)
    if (by_kind[k]) printf("%s%s %ld", n++ ? ", " : "", kind_names[k], by_kind[k]);
  printf("), %zu distinct call sites; %ld runs, %ld stopped by an injected failure with a "
         "clean status; %.2f s\n", site_count, runs, stopped,
         (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
  if (!copy_failures_checked) {
    fprintf(stderr, "no failed copy of an unaligned argument was checked\n");
    failures++;
  }
  if (failures) fprintf(stderr, "%d failures\n", failures);
  return failures != 0;
}
