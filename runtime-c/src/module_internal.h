/* A loaded module's decoded tables, shared by the loader, the bytecode
 * verifier, contexts and the interpreter. Everything here points into the
 * module's verified bytes or into arrays the module owns. */
#ifndef KILN_MODULE_INTERNAL_H_
#define KILN_MODULE_INTERNAL_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "kernel_image.h"
#include "kiln/kernel_abi.h"
#include "kiln/runtime.h"

typedef struct kiln_type_info {
  kiln_dtype_t dtype;
  size_t rank;
  const int64_t* shape; /* in the module's bytes; NULL for rank 0 */
  size_t byte_size;
} kiln_type_info_t;

typedef struct kiln_function_info {
  const char* name;
  int exported;
  uint32_t arg_count;
  uint32_t result_count;
  kiln_value_info_t* args;    /* arg_count entries */
  kiln_value_info_t* results; /* result_count entries */
  uint32_t* arg_types;        /* type indices */
  uint32_t* result_types;
  const char* arg_tree;
  const char* result_tree;
  uint32_t ref_count;
  uint32_t i64_count;
  const uint32_t* code;
  uint32_t code_len;
  uint64_t transient_size; /* bytes of the arena alloc.transient places buffers in */
} kiln_function_info_t;

typedef struct kiln_global_info {
  kiln_value_info_t info;
  uint32_t type;
  const uint8_t* data; /* NULL when zero-initialized */
} kiln_global_info_t;

typedef struct kiln_constant_info {
  uint32_t type;
  const uint8_t* data;
} kiln_constant_info_t;

typedef struct kiln_kernel_info {
  const char* name;
  kiln_kernel_fn_t fn;
  uint32_t binding_count;
  uint64_t* binding_sizes;
  uint8_t* binding_writable;
  uint32_t push_count;
  uint32_t max_workgroups; /* 1..KILN_MAX_WORKGROUPS; dispatches ask for no more */
  uint64_t code_size;      /* bytes from its entry to the next entry point or the text's end */
  uint64_t flops;          /* floating-point operations per dispatch (format 2.5; 0: unknown) */
} kiln_kernel_info_t;

struct kiln_module {
  atomic_int refs;
  kiln_instance_t* instance;
  void* mapping; /* mmap'ed file, or NULL */
  size_t mapping_size;
  void* owned;   /* aligned copy for load_memory, or NULL */
  const uint8_t* data;
  size_t size; /* of the flatbuffer: the file less its checksum trailer */
  const char* name;
  uint32_t version_major;
  uint32_t version_minor;
  uint32_t type_count;
  kiln_type_info_t* types;
  uint32_t function_count;
  kiln_function_info_t* functions;
  uint32_t export_count;
  uint32_t* exports; /* ordinals of exported functions, in module order */
  uint32_t global_count;
  kiln_global_info_t* globals;
  uint32_t constant_count;
  kiln_constant_info_t* constants;
  uint32_t image_count;
  kiln_kernel_image_t** images;
  /* Per image, what was loaded (format 2.4): the KernelImage table of the
   * chosen build (the image's own or one of its Module.kernel_variants), its
   * variant name ("" when it names none) and, for a variant, the entry of
   * each kernel of the image in kernel order (NULL: Kernel.entry_offset). */
  const uint8_t** image_tables;
  const char** image_variants;
  const uint64_t** image_entries;
  /* The kernels need only element-aligned bindings (format 2.1 on); else
   * KILN_BUFFER_ALIGNMENT (kernel_abi.h). */
  int element_aligned_bindings;
  uint32_t kernel_count;
  kiln_kernel_info_t* kernels;
  struct kiln_gdb_jit_entry* gdb_jit; /* its registration with GDB (gdb_jit.h), or NULL */
  uint32_t provenance_count; /* Module.provenance entries (format 2.3), read in place */
};

/* Checks every instruction of function `ordinal` (module tables must be
 * decoded already). Returns a DATA_LOSS status naming the function and word. */
kiln_status_t kiln_verify_function(const kiln_module_t* module, uint32_t ordinal);

/* Formats a type as "2x3xf32". */
void kiln_format_type_info(const kiln_type_info_t* type, char* buf, size_t size);

/* Writes the disassembly of function `ordinal` to `out`, one instruction a
 * line, with kernel, global and function names resolved. */
kiln_status_t kiln_module_disassemble(const kiln_module_t* module, uint32_t ordinal,
                                      void (*write)(void* user, const char* text),
                                      void* user);

#endif
