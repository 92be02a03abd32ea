/* GDB's JIT interface: telling a debugger where kernels are and what they are
 * called (gdb_jit.c; "JIT Compilation Interface" in GDB's manual).
 *
 * A registered region is described to GDB by a small in-memory ELF file (a
 * symfile): a .text section without contents at the region's address and one
 * function symbol per kernel, so that GDB names a kernel frame
 * (`kiln_softmax_3`), sets breakpoints by kernel name and disassembles it. The
 * runtime registers each module's kernel images when its instance asks for it
 * (kiln_instance_options_t.gdb_jit, or KILN_GDB_JIT=1 in the environment) and
 * unregisters them when the module is freed. */
#ifndef KILN_GDB_JIT_H_
#define KILN_GDB_JIT_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/runtime.h"

/* GDB's declarations (the names and layout are GDB's ABI). GDB sets a
 * breakpoint in __jit_debug_register_code and reads __jit_debug_descriptor
 * whenever it is called. */
typedef enum { KILN_JIT_NOACTION = 0, KILN_JIT_REGISTER_FN = 1, KILN_JIT_UNREGISTER_FN = 2 } kiln_jit_action_t;

struct jit_code_entry {
  struct jit_code_entry* next_entry;
  struct jit_code_entry* prev_entry;
  const char* symfile_addr;
  uint64_t symfile_size;
};

struct jit_descriptor {
  uint32_t version; /* 1 */
  uint32_t action_flag;
  struct jit_code_entry* relevant_entry;
  struct jit_code_entry* first_entry;
};

/* Exported under these names for GDB (aliases of the runtime's internal
 * kiln_jit_descriptor and kiln_jit_register_code, which it uses itself). */
extern struct jit_descriptor __jit_debug_descriptor;
void __jit_debug_register_code(void);

/* One function of a registered region: its name and where it lies, as an
 * offset from the region's start. */
typedef struct kiln_gdb_jit_symbol {
  const char* name;
  uint64_t offset;
  uint64_t size;
} kiln_gdb_jit_symbol_t;

typedef struct kiln_gdb_jit_entry kiln_gdb_jit_entry_t;

/* Builds the symfile of the code at [address, address + size) holding
 * `symbols` (names copied) and registers it with GDB (thread-safe). */
kiln_status_t kiln_gdb_jit_register(uint64_t address, uint64_t size,
                                    const kiln_gdb_jit_symbol_t* symbols, size_t count,
                                    kiln_gdb_jit_entry_t** out);
/* Unregisters it and frees it; NULL does nothing. */
void kiln_gdb_jit_unregister(kiln_gdb_jit_entry_t* entry);

/* Whether KILN_GDB_JIT in the environment asks for registration ("1", "on",
 * "true", "yes"). */
int kiln_gdb_jit_requested_by_environment(void);

struct kiln_module;
/* Registers each kernel image of a loaded module (one entry per image, its
 * kernels as symbols); `*out` is the list to give kiln_gdb_jit_unregister_module. */
kiln_status_t kiln_gdb_jit_register_module(const struct kiln_module* module,
                                           kiln_gdb_jit_entry_t** out);
void kiln_gdb_jit_unregister_module(kiln_gdb_jit_entry_t* entries);

#endif
