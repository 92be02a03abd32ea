/* debug.print (format 2.8): module kiln_vm_test_print (gen_vm_test_modules.py).
 * Its lines go to the context's print callback in program order, formatted
 * as numpy's str and Python's format() would; a nonzero return stops the
 * call; without a callback they go to stdout; a spec on an array is an error
 * naming the field. debug.callback calls the host callback with its number and
 * values before the next instruction, and fails without one. (Damaged templates are refused at load: test_vm's bad
 * modules.) */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"
#include "vm_test_modules.h"

typedef struct {
  char text[1024];
  size_t len;
  int lines;
  int answer; /* what the callback returns */
} sink_t;

static int collect(void* user, const char* text, size_t length) {
  sink_t* s = user;
  CHECK(text[length] == '\0' && length > 0 && text[length - 1] == '\n');
  CHECK(s->len + length < sizeof s->text);
  memcpy(s->text + s->len, text, length);
  s->len += length;
  s->text[s->len] = 0;
  s->lines++;
  return s->answer;
}

static kiln_status_t show(kiln_context_t* c, kiln_function_t f, int64_t n, int64_t* out) {
  static const float x[6] = {1, 2, 3, 4.5f, -5, 6};
  static const int64_t shape[2] = {2, 3};
  kiln_buffer_view_t* args[2] = {NULL, NULL};
  kiln_buffer_view_t* result = NULL;
  kiln_status_t s;
  CHECK_OK(kiln_buffer_view_create(KILN_DTYPE_F32, 2, shape, x, sizeof x, &args[0]));
  CHECK_OK(kiln_buffer_view_create(KILN_DTYPE_I64, 0, NULL, &n, sizeof n, &args[1]));
  s = kiln_context_invoke(c, f, args, 2, &result, 1);
  if (result && out) memcpy(out, kiln_buffer_view_data(result), sizeof *out);
  kiln_buffer_view_release(result);
  kiln_buffer_view_release(args[0]);
  kiln_buffer_view_release(args[1]);
  return s;
}

typedef struct {
  sink_t* sink; /* to check the order against the prints */
  uint32_t number;
  size_t count;
  float x5;
  int64_t n;
  int lines_before;
  int answer;
} host_t;

static int on_host(void* user, uint32_t number, const kiln_buffer_view_t* const* values, size_t count) {
  host_t* h = user;
  h->number = number;
  h->count = count;
  CHECK(count == 2 && kiln_buffer_view_dtype(values[0]) == KILN_DTYPE_F32 &&
        kiln_buffer_view_rank(values[0]) == 2 && kiln_buffer_view_dtype(values[1]) == KILN_DTYPE_I64);
  memcpy(&h->x5, (const float*)kiln_buffer_view_data(values[0]) + 5, sizeof h->x5);
  memcpy(&h->n, kiln_buffer_view_data(values[1]), sizeof h->n);
  h->lines_before = h->sink->lines;
  return h->answer;
}

#define ARRAY "[[ 1.   2.   3. ]\n [ 4.5 -5.   6. ]]"

int main(void) {
  kiln_instance_t* inst = NULL;
  kiln_module_t* m = NULL;
  kiln_context_t* c = NULL;
  kiln_function_t f, bad;
  sink_t sink;
  int64_t got = 0;
  CHECK_OK(kiln_instance_create(NULL, &inst));
  CHECK_OK(kiln_module_load_memory(inst, kiln_vm_test_print, sizeof kiln_vm_test_print, &m));
  CHECK_OK(kiln_context_create(m, &c));
  CHECK_OK(kiln_module_lookup_function(m, "show", &f));
  CHECK_OK(kiln_module_lookup_function(m, "spec_of_array", &bad));

  /* Two lines per call, in program order, every call. */
  memset(&sink, 0, sizeof sink);
  kiln_context_set_print_callback(c, collect, &sink);
  CHECK_OK(show(c, f, 7, &got));
  CHECK(got == 7);
  CHECK_OK(show(c, f, -3, NULL));
  CHECK(sink.lines == 4);
  CHECK(strcmp(sink.text,
               "x = " ARRAY ", n = +0007 {literal}\n"
               "n=  7.00 flag=True " ARRAY "|end\n"
               "x = " ARRAY ", n = -0003 {literal}\n"
               "n= -3.00 flag=True " ARRAY "|end\n") == 0);

  /* A nonzero answer stops the call before its next instruction. */
  memset(&sink, 0, sizeof sink);
  sink.answer = 3;
  CHECK_ERROR(show(c, f, 1, NULL), KILN_CANCELLED, "the print callback stopped the call",
              "(it returned 3)");
  CHECK(sink.lines == 1);

  /* A format spec applies to 0-d values only. */
  sink.answer = 0;
  CHECK_ERROR(kiln_context_invoke(c, bad, NULL, 0, NULL, 0), KILN_INVALID_ARGUMENT,
              "debug.print: field {0} has a format spec but its value has rank 1");

  /* debug.callback: none set fails the call; set, it runs before the print after it. */
  {
    kiln_function_t call_host;
    host_t host;
    memset(&host, 0, sizeof host);
    memset(&sink, 0, sizeof sink);
    host.sink = &sink;
    CHECK_OK(kiln_module_lookup_function(m, "call_host", &call_host));
    CHECK_ERROR(show(c, call_host, 4, NULL), KILN_FAILED_PRECONDITION,
                "debug.callback 7: the module calls back into its host, but no host callback is set");
    kiln_context_set_host_callback(c, on_host, &host);
    CHECK_OK(show(c, call_host, 4, NULL));
    CHECK(host.number == 7 && host.count == 2 && host.x5 == 6.0f && host.n == 4);
    CHECK(host.lines_before == 0 && sink.lines == 1);
    host.answer = 5;
    CHECK_ERROR(show(c, call_host, 4, NULL), KILN_CANCELLED,
                "the host callback stopped the call at debug.callback 7 (it returned 5)");
    CHECK(sink.lines == 1); /* stopped before the print */
    kiln_context_set_host_callback(c, NULL, NULL);
  }

  /* No callback: stdout, flushed at once. */
  {
    char path[] = "/tmp/kiln_test_debug_printXXXXXX", text[512];
    int fd = mkstemp(path), saved;
    ssize_t n;
    CHECK(fd >= 0);
    fflush(stdout);
    saved = dup(1);
    CHECK(saved >= 0 && dup2(fd, 1) == 1);
    kiln_context_set_print_callback(c, NULL, NULL);
    CHECK_OK(show(c, f, 2, NULL));
    fflush(stdout);
    CHECK(dup2(saved, 1) == 1);
    close(saved);
    n = pread(fd, text, sizeof text - 1, 0);
    CHECK(n > 0);
    text[n] = 0;
    CHECK(strcmp(text, "x = " ARRAY ", n = +0002 {literal}\nn=  2.00 flag=True " ARRAY "|end\n") == 0);
    close(fd);
    unlink(path);
  }

  kiln_context_release(c);
  kiln_module_release(m);
  kiln_instance_release(inst);
  printf("test_debug_print: ok\n");
  return 0;
}
