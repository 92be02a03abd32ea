/* debug.print (format 2.8): module kiln_vm_test_print (gen_vm_test_modules.py).
 * Its lines go to the context's print callback in program order, formatted
 * as numpy's str and Python's format() would; a nonzero return stops the
 * call; without a callback they go to stdout; a spec on an array is an error
 * naming the field. debug.callback calls the host callback with its number and
 * values before the next instruction, and fails without one. (Damaged templates are refused at load: test_vm's bad
 * modules.) */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "debug_print.h" /* kiln_debug_print_format, to bound a line without a module */
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

/* Two threads, each calling `show` on a context of its own with a sink of its
 * own: every line goes to its own context's sink, in order (the formatter
 * keeps no state of its own; ThreadSanitizer checks it in ctest-tsan). */
#define THREAD_CALLS 40

typedef struct {
  kiln_module_t* m;
  int64_t n;
  sink_t sink;
  int ok;
} worker_t;

/* collect and show without the CHECK macros (their counters are not atomic). */
static int collect_quiet(void* user, const char* text, size_t length) {
  sink_t* s = user;
  if (text[length] != '\0' || !length || text[length - 1] != '\n' ||
      s->len + length >= sizeof s->text)
    return 1;
  memcpy(s->text + s->len, text, length);
  s->len += length;
  s->text[s->len] = 0;
  s->lines++;
  return 0;
}

static kiln_status_t show_quiet(kiln_context_t* c, kiln_function_t f, int64_t n) {
  static const float x[6] = {1, 2, 3, 4.5f, -5, 6};
  static const int64_t shape[2] = {2, 3};
  kiln_buffer_view_t* args[2] = {NULL, NULL};
  kiln_buffer_view_t* result = NULL;
  kiln_status_t s = kiln_buffer_view_create(KILN_DTYPE_F32, 2, shape, x, sizeof x, &args[0]);
  if (!s) s = kiln_buffer_view_create(KILN_DTYPE_I64, 0, NULL, &n, sizeof n, &args[1]);
  if (!s) s = kiln_context_invoke(c, f, args, 2, &result, 1);
  kiln_buffer_view_release(result);
  kiln_buffer_view_release(args[0]);
  kiln_buffer_view_release(args[1]);
  return s;
}

static void* print_worker(void* arg) {
  worker_t* w = arg;
  kiln_context_t* c = NULL;
  kiln_function_t f;
  char want[256];
  int k;
  w->ok = 0;
  if (kiln_context_create(w->m, &c) || kiln_module_lookup_function(w->m, "show", &f)) return NULL;
  kiln_context_set_print_callback(c, collect_quiet, &w->sink);
  snprintf(want, sizeof want, "x = " ARRAY ", n = %+05lld {literal}\nn=%6.2f flag=True " ARRAY
           "|end\n", (long long)w->n, (double)w->n);
  w->ok = 1;
  for (k = 0; k < THREAD_CALLS && w->ok; ++k) {
    kiln_status_t s = show_quiet(c, f, w->n);
    w->ok = !s && w->sink.lines == 2 && strcmp(w->sink.text, want) == 0;
    kiln_status_free(s);
    w->sink.len = 0;
    w->sink.lines = 0;
  }
  kiln_context_release(c);
  return NULL;
}

/* A host callback may call into the runtime: here `show` again, on the same
 * context (its lines come out inside the outer call's, in order) and on
 * another one. The nested call runs to completion before the callback
 * returns; cancelling the outer call afterwards still works. */
typedef struct {
  kiln_context_t* same;
  kiln_context_t* other;
  kiln_function_t show;
  int calls;
  kiln_status_t nested[2];
} reenter_t;

static int reenter(void* user, uint32_t number, const kiln_buffer_view_t* const* values,
                   size_t count) {
  reenter_t* r = user;
  (void)number, (void)values, (void)count;
  r->nested[0] = show(r->same, r->show, 11, NULL);
  r->nested[1] = show(r->other, r->show, 12, NULL);
  r->calls++;
  kiln_context_cancel(r->same); /* the outer call: stops at its next instruction */
  return 0;
}

/* The formatter alone: an empty template (NULL data: an empty constant's) is
 * one '\n'; a line past its limit is refused naming it, both when many fields
 * add up (the walk stops at the first field past it) and when one array
 * cannot fit (refused before formatting: a (6,6,6,6) array shows all 1296
 * elements). */
static void line_limits(void) {
  static const int64_t wide[1] = {1000}, cube[4] = {6, 6, 6, 6};
  uint8_t template[300];
  kiln_buffer_view_t *v = NULL, *c = NULL;
  const kiln_buffer_view_t* values[1];
  char* text = NULL;
  size_t len = 0, i;
  CHECK_OK(kiln_debug_print_format(NULL, 0, NULL, 0, 16, &text, &len));
  CHECK(text && len == 1 && strcmp(text, "\n") == 0);
  free(text);
  CHECK_OK(kiln_buffer_view_create(KILN_DTYPE_U8, 1, wide, NULL, 0, &v));
  CHECK_OK(kiln_buffer_view_create(KILN_DTYPE_BOOL, 4, cube, NULL, 0, &c));
  for (i = 0; i + 3 <= sizeof template; i += 3) memcpy(template + i, "{0}", 3);
  values[0] = v;
  CHECK_ERROR(kiln_debug_print_format(template, sizeof template, values, 1, 8192, &text, &len),
              KILN_OUT_OF_MEMORY, "debug.print: its line would be longer than the 8192-byte limit");
  CHECK(text == NULL && len == 0);
  CHECK_OK(kiln_debug_print_format(template, 6, values, 1, 8192, &text, &len)); /* two fit */
  CHECK(len > 4000 && len < 8192 && text[len - 1] == '\n');
  free(text);
  values[0] = c;
  CHECK_ERROR(kiln_debug_print_format(template, 3, values, 1, 2000, &text, &len),
              KILN_OUT_OF_MEMORY, "the 2000-byte limit of one printed line");
  CHECK_OK(kiln_debug_print_format(template, 3, values, 1, 0, &text, &len)); /* no limit */
  CHECK(len > 1296 * 5 && strstr(text, "...") == NULL);
  free(text);
  kiln_buffer_view_release(v);
  kiln_buffer_view_release(c);
}

int main(void) {
  kiln_instance_t* inst = NULL;
  kiln_module_t* m = NULL;
  kiln_context_t* c = NULL;
  kiln_function_t f, bad;
  sink_t sink;
  int64_t got = 0;
  line_limits();
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

  /* Complex values print as numpy prints them (format 2.9; they once overran
   * get_int: fuzz_invoke); a spec does not format them. */
  {
    kiln_function_t cf;
    memset(&sink, 0, sizeof sink);
    CHECK_OK(kiln_module_lookup_function(m, "complex_array", &cf));
    CHECK_OK(kiln_context_invoke(c, cf, NULL, 0, NULL, 0));
    CHECK(strcmp(sink.text, "[1.+2.j]\n") == 0);
    memset(&sink, 0, sizeof sink);
    CHECK_OK(kiln_module_lookup_function(m, "options_repr", &cf));
    CHECK_OK(kiln_context_invoke(c, cf, NULL, 0, NULL, 0));
    CHECK(strcmp(sink.text, "array([+1.000+2.000j]) [+1.000+2.000j] (1+2j) array(+1.000+2.000j,\n"
                            "      dtype=complex64)\n") == 0);
    CHECK_OK(kiln_module_lookup_function(m, "complex_spec", &cf));
    CHECK_ERROR(kiln_context_invoke(c, cf, NULL, 0, NULL, 0), KILN_INVALID_ARGUMENT,
                "debug.print: field {0}: its value is c64, and a format spec does not format "
                "complex values");
  }

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

  /* Two threads, two contexts, two sinks. */
  {
    pthread_t threads[2];
    worker_t workers[2];
    int t;
    memset(workers, 0, sizeof workers);
    for (t = 0; t < 2; ++t) {
      workers[t].m = m;
      workers[t].n = t ? -5 : 9;
      CHECK(pthread_create(&threads[t], NULL, print_worker, &workers[t]) == 0);
    }
    for (t = 0; t < 2; ++t) CHECK(pthread_join(threads[t], NULL) == 0);
    CHECK(workers[0].ok && workers[1].ok);
  }

  /* A host callback calling into the runtime, the same context included. */
  {
    kiln_function_t call_host;
    kiln_context_t* other = NULL;
    sink_t other_sink;
    reenter_t r;
    memset(&r, 0, sizeof r);
    memset(&sink, 0, sizeof sink);
    memset(&other_sink, 0, sizeof other_sink);
    CHECK_OK(kiln_context_create(m, &other));
    kiln_context_set_print_callback(c, collect, &sink);
    kiln_context_set_print_callback(other, collect, &other_sink);
    r.same = c;
    r.other = other;
    r.show = f;
    kiln_context_set_host_callback(c, reenter, &r);
    CHECK_OK(kiln_module_lookup_function(m, "call_host", &call_host));
    CHECK_ERROR(show(c, call_host, 4, NULL), KILN_CANCELLED, "call cancelled before a debug.print");
    CHECK(r.calls == 1 && r.nested[0] == NULL && r.nested[1] == NULL);
    CHECK(strcmp(sink.text, "x = " ARRAY ", n = +0011 {literal}\nn= 11.00 flag=True " ARRAY
                            "|end\n") == 0); /* the outer print never ran: cancelled */
    CHECK(other_sink.lines == 2);
    kiln_context_set_host_callback(c, NULL, NULL);
    kiln_context_release(other);
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
  TEST_MAIN_END(); /* (was `return 0`: a failed CHECK did not fail the test) */
}
