/* kiln runtime: load a .vmfb module and run its functions with no Python.
 *
 * Objects
 *   instance  kernels' thread pool and settings; shared by modules.
 *   module    a verified, immutable .vmfb; shareable between contexts and threads.
 *   context   a module's globals (mutable state). Calls on different contexts
 *             may run concurrently; calls on one context must be serialized
 *             by the caller.
 *   function  an exported function of a module (a small value type).
 *   buffer view  a dense array: dtype, shape, row-major data; refcounted.
 *
 * Errors: every fallible call returns a kiln_status_t, NULL meaning success.
 * A non-NULL status carries a code and a message naming what was wrong; the
 * caller owns it and frees it with kiln_status_free. No call aborts on bad
 * input and no error path leaks.
 *
 * Trust: a module is verified when it is loaded (every offset, length, index,
 * register and branch target is checked), so a damaged or truncated file
 * gives an error rather than undefined behaviour. Kernels are native code:
 * a module is trusted code in the way a shared library is, and verification
 * protects against damage, not against malice. What was verified cannot
 * change afterwards (a file is copied unless it cannot change, see
 * kiln_module_load_file); no call returns or stores memory that nothing
 * wrote; globals never alias the caller's buffers. docs/vm.md has the rules.
 */
#ifndef KILN_RUNTIME_H_
#define KILN_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

/* Status codes (kiln_status_code_t), dtypes (kiln_dtype_t, KILN_DTYPE_COUNT),
 * limits (KILN_MAX_RANK, KILN_MAX_WORKERS, KILN_MAX_WORKGROUPS,
 * KILN_MAX_REGISTERS) and the module format version
 * (KILN_MODULE_VERSION_MAJOR/MINOR), generated from
 * schemas/runtime_constants.toml as the Python side's are. */
#include "kiln/constants.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version ----------------------------------------------------------- */

/* The runtime's version, "MAJOR.MINOR.PATCH" (the kiln project's version; the
 * shared library's SOVERSION is MAJOR, or 0.MINOR before 1.0). The module
 * format versions it loads are KILN_MODULE_VERSION_MAJOR/MINOR. A static
 * string. */
const char* kiln_runtime_version(void);

/* ---- status (codes: kiln_status_code_t, kiln/constants.h) -------------- */

typedef struct kiln_status* kiln_status_t;

kiln_status_code_t kiln_status_code(kiln_status_t status);
/* The message; "OK" for NULL. Valid until the status is freed. */
const char* kiln_status_message(kiln_status_t status);
void kiln_status_free(kiln_status_t status);
const char* kiln_status_code_name(kiln_status_code_t code);

/* ---- dtypes (kiln_dtype_t, KILN_MAX_RANK: kiln/constants.h) ------------ */

/* Bytes per element; 0 for an unknown dtype. */
size_t kiln_dtype_size(kiln_dtype_t dtype);
/* The alignment kiln_buffer_view_wrap needs of data of this dtype: the
 * element's size, at most 8; 0 for an unknown dtype. */
size_t kiln_dtype_alignment(kiln_dtype_t dtype);
/* Short name as used on the command line: "f32", "i64", "bool", ... */
const char* kiln_dtype_name(kiln_dtype_t dtype);
/* Parses a short name; returns 0 on success. */
int kiln_dtype_from_name(const char* name, kiln_dtype_t* out);

/* ---- buffer views ------------------------------------------------------ */

typedef struct kiln_buffer_view kiln_buffer_view_t;

/* Allocates a view of the given type; copies `data` (byte_size bytes) in when
 * non-NULL, else zero-fills. */
kiln_status_t kiln_buffer_view_create(kiln_dtype_t dtype, size_t rank,
                                      const int64_t* shape, const void* data,
                                      size_t data_size,
                                      kiln_buffer_view_t** out);
/* Wraps the caller's memory in a view without copying it (zero-copy
 * arguments). `data` must be aligned to its elements (kiln_dtype_alignment)
 * and hold exactly byte_size bytes of the given type in row-major order.
 * A module whose kernels need only element alignment (marked
 * element_aligned_bindings: kiln's compiler from module format 2.1 on) reads
 * it in place; for any other module kiln_context_invoke passes a copy
 * aligned to KILN_BUFFER_ALIGNMENT in place of an argument that is not. The runtime
 * never writes through such a view, and a global stored from it stores a
 * copy; the caller keeps the memory valid and unchanged until the view's last
 * reference goes, when `release(release_context)` runs (release may be NULL).
 * A call's results may share the memory of its arguments (an identity
 * function returns its argument's view). */
kiln_status_t kiln_buffer_view_wrap(kiln_dtype_t dtype, size_t rank,
                                    const int64_t* shape, void* data,
                                    size_t byte_size, void (*release)(void*),
                                    void* release_context,
                                    kiln_buffer_view_t** out);
void kiln_buffer_view_retain(kiln_buffer_view_t* view);
void kiln_buffer_view_release(kiln_buffer_view_t* view);
kiln_dtype_t kiln_buffer_view_dtype(const kiln_buffer_view_t* view);
size_t kiln_buffer_view_rank(const kiln_buffer_view_t* view);
const int64_t* kiln_buffer_view_shape(const kiln_buffer_view_t* view);
size_t kiln_buffer_view_element_count(const kiln_buffer_view_t* view);
size_t kiln_buffer_view_byte_size(const kiln_buffer_view_t* view);
/* Row-major (C order) element data. Views returned by the runtime are
 * read-only by contract: the runtime may share them between calls. */
const void* kiln_buffer_view_data(const kiln_buffer_view_t* view);
/* Writable data; only for views the caller created itself. */
void* kiln_buffer_view_mutable_data(kiln_buffer_view_t* view);
/* Nonzero when the caller's reference to `view` is its only one (no global,
 * other view, call or other holder has it) and its memory is the runtime's
 * own writable allocation (kiln_buffer_view_mutable_data is not NULL): a
 * result of an earlier call that nothing else holds any more. Its holder may
 * then write its memory, or pass it to kiln_context_invoke_host as a result
 * destination, as the Python binding does to reuse a released result's memory
 * for the next call's result (no fresh pages to fault in). 0 for a view the
 * caller retained again, a global's value, a constant, caller memory wrapped
 * by kiln_buffer_view_wrap, or a row of another view. */
int kiln_buffer_view_is_exclusive(kiln_buffer_view_t* view);

/* ---- instance ---------------------------------------------------------- */

typedef struct kiln_instance kiln_instance_t;

typedef struct kiln_instance_options {
  /* Worker threads for dispatches; 0 means one per online core. The calling
   * thread also runs workgroups, so 1 means fully single-threaded. At most
   * KILN_MAX_WORKERS. */
  uint32_t worker_count;
  /* Nonzero: each module loaded into the instance appends its kernels'
   * addresses, sizes and names to /tmp/perf-<pid>.map, perf's map of
   * JIT-compiled code, so `perf report` shows "kiln:<module>:<kernel>" instead
   * of an address (a failure to write it fails the load). 0 by default. */
  int perf_map;
  /* Nonzero: each module loaded into the instance registers its kernels with
   * GDB's JIT interface (an in-memory ELF file per kernel image naming its
   * kernels), so gdb shows, breaks on and disassembles "kiln_softmax_3"
   * instead of an address; unregistered when the module is freed. Also on
   * when the environment has KILN_GDB_JIT=1. 0 by default. */
  int gdb_jit;
} kiln_instance_options_t;

void kiln_instance_options_initialize(kiln_instance_options_t* options);
kiln_status_t kiln_instance_create(const kiln_instance_options_t* options,
                                   kiln_instance_t** out);
void kiln_instance_retain(kiln_instance_t* instance);
void kiln_instance_release(kiln_instance_t* instance);
uint32_t kiln_instance_worker_count(const kiln_instance_t* instance);

/* ---- module ------------------------------------------------------------ */

typedef struct kiln_module kiln_module_t;

/* Reads the file into memory the module owns and verifies it, so that later
 * changes to the file (rewritten in place, truncated) do not reach the
 * module. The file is mapped instead, with no copy, only when its bytes
 * cannot change: a memfd sealed with F_SEAL_WRITE and F_SEAL_SHRINK, a file
 * with the immutable attribute, or one on a squashfs/erofs image. */
kiln_status_t kiln_module_load_file(kiln_instance_t* instance, const char* path,
                                    kiln_module_t** out);
/* Copies `size` bytes from `data` and verifies them. */
kiln_status_t kiln_module_load_memory(kiln_instance_t* instance,
                                      const void* data, size_t size,
                                      kiln_module_t** out);
void kiln_module_retain(kiln_module_t* module);
void kiln_module_release(kiln_module_t* module);
const char* kiln_module_name(const kiln_module_t* module);
/* The loader refuses a module of another major format version than
 * KILN_MODULE_VERSION_MAJOR, or one asking for more than KILN_MAX_WORKGROUPS
 * workgroups or KILN_MAX_REGISTERS registers (kiln/constants.h). */

/* Static description of an argument, result or global. */
typedef struct kiln_value_info {
  const char* name;
  kiln_dtype_t dtype;
  size_t rank;
  const int64_t* shape;
  int is_mutable; /* globals only */
} kiln_value_info_t;

typedef struct kiln_function {
  const kiln_module_t* module;
  uint32_t ordinal; /* index among all of the module's functions */
} kiln_function_t;

/* Exported functions, in module order. */
size_t kiln_module_function_count(const kiln_module_t* module);
kiln_status_t kiln_module_function_at(const kiln_module_t* module, size_t index,
                                      kiln_function_t* out);
kiln_status_t kiln_module_lookup_function(const kiln_module_t* module,
                                          const char* name, kiln_function_t* out);
const char* kiln_function_name(kiln_function_t function);
size_t kiln_function_arg_count(kiln_function_t function);
size_t kiln_function_result_count(kiln_function_t function);
kiln_status_t kiln_function_arg_info(kiln_function_t function, size_t index,
                                     kiln_value_info_t* out);
kiln_status_t kiln_function_result_info(kiln_function_t function, size_t index,
                                        kiln_value_info_t* out);
/* Tree structure of the arguments / results, as the exporter wrote it (JSON). */
const char* kiln_function_arg_tree(kiln_function_t function);
const char* kiln_function_result_tree(kiln_function_t function);
/* Bytes of transient memory a call of the function uses beyond its results:
 * the arena its intermediate buffers were planned into at export (format 2.2;
 * 0 for older modules, whose intermediates are allocated one by one). The
 * context allocates it on the function's first call and reuses it for every
 * later one, so a steady-state call allocates only its results. */
uint64_t kiln_function_transient_size(kiln_function_t function);

/* Where the module came from (format 2.3; none before): key/value text
 * entries such as "producer" ("kiln 0.1.0"), "python", "llvm", "llvmlite",
 * "target", "export" and "function.NAME.ir_sha256", valid while the module
 * lives. kiln_module_provenance returns the value of `key`, or NULL. */
size_t kiln_module_provenance_count(const kiln_module_t* module);
kiln_status_t kiln_module_provenance_at(const kiln_module_t* module, size_t index,
                                        const char** key, const char** value);
const char* kiln_module_provenance(const kiln_module_t* module, const char* key);

/* 1 when this host's CPU has the feature `name` (LLVM's name, as kernel images
 * record them: "avx2", "avx512f", "sve"), 0 when it lacks it, -1 when this
 * runtime cannot check the name on this architecture (a kernel image that
 * needs such a feature is refused). The names and their detection come from
 * schemas/cpu_features.toml. Features marked gates_load = false there (they
 * add no instruction kiln's kernels use: aarch64 ssbs, dit, x86 xsave, sgx,
 * ...) are recorded by images but not required when loading them. The
 * environment variable KILN_HIDE_CPU_FEATURES=a,b (a testing aid) makes the
 * runtime answer 0 for these names. */
int kiln_host_cpu_feature(const char* name);

/* Kernel variants (format 2.4): a module may carry several builds of a kernel
 * image for different CPUs (x86-64-v2, v3 and v4; aarch64 NEON and SVE).
 * Loading takes, per image, the first build (best first) whose target and CPU
 * features this host supports. The environment variable KILN_CPU_VARIANT=NAME
 * forces the build named so (loading fails, UNIMPLEMENTED, when an image has
 * no such build or the host cannot run it): for tests of the other builds.
 * kiln_module_kernel_variant: the variant name of the build loaded for kernel
 * image `index` ("" when it names none, as before 2.4), NULL when `index` is
 * not below kiln_module_kernel_image_count. */
size_t kiln_module_kernel_image_count(const kiln_module_t* module);
const char* kiln_module_kernel_variant(const kiln_module_t* module, size_t index);

size_t kiln_module_global_count(const kiln_module_t* module);
kiln_status_t kiln_module_global_info(const kiln_module_t* module, size_t index,
                                      kiln_value_info_t* out);

/* ---- context ----------------------------------------------------------- */

typedef struct kiln_context kiln_context_t;

/* Creates a context whose globals hold the module's initial values. */
kiln_status_t kiln_context_create(kiln_module_t* module, kiln_context_t** out);
void kiln_context_release(kiln_context_t* context);

/* Calls `function` with `arg_count` arguments. On success writes
 * kiln_function_result_count(function) new references into `results`
 * (result_capacity must be at least that); the caller releases them.
 * Arguments are checked against the function's signature: a wrong count,
 * dtype or shape is an INVALID_ARGUMENT naming the function and argument.
 * Arguments are read in place, except that a module whose kernels need
 * 64-byte aligned bindings (format before 2.1) gets an aligned copy of an
 * argument whose data is not (see kiln_buffer_view_wrap). */
kiln_status_t kiln_context_invoke(kiln_context_t* context,
                                  kiln_function_t function,
                                  kiln_buffer_view_t* const* args,
                                  size_t arg_count,
                                  kiln_buffer_view_t** results,
                                  size_t result_capacity);

/* Host memory for kiln_context_invoke_host: `byte_size` bytes at `data`,
 * row-major data of the type the function declares for that argument or
 * result. */
typedef struct kiln_host_buffer {
  void* data;
  size_t byte_size;
  /* Arguments only. NULL: `data` is the caller's memory, read in place when
   * aligned to its elements (else copied) and kept valid and unchanged by the
   * caller until the call returns. Otherwise a view whose memory holds `data`
   * (a result of an earlier call going back in), which the call keeps alive
   * while it uses `data`. */
  kiln_buffer_view_t* owner;
} kiln_host_buffer_t;

/* kiln_context_invoke for a caller whose values are plain memory of the
 * function's declared types (a prepared call: dtypes and shapes come from the
 * signature, so one call does what a view per argument and per result would).
 * `args[i].byte_size` must be argument i's declared size: a wrong count or
 * size is an INVALID_ARGUMENT naming the function and argument. For each
 * result i (result_count must be kiln_function_result_count): when
 * `results[i].data` is non-NULL the result is copied there
 * (`results[i].byte_size` must be its declared size) and `result_views[i]`
 * is set to NULL; otherwise `result_views[i]` receives a new reference to the
 * result's view, which the caller releases. A result view never shares the
 * memory of an argument whose owner is NULL: such a result is copied into a
 * view of its own. `results` may be NULL when every result comes back as a
 * view. On failure every `result_views[i]` is NULL. */
kiln_status_t kiln_context_invoke_host(kiln_context_t* context,
                                       kiln_function_t function,
                                       const kiln_host_buffer_t* args,
                                       size_t arg_count,
                                       const kiln_host_buffer_t* results,
                                       kiln_buffer_view_t** result_views,
                                       size_t result_count);

/* Reads a global's current value by name (a new reference). */
kiln_status_t kiln_context_get_global(kiln_context_t* context, const char* name,
                                      kiln_buffer_view_t** out);
/* Replaces a global's value by name (copied); checks dtype and shape. Works
 * for immutable globals too, so that a checkpoint can be restored. */
kiln_status_t kiln_context_set_global(kiln_context_t* context, const char* name,
                                      const kiln_buffer_view_t* value);

/* ---- tracing ------------------------------------------------------------- */

/* A record of what contexts did: one event per call (with its duration), per
 * kernel dispatch (duration, workgroups, bytes bound), per buffer allocated and
 * per global store, named by the module's function, kernel and global names.
 * Reference counted; thread-safe (contexts on several threads may share one).
 * Tracing is off unless a context has a trace; off, it costs one pointer test
 * per event. */
typedef struct kiln_trace kiln_trace_t;
kiln_status_t kiln_trace_create(kiln_trace_t** out);
void kiln_trace_retain(kiln_trace_t* trace);
void kiln_trace_release(kiln_trace_t* trace);
/* Records this context's later calls into `trace` (retained), or stops
 * recording with NULL. Call it between calls, not during one. */
void kiln_context_set_trace(kiln_context_t* context, kiln_trace_t* trace);
size_t kiln_trace_event_count(const kiln_trace_t* trace);
/* Events lost because memory ran out while recording them. */
uint64_t kiln_trace_dropped_count(const kiln_trace_t* trace);
/* Writes the events as Chrome trace-event JSON (chrome://tracing, Perfetto):
 * calls and dispatches as complete events ("X"), allocations and global
 * stores as instant events, timestamps in microseconds from the trace's
 * creation, one track per thread. */
kiln_status_t kiln_trace_write_json(kiln_trace_t* trace, const char* path);

/* The dispatches of one kernel in a trace, summed. */
typedef struct kiln_kernel_stats {
  const char* name; /* the kernel's name (valid while the trace lives) */
  uint64_t dispatches;
  uint64_t total_ns;
  uint64_t bytes; /* bytes bound to its dispatches (inputs and outputs) */
  /* floating-point operations of its dispatches, from the work the kernel
   * declares (Kernel.flops, format 2.5); 0 when it declares none */
  uint64_t flops;
} kiln_kernel_stats_t;
/* Writes up to `capacity` kernels' statistics, in the order they first ran,
 * and returns how many distinct kernels the trace holds. */
size_t kiln_trace_kernel_stats(kiln_trace_t* trace, kiln_kernel_stats_t* out, size_t capacity);
/* Total time of the callers' calls (not calls between functions) and, in
 * `calls` when not NULL, their number. */
uint64_t kiln_trace_call_ns(kiln_trace_t* trace, uint64_t* calls);

/* ---- observing dispatches (debugging) ------------------------------------ */

/* When a dispatch observer is called: twice per dispatch, just before the
 * kernel runs (its read bindings hold the inputs it will read; its written
 * bindings are not written yet) and just after (its written bindings hold its
 * outputs; a read binding may have changed: a kernel may write its output
 * over an input that nothing reads later). */
typedef enum kiln_dispatch_phase {
  KILN_DISPATCH_BEFORE = 0,
  KILN_DISPATCH_AFTER = 1
} kiln_dispatch_phase_t;

/* What one dispatch reads or did, given to a dispatch observer before and
 * after the kernel runs, before the next instruction: the buffers are valid
 * only during the callback (an intermediate's memory may be reused by the next
 * dispatch, in the function's transient arena), so an observer copies what it
 * keeps. */
typedef struct kiln_dispatch_info {
  kiln_function_t function; /* whose code dispatched (exported or not) */
  uint32_t offset;          /* word offset of the dispatch instruction in its code */
  uint32_t kernel;          /* the kernel's index in the module */
  const char* kernel_name;
  uint32_t workgroup_count;
  uint32_t binding_count;
  /* Per binding, in the kernel's order (its inputs, then its outputs): the
   * bound buffer's data and byte size (a read binding may be larger than the
   * kernel reads), and nonzero when the kernel wrote it. */
  const void* const* binding_data;
  const size_t* binding_sizes;
  const uint8_t* binding_writable;
  kiln_dispatch_phase_t phase; /* before or after the kernel ran */
} kiln_dispatch_info_t;

/* Called before and after each dispatch of a call; a nonzero return stops the
 * call with KILN_CANCELLED (before: the kernel does not run; the call
 * releases what it made, as a cancelled call does). It runs on the calling
 * thread and must not call into the context. */
typedef int (*kiln_dispatch_observer_t)(void* user_data, const kiln_dispatch_info_t* info);

/* Calls `observer(user_data, info)` around every later dispatch on `context`
 * (`kiln check` compares each dispatch's outputs with a reference this way);
 * NULL removes it. Costs one pointer test per dispatch when none is set. Call
 * it between calls, not during one. */
void kiln_context_set_dispatch_observer(kiln_context_t* context,
                                        kiln_dispatch_observer_t observer, void* user_data);

/* ---- kiln.debug.print (format 2.8) ---------------------------------------- */

/* Receives each line a debug.print instruction prints: `text` (`length`
 * bytes, UTF-8, ending in '\n', NUL-terminated) is valid only during the
 * callback. It runs on the calling thread, in program order with the call's
 * dispatches, and must not call into the context. A nonzero return stops the
 * call with KILN_CANCELLED. */
typedef int (*kiln_print_callback_t)(void* user_data, const char* text, size_t length);

/* Sends the text of every later debug.print on `context` to `callback`
 * (kiln.vm sends it to Python's sys.stdout); NULL: to stdout, the default
 * (written and flushed at once). Call it between calls, not during one. */
void kiln_context_set_print_callback(kiln_context_t* context, kiln_print_callback_t callback,
                                     void* user_data);

/* Receives each debug.callback instruction (format 2.8: kiln.debug.callback
 * in a module compiled in-process by kiln.jit or a Program, which registered
 * `callback`, a number of its own): the values are valid only during the
 * callback, read-only. It runs on the calling thread, in program order, and
 * must not call into the context. A nonzero return stops the call with
 * KILN_CANCELLED. */
typedef int (*kiln_host_callback_t)(void* user_data, uint32_t callback,
                                    const kiln_buffer_view_t* const* values, size_t count);

/* Sets the host callback of every later call on `context`; NULL: none, and a
 * debug.callback instruction then fails the call with
 * KILN_FAILED_PRECONDITION. Call it between calls, not during one. */
void kiln_context_set_host_callback(kiln_context_t* context, kiln_host_callback_t callback,
                                    void* user_data);

/* ---- bounding and cancelling calls --------------------------------------- */

/* Limits on each call made on a context. A call checks them, and the cancel
 * request below, before each dispatch, call, debug.print and debug.callback
 * and at each backward branch (a kernel that has started runs its workgroups
 * to the end). */
typedef struct kiln_call_limits {
  /* Wall-clock time one call may take, in nanoseconds; 0: no limit. A call
   * past it fails with KILN_DEADLINE_EXCEEDED. */
  uint64_t timeout_ns;
  /* Bytecode instructions one call may execute, its callees' included; 0: no
   * limit. Deterministic, unlike the timeout: a call past it fails with
   * KILN_DEADLINE_EXCEEDED. */
  uint64_t max_steps;
} kiln_call_limits_t;

void kiln_call_limits_initialize(kiln_call_limits_t* limits); /* no limits */
/* Sets the limits of every later call on `context`; NULL removes them. Must
 * not race with a call on the same context (calls on one context are
 * serialized by the caller). */
kiln_status_t kiln_context_set_call_limits(kiln_context_t* context,
                                           const kiln_call_limits_t* limits);

/* Cancels the call running on `context`, if there is one: it stops at its
 * next check and returns KILN_CANCELLED, releasing everything it allocated;
 * the context's globals keep the values stored before the check. Does nothing
 * when no call is running (a later call is not affected). Safe to call from
 * any thread and from a signal handler (it only touches lock-free atomics). */
void kiln_context_cancel(kiln_context_t* context);

/* Makes `data` (byte_size bytes, aligned to KILN_BUFFER_ALIGNMENT) the
 * transient arena of `function` on `context` for every later call, in place of
 * the one the context allocates (which is freed): the caller's storage, as in
 * IREE's and ExecuTorch's planned memory. It must hold at least
 * kiln_function_transient_size(function) bytes and stay valid, untouched by
 * the caller while a call runs, until it is replaced or the context is
 * released. One storage may serve several functions and contexts whose calls
 * never run at the same time. A nested call of a function that is already
 * running uses an arena of its own, as before. data = NULL gives the function
 * back a context-owned arena (allocated on its next call). Errors:
 * INVALID_ARGUMENT (misaligned, too small, a function of another module),
 * FAILED_PRECONDITION (the function is running on this context). */
kiln_status_t kiln_context_set_transient_storage(kiln_context_t* context, kiln_function_t function,
                                               void* data, size_t byte_size);

#ifdef __cplusplus
}
#endif

#endif /* KILN_RUNTIME_H_ */
