/* An application outside the kiln tree, built against an installed runtime
 * with CMake (find_package(kiln), CMakeLists.txt here) or with pkg-config and
 * the C compiler; tests/test_packaging.py builds it both ways. It includes
 * only kiln/runtime.h.
 *
 *   kiln-consumer MODULE.vmfb FUNCTION OUT_PREFIX [ARG.bin ...]
 *
 * Each ARG.bin holds one argument's raw row-major data of the type the
 * function declares; result i is written the same way to OUT_PREFIX<i>.bin
 * and described on stdout as "result i: DTYPE[d0,d1,...]". Errors: one line on
 * stderr, exit status 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/runtime.h"

#define MAX_VALUES 16

static int fail(const char* what, kiln_status_t status) {
  fprintf(stderr, "consumer: error: %s: %s\n", what, kiln_status_message(status));
  kiln_status_free(status);
  return 1;
}

/* Reads the whole file into *data (malloc'd); returns 0 on success. */
static int read_file(const char* path, void** data, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (!f) return 1;
  int rc = 1;
  if (fseek(f, 0, SEEK_END) == 0) {
    long n = ftell(f);
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0) {
      *data = malloc(n ? (size_t)n : 1);
      *size = (size_t)n;
      rc = !*data || fread(*data, 1, *size, f) != *size;
      if (rc) free(*data);
    }
  }
  fclose(f);
  return rc;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s MODULE.vmfb FUNCTION OUT_PREFIX [ARG.bin ...]\n", argv[0]);
    return 2;
  }
  size_t arg_count = (size_t)(argc - 4);
  kiln_instance_t* instance = NULL;
  kiln_module_t* module = NULL;
  kiln_context_t* context = NULL;
  kiln_buffer_view_t* args[MAX_VALUES] = {0};
  kiln_buffer_view_t* results[MAX_VALUES] = {0};
  size_t result_count = 0;
  int rc = 1;
  kiln_status_t status = NULL;

  kiln_instance_options_t options;
  kiln_instance_options_initialize(&options);
  if ((status = kiln_instance_create(&options, &instance))) return fail("instance", status);
  if ((status = kiln_module_load_file(instance, argv[1], &module))) {
    rc = fail(argv[1], status);
    goto done;
  }
  kiln_function_t function;
  if ((status = kiln_module_lookup_function(module, argv[2], &function))) {
    rc = fail(argv[2], status);
    goto done;
  }
  result_count = kiln_function_result_count(function);
  if (arg_count != kiln_function_arg_count(function) || arg_count > MAX_VALUES ||
      result_count > MAX_VALUES) {
    fprintf(stderr, "consumer: error: %s takes %zu arguments, got %zu\n", argv[2],
            kiln_function_arg_count(function), arg_count);
    goto done;
  }
  for (size_t i = 0; i < arg_count; ++i) {
    kiln_value_info_t info;
    void* data = NULL;
    size_t size = 0;
    if ((status = kiln_function_arg_info(function, i, &info))) {
      rc = fail("argument info", status);
      goto done;
    }
    if (read_file(argv[4 + i], &data, &size)) {
      fprintf(stderr, "consumer: error: cannot read %s\n", argv[4 + i]);
      goto done;
    }
    status = kiln_buffer_view_create(info.dtype, info.rank, info.shape, data, size, &args[i]);
    free(data);
    if (status) {
      rc = fail(argv[4 + i], status);
      goto done;
    }
  }
  if ((status = kiln_context_create(module, &context))) {
    rc = fail("context", status);
    goto done;
  }
  if ((status = kiln_context_invoke(context, function, args, arg_count, results,
                                    result_count))) {
    rc = fail(argv[2], status);
    goto done;
  }
  for (size_t i = 0; i < result_count; ++i) {
    const kiln_buffer_view_t* r = results[i];
    printf("result %zu: %s[", i, kiln_dtype_name(kiln_buffer_view_dtype(r)));
    for (size_t d = 0; d < kiln_buffer_view_rank(r); ++d) {
      printf(d ? ",%lld" : "%lld", (long long)kiln_buffer_view_shape(r)[d]);
    }
    printf("]\n");
    char path[4096];
    snprintf(path, sizeof(path), "%s%zu.bin", argv[3], i);
    FILE* f = fopen(path, "wb");
    size_t size = kiln_buffer_view_byte_size(r);
    int ok = f && fwrite(kiln_buffer_view_data(r), 1, size, f) == size;
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) {
      fprintf(stderr, "consumer: error: cannot write %s\n", path);
      goto done;
    }
  }
  rc = 0;
done:
  for (size_t i = 0; i < MAX_VALUES; ++i) {
    if (args[i]) kiln_buffer_view_release(args[i]);
    if (results[i]) kiln_buffer_view_release(results[i]);
  }
  if (context) kiln_context_release(context);
  if (module) kiln_module_release(module);
  kiln_instance_release(instance);
  return rc;
}
