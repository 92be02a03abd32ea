/* libFuzzer target: load + verify.
 *
 * Loads the input with kiln_module_load_memory. Any status is fine; a crash,
 * leak or undefined behaviour is a finding, and so is an error with an empty
 * message or an unknown code. A module that loads has its reflection read
 * (names, signatures, trees, globals), every function disassembled and a
 * context created. No function is called (fuzz_invoke.c does that). The
 * input is not resealed here: the custom mutator (kiln_fuzz.c) recomputes
 * the checksum most of the time, so both the checksum's rejection and the
 * checks behind it are reached. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "module_internal.h"

static void discard(void* user, const char* text) {
  size_t* total = user;
  *total += strlen(text);
}

/* Reads every part of a value's description (ASan checks each read). */
static uint64_t g_sink;
static void read_value(const kiln_value_info_t* v) {
  size_t d;
  if (!v->name || v->rank > KILN_MAX_RANK || !kiln_dtype_size(v->dtype)) abort();
  g_sink += strlen(v->name);
  for (d = 0; d < v->rank; ++d) g_sink += (uint64_t)v->shape[d];
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln_module_t* m = NULL;
  kiln_context_t* c = NULL;
  kiln_status_t s = kiln_module_load_memory(kf_instance(), data, size, &m);
  size_t i, j, n, text = 0;
  if (s) {
    kf_check_status(s, "load");
    return 0;
  }
  if (!kiln_module_name(m)) abort();
  n = kiln_module_function_count(m);
  for (i = 0; i < n; ++i) {
    kiln_function_t f;
    kiln_value_info_t v;
    if ((s = kiln_module_function_at(m, i, &f))) abort(); /* in range: must succeed */
    if (!kiln_function_name(f) || !kiln_function_arg_tree(f) || !kiln_function_result_tree(f))
      abort();
    text += strlen(kiln_function_arg_tree(f)) + strlen(kiln_function_result_tree(f));
    for (j = 0; j < kiln_function_arg_count(f); ++j) {
      if ((s = kiln_function_arg_info(f, j, &v))) abort();
      read_value(&v);
    }
    for (j = 0; j < kiln_function_result_count(f); ++j) {
      if ((s = kiln_function_result_info(f, j, &v))) abort();
      read_value(&v);
    }
    /* Out of range: a clean error. */
    s = kiln_function_arg_info(f, kiln_function_arg_count(f), &v);
    if (!s) abort();
    kf_check_status(s, "arg_info");
    /* (a name with an embedded NUL may not be found by its C string) */
    if ((s = kiln_module_lookup_function(m, kiln_function_name(f), &f)))
      kf_check_status(s, "lookup_function");
  }
  for (i = 0; i < kiln_module_global_count(m); ++i) {
    kiln_value_info_t v;
    if ((s = kiln_module_global_info(m, i, &v))) abort();
    read_value(&v);
  }
  for (i = 0; i < m->function_count; ++i) {
    if ((s = kiln_module_disassemble(m, (uint32_t)i, discard, &text))) abort();
  }
  if ((s = kiln_context_create(m, &c))) kf_check_status(s, "context_create");
  kiln_context_release(c);
  kiln_module_release(m);
  return 0;
}
