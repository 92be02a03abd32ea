/* kiln-run: run a function of a .vmfb module from the command line.
 *
 *   kiln-run --module=m.vmfb --list
 *   kiln-run --module=m.vmfb --disassemble
 *   kiln-run --version
 *   kiln-run --module=m.vmfb --function=predict --input=8x3xf32=1 \
 *            [--input=@x.npy ... | --input=@xs.npz | --input=@xs.npz:NAME]
 *            [--output=@y.npy ... | --output=@ys.npz] [--workers=N]
 *            [--expected_output=VALUE ... [--expected_f32_threshold=T ...]]
 *            [--benchmark=N [--warmup=K] [--benchmark_format=json]]
 *            [--globals-in=state.npz] [--globals-out=state.npz]
 *            [--globals-partial]
 *
 * Values: SHAPExDTYPE=v1,v2,... (dims joined by 'x'; "f32=3.5" is a 0-d
 * scalar; one value broadcasts to the whole shape; no '=' gives zeros) or
 * @path.npy, or @path.npz (every array of the archive, one argument each, in
 * the archive's order) or @path.npz:NAME (one array). Results are printed (type
 * header, then numpy-like values) unless one --output per result names a .npy
 * file for each, or a single --output names a .npz archive for all of them.
 * --expected_output (one per result, the same syntax as --input) compares the
 * results as iree-run-module does instead of printing them.
 *
 * --globals-in must hold every global of the module (so that resuming from a
 * checkpoint never silently mixes saved and initial state); with
 * --globals-partial it may hold a subset and the others keep their values.
 *
 * Every error is one line on stderr, "kiln-run: error: ...", and a non-zero
 * exit status (1 for a failure, 2 for a usage error). Text that comes from a
 * module (names) is printed with control characters and bytes that are not
 * UTF-8 escaped as \xNN, so a damaged module cannot garble a terminal. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "buffer_internal.h"
#include "kiln/runtime.h"
#include "kiln_io.h"
#include "module_internal.h"
#include "status_internal.h"

#define EXIT_RUNTIME 1
#define EXIT_USAGE 2

/* The context whose call Ctrl-C (SIGINT) or SIGTERM cancels, and the signal. */
static kiln_context_t* volatile g_running_context;
static volatile sig_atomic_t g_interrupted;

static const char* kUsage =
    "usage: kiln-run --module=PATH.vmfb [--list] [--disassemble] [--function=NAME]\n"
    "                [--input=VALUE]... [--output=@PATH.npy]... [--output=@PATH.npz]\n"
    "                [--expected_output=VALUE]... [--expected_f16_threshold=T]\n"
    "                [--expected_f32_threshold=T] [--expected_f64_threshold=T]\n"
    "                [--workers=N] [--benchmark=N] [--warmup=K]\n"
    "                [--benchmark_format=text|json] [--timeout=SECONDS]\n"
    "                [--max-steps=N] [--caller-transient]\n"
    "                [--globals-in=PATH.npz] [--globals-out=PATH.npz]\n"
    "                [--globals-partial]\n"
    "       kiln-run --version\n"
    "\n"
    "  --version            print the runtime's version and the module format\n"
    "                       version it loads\n"
    "  --module=PATH        the .vmfb module to load\n"
    "  --list               print the module's functions (with signatures) and globals\n"
    "  --disassemble        print every function's bytecode (labels at branch\n"
    "                       targets, loop back-edges marked)\n"
    "  --function=NAME      the exported function to call\n"
    "  --input=VALUE        one per argument, in order: SHAPExDTYPE=v1,v2,...\n"
    "                       (2x3xf32=1,2,3,4,5,6; f32=3.5 for a scalar; a single\n"
    "                       value broadcasts; no '=' gives zeros), @path.npy,\n"
    "                       @path.npz (each array of the archive, in order) or\n"
    "                       @path.npz:NAME (its array NAME)\n"
    "  --output=@PATH.npy   one per result: write it to a .npy file instead of\n"
    "                       printing it\n"
    "  --output=@PATH.npz   the only --output: write every result to one .npz\n"
    "                       (named as the module names them: result0, ...)\n"
    "  --expected_output=V  one per result (the syntax of --input, @path.npz\n"
    "                       giving several; \"(ignored)\" skips one): compare\n"
    "                       the results instead of printing them; exit status 1\n"
    "                       naming the first element that differs\n"
    "  --expected_f16_threshold=T, --expected_f32_threshold=T,\n"
    "  --expected_f64_threshold=T\n"
    "                       largest absolute difference that still matches\n"
    "                       (defaults 0.001, 0.0001, 0.0001; f16's also for\n"
    "                       bf16, f32's and f64's for each part of c64, c128);\n"
    "                       NaN matches NaN\n"
    "  --workers=N          worker threads (0, the default: one per core; 1: none)\n"
    "  --benchmark=N        call the function N times after the warm-up calls;\n"
    "                       print the median, mean, min, max and standard\n"
    "                       deviation per call and the page faults per call\n"
    "  --warmup=K           calls before the timed ones, not counted (default 1;\n"
    "                       they run the function too: a training step that\n"
    "                       updates globals takes K+N steps)\n"
    "  --benchmark_format=F text (the default) or json (one object on stdout)\n"
    "  --trace=PATH.json    write a Chrome/Perfetto trace of the timed calls: every\n"
    "                       call, kernel dispatch, allocation and global store\n"
    "  --perf-map           append the kernels to /tmp/perf-<pid>.map, so that\n"
    "                       `perf report` shows their names\n"
    "  --print_statistics   print each kernel's dispatches, time, share of the\n"
    "                       calls and GB/s bound, and the memory high-water mark\n"
    "  --timeout=SECONDS    stop a call that runs longer (checked between dispatches\n"
    "                       and at loop back-edges); exit status 1\n"
    "  --max-steps=N        stop a call after N bytecode instructions; exit status 1\n"
    "  --caller-transient   give the function transient memory of kiln-run's own\n"
    "                       (its transient size, kiln_context_set_transient_storage),\n"
    "                       as an embedding that owns its memory would\n"
    "  --globals-in=PATH    set globals from a .npz (numpy.savez) before calling;\n"
    "                       it must hold every global of the module\n"
    "  --globals-out=PATH   save every global to a .npz after calling\n"
    "  --globals-partial    let --globals-in hold a subset of the globals (the\n"
    "                       others keep their initial values)\n"
    "\n"
    "dtypes: f32 f64 f16 bf16 i8 i16 i32 i64 u8 u16 u32 u64 bool c64 c128\n";

/* Length of the UTF-8 sequence at `s` (1-4), or 0 when it is not one. */
static size_t utf8_length(const unsigned char* s) {
  size_t len, k;
  uint32_t cp;
  if (s[0] < 0x80) return 1;
  if (s[0] >= 0xC2 && s[0] <= 0xDF) len = 2, cp = s[0] & 0x1Fu;
  else if (s[0] >= 0xE0 && s[0] <= 0xEF) len = 3, cp = s[0] & 0x0Fu;
  else if (s[0] >= 0xF0 && s[0] <= 0xF4) len = 4, cp = s[0] & 0x07u;
  else return 0;
  for (k = 1; k < len; ++k) {
    if ((s[k] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[k] & 0x3Fu);
  }
  if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
      (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
    return 0;
  return len;
}

/* Writes `text` with control characters (newlines too, unless `newlines` is
 * "keep", when they stay; "space" makes them spaces) and bytes that are not
 * UTF-8 written as \xNN. */
static void put_clean(FILE* out, const char* text, const char* newlines) {
  const unsigned char* p = (const unsigned char*)text;
  while (*p) {
    size_t len = utf8_length(p);
    if (*p == '\n' && newlines) {
      fputc(!strcmp(newlines, "keep") ? '\n' : ' ', out);
      p++;
    } else if (len == 0 || (len == 1 && (*p < 0x20 || *p == 0x7f))) {
      fprintf(out, "\\x%02x", (unsigned)*p);
      p++;
    } else {
      fwrite(p, 1, len, out);
      p += len;
    }
  }
}

static void error_line(const char* format, ...) __attribute__((format(printf, 1, 2)));
static void error_line(const char* format, ...) {
  char message[4096];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  fputs("kiln-run: error: ", stderr);
  put_clean(stderr, message, "space");
  fputc('\n', stderr);
}

/* Prints a status as the one error line (newlines flattened) and frees it. */
static int fail_status(kiln_status_t status) {
  fputs("kiln-run: error: ", stderr);
  put_clean(stderr, kiln_status_message(status), "space");
  fputc('\n', stderr);
  kiln_status_free(status);
  return EXIT_RUNTIME;
}

typedef struct {
  const char* module_path;
  const char* function;
  const char** inputs;
  size_t input_count;
  const char** outputs;
  size_t output_count;
  long workers;
  long benchmark;
  long warmup;
  int benchmark_json;
  const char* trace_path;
  int print_statistics;
  int perf_map;
  double timeout;
  long max_steps;
  const char* globals_in;
  const char* globals_out;
  const char** expected;
  size_t expected_count;
  kiln_io_tolerance_t tolerance;
  int threshold_given;
  int list;
  int disassemble;
  int globals_partial;
  int caller_transient;
  uint64_t caller_transient_bytes; /* set by main: the storage it gave the function */
} options_t;

static int parse_seconds(const char* flag, const char* text, double* out) {
  char* end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (!*text || *end || errno == ERANGE || !(v > 0) || v > 1e9) {
    error_line("%s expects a number of seconds in (0, 1e9], got '%s'", flag, text);
    return 0;
  }
  *out = v;
  return 1;
}

static int parse_count(const char* flag, const char* text, long min, long max,
                       long* out) {
  char* end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (!*text || *end || errno == ERANGE || v < min || v > max) {
    error_line("%s expects an integer in %ld..%ld, got '%s'", flag, min, max, text);
    return 0;
  }
  *out = v;
  return 1;
}

/* A threshold: a non-negative number, written as iree-run-module accepts it
 * ("0.1" or "0.1f"). */
static int parse_threshold(const char* flag, const char* text, double* out) {
  char* end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (end != text && *end == 'f') end++;
  if (!*text || *end || errno == ERANGE || !(v >= 0) || !isfinite(v)) {
    error_line("%s expects a non-negative number, got '%s'", flag, text);
    return 0;
  }
  *out = v;
  return 1;
}

static int is_npz_path(const char* path) {
  size_t n = strlen(path);
  return n >= 4 && !strcmp(path + n - 4, ".npz");
}

/* Returns 0 on success, EXIT_USAGE (message printed) on a bad command line,
 * -1 after printing --help. */
static int parse_options(int argc, char** argv, options_t* o) {
  memset(o, 0, sizeof(*o));
  o->workers = 0;
  o->benchmark = 0;
  o->warmup = -1; /* not given: 1 */
  kiln_io_tolerance_initialize(&o->tolerance);
  o->inputs = calloc((size_t)argc, sizeof(char*));
  o->outputs = calloc((size_t)argc, sizeof(char*));
  o->expected = calloc((size_t)argc, sizeof(char*));
  if (!o->inputs || !o->outputs || !o->expected) {
    error_line("out of memory");
    return EXIT_RUNTIME;
  }
  static const char* const flags[] = {"--module",     "--function",    "--input",
                                      "--output",     "--workers",     "--benchmark",
                                      "--globals-in", "--globals-out", "--timeout",
                                      "--max-steps",  "--warmup",      "--benchmark_format",
                                      "--expected_output", "--expected_f16_threshold",
                                      "--expected_f32_threshold", "--expected_f64_threshold",
                                      "--trace", NULL};
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
      fputs(kUsage, stdout);
      return -1;
    }
    if (!strcmp(arg, "--version")) {
      printf("kiln-run %s (module format %d.%d)\n", kiln_runtime_version(),
             KILN_MODULE_VERSION_MAJOR, KILN_MODULE_VERSION_MINOR);
      return -1;
    }
    if (!strcmp(arg, "--perf-map")) {
      o->perf_map = 1;
      continue;
    }
    if (!strcmp(arg, "--print_statistics")) {
      o->print_statistics = 1;
      continue;
    }
    if (!strcmp(arg, "--list")) {
      o->list = 1;
      continue;
    }
    if (!strcmp(arg, "--disassemble")) {
      o->disassemble = 1;
      continue;
    }
    if (!strcmp(arg, "--globals-partial")) {
      o->globals_partial = 1;
      continue;
    }
    if (!strcmp(arg, "--caller-transient")) {
      o->caller_transient = 1;
      continue;
    }
    const char* flag = NULL;
    const char* value = NULL;
    for (int f = 0; flags[f]; ++f) {
      size_t n = strlen(flags[f]);
      if (!strncmp(arg, flags[f], n) && (arg[n] == '=' || arg[n] == '\0')) {
        flag = flags[f];
        if (arg[n] == '=') {
          value = arg + n + 1;
        } else if (i + 1 < argc) {
          value = argv[++i];
        } else {
          error_line("%s needs a value (%s=VALUE); see kiln-run --help", flag, flag);
          return EXIT_USAGE;
        }
        break;
      }
    }
    if (!flag) {
      error_line("unknown argument '%s'; see kiln-run --help", arg);
      return EXIT_USAGE;
    }
    if (!strcmp(flag, "--module")) {
      o->module_path = value;
    } else if (!strcmp(flag, "--function")) {
      o->function = value;
    } else if (!strcmp(flag, "--input")) {
      o->inputs[o->input_count++] = value;
    } else if (!strcmp(flag, "--output")) {
      o->outputs[o->output_count++] = value[0] == '@' ? value + 1 : value;
      if (!*o->outputs[o->output_count - 1]) {
        error_line("--output expects @PATH.npy, got '%s'", value);
        return EXIT_USAGE;
      }
    } else if (!strcmp(flag, "--workers")) {
      if (!parse_count(flag, value, 0, KILN_MAX_WORKERS, &o->workers)) return EXIT_USAGE;
    } else if (!strcmp(flag, "--benchmark")) {
      if (!parse_count(flag, value, 1, LONG_MAX, &o->benchmark)) return EXIT_USAGE;
    } else if (!strcmp(flag, "--warmup")) {
      if (!parse_count(flag, value, 0, LONG_MAX, &o->warmup)) return EXIT_USAGE;
    } else if (!strcmp(flag, "--trace")) {
      o->trace_path = value;
    } else if (!strcmp(flag, "--benchmark_format")) {
      if (strcmp(value, "text") && strcmp(value, "json")) {
        error_line("--benchmark_format expects text or json, got '%s'", value);
        return EXIT_USAGE;
      }
      o->benchmark_json = !strcmp(value, "json");
    } else if (!strcmp(flag, "--timeout")) {
      if (!parse_seconds(flag, value, &o->timeout)) return EXIT_USAGE;
    } else if (!strcmp(flag, "--max-steps")) {
      if (!parse_count(flag, value, 1, LONG_MAX, &o->max_steps)) return EXIT_USAGE;
    } else if (!strcmp(flag, "--expected_output")) {
      o->expected[o->expected_count++] = value;
    } else if (!strncmp(flag, "--expected_f", 12)) {
      double* threshold = flag[12] == '1' ? &o->tolerance.f16
                          : flag[12] == '3' ? &o->tolerance.f32 : &o->tolerance.f64;
      if (!parse_threshold(flag, value, threshold)) return EXIT_USAGE;
      o->threshold_given = 1;
    } else if (!strcmp(flag, "--globals-in")) {
      o->globals_in = value;
    } else if (!strcmp(flag, "--globals-out")) {
      o->globals_out = value;
    }
  }
  for (size_t i = 0; o->output_count > 1 && i < o->output_count; ++i) {
    if (is_npz_path(o->outputs[i])) {
      error_line("--output=@%s: a .npz output holds every result, so it must be the only "
                 "--output", o->outputs[i]);
      return EXIT_USAGE;
    }
  }
  if (o->threshold_given && !o->expected_count) {
    error_line("--expected_f16_threshold, --expected_f32_threshold and "
               "--expected_f64_threshold need --expected_output=VALUE");
    return EXIT_USAGE;
  }
  if (!o->module_path) {
    error_line("no module: give --module=PATH.vmfb; see kiln-run --help");
    return EXIT_USAGE;
  }
  if (!o->function && !o->list && !o->disassemble && !o->globals_in && !o->globals_out) {
    error_line("nothing to do: give --function=NAME, --list or --disassemble; see "
               "kiln-run --help");
    return EXIT_USAGE;
  }
  if (o->globals_partial && !o->globals_in) {
    error_line("--globals-partial needs --globals-in=PATH.npz");
    return EXIT_USAGE;
  }
  if (!o->benchmark && (o->warmup >= 0 || o->benchmark_json)) {
    error_line("--warmup and --benchmark_format need --benchmark=N");
    return EXIT_USAGE;
  }
  if (o->warmup < 0) o->warmup = 1;
  if (!o->function && (o->input_count || o->output_count || o->expected_count ||
                       o->benchmark || o->timeout || o->max_steps || o->trace_path ||
                       o->print_statistics)) {
    error_line("--input, --output, --expected_output, --benchmark, --timeout, --max-steps, "
               "--trace and --print_statistics need --function=NAME");
    return EXIT_USAGE;
  }
  if (!o->function && o->caller_transient) {
    error_line("--caller-transient needs --function=NAME");
    return EXIT_USAGE;
  }
  return 0;
}

static int type_matches(const kiln_value_info_t* info, kiln_dtype_t dtype,
                                          size_t rank, const int64_t* shape) {
  if (info->dtype != dtype || info->rank != rank) return 0;
  for (size_t d = 0; d < rank; ++d) {
    if (info->shape[d] != shape[d]) return 0;
  }
  return 1;
}

static void format_info(const kiln_value_info_t* info, char* buf, size_t size) {
  kiln_format_type(info->dtype, info->rank, info->shape, buf, size);
}

/* "predict(x: 8x3xf32) -> (8x4xf32)" */
static kiln_status_t format_signature(kiln_function_t fn, char* buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
#define APPEND(...)                                                     \
  do {                                                                  \
    if (used < size) {                                                  \
      int n_ = snprintf(buf + used, size - used, __VA_ARGS__);          \
      if (n_ > 0) used += (size_t)n_ < size - used ? (size_t)n_ : size - used - 1; \
    }                                                                   \
  } while (0)
  APPEND("%s(", kiln_function_name(fn));
  char type[512];
  for (size_t i = 0; i < kiln_function_arg_count(fn); ++i) {
    kiln_value_info_t info;
    kiln_status_t s = kiln_function_arg_info(fn, i, &info);
    if (s) return s;
    format_info(&info, type, sizeof(type));
    if (info.name && *info.name) {
      APPEND("%s%s: %s", i ? ", " : "", info.name, type);
    } else {
      APPEND("%sarg%zu: %s", i ? ", " : "", i, type);
    }
  }
  APPEND(") -> (");
  for (size_t i = 0; i < kiln_function_result_count(fn); ++i) {
    kiln_value_info_t info;
    kiln_status_t s = kiln_function_result_info(fn, i, &info);
    if (s) return s;
    format_info(&info, type, sizeof(type));
    APPEND("%s%s", i ? ", " : "", type);
  }
  APPEND(")");
#undef APPEND
  return NULL;
}

static kiln_status_t list_module(const kiln_module_t* module) {
  printf("module ");
  put_clean(stdout, kiln_module_name(module), NULL);
  const char* producer = kiln_module_provenance(module, "producer");
  if (producer) {
    static const char* const kTools[] = {"python", "llvm", "llvmlite"};
    printf("\nproducer: ");
    put_clean(stdout, producer, NULL);
    int listed = 0;
    for (size_t i = 0; i < sizeof kTools / sizeof *kTools; ++i) {
      const char* v = kiln_module_provenance(module, kTools[i]);
      if (!v) continue;
      printf("%s%s ", listed++ ? ", " : " (", kTools[i]);
      put_clean(stdout, v, NULL);
    }
    if (listed) printf(")");
  }
  for (size_t i = 0; i < kiln_module_kernel_image_count(module); ++i) {
    const char* variant = kiln_module_kernel_variant(module, i);
    if (!variant || !*variant) continue;
    printf("\nkernel image %zu: variant ", i);
    put_clean(stdout, variant, NULL);
    const char* forced = getenv("KILN_CPU_VARIANT");
    printf(forced && *forced ? " (forced by KILN_CPU_VARIANT)"
                             : " (the best build of it this host runs; KILN_CPU_VARIANT=NAME forces one)");
  }
  size_t count = kiln_module_function_count(module);
  printf("\nfunctions (%zu):\n", count);
  char text[8192];
  for (size_t i = 0; i < count; ++i) {
    kiln_function_t fn;
    kiln_status_t s = kiln_module_function_at(module, i, &fn);
    if (!s) s = format_signature(fn, text, sizeof(text));
    if (s) return s;
    printf("  ");
    put_clean(stdout, text, NULL);
    uint64_t transient = kiln_function_transient_size(fn);
    printf("\n");
    if (transient) printf("    transient memory: %llu bytes\n", (unsigned long long)transient);
  }
  size_t globals = kiln_module_global_count(module);
  printf("globals (%zu):\n", globals);
  for (size_t i = 0; i < globals; ++i) {
    kiln_value_info_t info;
    kiln_status_t s = kiln_module_global_info(module, i, &info);
    if (s) return s;
    format_info(&info, text, sizeof(text));
    printf("  ");
    put_clean(stdout, info.name, NULL);
    printf(": %s (%s)\n", text, info.is_mutable ? "mutable" : "immutable");
  }
  return NULL;
}

static void write_code_line(void* user, const char* text) {
  (void)user;
  printf("  ");
  put_clean(stdout, text, "keep");
}

/* Every function, exported and internal, with the runtime's own decoder (the
 * one the verifier and the interpreter use). */
static kiln_status_t disassemble_module(const kiln_module_t* module) {
  char text[8192];
  printf("module ");
  put_clean(stdout, kiln_module_name(module), NULL);
  printf("\n");
  for (uint32_t i = 0; i < module->function_count; ++i) {
    const kiln_function_info_t* f = &module->functions[i];
    kiln_function_t fn = {module, i};
    kiln_status_t s = format_signature(fn, text, sizeof(text));
    if (s) return s;
    printf("%s func#%u ", f->exported ? "export" : "internal", (unsigned)i);
    put_clean(stdout, text, NULL);
    printf("\n  registers: %u ref, %u i64; transient memory: %llu bytes\n",
           (unsigned)f->ref_count, (unsigned)f->i64_count,
           (unsigned long long)f->transient_size);
    s = kiln_module_disassemble(module, i, write_code_line, NULL);
    if (s) return s;
  }
  return NULL;
}

/* "predict, update" (truncated to the buffer). */
static void function_names(const kiln_module_t* module, char* buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < kiln_module_function_count(module) && used + 1 < size; ++i) {
    kiln_function_t fn;
    kiln_status_t s = kiln_module_function_at(module, i, &fn);
    if (s) {
      kiln_status_free(s);
      continue;
    }
    int n = snprintf(buf + used, size - used, "%s%s", used ? ", " : "",
                     kiln_function_name(fn));
    if (n < 0) break;
    used += (size_t)n;
  }
  if (!buf[0]) snprintf(buf, size, "none");
}

static int find_global(const kiln_module_t* module, const char* name,
                       kiln_value_info_t* out) {
  for (size_t i = 0; i < kiln_module_global_count(module); ++i) {
    kiln_value_info_t info;
    kiln_status_t s = kiln_module_global_info(module, i, &info);
    if (s) {
      kiln_status_free(s);
      continue;
    }
    if (info.name && !strcmp(info.name, name)) {
      *out = info;
      return 1;
    }
  }
  return 0;
}

/* NULL when every global of the module has an entry in the archive, else a
 * NOT_FOUND status naming the missing globals. */
static kiln_status_t check_all_globals_present(const kiln_module_t* module,
                                               const kiln_npz_t* npz, const char* path) {
  char missing[1024];
  size_t used = 0, count = 0, total = kiln_module_global_count(module);
  missing[0] = '\0';
  for (size_t i = 0; i < total; ++i) {
    kiln_value_info_t info;
    kiln_status_t s = kiln_module_global_info(module, i, &info);
    if (s) return s;
    int found = 0;
    for (size_t e = 0; e < npz->count && !found; ++e) {
      found = !strcmp(npz->entries[e].name, info.name);
    }
    if (found) continue;
    if (count++ < 8 && used < sizeof(missing)) {
      int n = snprintf(missing + used, sizeof(missing) - used, "%s'%s'", used ? ", " : "",
                       info.name);
      if (n > 0) used += (size_t)n;
    }
  }
  if (!count) return NULL;
  return kiln_make_status(KILN_NOT_FOUND,
                          "--globals-in '%s' lacks %zu of the %zu globals of module "
                          "'%s': %s%s (give every global, or add --globals-partial to "
                          "keep the others' values)",
                          path, count, total, kiln_module_name(module), missing,
                          count > 8 ? ", ..." : "");
}

static kiln_status_t load_globals(kiln_context_t* context, const kiln_module_t* module,
                                  const char* path, int partial) {
  kiln_npz_t npz;
  kiln_status_t s = kiln_npz_read_file(path, &npz);
  if (s) return kiln_status_annotate(s, "--globals-in");
  /* Check every entry (names, types) and completeness before setting any. */
  for (size_t i = 0; i < npz.count && !s; ++i) {
    kiln_value_info_t info;
    const char* name = npz.entries[i].name;
    if (!find_global(module, name, &info)) {
      s = kiln_make_status(KILN_NOT_FOUND,
                           "--globals-in '%s': module '%s' has no global '%s'", path,
                           kiln_module_name(module), name);
      break;
    }
    s = kiln_io_bf16_from_bits(&npz.entries[i].value, info.dtype);
    if (s) break;
    const kiln_buffer_view_t* value = npz.entries[i].value;
    if (!kiln_buffer_view_has_type(value, info.dtype, info.rank, info.shape)) {
      char expected[512], got[512];
      format_info(&info, expected, sizeof(expected));
      kiln_format_type(kiln_buffer_view_dtype(value), kiln_buffer_view_rank(value),
                       kiln_buffer_view_shape(value), got, sizeof(got));
      s = kiln_make_status(KILN_INVALID_ARGUMENT,
                           "--globals-in '%s': global '%s': expected %s, got %s", path,
                           name, expected, got);
      break;
    }
  }
  if (!s && !partial) s = check_all_globals_present(module, &npz, path);
  for (size_t i = 0; i < npz.count && !s; ++i) {
    s = kiln_context_set_global(context, npz.entries[i].name, npz.entries[i].value);
    if (s) s = kiln_status_annotate(s, "--globals-in '%s'", path);
  }
  kiln_npz_free(&npz);
  return s;
}

static kiln_status_t save_globals(kiln_context_t* context, const kiln_module_t* module,
                                  const char* path) {
  size_t count = kiln_module_global_count(module);
  const char** names = calloc(count ? count : 1, sizeof(char*));
  kiln_buffer_view_t** values = calloc(count ? count : 1, sizeof(kiln_buffer_view_t*));
  kiln_status_t s = NULL;
  if (!names || !values) s = kiln_make_status(KILN_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < count && !s; ++i) {
    kiln_value_info_t info;
    s = kiln_module_global_info(module, i, &info);
    if (s) break;
    names[i] = info.name;
    s = kiln_context_get_global(context, info.name, &values[i]);
  }
  if (!s) {
    s = kiln_npz_write_file(path, count, names,
                            (const kiln_buffer_view_t* const*)values);
  }
  if (s) s = kiln_status_annotate(s, "--globals-out");
  if (values) {
    for (size_t i = 0; i < count; ++i) kiln_buffer_view_release(values[i]);
  }
  free(values);
  free(names);
  return s;
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void print_time(const char* label, double seconds) {
  if (seconds < 1e-3) printf("%s %.3f us", label, seconds * 1e6);
  else if (seconds < 1.0) printf("%s %.3f ms", label, seconds * 1e3);
  else printf("%s %.3f s", label, seconds);
}

/* Minor and major page faults of this process so far (-1 where unknown). */
static long page_faults(void) {
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) != 0) return -1;
  return usage.ru_minflt + usage.ru_majflt;
}

static int compare_doubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void print_json_string(const char* text) {
  putchar('"');
  for (const unsigned char* c = (const unsigned char*)text; *c; ++c) {
    if (*c == '"' || *c == '\\') printf("\\%c", *c);
    else if (*c < 0x20) printf("\\u%04x", *c);
    else putchar(*c);
  }
  putchar('"');
}

/* --print_statistics: one line per kernel of the traced calls, the slowest
 * first: dispatches, total and mean time, share of the calls' time, the
 * bytes bound per second and the floating-point operations per second (from
 * the work the kernel declares; "-" when it declares none); then the
 * process's memory high-water mark. */
static void print_kernel_statistics(const options_t* o, kiln_trace_t* trace) {
  uint64_t calls = 0, call_ns = kiln_trace_call_ns(trace, &calls);
  size_t n = kiln_trace_kernel_stats(trace, NULL, 0);
  kiln_kernel_stats_t* stats = n ? calloc(n, sizeof *stats) : NULL;
  if (n && !stats) {
    error_line("out of memory for the statistics of %zu kernels", n);
    return;
  }
  n = kiln_trace_kernel_stats(trace, stats, n);
  for (size_t i = 1; i < n; ++i) /* insertion sort by total time, descending */
    for (size_t j = i; j > 0 && stats[j].total_ns > stats[j - 1].total_ns; --j) {
      kiln_kernel_stats_t t = stats[j];
      stats[j] = stats[j - 1];
      stats[j - 1] = t;
    }
  uint64_t kernel_ns = 0;
  for (size_t i = 0; i < n; ++i) kernel_ns += stats[i].total_ns;
  printf("statistics: %s: %llu call%s,", o->function, (unsigned long long)calls,
         calls == 1 ? "" : "s");
  print_time(" total", (double)call_ns * 1e-9);
  printf("; kernels %.1f%% of it\n", call_ns ? 100.0 * (double)kernel_ns / (double)call_ns : 0.0);
  printf("  %-40s %10s %12s %12s %7s %9s %9s\n", "kernel", "dispatches", "total", "mean", "share",
         "GB/s", "GFLOP/s");
  for (size_t i = 0; i < n; ++i) {
    char total[32], mean[32], gflops[32] = "-";
    double t = (double)stats[i].total_ns * 1e-9;
    snprintf(total, sizeof total, "%.3f ms", t * 1e3);
    snprintf(mean, sizeof mean, "%.3f us", t * 1e6 / (double)stats[i].dispatches);
    if (stats[i].flops && t > 0)
      snprintf(gflops, sizeof gflops, "%.2f", (double)stats[i].flops / t * 1e-9);
    printf("  ");
    put_clean(stdout, stats[i].name, NULL);
    size_t len = strlen(stats[i].name);
    printf("%*s %10llu %12s %12s %6.1f%% %9.2f %9s\n", len < 40 ? (int)(40 - len) : 0, "",
           (unsigned long long)stats[i].dispatches, total, mean,
           call_ns ? 100.0 * (double)stats[i].total_ns / (double)call_ns : 0.0,
           t > 0 ? (double)stats[i].bytes / t * 1e-9 : 0.0, gflops);
  }
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) == 0)
    printf("memory high-water mark: %.1f MiB\n", (double)usage.ru_maxrss / 1024.0);
  if (o->caller_transient)
    printf("transient memory: %llu bytes, kiln-run's own (--caller-transient)\n",
           (unsigned long long)o->caller_transient_bytes);
  if (kiln_trace_dropped_count(trace))
    printf("(%llu events were dropped: out of memory)\n",
           (unsigned long long)kiln_trace_dropped_count(trace));
  free(stats);
}

/* The statistics of `calls` timed calls (times sorted here): text or JSON. */
static void print_benchmark(const options_t* o, double* times, long calls, double faults) {
  double sum = 0, squares = 0;
  for (long i = 0; i < calls; ++i) sum += times[i];
  double mean = sum / (double)calls;
  for (long i = 0; i < calls; ++i) squares += (times[i] - mean) * (times[i] - mean);
  double stddev = calls > 1 ? sqrt(squares / (double)(calls - 1)) : 0.0;
  qsort(times, (size_t)calls, sizeof(double), compare_doubles);
  double median = calls % 2 ? times[calls / 2] : 0.5 * (times[calls / 2 - 1] + times[calls / 2]);
  if (o->benchmark_json) {
    printf("{\"function\": ");
    print_json_string(o->function);
    printf(", \"calls\": %ld, \"warmup\": %ld, \"median_s\": %.9g, \"mean_s\": %.9g, "
           "\"min_s\": %.9g, \"max_s\": %.9g, \"stddev_s\": %.9g, \"page_faults_per_call\": ",
           calls, o->warmup, median, mean, times[0], times[calls - 1], stddev);
    if (faults >= 0) printf("%.3f}\n", faults);
    else printf("null}\n");
    return;
  }
  printf("benchmark: %s: %ld call%s after %ld warm-up,", o->function, calls, calls == 1 ? "" : "s",
         o->warmup);
  print_time(" median", median);
  print_time(", mean", mean);
  print_time(", min", times[0]);
  print_time(", max", times[calls - 1]);
  print_time(", stddev", stddev);
  printf(" per call");
  if (faults >= 0) printf("; %.2f page faults per call", faults);
  printf("\n");
}

/* The values a list of --input (or --expected_output) options gives, in
 * order: an inline value stays text until its type is checked against the
 * function's (so a mistyped huge shape allocates nothing); a .npy file gives
 * its array, a .npz archive each of its arrays. */
typedef struct {
  const char* text;          /* an inline value, or NULL */
  kiln_buffer_view_t* value; /* a file's array (owned by `files`), or NULL */
  const char* entry;         /* its name in an archive, or NULL */
  size_t option;             /* which option (1-based) gave it */
} source_t;

typedef struct {
  source_t* items;
  size_t count;
  kiln_npz_t* files; /* one per option (empty for inline values) */
  size_t file_count;
} sources_t;

static void free_sources(sources_t* s) {
  for (size_t i = 0; i < s->file_count; ++i) kiln_npz_free(&s->files[i]);
  free(s->files);
  free(s->items);
  memset(s, 0, sizeof(*s));
}

/* Reads the files among `texts` (the values of `count` options `flag`). */
static kiln_status_t expand_sources(const char* flag, const char* const* texts, size_t count,
                                    sources_t* out) {
  memset(out, 0, sizeof(*out));
  out->files = calloc(count ? count : 1, sizeof(kiln_npz_t));
  size_t capacity = count ? count : 1;
  out->items = calloc(capacity, sizeof(source_t));
  if (!out->files || !out->items) return kiln_make_status(KILN_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < count; ++i) {
    out->file_count = i + 1;
    int is_file = texts[i][0] == '@';
    if (is_file) {
      kiln_status_t s = kiln_io_parse_values(texts[i], &out->files[i]);
      if (s) return kiln_status_annotate(s, "%s %zu", flag, i + 1);
    }
    size_t n = is_file ? out->files[i].count : 1;
    if (out->count + n > capacity) {
      size_t grown = 2 * capacity > out->count + n ? 2 * capacity : out->count + n;
      source_t* items = realloc(out->items, grown * sizeof(source_t));
      if (!items) return kiln_make_status(KILN_OUT_OF_MEMORY, "out of memory");
      out->items = items;
      capacity = grown;
    }
    for (size_t k = 0; k < n; ++k) {
      source_t* item = &out->items[out->count++];
      item->text = is_file ? NULL : texts[i];
      item->value = is_file ? out->files[i].entries[k].value : NULL;
      item->entry = is_file ? out->files[i].entries[k].name : NULL;
      item->option = i + 1;
    }
  }
  return NULL;
}

/* "--input 2" or "--input 2, array 'b'". */
static void source_label(const char* flag, const source_t* item, char* buf, size_t size) {
  if (item->entry) {
    snprintf(buf, size, "%s %zu, array '%s'", flag, item->option, item->entry);
  } else {
    snprintf(buf, size, "%s %zu", flag, item->option);
  }
}

/* "got 2 --input" or "got 3 values from 2 --input". */
static void source_count(const char* flag, const sources_t* s, size_t options, char* buf,
                         size_t size) {
  if (s->count == options) snprintf(buf, size, "got %zu %s", s->count, flag);
  else snprintf(buf, size, "got %zu values from %zu %s", s->count, options, flag);
}

/* The value of `item` for `info` (argument or result `index` of the function;
 * `role` says which): parsed, bf16 bits made bf16, its type checked. */
static int source_value(const options_t* o, const source_t* item, const char* flag,
                        const char* role, size_t index, const kiln_value_info_t* info,
                        kiln_buffer_view_t** out) {
  const char* name = info->name && *info->name ? info->name : "";
  char label[512];
  source_label(flag, item, label, sizeof(label));
  char expected[512], got[512];
  format_info(info, expected, sizeof(expected));
  kiln_status_t s = NULL;
  if (item->value) {
    kiln_buffer_view_retain(item->value);
    *out = item->value;
  } else {
    /* Check an inline value's type before allocating anything for it. */
    const char* text = item->text;
    size_t type_len = strcspn(text, "=");
    char type_text[512];
    kiln_dtype_t dtype;
    size_t rank = 0;
    int64_t shape[KILN_MAX_RANK];
    if (type_len < sizeof(type_text)) {
      memcpy(type_text, text, type_len);
      type_text[type_len] = '\0';
      kiln_status_t ts = kiln_io_parse_type(type_text, &dtype, &rank, shape);
      if (!ts && !type_matches(info, dtype, rank, shape)) {
        error_line("function '%s' %s %zu '%s': expected %s, got %s (%s)", o->function, role,
                   index, name, expected, type_text, label);
        return EXIT_RUNTIME;
      }
      kiln_status_free(ts); /* a malformed type is reported by the parse below */
    }
    s = kiln_io_parse_value(text, out);
    if (s) {
      return fail_status(kiln_status_annotate(s, "function '%s' %s %zu '%s' (%s)", o->function,
                                              role, index, name, label));
    }
  }
  s = kiln_io_bf16_from_bits(out, info->dtype);
  if (s) return fail_status(s);
  const kiln_buffer_view_t* v = *out;
  if (!kiln_buffer_view_has_type(v, info->dtype, info->rank, info->shape)) {
    kiln_format_type(kiln_buffer_view_dtype(v), kiln_buffer_view_rank(v),
                     kiln_buffer_view_shape(v), got, sizeof(got));
    error_line("function '%s' %s %zu '%s': expected %s, got %s (%s)", o->function, role, index,
               name, expected, got, label);
    return EXIT_RUNTIME;
  }
  return 0;
}

/* Writes every result into one .npz archive, named as the module names them
 * (the exporter writes result0, result1, ...; "resultI" where a name is empty). */
static kiln_status_t write_results_npz(kiln_function_t fn, const char* path,
                                       kiln_buffer_view_t* const* results, size_t count) {
  char** names = calloc(count ? count : 1, sizeof(char*));
  kiln_status_t s = names ? NULL : kiln_make_status(KILN_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < count && !s; ++i) {
    kiln_value_info_t info;
    s = kiln_function_result_info(fn, i, &info);
    if (s) break;
    char fallback[32];
    snprintf(fallback, sizeof(fallback), "result%zu", i);
    names[i] = strdup(info.name && *info.name ? info.name : fallback);
    if (!names[i]) s = kiln_make_status(KILN_OUT_OF_MEMORY, "out of memory");
  }
  if (!s) {
    s = kiln_npz_write_file(path, count, (const char* const*)names,
                            (const kiln_buffer_view_t* const*)results);
  }
  for (size_t i = 0; names && i < count; ++i) free(names[i]);
  free(names);
  return s;
}

typedef struct {
  kiln_instance_t* instance;
  kiln_module_t* module;
  kiln_context_t* context;
  kiln_buffer_view_t** args;
  size_t arg_count;
  kiln_buffer_view_t** results;
  size_t result_count;
  sources_t inputs;
  sources_t expected_sources;
  kiln_buffer_view_t** expected; /* one per result; NULL: "(ignored)" */
  void* transient;               /* --caller-transient: the function's arena */
} state_t;

static void release_results(state_t* st) {
  for (size_t i = 0; i < st->result_count; ++i) {
    kiln_buffer_view_release(st->results[i]);
    st->results[i] = NULL;
  }
}

/* Benchmark calls write their results into buffers made once (the caller's
 * destinations of kiln_context_invoke_host, as an embedding application
 * would keep them), so a steady-state call allocates nothing for its results. */
typedef struct {
  kiln_host_buffer_t* args;
  kiln_host_buffer_t* results;
  kiln_buffer_view_t** views; /* results without a destination (empty ones) */
} host_call_t;

static void host_call_free(host_call_t* h, size_t result_count) {
  if (h->results)
    for (size_t i = 0; i < result_count; ++i) free(h->results[i].data);
  if (h->views)
    for (size_t i = 0; i < result_count; ++i) kiln_buffer_view_release(h->views[i]);
  free(h->args);
  free(h->results);
  free(h->views);
  memset(h, 0, sizeof *h);
}

static kiln_status_t host_call_init(host_call_t* h, const state_t* st, kiln_function_t fn) {
  memset(h, 0, sizeof *h);
  h->args = calloc(st->arg_count ? st->arg_count : 1, sizeof *h->args);
  h->results = calloc(st->result_count ? st->result_count : 1, sizeof *h->results);
  h->views = calloc(st->result_count ? st->result_count : 1, sizeof *h->views);
  if (!h->args || !h->results || !h->views)
    return kiln_make_status(KILN_OUT_OF_MEMORY, "allocating the benchmark's buffers");
  for (size_t i = 0; i < st->arg_count; ++i) {
    h->args[i].data = (void*)(uintptr_t)kiln_buffer_view_data(st->args[i]);
    h->args[i].byte_size = kiln_buffer_view_byte_size(st->args[i]);
    h->args[i].owner = st->args[i];
  }
  for (size_t i = 0; i < st->result_count; ++i) {
    kiln_value_info_t info;
    size_t size = 0;
    kiln_status_t s = kiln_function_result_info(fn, i, &info);
    if (s) return s;
    if (kiln_compute_byte_size(info.dtype, info.rank, info.shape, &size) != 0)
      return kiln_make_status(KILN_INTERNAL, "result %zu's byte size overflows", i);
    if (!size) continue; /* an empty result comes back as a view */
    h->results[i].data = aligned_alloc(64, (size + 63) / 64 * 64);
    h->results[i].byte_size = size;
    if (!h->results[i].data)
      return kiln_make_status(KILN_OUT_OF_MEMORY, "allocating result %zu's %zu bytes", i, size);
  }
  return NULL;
}

/* One call into the benchmark's destinations. */
static kiln_status_t host_call(host_call_t* h, state_t* st, kiln_function_t fn) {
  for (size_t i = 0; i < st->result_count; ++i) {
    kiln_buffer_view_release(h->views[i]);
    h->views[i] = NULL;
  }
  return kiln_context_invoke_host(st->context, fn, h->args, st->arg_count, h->results, h->views,
                                  st->result_count);
}

/* The last call's results as st->results (taking over the destinations). */
static kiln_status_t host_call_results(host_call_t* h, state_t* st, kiln_function_t fn) {
  release_results(st);
  for (size_t i = 0; i < st->result_count; ++i) {
    kiln_value_info_t info;
    kiln_status_t s = kiln_function_result_info(fn, i, &info);
    if (s) return s;
    if (!h->results[i].data) {
      st->results[i] = h->views[i];
      h->views[i] = NULL;
      continue;
    }
    if ((s = kiln_buffer_view_wrap(info.dtype, info.rank, info.shape, h->results[i].data,
                                   h->results[i].byte_size, free, h->results[i].data,
                                   &st->results[i])))
      return s;
    h->results[i].data = NULL; /* the view frees it */
  }
  return NULL;
}

/* Compares every result with its --expected_output: one error line per result
 * that differs (exit status 1), else one line saying how many matched. */
static int check_expected(const state_t* st, kiln_function_t fn, const options_t* o) {
  size_t mismatches = 0, ignored = 0;
  for (size_t i = 0; i < st->result_count; ++i) {
    if (!st->expected[i]) {
      ignored++;
      continue;
    }
    kiln_status_t s = kiln_io_compare(st->results[i], st->expected[i], &o->tolerance);
    if (!s) continue;
    mismatches++;
    kiln_value_info_t info;
    kiln_status_t si = kiln_function_result_info(fn, i, &info);
    const char* name = !si && info.name ? info.name : "";
    kiln_status_free(si);
    char label[512];
    source_label("--expected_output", &st->expected_sources.items[i], label, sizeof(label));
    error_line("function '%s' result %zu '%s' does not match (%s): %s", o->function, i, name,
               label, kiln_status_message(s));
    kiln_status_free(s);
  }
  if (mismatches) return EXIT_RUNTIME;
  size_t matched = st->result_count - ignored;
  printf("%zu result%s matched the expected output%s", matched, matched == 1 ? "" : "s",
         matched == 1 ? "" : "s");
  if (ignored) printf(" (%zu ignored)", ignored);
  printf("\n");
  return 0;
}

static int run_function(state_t* st, const options_t* o) {
  kiln_function_t fn;
  kiln_status_t s = kiln_module_lookup_function(st->module, o->function, &fn);
  if (s) {
    kiln_status_free(s);
    char names[1024];
    function_names(st->module, names, sizeof(names));
    error_line("module '%s' has no function '%s' (functions: %s)",
               kiln_module_name(st->module), o->function, names);
    return EXIT_RUNTIME;
  }
  char signature[8192];
  s = format_signature(fn, signature, sizeof(signature));
  if (s) return fail_status(s);

  size_t want = kiln_function_arg_count(fn);
  size_t results = kiln_function_result_count(fn);
  s = expand_sources("--input", o->inputs, o->input_count, &st->inputs);
  if (!s) s = expand_sources("--expected_output", o->expected, o->expected_count,
                             &st->expected_sources);
  if (s) return fail_status(s);
  char got_count[128];
  if (st->inputs.count != want) {
    source_count("--input", &st->inputs, o->input_count, got_count, sizeof(got_count));
    error_line("function '%s' expects %zu input%s, %s (signature: %s)", o->function, want,
               want == 1 ? "" : "s", got_count, signature);
    return EXIT_RUNTIME;
  }
  int npz_output = o->output_count == 1 && is_npz_path(o->outputs[0]);
  if (o->output_count && o->output_count != results && !npz_output) {
    error_line("function '%s' has %zu result%s, got %zu --output (give one per "
               "result, one .npz for all, or none to print them; signature: %s)",
               o->function, results, results == 1 ? "" : "s", o->output_count,
               signature);
    return EXIT_RUNTIME;
  }
  if (o->expected_count && st->expected_sources.count != results) {
    source_count("--expected_output", &st->expected_sources, o->expected_count, got_count,
                 sizeof(got_count));
    error_line("function '%s' has %zu result%s, %s (give one per result; signature: %s)",
               o->function, results, results == 1 ? "" : "s", got_count, signature);
    return EXIT_RUNTIME;
  }

  st->args = calloc(want ? want : 1, sizeof(kiln_buffer_view_t*));
  st->results = calloc(results ? results : 1, sizeof(kiln_buffer_view_t*));
  st->expected = calloc(results ? results : 1, sizeof(kiln_buffer_view_t*));
  if (!st->args || !st->results || !st->expected) {
    error_line("out of memory");
    return EXIT_RUNTIME;
  }
  st->result_count = results;
  for (size_t i = 0; i < want; ++i) {
    kiln_value_info_t info;
    s = kiln_function_arg_info(fn, i, &info);
    if (s) return fail_status(s);
    int rc = source_value(o, &st->inputs.items[i], "--input", "argument", i, &info, &st->args[i]);
    if (st->args[i]) st->arg_count = i + 1;
    if (rc) return rc;
  }
  for (size_t i = 0; i < st->expected_sources.count; ++i) {
    const source_t* item = &st->expected_sources.items[i];
    if (item->text && !strcmp(item->text, "(ignored)")) continue;
    kiln_value_info_t info;
    s = kiln_function_result_info(fn, i, &info);
    if (s) return fail_status(s);
    int rc = source_value(o, item, "--expected_output", "result", i, &info, &st->expected[i]);
    if (rc) return rc;
  }

  long warmup = o->benchmark > 0 ? o->warmup : 0;
  host_call_t host;
  memset(&host, 0, sizeof host);
  if (o->benchmark > 0 && (s = host_call_init(&host, st, fn))) {
    host_call_free(&host, st->result_count);
    return fail_status(s);
  }
  for (long call = 0; call < warmup && !g_interrupted; ++call) {
    if ((s = host_call(&host, st, fn))) {
      host_call_free(&host, st->result_count);
      return fail_status(kiln_status_annotate(s, "warm-up call %ld", call + 1));
    }
  }
  kiln_trace_t* trace = NULL;
  if (o->trace_path || o->print_statistics) {
    if ((s = kiln_trace_create(&trace))) return fail_status(s);
    kiln_context_set_trace(st->context, trace); /* the context holds it from here */
    kiln_trace_release(trace);
  }
  long calls = o->benchmark > 0 ? o->benchmark : 1;
  double* times = o->benchmark > 0 ? malloc((size_t)calls * sizeof(double)) : NULL;
  if (o->benchmark > 0 && !times) {
    host_call_free(&host, st->result_count);
    error_line("out of memory for the times of %ld calls", calls);
    return EXIT_RUNTIME;
  }
  long faults_before = page_faults();
  for (long call = 0; call < calls && !g_interrupted; ++call) {
    double start = now_seconds();
    if (times) {
      s = host_call(&host, st, fn);
    } else {
      release_results(st);
      s = kiln_context_invoke(st->context, fn, st->args, st->arg_count, st->results,
                              st->result_count);
    }
    double elapsed = now_seconds() - start;
    if (s) {
      free(times);
      host_call_free(&host, st->result_count);
      return fail_status(s);
    }
    if (times) times[call] = elapsed;
  }
  if (times) {
    s = host_call_results(&host, st, fn);
    host_call_free(&host, st->result_count);
    if (s) {
      free(times);
      return fail_status(s);
    }
  }
  if (times) {
    double faults = (double)(page_faults() - faults_before) / (double)calls;
    print_benchmark(o, times, calls, faults);
    free(times);
  }
  if (trace) {
    if (o->print_statistics) print_kernel_statistics(o, trace);
    if (o->trace_path && (s = kiln_trace_write_json(trace, o->trace_path)))
      return fail_status(kiln_status_annotate(s, "--trace"));
    kiln_context_set_trace(st->context, NULL);
  }

  if (npz_output) {
    s = write_results_npz(fn, o->outputs[0], st->results, results);
    if (s) return fail_status(kiln_status_annotate(s, "--output 1"));
  }
  for (size_t i = 0; i < results && !npz_output; ++i) {
    const kiln_buffer_view_t* r = st->results[i];
    if (o->output_count) {
      s = kiln_npy_write_file(o->outputs[i], r);
      if (s) return fail_status(kiln_status_annotate(s, "--output %zu", i + 1));
      continue;
    }
    /* benchmark mode prints timings only, --expected_output the comparison */
    if (o->benchmark > 0 || o->expected_count) continue;
    char type[512];
    kiln_format_type(kiln_buffer_view_dtype(r), kiln_buffer_view_rank(r),
                     kiln_buffer_view_shape(r), type, sizeof(type));
    printf("result[%zu]: %s\n", i, type);
    kiln_io_print_values(stdout, r);
  }
  return o->expected_count ? check_expected(st, fn, o) : 0;
}

static void cancel_on_signal(int sig) {
  g_interrupted = sig;
  kiln_context_cancel(g_running_context); /* lock-free atomics only */
}

/* --caller-transient: the function's transient arena in memory kiln-run owns
 * (64-byte aligned, its transient size), handed to the context as an
 * embedding that plans its own memory would. A function without an arena
 * gets none. */
static kiln_status_t give_transient_storage(state_t* st, options_t* o) {
  kiln_function_t fn;
  kiln_status_t s = kiln_module_lookup_function(st->module, o->function, &fn);
  if (s) { /* run_function names the missing function as without the flag */
    kiln_status_free(s);
    return NULL;
  }
  uint64_t bytes = kiln_function_transient_size(fn);
  o->caller_transient_bytes = bytes;
  if (!bytes) return NULL;
  if (bytes > SIZE_MAX - 63) /* the verifier keeps it a multiple of 64 */
    return kiln_make_status(KILN_OUT_OF_MEMORY, "--caller-transient: %llu bytes of transient "
                            "storage", (unsigned long long)bytes);
  st->transient = aligned_alloc(64, (size_t)((bytes + 63) / 64 * 64));
  if (!st->transient)
    return kiln_make_status(KILN_OUT_OF_MEMORY, "--caller-transient: allocating %llu bytes of "
                            "transient storage", (unsigned long long)bytes);
  return kiln_context_set_transient_storage(st->context, fn, st->transient, bytes);
}

/* The first SIGINT or SIGTERM cancels the running call (kiln-run then exits
 * with 128 + the signal); a second one kills as usual. */
static void install_cancel_handler(kiln_context_t* context) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = cancel_on_signal;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  g_running_context = context;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

int main(int argc, char** argv) {
  options_t o;
  int rc = parse_options(argc, argv, &o);
  state_t st;
  memset(&st, 0, sizeof(st));
  if (rc != 0) goto done;

  kiln_instance_options_t instance_options;
  kiln_instance_options_initialize(&instance_options);
  instance_options.worker_count = (uint32_t)o.workers;
  instance_options.perf_map = o.perf_map;
  kiln_status_t s = kiln_instance_create(&instance_options, &st.instance);
  if (!s) s = kiln_module_load_file(st.instance, o.module_path, &st.module);
  if (s) {
    rc = fail_status(s);
    goto done;
  }
  if (o.list) {
    s = list_module(st.module);
    if (s) {
      rc = fail_status(s);
      goto done;
    }
  }
  if (o.disassemble) {
    s = disassemble_module(st.module);
    if (s) {
      rc = fail_status(s);
      goto done;
    }
  }
  if (o.function || o.globals_in || o.globals_out) {
    s = kiln_context_create(st.module, &st.context);
    if (!s && o.globals_in) s = load_globals(st.context, st.module, o.globals_in,
                                                 o.globals_partial);
    if (s) {
      rc = fail_status(s);
      goto done;
    }
  }
  if (o.function) {
    kiln_call_limits_t limits;
    kiln_call_limits_initialize(&limits);
    limits.timeout_ns = (uint64_t)(o.timeout * 1e9);
    limits.max_steps = (uint64_t)o.max_steps;
    s = kiln_context_set_call_limits(st.context, &limits);
    if (!s && o.caller_transient) s = give_transient_storage(&st, &o);
    if (s) {
      rc = fail_status(s);
      goto done;
    }
    install_cancel_handler(st.context);
    rc = run_function(&st, &o);
    g_running_context = NULL;
    if (g_interrupted) {
      if (!rc) error_line("interrupted by signal %d", (int)g_interrupted);
      rc = 128 + g_interrupted;
    }
    if (rc) goto done;
  }
  if (o.globals_out) {
    s = save_globals(st.context, st.module, o.globals_out);
    if (s) rc = fail_status(s);
  }

done:
  if (st.results) release_results(&st);
  free(st.results);
  for (size_t i = 0; i < st.arg_count; ++i) kiln_buffer_view_release(st.args[i]);
  free(st.args);
  for (size_t i = 0; st.expected && i < st.result_count; ++i) {
    kiln_buffer_view_release(st.expected[i]);
  }
  free(st.expected);
  free_sources(&st.inputs);
  free_sources(&st.expected_sources);
  kiln_context_release(st.context);
  free(st.transient); /* after the context: it never frees the caller's storage */
  kiln_module_release(st.module);
  kiln_instance_release(st.instance);
  free(o.inputs);
  free(o.outputs);
  free(o.expected);
  if (fflush(stdout) != 0 && rc == 0) {
    fprintf(stderr, "kiln-run: error: cannot write to standard output\n");
    rc = EXIT_RUNTIME;
  }
  return rc < 0 ? 0 : rc;
}
