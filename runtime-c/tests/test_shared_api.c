/* The shared library, used as an application would: only include/kiln/
 * runtime.h and libkiln_runtime.so. Every public function must link (the
 * list is generated from the header), and the basic calls work. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kiln/runtime.h"
#include "kiln_public_symbols.h" /* generated: KILN_SYMBOL(name) per function */

typedef void (*kiln_any_fn_t)(void);

static int failures = 0;
#define EXPECT(cond)                                                   \
  do {                                                                 \
    if (!(cond)) {                                                     \
      failures++;                                                      \
      fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                  \
  } while (0)

int main(void) {
#define KILN_SYMBOL(name) (kiln_any_fn_t)name,
  kiln_any_fn_t functions[] = {KILN_PUBLIC_SYMBOLS};
#undef KILN_SYMBOL
  size_t count = sizeof(functions) / sizeof(functions[0]);
  for (size_t i = 0; i < count; ++i) EXPECT(functions[i] != NULL);

  EXPECT(strcmp(kiln_runtime_version(), KILN_TEST_VERSION) == 0); /* pyproject.toml's */
  EXPECT(strcmp(kiln_status_code_name(KILN_DATA_LOSS), "DATA_LOSS") == 0);
  int64_t shape[2] = {2, 2};
  float data[4] = {1, 2, 3, 4};
  kiln_buffer_view_t* view = NULL;
  kiln_status_t s = kiln_buffer_view_create(KILN_DTYPE_F32, 2, shape, data, sizeof(data), &view);
  EXPECT(s == NULL && view && kiln_buffer_view_element_count(view) == 4);
  kiln_buffer_view_release(view);

  kiln_instance_options_t options;
  kiln_instance_options_initialize(&options);
  options.worker_count = 2;
  kiln_instance_t* instance = NULL;
  s = kiln_instance_create(&options, &instance);
  EXPECT(s == NULL && kiln_instance_worker_count(instance) == 2);
  kiln_module_t* module = NULL;
  s = kiln_module_load_file(instance, "/nonexistent/module.vmfb", &module);
  EXPECT(kiln_status_code(s) == KILN_NOT_FOUND && module == NULL);
  EXPECT(strstr(kiln_status_message(s), "/nonexistent/module.vmfb") != NULL);
  kiln_status_free(s);
  static const char garbage[64] = "not a module";
  s = kiln_module_load_memory(instance, garbage, sizeof(garbage), &module);
  EXPECT(kiln_status_code(s) == KILN_DATA_LOSS && module == NULL);
  kiln_status_free(s);
  kiln_instance_release(instance);

  if (failures) return 1;
  printf("%zu public functions linked from the shared library; checks passed\n", count);
  return 0;
}
