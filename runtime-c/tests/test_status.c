/* Statuses: codes, messages, annotation, NULL as success. */
#include "status_internal.h"
#include "test_util.h"

int main(void) {
  CHECK(kiln_status_code(NULL) == KILN_OK);
  CHECK(strcmp(kiln_status_message(NULL), "OK") == 0);
  kiln_status_free(NULL);
  CHECK(kiln_make_status(KILN_OK, "ignored") == NULL);

  kiln_status_t s = kiln_make_status(KILN_INVALID_ARGUMENT,
                                     "argument %d '%s': expected %s, got %s", 0,
                                     "x", "2x3xf32", "3x2xf32");
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT);
  CHECK(strcmp(kiln_status_message(s),
               "argument 0 'x': expected 2x3xf32, got 3x2xf32") == 0);
  s = kiln_status_annotate(s, "function '%s'", "predict");
  CHECK(strcmp(kiln_status_message(s),
               "function 'predict': argument 0 'x': expected 2x3xf32, got 3x2xf32") == 0);
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT);
  kiln_status_free(s);
  CHECK(kiln_status_annotate(NULL, "context") == NULL);

  /* A long message is not truncated. */
  char big[5000];
  memset(big, 'a', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  s = kiln_make_status(KILN_INTERNAL, "%s!", big);
  CHECK(strlen(kiln_status_message(s)) == sizeof(big));
  kiln_status_free(s);

  const struct { kiln_status_code_t code; const char* name; } names[] = {
      {KILN_OK, "OK"},
      {KILN_INVALID_ARGUMENT, "INVALID_ARGUMENT"},
      {KILN_NOT_FOUND, "NOT_FOUND"},
      {KILN_OUT_OF_MEMORY, "OUT_OF_MEMORY"},
      {KILN_DATA_LOSS, "DATA_LOSS"},
      {KILN_UNIMPLEMENTED, "UNIMPLEMENTED"},
      {KILN_FAILED_PRECONDITION, "FAILED_PRECONDITION"},
      {KILN_INTERNAL, "INTERNAL"},
      {KILN_IO, "IO"},
      {KILN_CANCELLED, "CANCELLED"},
      {KILN_DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED"},
  };
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
    CHECK(strcmp(kiln_status_code_name(names[i].code), names[i].name) == 0);
    s = kiln_make_status(names[i].code, "x");
    CHECK(kiln_status_code(s) == names[i].code);
    kiln_status_free(s);
  }
  CHECK(strcmp(kiln_status_code_name((kiln_status_code_t)99), "UNKNOWN") == 0);
  CHECK(strcmp(kiln_status_code_name((kiln_status_code_t)-1), "UNKNOWN") == 0);
  TEST_MAIN_END();
}
