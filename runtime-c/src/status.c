/* Statuses: a code and a heap-allocated message. NULL means success. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generated/constant_tables.h"
#include "status_internal.h"

struct kiln_status {
  kiln_status_code_t code;
  int is_static; /* the fallback below: never freed */
  char* message;
};

/* Returned when building a status fails for lack of memory. */
static char kiln_oom_message[] =
    "out of memory while reporting an error (original message lost)";
static struct kiln_status kiln_oom_status = {KILN_OUT_OF_MEMORY, 1,
                                             kiln_oom_message};

static char* kiln_vformat(const char* format, va_list args) {
  va_list copy;
  va_copy(copy, args);
  int n = vsnprintf(NULL, 0, format, copy);
  va_end(copy);
  if (n < 0) return NULL;
  char* text = malloc((size_t)n + 1);
  if (!text) return NULL;
  vsnprintf(text, (size_t)n + 1, format, args);
  return text;
}

kiln_status_t kiln_make_status(kiln_status_code_t code, const char* format, ...) {
  if (code == KILN_OK) return NULL;
  struct kiln_status* status = malloc(sizeof(*status));
  if (!status) return &kiln_oom_status;
  va_list args;
  va_start(args, format);
  status->message = kiln_vformat(format ? format : "", args);
  va_end(args);
  if (!status->message) {
    free(status);
    return &kiln_oom_status;
  }
  status->code = code;
  status->is_static = 0;
  return status;
}

kiln_status_t kiln_status_annotate(kiln_status_t status, const char* format, ...) {
  if (!status || status->is_static) return status;
  va_list args;
  va_start(args, format);
  char* prefix = kiln_vformat(format ? format : "", args);
  va_end(args);
  if (!prefix) return status; /* keep the original message */
  size_t prefix_len = strlen(prefix);
  size_t message_len = strlen(status->message);
  char* joined = malloc(prefix_len + 2 + message_len + 1);
  if (joined) {
    memcpy(joined, prefix, prefix_len);
    memcpy(joined + prefix_len, ": ", 2);
    memcpy(joined + prefix_len + 2, status->message, message_len + 1);
    free(status->message);
    status->message = joined;
  }
  free(prefix);
  return status;
}

kiln_status_code_t kiln_status_code(kiln_status_t status) {
  return status ? status->code : KILN_OK;
}

const char* kiln_status_message(kiln_status_t status) {
  return status ? status->message : "OK";
}

void kiln_status_free(kiln_status_t status) {
  if (!status || status->is_static) return;
  free(status->message);
  free(status);
}

const char* kiln_status_code_name(kiln_status_code_t code) {
  static const char* const names[KILN_STATUS_CODE_COUNT] = KILN_STATUS_CODE_NAMES_INIT;
  if ((int)code < 0 || (int)code >= KILN_STATUS_CODE_COUNT) return "UNKNOWN";
  return names[code];
}
