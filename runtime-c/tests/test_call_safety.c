/* The runtime's promises about a call (issue 8's findings), on the kernel-less
 * module kiln_vm_test_safety (gen_vm_test_modules.py):
 *   - a module file changed or truncated after loading does not change what
 *     runs (it was copied), unless the file cannot change (a sealed memfd),
 *     which is used in place;
 *   - memory that `alloc` returns reads as zeros until something writes it;
 *   - a global keeps its own copy of an argument (or a row of one) stored
 *     into it, so the caller's later writes do not reach it;
 *   - a call can be cancelled from another thread, and bounded by a timeout
 *     and an instruction budget; the context stays usable afterwards. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "context_internal.h"
#include "module_internal.h"
#include "test_util.h"
#include "vm_test_modules.h"

static const float kOnes[4] = {1, 2, 3, 4};

static kiln_buffer_view_t* f32_view(size_t rank, const int64_t* shape, const float* data,
                                    size_t count) {
  kiln_buffer_view_t* v = NULL;
  CHECK_OK(kiln_buffer_view_create(KILN_DTYPE_F32, rank, shape, data, count * sizeof(float),
                                   &v));
  return v;
}

static kiln_buffer_view_t* i64_scalar(int64_t x) {
  kiln_buffer_view_t* v = NULL;
  CHECK_OK(kiln_buffer_view_create(KILN_DTYPE_I64, 0, NULL, &x, sizeof x, &v));
  return v;
}

/* Calls `name` with `args`; the single result (if any) goes to *result. */
static kiln_status_t call(kiln_context_t* c, const char* name, kiln_buffer_view_t** args,
                          size_t n, kiln_buffer_view_t** result) {
  kiln_function_t f;
  kiln_buffer_view_t* out[1] = {NULL};
  kiln_status_t s = kiln_module_lookup_function(c->module, name, &f);
  if (s) return s;
  s = kiln_context_invoke(c, f, args, n, out, 1);
  if (result) *result = out[0];
  else kiln_buffer_view_release(out[0]);
  return s;
}

static int64_t triangle(kiln_context_t* c, int64_t n) {
  kiln_buffer_view_t* arg = i64_scalar(n);
  kiln_buffer_view_t* out = NULL;
  int64_t sum = -1;
  CHECK_OK(call(c, "triangle", &arg, 1, &out));
  if (out) memcpy(&sum, kiln_buffer_view_data(out), sizeof sum);
  kiln_buffer_view_release(out);
  kiln_buffer_view_release(arg);
  return sum;
}

static int equals(const kiln_buffer_view_t* v, const float* want, size_t count) {
  return v && kiln_buffer_view_byte_size(v) == count * sizeof(float) &&
         memcmp(kiln_buffer_view_data(v), want, count * sizeof(float)) == 0;
}

/* ---- a module file that changes after loading ------------------------------ */

static void check_module_runs(kiln_module_t* m) {
  kiln_context_t* c = NULL;
  CHECK_OK(kiln_context_create(m, &c));
  if (c) CHECK(triangle(c, 100) == 5050);
  kiln_context_release(c);
}

static void test_file_changed_after_load(kiln_instance_t* inst) {
  char path[] = "/tmp/kiln_test_safety_XXXXXX";
  int fd = mkstemp(path);
  size_t n = sizeof kiln_vm_test_safety;
  unsigned char* garbage = malloc(n);
  kiln_module_t* m = NULL;
  CHECK(fd >= 0 && garbage);
  if (fd < 0 || !garbage) {
    free(garbage);
    return;
  }
  CHECK(write(fd, kiln_vm_test_safety, n) == (ssize_t)n);
  CHECK_OK(kiln_module_load_file(inst, path, &m));
  if (m) {
    CHECK(m->mapping == NULL); /* a writable file is copied, not mapped */
    /* Rewritten in place (what `cp other.vmfb deployed.vmfb` does to the
     * inode), every byte changed. */
    memset(garbage, 0xA5, n);
    CHECK(pwrite(fd, garbage, n, 0) == (ssize_t)n);
    check_module_runs(m);
    /* Truncated: a mapping would fault with SIGBUS here. */
    CHECK(ftruncate(fd, 0) == 0);
    check_module_runs(m);
    kiln_module_release(m);
  }
  close(fd);
  unlink(path);
  free(garbage);
}

static void test_sealed_memfd_is_used_in_place(kiln_instance_t* inst) {
#if defined(__linux__) && defined(MFD_ALLOW_SEALING)
  size_t n = sizeof kiln_vm_test_safety;
  char path[64];
  kiln_module_t* m = NULL;
  int fd = memfd_create("kiln-module", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0 && errno == ENOSYS) return; /* a kernel without memfd */
  CHECK(fd >= 0);
  if (fd < 0) return;
  CHECK(write(fd, kiln_vm_test_safety, n) == (ssize_t)n);
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  /* Unsealed: copied like any other file that can change. */
  CHECK_OK(kiln_module_load_file(inst, path, &m));
  if (m) CHECK(m->mapping == NULL);
  kiln_module_release(m);
  m = NULL;
  CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW) == 0);
  CHECK_OK(kiln_module_load_file(inst, path, &m));
  if (m) {
    CHECK(m->mapping != NULL); /* sealed: mapped, no copy */
    CHECK(pwrite(fd, "x", 1, 0) < 0); /* and the kernel refuses changes */
    check_module_runs(m);
    kiln_module_release(m);
  }
  close(fd);
#else
  (void)inst;
#endif
}

/* ---- memory reads as zeros until written -------------------------------------- */

static void test_allocations_read_as_zeros(kiln_context_t* c) {
  static const float zeros[8] = {0};
  float half[8] = {0, 0, 0, 0, 1, 2, 3, 4};
  const int64_t four[1] = {4};
  int round;
  /* Earlier calls leave freed buffers of the same size behind to be reused. */
  for (round = 0; round < 8; ++round) {
    kiln_buffer_view_t* v = f32_view(1, four, kOnes, 4);
    kiln_buffer_view_t* out = NULL;
    CHECK_OK(call(c, "fresh", NULL, 0, &out));
    CHECK(equals(out, zeros, 4));
    kiln_buffer_view_release(out);
    out = NULL;
    CHECK_OK(call(c, "half", &v, 1, &out));
    CHECK(equals(out, half, 8));
    kiln_buffer_view_release(out);
    kiln_buffer_view_release(v);
  }
}

/* ---- globals keep a copy of the caller's memory --------------------------------- */

static void test_global_copies_argument(kiln_module_t* m) {
  const int64_t four[1] = {4}, two_by_four[2] = {2, 4};
  const float rows[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  kiln_context_t* c[2] = {NULL, NULL};
  kiln_buffer_view_t* x = f32_view(1, four, kOnes, 4);
  kiln_buffer_view_t* xs = f32_view(2, two_by_four, rows, 8);
  kiln_buffer_view_t* out = NULL;
  int k;
  for (k = 0; k < 2; ++k) {
    CHECK_OK(kiln_context_create(m, &c[k]));
    if (c[k]) CHECK_OK(call(c[k], "keep", &x, 1, NULL));
  }
  if (x) memset(kiln_buffer_view_mutable_data(x), 0x7f, 4 * sizeof(float));
  for (k = 0; k < 2; ++k) {
    if (!c[k]) continue;
    CHECK_OK(call(c[k], "kept", NULL, 0, &out));
    CHECK(equals(out, kOnes, 4));
    kiln_buffer_view_release(out);
    out = NULL;
  }
  /* A row of an argument: a view into the caller's memory, copied as well. */
  if (c[0] && xs) {
    kiln_buffer_view_t* args[2] = {xs, i64_scalar(1)};
    CHECK_OK(call(c[0], "keep_row", args, 2, NULL));
    memset(kiln_buffer_view_mutable_data(xs), 0, sizeof rows);
    CHECK_OK(call(c[0], "kept", NULL, 0, &out));
    CHECK(equals(out, rows + 4, 4));
    kiln_buffer_view_release(out);
    kiln_buffer_view_release(args[1]);
  }
  for (k = 0; k < 2; ++k) kiln_context_release(c[k]);
  kiln_buffer_view_release(x);
  kiln_buffer_view_release(xs);
}

/* ---- cancellation and limits ---------------------------------------------------- */

typedef struct spinner {
  kiln_context_t* context;
  kiln_status_t status;
  atomic_int finished;
} spinner_t;

static void* spin(void* arg) {
  spinner_t* sp = arg;
  sp->status = call(sp->context, "spin", NULL, 0, NULL);
  atomic_store(&sp->finished, 1);
  return NULL;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void test_cancel_from_another_thread(kiln_context_t* c) {
  spinner_t sp;
  pthread_t thread;
  int waited;
  sp.context = c;
  sp.status = NULL;
  atomic_init(&sp.finished, 0);
  kiln_context_cancel(c); /* no call running: nothing to cancel, nothing remembered */
  CHECK(triangle(c, 10) == 55);
  CHECK(pthread_create(&thread, NULL, spin, &sp) == 0);
  /* Wait until the call runs (cancel does nothing before), then cancel it. */
  while (atomic_load(&c->running) == 0) sleep_ms(1);
  sleep_ms(20);
  CHECK(atomic_load(&sp.finished) == 0); /* it really loops */
  kiln_context_cancel(c);
  for (waited = 0; waited < 10000 && !atomic_load(&sp.finished); ++waited) sleep_ms(1);
  CHECK(atomic_load(&sp.finished) == 1);
  pthread_join(thread, NULL);
  CHECK_ERROR(sp.status, KILN_CANCELLED, "call cancelled", "before a backward branch",
              "in function 'spin' at word 0 (br)");
  CHECK(triangle(c, 10) == 55); /* the context is usable, and the next call runs */
}

static void test_limits(kiln_context_t* c) {
  kiln_call_limits_t limits;
  kiln_call_limits_initialize(&limits);
  CHECK(limits.timeout_ns == 0 && limits.max_steps == 0);
  /* The instruction budget is exact: triangle(n) takes 5n + 8 instructions. */
  limits.max_steps = 5 * 20 + 8;
  CHECK_OK(kiln_context_set_call_limits(c, &limits));
  CHECK(triangle(c, 20) == 210);
  limits.max_steps -= 1;
  CHECK_OK(kiln_context_set_call_limits(c, &limits));
  {
    kiln_buffer_view_t* arg = i64_scalar(20);
    CHECK_ERROR(call(c, "triangle", &arg, 1, NULL), KILN_DEADLINE_EXCEEDED,
                "limit of 107 bytecode instructions", "in function 'triangle' at word");
    kiln_buffer_view_release(arg);
  }
  CHECK_ERROR(call(c, "spin", NULL, 0, NULL), KILN_DEADLINE_EXCEEDED,
              "limit of 107 bytecode instructions");
  /* A timeout stops an endless loop. */
  kiln_call_limits_initialize(&limits);
  limits.timeout_ns = 30 * 1000000ull;
  CHECK_OK(kiln_context_set_call_limits(c, &limits));
  CHECK_ERROR(call(c, "spin", NULL, 0, NULL), KILN_DEADLINE_EXCEEDED,
              "call ran past its timeout of 0.030 s", "in function 'spin'");
  CHECK(triangle(c, 100) == 5050);
  CHECK_OK(kiln_context_set_call_limits(c, NULL));
  CHECK(triangle(c, 100000) == 5000050000);
  CHECK_ERROR(kiln_context_set_call_limits(NULL, &limits), KILN_INVALID_ARGUMENT,
              "context is NULL");
  kiln_context_cancel(NULL); /* no effect, no crash */
}

int main(void) {
  kiln_instance_options_t opts;
  kiln_instance_t* inst = NULL;
  kiln_module_t* m = NULL;
  kiln_context_t* c = NULL;
  kiln_instance_options_initialize(&opts);
  opts.worker_count = 2;
  CHECK_OK(kiln_instance_create(&opts, &inst));
  if (!inst) return 1;
  test_file_changed_after_load(inst);
  test_sealed_memfd_is_used_in_place(inst);
  CHECK_OK(kiln_module_load_memory(inst, kiln_vm_test_safety, sizeof kiln_vm_test_safety,
                                   &m));
  if (m) {
    CHECK_OK(kiln_context_create(m, &c));
    if (c) {
      test_allocations_read_as_zeros(c);
      test_cancel_from_another_thread(c);
      test_limits(c);
    }
    test_global_copies_argument(m);
    kiln_context_release(c);
    kiln_module_release(m);
  }
  kiln_instance_release(inst);
  TEST_MAIN_END();
}
