/* Minimal test helpers: CHECK(...) records a failure and continues;
 * CHECK_OK(status) fails on a non-NULL status (printing its message) and
 * frees it; TEST_MAIN_END returns non-zero when anything failed. */
#ifndef KILN_TEST_UTIL_H_
#define KILN_TEST_UTIL_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/runtime.h"

static int kiln_test_failures = 0;
static int kiln_test_checks = 0;

#define CHECK(cond)                                                        \
  do {                                                                     \
    kiln_test_checks++;                                                    \
    if (!(cond)) {                                                         \
      kiln_test_failures++;                                                \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                      \
  } while (0)

#define CHECK_OK(expr)                                                     \
  do {                                                                     \
    kiln_test_checks++;                                                    \
    kiln_status_t check_status_ = (expr);                                  \
    if (check_status_) {                                                   \
      kiln_test_failures++;                                                \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, \
              kiln_status_message(check_status_));                         \
      kiln_status_free(check_status_);                                     \
    }                                                                      \
  } while (0)

/* Expects a status with `code` whose message contains every string of the
 * NULL-terminated list; frees it. */
static inline void kiln_check_error(const char* file, int line, const char* expr,
                                    kiln_status_t status, kiln_status_code_t code,
                                    const char* const* needles) {
  kiln_test_checks++;
  if (!status) {
    kiln_test_failures++;
    fprintf(stderr, "%s:%d: %s: expected error %s, got OK\n", file, line, expr,
            kiln_status_code_name(code));
    return;
  }
  const char* message = kiln_status_message(status);
  if (kiln_status_code(status) != code) {
    kiln_test_failures++;
    fprintf(stderr, "%s:%d: %s: expected code %s, got %s (%s)\n", file, line,
            expr, kiln_status_code_name(code),
            kiln_status_code_name(kiln_status_code(status)), message);
  }
  for (const char* const* n = needles; *n; ++n) {
    if (!strstr(message, *n)) {
      kiln_test_failures++;
      fprintf(stderr, "%s:%d: %s: message '%s' lacks '%s'\n", file, line, expr,
              message, *n);
    }
  }
  kiln_status_free(status);
}

#define CHECK_ERROR(expr, code, ...)                                        \
  do {                                                                     \
    const char* const needles_[] = {__VA_ARGS__, NULL};                    \
    kiln_check_error(__FILE__, __LINE__, #expr, (expr), (code), needles_); \
  } while (0)

#define TEST_MAIN_END()                                                    \
  do {                                                                     \
    if (kiln_test_failures) {                                              \
      fprintf(stderr, "%d of %d checks failed\n", kiln_test_failures,      \
              kiln_test_checks);                                           \
      return 1;                                                            \
    }                                                                      \
    printf("%d checks passed\n", kiln_test_checks);                        \
    return 0;                                                              \
  } while (0)

#endif
