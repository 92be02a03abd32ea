/* Drives the module loader and the VM from the command line, for the tests
 * in tests/test_vm_runtime.py (which build modules with kiln.vm.writer).
 *
 *   kiln_vm_driver load MODULE
 *       load, print reflection and disassembly; exit 1 with "error CODE: msg"
 *   kiln_vm_driver fuzz MODULE
 *       load every truncation and many byte-flipped copies of MODULE from
 *       memory, the flipped ones with their checksum recomputed (so that
 *       they reach the structural checks); each must load or fail cleanly
 *       (run under ASan/UBSan)
 *   kiln_vm_driver fuzz-invoke MODULE
 *       damage MODULE and call every exported function of each copy that
 *       still loads, with zero arguments of the declared types:
 *       every truncation and every byte flipped (three masks) must fail to
 *       load with DATA_LOSS (the checksum), or load and give the undamaged
 *       module's results; then the same flips, and random scrambles, with the
 *       checksum recomputed (outside kernel code and relocations, which are
 *       native code the loader cannot judge) must load or fail cleanly and
 *       run or fail cleanly. Exit 3 when an expectation fails.
 *   kiln_vm_driver run MODULE STEP...
 *       on one context, in order: --call=FUNC followed by its --arg=VALUE
 *       options, --get=GLOBAL, --set=GLOBAL=VALUE. VALUE is TYPE=v,v,...
 *       with TYPE like 2x3xf32 or i64 (0-d). Prints "result K VALUE" lines.
 *       --observe sets a dispatch observer that prints, before and after
 *       each later dispatch, "dispatch FUNC@OFFSET KERNEL_INDEX NAME wg=N
 *       before|after" and then one "  binding J r|w SIZE HEX" line per
 *       binding (its bytes, read in the callback; before the kernel, the read
 *       bindings only); --observe-stop=N and --observe-stop-after=N one that
 *       returns N before / after the kernel (stopping the call);
 *       --observe-off removes it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer_internal.h"
#include "checksum.h"
#include "generated/module_fb.h"
#include "kiln/runtime.h"
#include "module_internal.h"

/* Under AddressSanitizer: a damaged type may ask for a huge buffer; the
 * runtime reports that as OUT_OF_MEMORY, so let malloc fail instead of
 * aborting (a no-op in other builds). */
const char* __asan_default_options(void);
const char* __asan_default_options(void) {
  return "allocator_may_return_null=1:max_allocation_size_mb=512";
}

static int report(kiln_status_t s) {
  printf("error %s: %s\n", kiln_status_code_name(kiln_status_code(s)), kiln_status_message(s));
  kiln_status_free(s);
  return 1;
}

static void print_info(const char* what, const kiln_value_info_t* v) {
  size_t d;
  printf("  %s %s: ", what, v->name);
  for (d = 0; d < v->rank; ++d) printf("%lldx", (long long)v->shape[d]);
  printf("%s%s\n", kiln_dtype_name(v->dtype), v->is_mutable ? " mutable" : "");
}

static void write_stdout(void* user, const char* text) {
  (void)user;
  fputs(text, stdout);
}

static void discard(void* user, const char* text) {
  (void)user;
  (void)text;
}

static kiln_status_t describe(kiln_module_t* m, int print) {
  size_t i, j, n = kiln_module_function_count(m);
  kiln_status_t s;
  if (print) printf("module %s\n", kiln_module_name(m));
  for (i = 0; i < n; ++i) {
    kiln_function_t f;
    kiln_value_info_t v;
    if ((s = kiln_module_function_at(m, i, &f))) return s;
    if (print) printf("function %s\n", kiln_function_name(f));
    for (j = 0; j < kiln_function_arg_count(f); ++j) {
      if ((s = kiln_function_arg_info(f, j, &v))) return s;
      if (print) print_info("arg", &v);
    }
    for (j = 0; j < kiln_function_result_count(f); ++j) {
      if ((s = kiln_function_result_info(f, j, &v))) return s;
      if (print) print_info("result", &v);
    }
    if (print) printf("  arg_tree %s\n  result_tree %s\n", kiln_function_arg_tree(f),
                      kiln_function_result_tree(f));
  }
  for (i = 0; i < kiln_module_global_count(m); ++i) {
    kiln_value_info_t v;
    if ((s = kiln_module_global_info(m, i, &v))) return s;
    if (print) print_info("global", &v);
  }
  for (i = 0; i < m->function_count; ++i) {
    if (print) printf("code %s\n", m->functions[i].name);
    if ((s = kiln_module_disassemble(m, (uint32_t)i, print ? write_stdout : discard, NULL)))
      return s;
  }
  return NULL;
}

/* Loads `size` bytes; on success exercises reflection, disassembly and a context. */
static int try_load(kiln_instance_t* inst, const uint8_t* data, size_t size) {
  kiln_module_t* m = NULL;
  kiln_context_t* c = NULL;
  kiln_status_t s = kiln_module_load_memory(inst, data, size, &m);
  uint32_t i;
  if (s) {
    if (kiln_status_message(s)[0] == 0) {
      printf("empty error message for a %zu-byte load\n", size);
      exit(2);
    }
    kiln_status_free(s);
    return 0;
  }
  for (i = 0; i < m->function_count; ++i) kiln_module_disassemble(m, i, discard, NULL);
  kiln_status_free(describe(m, 0));
  s = kiln_context_create(m, &c);
  kiln_status_free(s);
  kiln_context_release(c);
  kiln_module_release(m);
  return 1;
}

static void reseal(uint8_t* data, size_t size);

static int fuzz(kiln_instance_t* inst, const uint8_t* data, size_t size) {
  static const uint8_t masks[] = {0x01, 0x80, 0xff, 0x10};
  uint8_t* copy = malloc(size ? size : 1);
  size_t i, ok = 0, total = 0;
  unsigned k;
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  if (!copy) return 1;
  for (i = 0; i < size; ++i) {
    ok += (size_t)try_load(inst, data, i);
    total++;
  }
  printf("truncate: %zu loads, %zu loaded\n", total, ok);
  ok = total = 0;
  for (i = 0; i < size; ++i) {
    for (k = 0; k < sizeof masks; ++k) {
      memcpy(copy, data, size);
      copy[i] ^= masks[k];
      if (i + KILN_TRAILER_SIZE < size) reseal(copy, size);
      ok += (size_t)try_load(inst, copy, size);
      total++;
    }
  }
  printf("flip: %zu loads, %zu loaded\n", total, ok);
  ok = total = 0;
  for (i = 0; i < 4000; ++i) {
    memcpy(copy, data, size);
    for (k = 0; k < 6; ++k) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      copy[(seed >> 33) % size] = (uint8_t)(seed >> 13);
    }
    if (i % 2 == 0 && size > KILN_TRAILER_SIZE) reseal(copy, size);
    ok += (size_t)try_load(inst, copy, size);
    total++;
  }
  printf("scramble: %zu loads, %zu loaded\n", total, ok);
  free(copy);
  return 0;
}

/* ---- fuzz-invoke ------------------------------------------------------------- */

typedef struct fuzz_stats {
  size_t loads, loaded, calls, call_errors, skipped;
} fuzz_stats_t;

/* Calls every exported function of `m` in order on one fresh context, with
 * zero arguments; returns a CRC of every outcome (status codes, result types
 * and their first 64 KiB). Functions whose arguments would take over 16 MiB
 * are skipped. */
static uint32_t invoke_all(kiln_module_t* m, fuzz_stats_t* st) {
  kiln_context_t* c = NULL;
  kiln_status_t s = kiln_context_create(m, &c);
  uint32_t digest = 0;
  size_t i, j, n = kiln_module_function_count(m);
  if (s) {
    uint32_t code = (uint32_t)kiln_status_code(s);
    kiln_status_free(s);
    return kiln_crc32(0x5A5A5A5Au, &code, sizeof code);
  }
  for (i = 0; i < n; ++i) {
    kiln_function_t f;
    kiln_buffer_view_t* args[64];
    kiln_buffer_view_t* results[64];
    size_t nargs, nres, made = 0, bytes = 0;
    uint32_t code = 0;
    if ((s = kiln_module_function_at(m, i, &f))) {
      kiln_status_free(s);
      continue;
    }
    nargs = kiln_function_arg_count(f);
    nres = kiln_function_result_count(f);
    if (nargs > 64 || nres > 64) {
      st->skipped++;
      continue;
    }
    for (j = 0; j < nargs && !s; ++j) {
      kiln_value_info_t v;
      size_t size;
      if ((s = kiln_function_arg_info(f, j, &v))) break;
      if (kiln_compute_byte_size(v.dtype, v.rank, v.shape, &size) != 0 ||
          (bytes += size) > ((size_t)16 << 20))
        break;
      if ((s = kiln_buffer_view_create(v.dtype, v.rank, v.shape, NULL, 0, &args[j]))) break;
      made++;
    }
    if (made < nargs) {
      if (s) kiln_status_free(s);
      else st->skipped++;
      s = NULL;
      for (j = 0; j < made; ++j) kiln_buffer_view_release(args[j]);
      continue;
    }
    memset(results, 0, sizeof results);
    st->calls++;
    s = kiln_context_invoke(c, f, args, nargs, results, nres);
    if (s) {
      code = (uint32_t)kiln_status_code(s);
      if (kiln_status_message(s)[0] == 0) {
        printf("empty error message from a call\n");
        exit(3);
      }
      kiln_status_free(s);
      s = NULL;
      st->call_errors++;
    }
    digest = kiln_crc32(digest, &code, sizeof code);
    for (j = 0; j < nres && !code; ++j) {
      const kiln_buffer_view_t* r = results[j];
      uint32_t dtype = (uint32_t)kiln_buffer_view_dtype(r);
      size_t rank = kiln_buffer_view_rank(r);
      size_t bytes_out = kiln_buffer_view_element_count(r) * kiln_dtype_size((kiln_dtype_t)dtype);
      digest = kiln_crc32(digest, &dtype, sizeof dtype);
      digest = kiln_crc32(digest, kiln_buffer_view_shape(r), rank * sizeof(int64_t));
      /* (a damaged type can make a result huge and mostly unwritten) */
      digest = kiln_crc32(digest, kiln_buffer_view_data(r),
                          bytes_out < 65536 ? bytes_out : 65536);
      kiln_buffer_view_release(results[j]);
    }
    for (j = 0; j < made; ++j) kiln_buffer_view_release(args[j]);
  }
  kiln_context_release(c);
  return digest;
}

/* Loads `size` bytes; returns 1 and the outcome digest when it loads, else 0
 * with the status in *err (caller frees). */
static int load_and_invoke(kiln_instance_t* inst, const uint8_t* data, size_t size,
                           fuzz_stats_t* st, uint32_t* digest, kiln_status_t* err) {
  kiln_module_t* m = NULL;
  kiln_status_t s = kiln_module_load_memory(inst, data, size, &m);
  st->loads++;
  *err = s;
  if (s) {
    if (kiln_status_message(s)[0] == 0) {
      printf("empty error message for a %zu-byte load\n", size);
      exit(3);
    }
    return 0;
  }
  st->loaded++;
  *digest = invoke_all(m, st);
  kiln_module_release(m);
  return 1;
}

static void print_stats(const char* what, const fuzz_stats_t* st) {
  printf("%s: %zu loads, %zu loaded, %zu calls, %zu call errors, %zu skipped\n", what,
         st->loads, st->loaded, st->calls, st->call_errors, st->skipped);
}

static void reseal(uint8_t* data, size_t size) {
  uint32_t crc = kiln_crc32(0, data, size - 4);
  memcpy(data + size - 4, &crc, 4); /* little-endian hosts */
}

static int fuzz_invoke(kiln_instance_t* inst, const uint8_t* data, size_t size) {
  static const uint8_t masks[] = {0xff, 0x01, 0x80};
  fuzz_stats_t st;
  kiln_module_t* m = NULL;
  kiln_status_t s;
  uint32_t reference = 0, digest = 0;
  uint8_t* copy = malloc(size);
  uint8_t* native = calloc(size, 1); /* 1: a byte of kernel code or relocations */
  size_t i, k, bad = 0;
  uint64_t seed = 0x2545F4914F6CDD1Dull;
  if (!copy || !native) return 2;
  memset(&st, 0, sizeof st);
  if (!load_and_invoke(inst, data, size, &st, &reference, &s)) return report(s);
  if (st.calls == 0 || st.call_errors != 0) {
    printf("the undamaged module made %zu calls, %zu failed\n", st.calls, st.call_errors);
    return 3;
  }
  /* Where the kernel images' code and relocations lie. */
  if ((s = kiln_module_load_memory(inst, data, size, &m))) return report(s);
  {
    const uint8_t* root = kiln_fb_Module_root(m->data);
    uint32_t n = kiln_fb_Module_kernel_images_len(root);
    for (i = 0; i < n; ++i) {
      const uint8_t* img = kiln_fb_Module_kernel_images_at(root, (uint32_t)i);
      size_t at = (size_t)(kiln_fb_KernelImage_code(img) - m->data);
      memset(native + at, 1, kiln_fb_KernelImage_code_len(img));
      if (kiln_fb_KernelImage_relocs_len(img)) {
        at = (size_t)(kiln_fb_KernelImage_relocs_bytes(img) - m->data);
        memset(native + at, 1, 16 * (size_t)kiln_fb_KernelImage_relocs_len(img));
      }
    }
  }
  kiln_module_release(m);

  /* As written: damage must be caught by the checksum. */
  memset(&st, 0, sizeof st);
  for (i = 0; i < size; ++i) {
    if (!load_and_invoke(inst, data, i, &st, &digest, &s)) {
      if (kiln_status_code(s) != KILN_DATA_LOSS && bad++ < 10)
        printf("truncation to %zu: %s\n", i, kiln_status_message(s));
      kiln_status_free(s);
    } else if (bad++ < 10) {
      printf("truncation to %zu loaded\n", i);
    }
  }
  print_stats("truncate", &st);
  memset(&st, 0, sizeof st);
  for (i = 0; i < size; ++i) {
    for (k = 0; k < sizeof masks; ++k) {
      memcpy(copy, data, size);
      copy[i] ^= masks[k];
      if (!load_and_invoke(inst, copy, size, &st, &digest, &s)) {
        if ((kiln_status_code(s) != KILN_DATA_LOSS ||
             !strstr(kiln_status_message(s), "checksum")) && bad++ < 10)
          printf("flip of byte %zu by 0x%02x: %s\n", i, masks[k], kiln_status_message(s));
        kiln_status_free(s);
      } else if (digest != reference && bad++ < 10) {
        printf("flip of byte %zu by 0x%02x loaded and gave other results\n", i, masks[k]);
      }
    }
  }
  print_stats("flip", &st);

  /* Resealed: the loader's structural checks and the VM's run-time checks. */
  memset(&st, 0, sizeof st);
  for (i = 0; i + KILN_TRAILER_SIZE < size; ++i) {
    if (native[i]) continue;
    for (k = 0; k < sizeof masks; ++k) {
      memcpy(copy, data, size);
      copy[i] ^= masks[k];
      reseal(copy, size);
      if (!load_and_invoke(inst, copy, size, &st, &digest, &s)) kiln_status_free(s);
    }
  }
  print_stats("sealed flip", &st);
  memset(&st, 0, sizeof st);
  for (i = 0; i < 3000; ++i) {
    memcpy(copy, data, size);
    for (k = 0; k < 4;) {
      size_t at;
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      at = (size_t)((seed >> 33) % (size - KILN_TRAILER_SIZE));
      if (native[at]) continue;
      copy[at] = (uint8_t)(seed >> 13);
      k++;
    }
    reseal(copy, size);
    if (!load_and_invoke(inst, copy, size, &st, &digest, &s)) kiln_status_free(s);
  }
  print_stats("sealed scramble", &st);
  free(copy);
  free(native);
  if (bad) {
    printf("%zu damaged copies were not caught by the checksum\n", bad);
    return 3;
  }
  return 0;
}

/* ---- values ----------------------------------------------------------------- */

static kiln_status_t parse_value(const char* text, kiln_buffer_view_t** out) {
  char type[128];
  const char* eq = strchr(text, '=');
  char* parts[KILN_MAX_RANK + 1];
  int64_t shape[KILN_MAX_RANK];
  size_t rank = 0, n, i, count = 1, esize;
  kiln_dtype_t dtype;
  kiln_status_t s;
  char* p;
  const char* v;
  uint8_t* data;
  if (!eq || (size_t)(eq - text) >= sizeof type) {
    fprintf(stderr, "bad value %s (expected TYPE=v,v,...)\n", text);
    exit(2);
  }
  memcpy(type, text, (size_t)(eq - text));
  type[eq - text] = 0;
  n = 0;
  parts[n++] = type;
  for (p = type; *p; ++p)
    if (*p == 'x' && n <= KILN_MAX_RANK) {
      *p = 0;
      parts[n++] = p + 1;
    }
  if (kiln_dtype_from_name(parts[n - 1], &dtype) != 0) {
    fprintf(stderr, "bad dtype in %s\n", text);
    exit(2);
  }
  for (i = 0; i + 1 < n; ++i) {
    shape[rank++] = strtoll(parts[i], NULL, 10);
    count *= (size_t)shape[rank - 1];
  }
  if ((s = kiln_buffer_view_create(dtype, rank, shape, NULL, 0, out))) return s;
  data = kiln_buffer_view_mutable_data(*out);
  esize = kiln_dtype_size(dtype);
  v = eq + 1;
  for (i = 0; i < count && *v; ++i) {
    char* end;
    double d = strtod(v, &end);
    long long ll = (long long)d;
    uint8_t* at = data + i * esize;
    switch (dtype) {
      case KILN_DTYPE_F32: { float f = (float)d; memcpy(at, &f, 4); break; }
      case KILN_DTYPE_F64: memcpy(at, &d, 8); break;
      case KILN_DTYPE_I64: ll = strtoll(v, &end, 10); memcpy(at, &ll, 8); break;
      default: memcpy(at, &ll, esize); break; /* little-endian low bytes */
    }
    v = *end == ',' ? end + 1 : end;
  }
  return NULL;
}

static void print_value(const char* label, const kiln_buffer_view_t* view) {
  size_t i, d, n = kiln_buffer_view_element_count(view);
  kiln_dtype_t dt = kiln_buffer_view_dtype(view);
  const uint8_t* data = kiln_buffer_view_data(view);
  printf("%s ", label);
  for (d = 0; d < kiln_buffer_view_rank(view); ++d)
    printf("%lldx", (long long)kiln_buffer_view_shape(view)[d]);
  printf("%s=", kiln_dtype_name(dt));
  for (i = 0; i < n; ++i) {
    const uint8_t* at = data + i * kiln_dtype_size(dt);
    union { float f; double g; int8_t b; int16_t h; int32_t i; int64_t l; uint8_t u; } u;
    memcpy(&u, at, kiln_dtype_size(dt));
    if (i) printf(",");
    switch (dt) {
      case KILN_DTYPE_F32: printf("%.9g", u.f); break;
      case KILN_DTYPE_F64: printf("%.17g", u.g); break;
      case KILN_DTYPE_I8: printf("%d", u.b); break;
      case KILN_DTYPE_I16: printf("%d", u.h); break;
      case KILN_DTYPE_I32: printf("%d", u.i); break;
      case KILN_DTYPE_I64: printf("%lld", (long long)u.l); break;
      case KILN_DTYPE_U8: case KILN_DTYPE_BOOL: printf("%u", u.u); break;
      default: printf("0x%04x", (unsigned)(uint16_t)u.h); break;
    }
  }
  printf("\n");
}

static kiln_status_t do_call(kiln_context_t* c, kiln_module_t* m, const char* name,
                             char** argv, int argc) {
  kiln_function_t f;
  kiln_buffer_view_t* args[64];
  kiln_buffer_view_t* results[64];
  size_t n = 0, i, nres;
  kiln_status_t s;
  if ((s = kiln_module_lookup_function(m, name, &f))) return s;
  for (i = 0; i < (size_t)argc && n < 64; ++i) {
    if ((s = parse_value(argv[i] + 6, &args[n]))) break;
    n++;
  }
  nres = kiln_function_result_count(f);
  if (!s) s = kiln_context_invoke(c, f, args, n, results, 64);
  for (i = 0; i < n; ++i) kiln_buffer_view_release(args[i]);
  if (s) return s;
  for (i = 0; i < nres; ++i) {
    char label[32];
    snprintf(label, sizeof label, "result %zu", i);
    print_value(label, results[i]);
    kiln_buffer_view_release(results[i]);
  }
  return NULL;
}

/* The observer of --observe: prints what the dispatch bound, byte by byte
 * (under ASan this reads every byte the runtime hands over). */
static int print_dispatch(void* user, const kiln_dispatch_info_t* info) {
  uint32_t j;
  size_t b;
  (void)user;
  printf("dispatch %s@%u %u %s wg=%u %s\n", kiln_function_name(info->function),
         (unsigned)info->offset, (unsigned)info->kernel, info->kernel_name,
         (unsigned)info->workgroup_count, info->phase == KILN_DISPATCH_BEFORE ? "before" : "after");
  for (j = 0; j < info->binding_count; ++j) {
    const uint8_t* bytes = info->binding_data[j];
    if (info->phase == KILN_DISPATCH_BEFORE && info->binding_writable[j]) continue; /* not written yet */
    printf("  binding %u %s %zu ", (unsigned)j, info->binding_writable[j] ? "w" : "r",
           info->binding_sizes[j]);
    for (b = 0; b < info->binding_sizes[j]; ++b) printf("%02x", bytes[b]);
    printf("\n");
  }
  return 0;
}

static int stop_answer;
static kiln_dispatch_phase_t stop_phase;
static int stop_dispatch(void* user, const kiln_dispatch_info_t* info) {
  (void)user;
  if (info->phase != stop_phase) return 0;
  printf("dispatch %s stopped %s\n", info->kernel_name,
         info->phase == KILN_DISPATCH_BEFORE ? "before" : "after");
  return stop_answer;
}

static kiln_status_t run_steps(kiln_context_t* c, kiln_module_t* m, char** argv, int argc) {
  int i = 0;
  kiln_status_t s = NULL;
  while (i < argc && !s) {
    if (strncmp(argv[i], "--call=", 7) == 0) {
      int j = i + 1;
      while (j < argc && strncmp(argv[j], "--arg=", 6) == 0) ++j;
      s = do_call(c, m, argv[i] + 7, argv + i + 1, j - i - 1);
      i = j;
    } else if (strcmp(argv[i], "--observe") == 0) {
      kiln_context_set_dispatch_observer(c, print_dispatch, NULL);
      ++i;
    } else if (strncmp(argv[i], "--observe-stop=", 15) == 0) {
      stop_answer = atoi(argv[i] + 15);
      stop_phase = KILN_DISPATCH_BEFORE;
      kiln_context_set_dispatch_observer(c, stop_dispatch, NULL);
      ++i;
    } else if (strncmp(argv[i], "--observe-stop-after=", 21) == 0) {
      stop_answer = atoi(argv[i] + 21);
      stop_phase = KILN_DISPATCH_AFTER;
      kiln_context_set_dispatch_observer(c, stop_dispatch, NULL);
      ++i;
    } else if (strcmp(argv[i], "--observe-off") == 0) {
      kiln_context_set_dispatch_observer(c, NULL, NULL);
      ++i;
    } else if (strncmp(argv[i], "--get=", 6) == 0) {
      kiln_buffer_view_t* v = NULL;
      if (!(s = kiln_context_get_global(c, argv[i] + 6, &v))) {
        print_value("global", v);
        kiln_buffer_view_release(v);
      }
      ++i;
    } else if (strncmp(argv[i], "--set=", 6) == 0) {
      char name[128];
      const char* eq = strchr(argv[i] + 6, '=');
      kiln_buffer_view_t* v = NULL;
      size_t len = eq ? (size_t)(eq - argv[i] - 6) : 0;
      if (!eq || len >= sizeof name) {
        fprintf(stderr, "bad --set\n");
        exit(2);
      }
      memcpy(name, argv[i] + 6, len);
      name[len] = 0;
      if (!(s = parse_value(eq + 1, &v))) {
        s = kiln_context_set_global(c, name, v);
        kiln_buffer_view_release(v);
      }
      ++i;
    } else {
      fprintf(stderr, "unknown step %s\n", argv[i]);
      exit(2);
    }
  }
  return s;
}

static uint8_t* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  uint8_t* data;
  long n;
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  data = malloc(n > 0 ? (size_t)n : 1);
  if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
    free(data);
    data = NULL;
  }
  fclose(f);
  *size = (size_t)n;
  return data;
}

int main(int argc, char** argv) {
  kiln_instance_options_t opts;
  kiln_instance_t* inst = NULL;
  kiln_module_t* m = NULL;
  kiln_context_t* c = NULL;
  kiln_status_t s;
  int rc = 0;
  if (argc < 3) {
    fprintf(stderr, "usage: %s load|fuzz|fuzz-invoke|run MODULE [STEP...]\n", argv[0]);
    return 2;
  }
  kiln_instance_options_initialize(&opts);
  opts.worker_count = 2;
  if ((s = kiln_instance_create(&opts, &inst))) return report(s);
  if (strcmp(argv[1], "fuzz") == 0 || strcmp(argv[1], "fuzz-invoke") == 0) {
    size_t size = 0;
    uint8_t* data = read_file(argv[2], &size);
    if (!data) {
      fprintf(stderr, "cannot read %s\n", argv[2]);
      kiln_instance_release(inst);
      return 2;
    }
    rc = strcmp(argv[1], "fuzz") == 0 ? fuzz(inst, data, size)
                                      : fuzz_invoke(inst, data, size);
    free(data);
    kiln_instance_release(inst);
    return rc;
  }
  if ((s = kiln_module_load_file(inst, argv[2], &m))) {
    kiln_instance_release(inst);
    return report(s);
  }
  if (strcmp(argv[1], "load") == 0) {
    s = describe(m, 1);
  } else if (!(s = kiln_context_create(m, &c))) {
    s = run_steps(c, m, argv + 3, argc - 3);
    kiln_context_release(c);
  }
  if (s) rc = report(s);
  else if (strcmp(argv[1], "load") == 0) printf("ok\n");
  kiln_module_release(m);
  kiln_instance_release(inst);
  return rc;
}
