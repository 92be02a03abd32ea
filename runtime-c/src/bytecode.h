/* The one bytecode decoder, shared by the verifier, the interpreter and the
 * disassembler. */
#ifndef KILN_BYTECODE_H_
#define KILN_BYTECODE_H_

#include <stddef.h>
#include <stdint.h>

#include "generated/bytecode_ops.h"

typedef struct kiln_bc_operand {
  uint32_t value;       /* register, index, target, imm, or list count */
  int64_t imm64;        /* imm64 operands */
  const uint32_t* list; /* list operands: `value` elements */
} kiln_bc_operand_t;

typedef struct kiln_bc_instr {
  uint32_t pc;
  uint32_t next_pc;
  uint32_t opcode;
  const kiln_op_info_t* info;
  kiln_bc_operand_t operands[KILN_OP_MAX_OPERANDS];
} kiln_bc_instr_t;

/* Decodes the instruction at word `pc` of `code` (code_len words). Returns 1
 * on success; 0 on an unknown opcode or an instruction that runs past the
 * end, with a message in `error`. */
int kiln_bc_decode(const uint32_t* code, uint32_t code_len, uint32_t pc,
                   kiln_bc_instr_t* out, char* error, size_t error_size);

#endif
