/* Text form of a function's bytecode, from the same decoder the VM uses. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bytecode.h"
#include "module_internal.h"
#include "status_internal.h"

typedef struct kiln_text {
  char buf[1024];
  size_t n;
} kiln_text_t;

static void put(kiln_text_t* t, const char* format, ...) __attribute__((format(printf, 2, 3)));
static void put(kiln_text_t* t, const char* format, ...) {
  va_list ap;
  int k;
  if (t->n >= sizeof t->buf) return;
  va_start(ap, format);
  k = vsnprintf(t->buf + t->n, sizeof t->buf - t->n, format, ap);
  va_end(ap);
  if (k > 0) t->n += (size_t)k;
  if (t->n >= sizeof t->buf) t->n = sizeof t->buf - 1;
}

static void operand(const kiln_module_t* m, kiln_text_t* t, uint8_t kind,
                    const kiln_bc_operand_t* op) {
  uint32_t j;
  char type[128];
  switch (kind) {
    case KILN_OPERAND_R: put(t, "r%u", (unsigned)op->value); break;
    case KILN_OPERAND_I: put(t, "i%u", (unsigned)op->value); break;
    case KILN_OPERAND_LIST_R:
    case KILN_OPERAND_LIST_I:
      put(t, "[");
      for (j = 0; j < op->value; ++j)
        put(t, "%s%c%u", j ? ", " : "", kind == KILN_OPERAND_LIST_R ? 'r' : 'i',
            (unsigned)op->list[j]);
      put(t, "]");
      break;
    case KILN_OPERAND_TYPE:
      kiln_format_type_info(&m->types[op->value], type, sizeof type);
      put(t, "%s", type);
      break;
    case KILN_OPERAND_CONST: put(t, "const#%u", (unsigned)op->value); break;
    case KILN_OPERAND_GLOBAL: put(t, "global(%s)", m->globals[op->value].info.name); break;
    case KILN_OPERAND_KERNEL: put(t, "kernel(%s)", m->kernels[op->value].name); break;
    case KILN_OPERAND_FUNC: put(t, "func(%s)", m->functions[op->value].name); break;
    case KILN_OPERAND_TARGET: put(t, "@%u", (unsigned)op->value); break;
    case KILN_OPERAND_IMM64: put(t, "%lld", (long long)op->imm64); break;
    default: put(t, "%u", (unsigned)op->value); break;
  }
}

kiln_status_t kiln_module_disassemble(const kiln_module_t* module, uint32_t ordinal,
                                      void (*write)(void* user, const char* text),
                                      void* user) {
  const kiln_function_info_t* f;
  kiln_bc_instr_t in;
  uint32_t pc, k;
  char err[160];
  if (!module || !write || ordinal >= module->function_count)
    return kiln_make_status(KILN_INVALID_ARGUMENT,
                            "disassemble: bad module, writer or function ordinal %u",
                            (unsigned)ordinal);
  f = &module->functions[ordinal];
  for (pc = 0; pc < f->code_len; pc = in.next_pc) {
    kiln_text_t t;
    t.n = 0;
    if (!kiln_bc_decode(f->code, f->code_len, pc, &in, err, sizeof err))
      return kiln_make_status(KILN_INTERNAL, "function '%s': %s", f->name, err);
    put(&t, "%5u  %s", (unsigned)pc, in.info->name);
    for (k = 0; k < in.info->operand_count; ++k) {
      put(&t, k ? ", " : " ");
      operand(module, &t, in.info->kinds[k], &in.operands[k]);
    }
    put(&t, "\n");
    write(user, t.buf);
  }
  return NULL;
}
