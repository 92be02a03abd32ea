/* Training in C: run an exported training step, evaluate, checkpoint, restore.
 *
 * examples/mlp_train.py exports a Program whose globals hold an MLP's
 * parameters and its Adam optimizer state, and whose `train_step(x, y)`
 * performs one update and returns the loss. This program drives it with no
 * Python:
 *
 *   1. load the module and read a data set (x: N x F f32, y: N x C one-hot
 *      f32) from .npy files;
 *   2. call train_step STEPS times, printing the loss;
 *   3. call predict(x) and compute the accuracy here (argmax per row);
 *   4. checkpoint every global, by name (kiln_context_get_global), to a .npz;
 *   5. read the checkpoint back and restore it into a FRESH context
 *      (kiln_context_set_global), then check that the restored context
 *      predicts exactly what the trained one does, and that one more training
 *      step gives the same loss and parameters on both.
 *
 *   python examples/mlp_train.py            # writes mlp_train.vmfb
 *   kiln-train-example mlp_train.vmfb x.npy y.npy [STEPS] [CHECKPOINT.npz]
 *
 * Prints "step I loss L" per step, then "accuracy A (K/N)", "checkpoint: ...",
 * "restored predictions identical: yes" and "resumed step identical: yes";
 * exits 1 on any error or mismatch. Reads and writes .npy/.npz with kiln_io.h,
 * so it links kiln::io (CMake) or kiln-io (pkg-config) from an installed
 * runtime (runtime-c/README.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/runtime.h"
#include "kiln_io.h"

static int report(const char* what, kiln_status_t status) {
  fprintf(stderr, "train: error: %s: %s (%s)\n", what, kiln_status_message(status),
          kiln_status_code_name(kiln_status_code(status)));
  kiln_status_free(status);
  return 1;
}

/* Calls a one-result function; *out is a new reference. */
static kiln_status_t call1(kiln_context_t* context, kiln_function_t fn,
                           kiln_buffer_view_t* const* args, size_t arg_count,
                           kiln_buffer_view_t** out) {
  return kiln_context_invoke(context, fn, args, arg_count, out, 1);
}

static int same_bytes(const kiln_buffer_view_t* a, const kiln_buffer_view_t* b) {
  return kiln_buffer_view_byte_size(a) == kiln_buffer_view_byte_size(b) &&
         memcmp(kiln_buffer_view_data(a), kiln_buffer_view_data(b),
                kiln_buffer_view_byte_size(a)) == 0;
}

/* Index of the largest of n floats (the first on ties). */
static size_t argmax(const float* v, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; ++i) {
    if (v[i] > v[best]) best = i;
  }
  return best;
}

/* Writes every global of the context to `path` (a .npz, one entry per
 * global name). Returns 0, or 1 after reporting an error. */
static int save_checkpoint(kiln_context_t* context, const kiln_module_t* module,
                           const char* path) {
  size_t count = kiln_module_global_count(module);
  const char** names = calloc(count ? count : 1, sizeof(*names));
  kiln_buffer_view_t** values = calloc(count ? count : 1, sizeof(*values));
  kiln_status_t status = NULL;
  int rc = 0;
  if (!names || !values) {
    fprintf(stderr, "train: error: out of memory\n");
    rc = 1;
  }
  for (size_t i = 0; i < count && !rc && !status; ++i) {
    kiln_value_info_t info;
    status = kiln_module_global_info(module, i, &info);
    if (!status) {
      names[i] = info.name;
      status = kiln_context_get_global(context, info.name, &values[i]);
    }
  }
  if (!rc && !status) {
    status = kiln_npz_write_file(path, count, names,
                                 (const kiln_buffer_view_t* const*)values);
  }
  if (status) rc = report("writing the checkpoint", status);
  for (size_t i = 0; values && i < count; ++i) kiln_buffer_view_release(values[i]);
  free(values);
  free(names);
  return rc;
}

/* Sets every global of the module from the checkpoint at `path`; a global
 * missing from the file is an error (a partial restore would silently mix
 * trained and initial state). Returns 0, or 1 after reporting an error. */
static int load_checkpoint(kiln_context_t* context, const kiln_module_t* module,
                           const char* path, size_t* restored) {
  kiln_npz_t npz;
  kiln_status_t status = kiln_npz_read_file(path, &npz);
  if (status) return report("reading the checkpoint", status);
  int rc = 0;
  *restored = 0;
  for (size_t i = 0; i < kiln_module_global_count(module) && !rc; ++i) {
    kiln_value_info_t info;
    status = kiln_module_global_info(module, i, &info);
    if (status) {
      rc = report("reading the module's globals", status);
      break;
    }
    const kiln_buffer_view_t* value = NULL;
    for (size_t e = 0; e < npz.count; ++e) {
      if (!strcmp(npz.entries[e].name, info.name)) value = npz.entries[e].value;
    }
    if (!value) {
      fprintf(stderr, "train: error: checkpoint '%s' has no global '%s'\n", path, info.name);
      rc = 1;
      break;
    }
    /* set_global copies the value and checks its dtype and shape against
     * the module's declaration. */
    status = kiln_context_set_global(context, info.name, value);
    if (status) {
      rc = report("restoring a global", status);
      break;
    }
    ++*restored;
  }
  kiln_npz_free(&npz);
  return rc;
}

int main(int argc, char** argv) {
  if (argc < 4 || argc > 6) {
    fprintf(stderr, "usage: %s MODULE.vmfb X.npy Y.npy [STEPS] [CHECKPOINT.npz]\n", argv[0]);
    return 2;
  }
  const char* module_path = argv[1];
  long steps = argc > 4 ? strtol(argv[4], NULL, 10) : 200;
  const char* checkpoint = argc > 5 ? argv[5] : "train_checkpoint.npz";
  if (steps < 1) {
    fprintf(stderr, "train: error: STEPS must be a positive integer, got '%s'\n", argv[4]);
    return 2;
  }

  int rc = 0;
  kiln_instance_t* instance = NULL;
  kiln_module_t* module = NULL;
  kiln_context_t* context = NULL;
  kiln_context_t* restored = NULL;
  kiln_buffer_view_t* x = NULL;
  kiln_buffer_view_t* y = NULL;
  kiln_buffer_view_t* loss = NULL;
  kiln_buffer_view_t* probs = NULL;
  kiln_buffer_view_t* probs2 = NULL;
  kiln_buffer_view_t* loss2 = NULL;
  kiln_buffer_view_t* w = NULL;
  kiln_buffer_view_t* w2 = NULL;
  kiln_status_t status;

  kiln_instance_options_t options;
  kiln_instance_options_initialize(&options);
  status = kiln_instance_create(&options, &instance);
  if (!status) status = kiln_module_load_file(instance, module_path, &module);
  if (status) { rc = report("loading the module", status); goto cleanup; }

  kiln_function_t train_step, predict;
  status = kiln_module_lookup_function(module, "train_step", &train_step);
  if (!status) status = kiln_module_lookup_function(module, "predict", &predict);
  if (status) { rc = report("looking up train_step and predict", status); goto cleanup; }

  status = kiln_npy_read_file(argv[2], &x);
  if (!status) status = kiln_npy_read_file(argv[3], &y);
  if (status) { rc = report("reading the data set", status); goto cleanup; }
  if (kiln_buffer_view_rank(y) != 2 || kiln_buffer_view_dtype(y) != KILN_DTYPE_F32) {
    fprintf(stderr, "train: error: %s: expected one-hot labels (N x C f32)\n", argv[3]);
    rc = 1;
    goto cleanup;
  }
  const size_t n = (size_t)kiln_buffer_view_shape(y)[0];
  const size_t classes = (size_t)kiln_buffer_view_shape(y)[1];

  /* 1-2. Train. The context holds parameters and optimizer state; each call
   * updates them in place and returns the loss. */
  status = kiln_context_create(module, &context);
  if (status) { rc = report("creating a context", status); goto cleanup; }
  kiln_buffer_view_t* xy[2] = {x, y};
  for (long step = 0; step < steps; ++step) {
    status = call1(context, train_step, xy, 2, &loss);
    if (status) { rc = report("train_step", status); goto cleanup; }
    printf("step %ld loss %.9g\n", step, *(const float*)kiln_buffer_view_data(loss));
    kiln_buffer_view_release(loss);
    loss = NULL;
  }

  /* 3. Evaluate: predict gives class probabilities; accuracy is computed here. */
  status = call1(context, predict, &x, 1, &probs);
  if (status) { rc = report("predict", status); goto cleanup; }
  if (kiln_buffer_view_element_count(probs) != n * classes) {
    fprintf(stderr, "train: error: predict returned %zu values, expected %zu\n",
            kiln_buffer_view_element_count(probs), n * classes);
    rc = 1;
    goto cleanup;
  }
  const float* p = kiln_buffer_view_data(probs);
  const float* labels = kiln_buffer_view_data(y);
  size_t correct = 0;
  for (size_t i = 0; i < n; ++i) {
    correct += argmax(p + i * classes, classes) == argmax(labels + i * classes, classes);
  }
  printf("accuracy %.6f (%zu/%zu)\n", n ? (double)correct / (double)n : 0.0, correct, n);

  /* 4. Checkpoint every global by name. */
  rc = save_checkpoint(context, module, checkpoint);
  if (rc) goto cleanup;
  printf("checkpoint: %zu globals written to %s\n", kiln_module_global_count(module),
         checkpoint);

  /* 5. Restore into a fresh context (which starts from the module's initial
   * values) and compare. */
  size_t count = 0;
  status = kiln_context_create(module, &restored);
  if (status) { rc = report("creating a second context", status); goto cleanup; }
  rc = load_checkpoint(restored, module, checkpoint, &count);
  if (rc) goto cleanup;
  printf("restored: %zu globals into a fresh context\n", count);
  status = call1(restored, predict, &x, 1, &probs2);
  if (status) { rc = report("predict (restored)", status); goto cleanup; }
  int same = same_bytes(probs, probs2);
  printf("restored predictions identical: %s (%zu values)\n", same ? "yes" : "no",
         kiln_buffer_view_element_count(probs));
  if (!same) rc = 1;

  /* Training resumes from the restored state exactly where it stopped. */
  status = call1(context, train_step, xy, 2, &loss);
  if (!status) status = call1(restored, train_step, xy, 2, &loss2);
  if (status) { rc = report("train_step after restoring", status); goto cleanup; }
  kiln_value_info_t first;
  status = kiln_module_global_info(module, 0, &first);
  if (!status) status = kiln_context_get_global(context, first.name, &w);
  if (!status) status = kiln_context_get_global(restored, first.name, &w2);
  if (status) { rc = report("reading a global", status); goto cleanup; }
  same = same_bytes(loss, loss2) && same_bytes(w, w2);
  printf("resumed step identical: %s (loss %.9g)\n", same ? "yes" : "no",
         *(const float*)kiln_buffer_view_data(loss2));
  if (!same) rc = 1;

cleanup:
  kiln_buffer_view_release(w2);
  kiln_buffer_view_release(w);
  kiln_buffer_view_release(loss2);
  kiln_buffer_view_release(probs2);
  kiln_buffer_view_release(probs);
  kiln_buffer_view_release(loss);
  kiln_buffer_view_release(y);
  kiln_buffer_view_release(x);
  kiln_context_release(restored);
  kiln_context_release(context);
  kiln_module_release(module);
  kiln_instance_release(instance);
  return rc;
}
