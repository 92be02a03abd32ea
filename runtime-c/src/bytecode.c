#include "bytecode.h"

#include <stdio.h>
#include <string.h>

int kiln_bc_decode(const uint32_t* code, uint32_t code_len, uint32_t pc,
                   kiln_bc_instr_t* out, char* error, size_t error_size) {
  uint32_t k, at;
  const kiln_op_info_t* info;
  if (pc >= code_len) {
    snprintf(error, error_size, "word %u: past the end of the code (%u words)",
             (unsigned)pc, (unsigned)code_len);
    return 0;
  }
  info = kiln_op_info(code[pc]);
  if (!info) {
    snprintf(error, error_size, "word %u: unknown opcode %u", (unsigned)pc,
             (unsigned)code[pc]);
    return 0;
  }
  memset(out, 0, sizeof *out);
  out->pc = pc;
  out->opcode = code[pc];
  out->info = info;
  at = pc + 1;
  for (k = 0; k < info->operand_count; ++k) {
    kiln_bc_operand_t* op = &out->operands[k];
    uint32_t left = code_len - at; /* at <= code_len holds throughout */
    switch (info->kinds[k]) {
      case KILN_OPERAND_IMM64: {
        uint64_t v;
        if (left < 2) goto truncated;
        v = (uint64_t)code[at] | ((uint64_t)code[at + 1] << 32);
        memcpy(&op->imm64, &v, sizeof v);
        at += 2;
        break;
      }
      case KILN_OPERAND_LIST_R:
      case KILN_OPERAND_LIST_I:
        if (left < 1 || code[at] > left - 1) goto truncated;
        op->value = code[at];
        op->list = code + at + 1;
        at += 1 + op->value;
        break;
      default:
        if (left < 1) goto truncated;
        op->value = code[at];
        at += 1;
        break;
    }
  }
  out->next_pc = at;
  return 1;
truncated:
  snprintf(error, error_size, "word %u: %s operand '%s' runs past the end of the code "
           "(%u words)", (unsigned)pc, info->name, info->operand_names[k],
           (unsigned)code_len);
  return 0;
}
