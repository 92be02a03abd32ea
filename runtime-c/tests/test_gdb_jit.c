/* GDB's JIT interface (src/gdb_jit.c): entries added to and removed from
 * __jit_debug_descriptor's list; each symfile a well-formed ELF file whose
 * .text lies at the code and whose symbols name the kernels; modules register
 * only when their instance asks (the option or KILN_GDB_JIT=1) and unregister
 * when freed. Arguments: module files, or folders of *.vmfb modules, to load
 * (the built-in test modules have no kernels; tests/test_gdb_jit.py passes an
 * exported one and also runs gdb itself on kiln-run; ctest passes
 * KILN_TEST_MODULES when configured with it). */
#include <dirent.h>
#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#include "gdb_jit.h"
#include "module_internal.h"
#include "test_util.h"
#include "vm_test_modules.h"

static size_t list_length(void) {
  size_t n = 0;
  const struct jit_code_entry* prev = NULL;
  for (const struct jit_code_entry* e = __jit_debug_descriptor.first_entry; e; e = e->next_entry) {
    CHECK(e->prev_entry == prev);
    prev = e;
    n++;
  }
  return n;
}

/* The symfile's .text address and size, and the address of symbol `name`
 * (0 when absent). */
static uint64_t symfile_symbol(const struct jit_code_entry* e, const char* name,
                               uint64_t* text_addr, uint64_t* text_size) {
  const char* f = e->symfile_addr;
  const ElfW(Ehdr)* eh = (const ElfW(Ehdr)*)f;
  CHECK(e->symfile_size >= sizeof *eh && !memcmp(eh->e_ident, ELFMAG, SELFMAG));
  CHECK(eh->e_type == ET_REL && eh->e_shnum == 5 && eh->e_shstrndx == 4);
#if defined(__x86_64__)
  CHECK(eh->e_machine == EM_X86_64);
#elif defined(__aarch64__)
  CHECK(eh->e_machine == EM_AARCH64);
#endif
  const ElfW(Shdr)* sh = (const ElfW(Shdr)*)(f + eh->e_shoff);
  CHECK(eh->e_shoff + 5 * sizeof *sh <= e->symfile_size);
  const char* shstr = f + sh[4].sh_offset;
  CHECK(!strcmp(shstr + sh[1].sh_name, ".text") && sh[1].sh_type == SHT_NOBITS);
  CHECK(!strcmp(shstr + sh[2].sh_name, ".symtab") && sh[2].sh_link == 3);
  CHECK(sh[2].sh_offset + sh[2].sh_size <= e->symfile_size);
  CHECK(sh[3].sh_offset + sh[3].sh_size <= e->symfile_size);
  *text_addr = sh[1].sh_addr;
  *text_size = sh[1].sh_size;
  const ElfW(Sym)* sym = (const ElfW(Sym)*)(f + sh[2].sh_offset);
  const char* str = f + sh[3].sh_offset;
  for (size_t i = 1; i < sh[2].sh_size / sizeof *sym; ++i) {
    CHECK(sym[i].st_shndx == 1 && ELF64_ST_TYPE(sym[i].st_info) == STT_FUNC);
    CHECK(sym[i].st_value + sym[i].st_size <= sh[1].sh_size);
    if (!strcmp(str + sym[i].st_name, name)) return sh[1].sh_addr + sym[i].st_value;
  }
  return 0;
}

static void test_register(void) {
  static const char code[256] = {0};
  uint64_t base = (uint64_t)(uintptr_t)code, addr = 0, size = 0;
  kiln_gdb_jit_symbol_t symbols[2] = {{"kiln_first_0", 0, 64}, {"kiln_second_1", 64, 192}};
  kiln_gdb_jit_entry_t *a = NULL, *b = NULL;
  size_t before = list_length();
  CHECK_OK(kiln_gdb_jit_register(base, 256, symbols, 2, &a));
  CHECK(a && list_length() == before + 1);
  CHECK(__jit_debug_descriptor.version == 1 && __jit_debug_descriptor.action_flag == 0);
  CHECK(symfile_symbol(__jit_debug_descriptor.first_entry, "kiln_second_1", &addr, &size) ==
        base + 64);
  CHECK(addr == base && size == 256);
  CHECK_OK(kiln_gdb_jit_register(base + 128, 128, symbols, 1, &b));
  CHECK(list_length() == before + 2);
  CHECK(symfile_symbol(__jit_debug_descriptor.first_entry, "kiln_first_0", &addr, &size) ==
        base + 128);
  kiln_gdb_jit_unregister(a); /* from the middle of the list */
  CHECK(list_length() == before + 1);
  kiln_gdb_jit_unregister(b);
  CHECK(list_length() == before);
  kiln_gdb_jit_unregister(NULL);

  kiln_gdb_jit_symbol_t outside = {"kiln_far_2", 200, 100};
  CHECK_ERROR(kiln_gdb_jit_register(base, 256, &outside, 1, &a), KILN_INVALID_ARGUMENT,
              "symbol 0 lies outside the 256-byte region");
  CHECK(a == NULL && list_length() == before);
  CHECK_ERROR(kiln_gdb_jit_register(base, 256, NULL, 1, &a), KILN_INVALID_ARGUMENT,
              "out or symbols is NULL");
}

/* A module's kernels are registered with their instance's option, named and
 * placed at their code, and unregistered with the module. */
static void test_module(const char* path, int option, int environment) {
  kiln_instance_options_t options;
  kiln_instance_options_initialize(&options);
  CHECK(options.gdb_jit == 0);
  options.gdb_jit = option;
  if (environment) setenv("KILN_GDB_JIT", "1", 1);
  else setenv("KILN_GDB_JIT", "0", 1);
  kiln_instance_t* inst = NULL;
  kiln_module_t* m = NULL;
  CHECK_OK(kiln_instance_create(&options, &inst));
  unsetenv("KILN_GDB_JIT");
  size_t before = list_length();
  if (path) CHECK_OK(kiln_module_load_file(inst, path, &m));
  else CHECK_OK(kiln_module_load_memory(inst, kiln_vm_test_rows, sizeof kiln_vm_test_rows, &m));
  if (!m) {
    kiln_instance_release(inst);
    return;
  }
  if (!path) CHECK(m->kernel_count == 0 && list_length() == before && m->gdb_jit == NULL);
  if ((option || environment) && m->kernel_count) {
    CHECK(list_length() == before + 1); /* one kernel image */
    for (uint32_t k = 0; k < m->kernel_count; ++k) {
      uint64_t addr = 0, size = 0;
      CHECK(symfile_symbol(__jit_debug_descriptor.first_entry, m->kernels[k].name, &addr,
                           &size) == (uint64_t)(uintptr_t)m->kernels[k].fn);
      CHECK(addr <= (uint64_t)(uintptr_t)m->kernels[k].fn && addr + size >=
            (uint64_t)(uintptr_t)m->kernels[k].fn + m->kernels[k].code_size);
    }
  } else {
    CHECK(list_length() == before && m->gdb_jit == NULL);
  }
  kiln_module_release(m);
  CHECK(list_length() == before);
  kiln_instance_release(inst);
}

static size_t g_modules_with_kernels;

static void test_module_file(const char* path) {
  test_module(path, 0, 0);
  test_module(path, 1, 0);
  test_module(path, 0, 1);
  kiln_instance_t* inst = NULL;
  kiln_module_t* m = NULL;
  CHECK_OK(kiln_instance_create(NULL, &inst));
  CHECK_OK(kiln_module_load_file(inst, path, &m));
  if (m && m->kernel_count) g_modules_with_kernels++;
  kiln_module_release(m);
  kiln_instance_release(inst);
}

int main(int argc, char** argv) {
  test_register();
  test_module(NULL, 1, 1);
  for (int i = 1; i < argc; ++i) {
    DIR* dir = opendir(argv[i]);
    if (!dir) {
      test_module_file(argv[i]);
      continue;
    }
    for (struct dirent* d; (d = readdir(dir));) {
      size_t n = strlen(d->d_name);
      if (n < 5 || strcmp(d->d_name + n - 5, ".vmfb")) continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[i], d->d_name);
      test_module_file(path);
    }
    closedir(dir);
  }
  if (argc > 1) CHECK(g_modules_with_kernels > 0);
  printf("test_gdb_jit: %zu modules with kernels registered and unregistered\n",
         g_modules_with_kernels);
  TEST_MAIN_END();
}
