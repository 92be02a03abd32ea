/* Building statuses inside the runtime. */
#ifndef KILN_STATUS_INTERNAL_H_
#define KILN_STATUS_INTERNAL_H_

#include "kiln/runtime.h"

/* Returns a new status with a printf-formatted message; never NULL for a
 * code other than KILN_OK (falls back to a static out-of-memory status). */
kiln_status_t kiln_make_status(kiln_status_code_t code, const char* format, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefixes an existing status's message with "<context>: " and returns it. */
kiln_status_t kiln_status_annotate(kiln_status_t status, const char* format, ...)
    __attribute__((format(printf, 2, 3)));

#endif
