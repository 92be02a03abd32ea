/* Text form of a function's bytecode, from the same decoder the VM uses. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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
    case KILN_OPERAND_TARGET: put(t, "@L%u", (unsigned)op->value); break;
    case KILN_OPERAND_IMM64: put(t, "%lld", (long long)op->imm64); break;
    default: put(t, "%u", (unsigned)op->value); break;
  }
}

typedef struct kiln_edge {
  uint32_t target;
  uint32_t source;
} kiln_edge_t;

static int edge_order(const void* a, const void* b) {
  const kiln_edge_t* x = a;
  const kiln_edge_t* y = b;
  if (x->target != y->target) return x->target < y->target ? -1 : 1;
  return x->source < y->source ? -1 : x->source > y->source;
}

/* Same text as kiln.vm.disassembler.disassemble: a "L<pc>:" line before every
 * branch target (with "; loop header (back-edge from a, b)" when branches at
 * or after it jump back to it), "@L<pc>" targets, and "; loop back-edge" after
 * every branch to its own or an earlier offset. */
kiln_status_t kiln_module_disassemble(const kiln_module_t* module, uint32_t ordinal,
                                      void (*write)(void* user, const char* text),
                                      void* user) {
  const kiln_function_info_t* f;
  kiln_bc_instr_t in;
  uint32_t pc, k, edge_count = 0, back_count = 0, e;
  uint8_t* is_target = NULL; /* 1: a branch target; 2: also a loop header */
  kiln_edge_t* back = NULL;  /* back-edges sorted by (target, source) */
  kiln_status_t status = NULL;
  char err[160];
  if (!module || !write || ordinal >= module->function_count)
    return kiln_make_status(KILN_INVALID_ARGUMENT,
                            "disassemble: bad module, writer or function ordinal %u",
                            (unsigned)ordinal);
  f = &module->functions[ordinal];
  /* Pass 1: branch targets and back-edges. */
  for (pc = 0; pc < f->code_len; pc = in.next_pc) {
    if (!kiln_bc_decode(f->code, f->code_len, pc, &in, err, sizeof err))
      return kiln_make_status(KILN_INTERNAL, "function '%s': %s", f->name, err);
    for (k = 0; k < in.info->operand_count; ++k)
      if (in.info->kinds[k] == KILN_OPERAND_TARGET) edge_count++;
  }
  is_target = calloc(f->code_len ? f->code_len : 1, 1);
  back = malloc((edge_count ? edge_count : 1) * sizeof *back);
  if (!is_target || !back) {
    status = kiln_make_status(KILN_OUT_OF_MEMORY, "disassembling function '%s'", f->name);
    goto done;
  }
  for (pc = 0; pc < f->code_len; pc = in.next_pc) {
    kiln_bc_decode(f->code, f->code_len, pc, &in, err, sizeof err);
    for (k = 0; k < in.info->operand_count; ++k) {
      uint32_t t = in.operands[k].value;
      if (in.info->kinds[k] != KILN_OPERAND_TARGET || t >= f->code_len) continue;
      if (!is_target[t]) is_target[t] = 1;
      if (t <= pc) {
        is_target[t] = 2;
        back[back_count].target = t;
        back[back_count].source = pc;
        back_count++;
      }
    }
  }
  qsort(back, back_count, sizeof *back, edge_order);
  /* Pass 2: the text. */
  e = 0;
  for (pc = 0; pc < f->code_len; pc = in.next_pc) {
    kiln_text_t t;
    int is_back = 0;
    kiln_bc_decode(f->code, f->code_len, pc, &in, err, sizeof err);
    if (is_target[pc]) {
      uint32_t j = 0;
      t.n = 0;
      put(&t, "L%u:", (unsigned)pc);
      while (e < back_count && back[e].target < pc) e++;
      for (; e < back_count && back[e].target == pc; ++e, ++j)
        put(&t, j ? ", %u" : "   ; loop header (back-edge from %u", (unsigned)back[e].source);
      if (j) put(&t, ")");
      put(&t, "\n");
      write(user, t.buf);
    }
    t.n = 0;
    put(&t, "%5u  %s", (unsigned)pc, in.info->name);
    for (k = 0; k < in.info->operand_count; ++k) {
      put(&t, k ? ", " : " ");
      operand(module, &t, in.info->kinds[k], &in.operands[k]);
      if (in.info->kinds[k] == KILN_OPERAND_TARGET && in.operands[k].value <= pc) is_back = 1;
    }
    if (in.opcode == KILN_OP_DEBUG_PRINT) {
      /* the template, as kiln.vm.disassembler.template_comment writes it */
      const kiln_constant_info_t* c = &module->constants[in.operands[0].value];
      size_t size = module->types[c->type].byte_size, j2;
      put(&t, "   ; \"");
      for (j2 = 0; j2 < size && j2 < 60; ++j2) {
        uint8_t b = c->data[j2];
        if (b == '"' || b == '\\') put(&t, "\\%c", b);
        else if (b == '\n') put(&t, "\\n");
        else if (b >= 0x20 && b < 0x7f) put(&t, "%c", b);
        else put(&t, "\\x%02x", b);
      }
      put(&t, size > 60 ? "\"..." : "\"");
    }
    if (is_back) put(&t, "   ; loop back-edge");
    put(&t, "\n");
    write(user, t.buf);
  }
done:
  free(is_target);
  free(back);
  return status;
}
