/* libFuzzer target: load + invoke.
 *
 * The input's checksum trailer is recomputed first, so every mutation reaches
 * the verifier instead of being rejected as damage. A module that loads and
 * whose native code is that of a trusted seed (kf_native_code_is_trusted:
 * kernels are native code, which no verifier can judge) has every exported
 * function called, in order, on one context, with zero-filled arguments of
 * the declared types; then every global is read and written back. Each call
 * is bounded by kiln_context_set_call_limits (an instruction budget and a
 * timeout), so mutated bytecode such as `L: br L` ends with
 * DEADLINE_EXCEEDED. All of that is done twice, on two fresh contexts. Any
 * status is fine; a crash, leak or undefined behaviour is a finding, and so
 * is a broken promise of the API: a result or global whose type is not the
 * declared one, an error without a message, or two runs that disagree
 * (memory returned or stored that nothing wrote).
 *
 * Functions are called only of modules whose functions have at most
 * KF_MAX_CALLED_REGISTERS registers of each kind (speed, see below).
 *
 * Seeds: the *.vmfb files of $KILN_FUZZ_SEEDS, else of `seeds/` beside the
 * executable (fuzz/make_seeds.py writes them there). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checksum.h"
#include "fuzz_common.h"

/* Bounds of one call: far more than any seed's function needs (the seeds'
 * calls all finish), few enough that a mutated endless loop costs ~10 ms.
 * The timeout catches loops whose steps are slow: a call instruction costs
 * time in proportion to the callee's registers (up to 2^20 of each kind). */
#define KF_MAX_STEPS 10000
#define KF_TIMEOUT_NS 1000000000ull
/* Modules with a function of more registers are only loaded: valid (up to
 * 2^20), but every call of such a function allocates and scans its register
 * files, which under coverage instrumentation takes milliseconds, and a few
 * such inputs in the corpus halved the long run's rate. */
#define KF_MAX_CALLED_REGISTERS 16384
/* Arguments above this many bytes in total are not built (the call is skipped). */
#define KF_MAX_ARG_BYTES ((size_t)16 << 20)
#define KF_MAX_VALUES 256

static size_t g_inputs, g_loaded, g_trusted, g_calls, g_call_errors, g_deadline;
/* KILN_FUZZ_VERBOSE=1: print every load and call error (to replay one input). */
static int g_verbose;

static void print_stats(void) {
  fprintf(stderr,
          "fuzz_invoke: %zu inputs, %zu loaded, %zu run (trusted kernels); %zu calls, "
          "%zu failed (%zu past their limits)\n",
          g_inputs, g_loaded, g_trusted, g_calls, g_call_errors, g_deadline);
}

/* Seeds are the modules that load as they are (not the near misses that the
 * verifier rejects, which fuzz_load starts from). */
static int loads(const uint8_t* data, size_t size) {
  kiln_module_t* m = NULL;
  kiln_status_t s = kiln_module_load_memory(kf_instance(), data, size, &m);
  int ok = s == NULL;
  kiln_status_free(s);
  kiln_module_release(m);
  return ok;
}

int LLVMFuzzerInitialize(int* argc, char*** argv);
int LLVMFuzzerInitialize(int* argc, char*** argv) {
  char dir[PATH_MAX];
  const char* env = getenv("KILN_FUZZ_SEEDS");
  int kept;
  (void)argc;
  (void)argv;
  if (env && env[0]) {
    snprintf(dir, sizeof dir, "%s", env);
  } else {
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 8);
    char* slash;
    if (n <= 0) n = 0;
    dir[n] = 0;
    slash = strrchr(dir, '/');
    if (slash) strcpy(slash + 1, "seeds");
    else strcpy(dir, "seeds");
  }
  kept = kf_seed_add_dir(dir, loads);
  if (kept <= 0) {
    fprintf(stderr,
            "fuzz_invoke: no seed modules in %s (run fuzz/make_seeds.py, or set "
            "KILN_FUZZ_SEEDS): without them no function is ever called\n",
            dir);
    exit(1);
  }
  fprintf(stderr, "fuzz_invoke: %d seed modules that load, from %s\n", kept, dir);
  atexit(print_stats);
  g_verbose = getenv("KILN_FUZZ_VERBOSE") && atoi(getenv("KILN_FUZZ_VERBOSE")) > 0;
  kf_set_profile(KF_PROFILE_INVOKE);
  return 0;
}

/* Bytes of a dense array of `v`'s type; 0 with *ok = 0 when it overflows. */
static size_t value_bytes(const kiln_value_info_t* v, int* ok) {
  size_t bytes = kiln_dtype_size(v->dtype), d;
  *ok = bytes != 0 && v->rank <= KILN_MAX_RANK;
  for (d = 0; d < v->rank && *ok; ++d) {
    if (v->shape[d] < 0 || (v->shape[d] && bytes > SIZE_MAX / (uint64_t)v->shape[d])) *ok = 0;
    else bytes *= (size_t)v->shape[d];
  }
  return *ok ? bytes : 0;
}

/* What two runs of one module must agree on: every call's status code and
 * every result's and global's bytes. `timed`: a call ran out of wall-clock
 * time, which may differ between runs. */
typedef struct kf_outcome {
  uint32_t digest;
  int timed;
} kf_outcome_t;

static void note(kf_outcome_t* out, const void* data, size_t size) {
  out->digest = kiln_crc32(out->digest, data, size);
}

/* A view returned by the runtime must have exactly the declared type, and all
 * of its bytes must be readable (ASan checks the read); they go into `out`. */
static void check_view(const kiln_buffer_view_t* view, const kiln_value_info_t* want,
                       const char* what, kf_outcome_t* out) {
  size_t d, rank = kiln_buffer_view_rank(view), bytes = kiln_buffer_view_byte_size(view);
  const int64_t* shape = kiln_buffer_view_shape(view);
  int ok = kiln_buffer_view_dtype(view) == want->dtype && rank == want->rank;
  for (d = 0; ok && d < rank; ++d) ok = shape[d] == want->shape[d];
  if (!ok || bytes != kiln_buffer_view_element_count(view) * kiln_dtype_size(want->dtype)) {
    fprintf(stderr, "%s '%s': the runtime's value does not have the declared type\n", what,
            want->name);
    abort();
  }
  if (bytes) note(out, kiln_buffer_view_data(view), bytes);
}

/* debug.print's sink (format 2.8): the line must be NUL-terminated and end in
 * '\n'; its bytes go into the outcome, so a print of memory nothing wrote
 * makes the two runs differ. Not written anywhere (speed). */
static int print_sink(void* user, const char* text, size_t length) {
  if (!length || text[length - 1] != '\n' || text[length] != '\0') {
    fprintf(stderr, "fuzz_invoke: a debug.print line that is not '\\n'-ended text\n");
    abort();
  }
  note(user, text, length);
  return 0;
}

/* debug.callback's host callback: every value's bytes are read (ASan checks
 * them) and go into the outcome with the callback number. */
static int host_callback(void* user, uint32_t number, const kiln_buffer_view_t* const* values,
                         size_t count) {
  size_t j;
  note(user, &number, sizeof number);
  for (j = 0; j < count; ++j) {
    size_t bytes = kiln_buffer_view_byte_size(values[j]);
    if (bytes != kiln_buffer_view_element_count(values[j]) *
                     kiln_dtype_size(kiln_buffer_view_dtype(values[j]))) {
      fprintf(stderr, "fuzz_invoke: a debug.callback value's size is not its type's\n");
      abort();
    }
    if (bytes) note(user, kiln_buffer_view_data(values[j]), bytes);
  }
  return 0;
}

static void call_function(kiln_context_t* c, kiln_function_t f, kf_outcome_t* out) {
  kiln_buffer_view_t* args[KF_MAX_VALUES];
  kiln_buffer_view_t* results[KF_MAX_VALUES];
  size_t nargs = kiln_function_arg_count(f), nres = kiln_function_result_count(f);
  size_t j, made = 0, total = 0;
  kiln_status_t s = NULL;
  if (nargs > KF_MAX_VALUES || nres > KF_MAX_VALUES) return;
  for (j = 0; j < nargs; ++j) {
    kiln_value_info_t v;
    size_t bytes;
    int ok;
    if ((s = kiln_function_arg_info(f, j, &v))) abort();
    bytes = value_bytes(&v, &ok);
    if (!ok || (total += bytes) > KF_MAX_ARG_BYTES) break;
    if ((s = kiln_buffer_view_create(v.dtype, v.rank, v.shape, NULL, 0, &args[j]))) {
      kf_check_status(s, "buffer_view_create");
      break;
    }
    made++;
  }
  if (made == nargs) {
    memset(results, 0, sizeof results);
    g_calls++;
    s = kiln_context_invoke(c, f, args, nargs, results, nres);
    if (s) {
      uint32_t code = (uint32_t)kiln_status_code(s);
      g_call_errors++;
      if (code == KILN_DEADLINE_EXCEEDED) {
        g_deadline++;
        out->timed |= strstr(kiln_status_message(s), "timeout") != NULL;
      }
      if (g_verbose) fprintf(stderr, "call %s: %s\n", kiln_function_name(f), kiln_status_message(s));
      note(out, &code, sizeof code);
      kf_check_status(s, "invoke");
    } else {
      for (j = 0; j < nres; ++j) {
        kiln_value_info_t v;
        if (!results[j] || kiln_function_result_info(f, j, &v)) abort();
        check_view(results[j], &v, "result", out);
        kiln_buffer_view_release(results[j]);
      }
    }
  }
  for (j = 0; j < made; ++j) kiln_buffer_view_release(args[j]);
}

/* Every global has its declared type, is found by its name (the loader
 * refuses duplicate names, fuzz/regressions/duplicate_names.vmfb) and can be
 * written back. */
static void round_trip_globals(kiln_module_t* m, kiln_context_t* c, kf_outcome_t* out) {
  size_t i;
  for (i = 0; i < kiln_module_global_count(m); ++i) {
    kiln_value_info_t v;
    kiln_buffer_view_t* value = NULL;
    kiln_status_t s;
    if ((s = kiln_module_global_info(m, i, &v))) abort();
    if ((s = kiln_context_get_global(c, v.name, &value))) abort();
    check_view(value, &v, "global", out);
    if ((s = kiln_context_set_global(c, v.name, value))) kf_check_status(s, "set_global");
    kiln_buffer_view_release(value);
  }
}

/* Calls every exported function in order on a fresh context, then reads and
 * writes back every global. */
static kf_outcome_t invoke_all(kiln_module_t* m) {
  kiln_context_t* c = NULL;
  kiln_call_limits_t limits;
  kiln_status_t s = kiln_context_create(m, &c);
  size_t i, n = kiln_module_function_count(m);
  kf_outcome_t out = {0, 0};
  if (s) {
    uint32_t code = (uint32_t)kiln_status_code(s);
    note(&out, &code, sizeof code);
    kf_check_status(s, "context_create");
    return out;
  }
  kiln_call_limits_initialize(&limits);
  limits.max_steps = KF_MAX_STEPS;
  limits.timeout_ns = KF_TIMEOUT_NS;
  if ((s = kiln_context_set_call_limits(c, &limits))) abort();
  kiln_context_set_print_callback(c, print_sink, &out);
  kiln_context_set_host_callback(c, host_callback, &out);
  for (i = 0; i < n; ++i) {
    kiln_function_t f;
    if ((s = kiln_module_function_at(m, i, &f))) abort();
    call_function(c, f, &out);
  }
  round_trip_globals(m, c, &out);
  kiln_context_release(c);
  return out;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint8_t* copy = kf_aligned_copy(data, size);
  kiln_module_t* m = NULL;
  kiln_status_t s;
  const uint8_t* root;
  int trusted;
  if (!copy) return 0;
  g_inputs++;
  kf_reseal(copy, size);
  s = kiln_module_load_memory(kf_instance(), copy, size, &m);
  if (s) {
    if (g_verbose) fprintf(stderr, "load: %s\n", kiln_status_message(s));
    kf_check_status(s, "load");
    free(copy);
    return -1; /* not kept in the corpus: fuzz_load covers what fails to load */
  }
  g_loaded++;
  /* The loader verified these bytes; verify again before reading them here. */
  root = kf_verified_root(copy, size);
  if (!root) {
    fprintf(stderr, "the module loaded but its flatbuffer does not verify\n");
    abort();
  }
  trusted = kf_native_code_is_trusted(root) &&
            kf_max_registers(root) <= KF_MAX_CALLED_REGISTERS;
  if (trusted) {
    /* Twice, on two fresh contexts: the outcomes must agree. Calls are
     * deterministic (one thread, zero arguments, allocations that read as
     * zeros until written), so a difference means something returned or
     * stored memory that nothing wrote (docs/vm.md, the initialization rule);
     * fuzz_common.h keeps ASan from filling new allocations, so such memory
     * holds whatever an earlier input left there. */
    kf_outcome_t first = invoke_all(m), second;
    g_trusted++;
    second = invoke_all(m);
    if (!first.timed && !second.timed && first.digest != second.digest) {
      fprintf(stderr,
              "fuzz_invoke: two fresh contexts of one module gave different results "
              "(digests %08x and %08x): a call returned or stored memory nothing wrote\n",
              (unsigned)first.digest, (unsigned)second.digest);
      abort();
    }
  }
  kiln_module_release(m);
  free(copy);
  /* Only modules whose functions run are kept: the corpus stays made of
   * modules the structured mutator can parse and the VM can run. */
  return trusted ? 0 : -1;
}
