/* Embedding the kiln runtime in a C program.
 *
 * This is the whole life cycle of a kiln module inside an application, with
 * no Python: create an instance (its worker threads run the kernels), load a
 * .vmfb file (it is verified on load), look up an exported function, create
 * a context (the module's globals: its mutable state), build input buffer
 * views, invoke, read the results, and release everything. Every call
 * returns a kiln_status_t: NULL on success, otherwise an error the caller
 * reports and frees. Link against libkiln_runtime (include/kiln/runtime.h is
 * the only header an application needs); this example also uses the value
 * parser and printer of kiln_io.h (libkiln_io, installed with the runtime) to
 * turn its command line into inputs and its results into text, so it links
 * kiln::io (CMake) or kiln-io (pkg-config); runtime-c/README.md shows both.
 *
 *   kiln-embed-example MODULE.vmfb FUNCTION [VALUE...]
 *   kiln-embed-example linear.vmfb predict 8x3xf32=0.5
 *
 * VALUEs use kiln-run's syntax (SHAPExDTYPE=v1,v2,... or @file.npy); with no
 * VALUEs, every argument is filled with ones of its declared type. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/runtime.h"
#include "kiln_io.h"

/* Reports a failed call and frees its status; returns 1 for `rc`. */
static int report(const char* what, kiln_status_t status) {
  fprintf(stderr, "embed: error: %s: %s (%s)\n", what, kiln_status_message(status),
          kiln_status_code_name(kiln_status_code(status)));
  kiln_status_free(status);
  return 1;
}

/* A buffer of the declared argument type filled with ones. */
static kiln_status_t ones_like(const kiln_value_info_t* info, kiln_buffer_view_t** out) {
  kiln_status_t status =
      kiln_buffer_view_create(info->dtype, info->rank, info->shape, NULL, 0, out);
  if (status) return status;
  /* Build "ones" through the parser so every dtype (f16, bf16, ...) works. */
  char text[64];
  snprintf(text, sizeof(text), "%s=1", kiln_dtype_name(info->dtype));
  kiln_buffer_view_t* one = NULL;
  status = kiln_io_parse_value(text, &one);
  if (status) {
    kiln_buffer_view_release(*out);
    *out = NULL;
    return status;
  }
  size_t elem = kiln_dtype_size(info->dtype);
  char* data = kiln_buffer_view_mutable_data(*out);
  for (size_t i = 0; i < kiln_buffer_view_element_count(*out); ++i) {
    memcpy(data + i * elem, kiln_buffer_view_data(one), elem);
  }
  kiln_buffer_view_release(one);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODULE.vmfb FUNCTION [VALUE...]\n", argv[0]);
    return 2;
  }
  const char* module_path = argv[1];
  const char* function_name = argv[2];
  int rc = 0;
  kiln_instance_t* instance = NULL;
  kiln_module_t* module = NULL;
  kiln_context_t* context = NULL;
  kiln_buffer_view_t** args = NULL;
  kiln_buffer_view_t** results = NULL;
  size_t arg_count = 0, result_count = 0;
  kiln_status_t status;

  /* 1. An instance: worker threads for dispatches (0: one per core). */
  kiln_instance_options_t options;
  kiln_instance_options_initialize(&options);
  status = kiln_instance_create(&options, &instance);
  if (status) { rc = report("creating the instance", status); goto cleanup; }

  /* 2. The module: mapped, verified, kernels loaded. */
  status = kiln_module_load_file(instance, module_path, &module);
  if (status) { rc = report("loading the module", status); goto cleanup; }

  /* 3. The function and its signature. */
  kiln_function_t function;
  status = kiln_module_lookup_function(module, function_name, &function);
  if (status) { rc = report("looking up the function", status); goto cleanup; }
  arg_count = kiln_function_arg_count(function);
  result_count = kiln_function_result_count(function);
  if ((size_t)(argc - 3) != arg_count && argc != 3) {
    fprintf(stderr, "embed: error: %s takes %zu arguments, got %d values\n",
            function_name, arg_count, argc - 3);
    rc = 1;
    goto cleanup;
  }

  /* 4. A context: the module's globals with their initial values. */
  status = kiln_context_create(module, &context);
  if (status) { rc = report("creating a context", status); goto cleanup; }

  /* 5. Inputs: parsed from the command line, or ones of the declared type. */
  args = calloc(arg_count ? arg_count : 1, sizeof(*args));
  results = calloc(result_count ? result_count : 1, sizeof(*results));
  if (!args || !results) {
    fprintf(stderr, "embed: error: out of memory\n");
    rc = 1;
    goto cleanup;
  }
  for (size_t i = 0; i < arg_count; ++i) {
    kiln_value_info_t info;
    status = kiln_function_arg_info(function, i, &info);
    if (!status) {
      status = argc > 3 ? kiln_io_parse_value(argv[3 + i], &args[i])
                        : ones_like(&info, &args[i]);
    }
    if (status) { rc = report("building an input", status); goto cleanup; }
  }

  /* 6. Invoke. The runtime checks every argument against the signature. */
  status = kiln_context_invoke(context, function, args, arg_count, results, result_count);
  if (status) { rc = report("invoking the function", status); goto cleanup; }

  /* 7. Results: dtype, shape and data of each buffer view. */
  for (size_t i = 0; i < result_count; ++i) {
    kiln_value_info_t info;
    status = kiln_function_result_info(function, i, &info);
    if (status) { rc = report("reading result info", status); goto cleanup; }
    const kiln_buffer_view_t* r = results[i];
    printf("result %zu%s%s: %s[", i, info.name && *info.name ? " " : "",
           info.name ? info.name : "", kiln_dtype_name(kiln_buffer_view_dtype(r)));
    for (size_t d = 0; d < kiln_buffer_view_rank(r); ++d) {
      printf("%s%lld", d ? ", " : "", (long long)kiln_buffer_view_shape(r)[d]);
    }
    printf("]\n");
    kiln_io_print_values(stdout, r);
  }

cleanup:
  /* 8. Release in any order: objects keep what they need alive. */
  if (results) {
    for (size_t i = 0; i < result_count; ++i) kiln_buffer_view_release(results[i]);
  }
  if (args) {
    for (size_t i = 0; i < arg_count; ++i) kiln_buffer_view_release(args[i]);
  }
  free(results);
  free(args);
  kiln_context_release(context);
  kiln_module_release(module);
  kiln_instance_release(instance);
  return rc;
}
