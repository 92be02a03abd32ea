/* Bytecode verification: after it, the interpreter can trust every opcode,
 * register, index, list and branch target of a function. */
#include <stdlib.h>
#include <string.h>

#include "bytecode.h"
#include "debug_print.h"
#include "module_internal.h"
#include "status_internal.h"

#define FAIL(...) kiln_make_status(KILN_DATA_LOSS, __VA_ARGS__)

static kiln_status_t check_operands(const kiln_module_t* m, const kiln_function_info_t* f,
                                    const kiln_bc_instr_t* in, const uint8_t* starts) {
  const kiln_op_info_t* info = in->info;
  unsigned k;
  for (k = 0; k < info->operand_count; ++k) {
    const kiln_bc_operand_t* op = &in->operands[k];
    const char* what = info->operand_names[k];
    uint32_t limit = 0, n = 1, j;
    const char* space = "";
    switch (info->kinds[k]) {
      case KILN_OPERAND_R: limit = f->ref_count; space = "ref register r"; break;
      case KILN_OPERAND_I: limit = f->i64_count; space = "int register i"; break;
      case KILN_OPERAND_LIST_R: limit = f->ref_count; space = "ref register r"; break;
      case KILN_OPERAND_LIST_I: limit = f->i64_count; space = "int register i"; break;
      case KILN_OPERAND_TYPE: limit = m->type_count; space = "type "; break;
      case KILN_OPERAND_CONST: limit = m->constant_count; space = "constant "; break;
      case KILN_OPERAND_GLOBAL: limit = m->global_count; space = "global "; break;
      case KILN_OPERAND_KERNEL: limit = m->kernel_count; space = "kernel "; break;
      case KILN_OPERAND_FUNC: limit = m->function_count; space = "function "; break;
      case KILN_OPERAND_TARGET:
        if (op->value >= f->code_len || !starts[op->value])
          return FAIL("function '%s': word %u: %s target %u is not the start of an "
                      "instruction (code has %u words)", f->name, (unsigned)in->pc,
                      info->name, (unsigned)op->value, (unsigned)f->code_len);
        continue;
      default:
        continue;
    }
    if (info->kinds[k] == KILN_OPERAND_LIST_R || info->kinds[k] == KILN_OPERAND_LIST_I)
      n = op->value;
    for (j = 0; j < n; ++j) {
      uint32_t v = (info->kinds[k] == KILN_OPERAND_LIST_R ||
                    info->kinds[k] == KILN_OPERAND_LIST_I) ? op->list[j] : op->value;
      if (v >= limit)
        return FAIL("function '%s': word %u: %s operand '%s' names %s%u, but only %u "
                    "exist", f->name, (unsigned)in->pc, info->name, what, space,
                    (unsigned)v, (unsigned)limit);
    }
  }
  return NULL;
}

static kiln_status_t check_arity(const kiln_module_t* m, const kiln_function_info_t* f,
                                 const kiln_bc_instr_t* in) {
  const kiln_bc_operand_t* op = in->operands;
  if (in->opcode == KILN_OP_DISPATCH) {
    const kiln_kernel_info_t* k = &m->kernels[op[0].value];
    if (op[1].value == 0)
      return FAIL("function '%s': word %u: dispatch of kernel '%s' with 0 workgroups",
                  f->name, (unsigned)in->pc, k->name);
    if (op[1].value > k->max_workgroups)
      return FAIL("function '%s': word %u: dispatch of kernel '%s' with %u workgroups, the "
                  "kernel allows at most %u", f->name, (unsigned)in->pc, k->name,
                  (unsigned)op[1].value, (unsigned)k->max_workgroups);
    if (op[2].value != k->binding_count || op[3].value != k->push_count)
      return FAIL("function '%s': word %u: dispatch of kernel '%s' passes %u bindings and "
                  "%u push constants, the kernel takes %u and %u", f->name,
                  (unsigned)in->pc, k->name, (unsigned)op[2].value, (unsigned)op[3].value,
                  (unsigned)k->binding_count, (unsigned)k->push_count);
  } else if (in->opcode == KILN_OP_CALL) {
    const kiln_function_info_t* g = &m->functions[op[0].value];
    if (op[1].value != g->arg_count || op[2].value != g->result_count)
      return FAIL("function '%s': word %u: call of '%s' passes %u arguments and takes %u "
                  "results, the callee has %u and %u", f->name, (unsigned)in->pc,
                  g->name, (unsigned)op[1].value, (unsigned)op[2].value,
                  (unsigned)g->arg_count, (unsigned)g->result_count);
  } else if (in->opcode == KILN_OP_RET) {
    if (op[0].value != f->result_count)
      return FAIL("function '%s': word %u: ret of %u values, the function has %u results",
                  f->name, (unsigned)in->pc, (unsigned)op[0].value,
                  (unsigned)f->result_count);
  } else if (in->opcode == KILN_OP_ALLOC_RESULT) {
    if (op[2].value >= f->result_count || op[1].value != f->result_types[op[2].value])
      return FAIL("function '%s': word %u: alloc.result %u of type %u is not one of the "
                  "function's %u results with that type", f->name, (unsigned)in->pc,
                  (unsigned)op[2].value, (unsigned)op[1].value, (unsigned)f->result_count);
  } else if (in->opcode == KILN_OP_ALLOC_TRANSIENT) {
    const kiln_type_info_t* t = &m->types[op[1].value];
    int64_t offset = op[2].imm64;
    if (offset < 0 || offset % KILN_BUFFER_ALIGNMENT ||
        (uint64_t)offset > f->transient_size || t->byte_size > f->transient_size - (uint64_t)offset)
      return FAIL("function '%s': word %u: alloc.transient of %zu bytes at offset %lld does not "
                  "lie in the function's %llu-byte transient arena at a multiple of %u",
                  f->name, (unsigned)in->pc, t->byte_size, (long long)offset,
                  (unsigned long long)f->transient_size, (unsigned)KILN_BUFFER_ALIGNMENT);
  } else if (in->opcode == KILN_OP_DEBUG_PRINT) {
    const kiln_constant_info_t* k = &m->constants[op[0].value];
    const kiln_type_info_t* t = &m->types[k->type];
    char why[160];
    if (t->dtype != KILN_DTYPE_U8 || t->rank != 1)
      return FAIL("function '%s': word %u: debug.print template constant %u is not a 1-d u8 "
                  "constant", f->name, (unsigned)in->pc, (unsigned)op[0].value);
    if (!kiln_debug_print_check_template((const uint8_t*)k->data, t->byte_size, op[1].value, why,
                                         sizeof why))
      return FAIL("function '%s': word %u: %s", f->name, (unsigned)in->pc, why);
  } else if (in->opcode == KILN_OP_I_STORE) {
    const kiln_type_info_t* t = &m->types[op[2].value];
    if (t->rank != 0)
      return FAIL("function '%s': word %u: i.store type %u has rank %zu, expected a 0-d "
                  "type", f->name, (unsigned)in->pc, (unsigned)op[2].value, t->rank);
  }
  return NULL;
}

kiln_status_t kiln_verify_function(const kiln_module_t* m, uint32_t ordinal) {
  const kiln_function_info_t* f = &m->functions[ordinal];
  kiln_bc_instr_t in;
  char err[160];
  uint8_t* starts;
  uint32_t pc;
  int last_terminates = 0;
  kiln_status_t status = NULL;

  if (f->ref_count > KILN_MAX_REGISTERS || f->i64_count > KILN_MAX_REGISTERS)
    return FAIL("function '%s': %u ref and %u i64 registers, at most %u of each are "
                "allowed", f->name, (unsigned)f->ref_count, (unsigned)f->i64_count,
                (unsigned)KILN_MAX_REGISTERS);
  if (f->arg_count > f->ref_count)
    return FAIL("function '%s': %u arguments but only %u ref registers", f->name,
                (unsigned)f->arg_count, (unsigned)f->ref_count);
  if (f->code_len == 0)
    return FAIL("function '%s': empty code (it must end in ret or br)", f->name);
  starts = calloc(f->code_len, 1);
  if (!starts)
    return kiln_make_status(KILN_OUT_OF_MEMORY, "function '%s': verifying %u code words",
                            f->name, (unsigned)f->code_len);
  for (pc = 0; pc < f->code_len; pc = in.next_pc) {
    if (!kiln_bc_decode(f->code, f->code_len, pc, &in, err, sizeof err)) {
      status = FAIL("function '%s': %s", f->name, err);
      goto done;
    }
    starts[pc] = 1;
    last_terminates = in.info->terminator;
  }
  if (!last_terminates) {
    status = FAIL("function '%s': code does not end in a terminator (ret, br or br.if)",
                  f->name);
    goto done;
  }
  for (pc = 0; pc < f->code_len && !status; pc = in.next_pc) {
    kiln_bc_decode(f->code, f->code_len, pc, &in, err, sizeof err);
    status = check_operands(m, f, &in, starts);
    if (!status) status = check_arity(m, f, &in);
  }
done:
  free(starts);
  return status;
}
