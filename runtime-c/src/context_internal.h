/* Contexts (a module's mutable globals) and the interpreter that runs them. */
#ifndef KILN_CONTEXT_INTERNAL_H_
#define KILN_CONTEXT_INTERNAL_H_

#include "kiln/runtime.h"
#include "module_internal.h"

#define KILN_VM_MAX_CALL_DEPTH 64

struct kiln_context {
  kiln_module_t* module;
  kiln_buffer_view_t** globals; /* module->global_count current values */
};

/* Runs function `ordinal` on already type-checked arguments; on success
 * stores result_count new references in `results`. */
kiln_status_t kiln_vm_invoke(kiln_context_t* context, uint32_t ordinal,
                             kiln_buffer_view_t* const* args,
                             kiln_buffer_view_t** results);

/* True when `view` has exactly the module type `type`. */
int kiln_view_has_module_type(const kiln_module_t* module, const kiln_buffer_view_t* view,
                              uint32_t type);

/* Formats a view's type as "2x3xf32". */
void kiln_format_view_type(const kiln_buffer_view_t* view, char* buf, size_t size);

#endif
