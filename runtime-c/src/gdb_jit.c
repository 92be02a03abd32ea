/* GDB's JIT interface (gdb_jit.h): in-memory ELF symfiles for kernel images,
 * linked into GDB's descriptor list.
 *
 * A symfile is a relocatable ELF file of the host's class and machine with
 * five sections: the null section, .text (SHT_NOBITS: no bytes, GDB reads the
 * code from the process; its address is the region's), .symtab (one STT_FUNC
 * symbol per kernel, value relative to .text), .strtab and .shstrtab. GDB
 * places an ELF JIT file's sections at their sh_addr, so its symbols name the
 * live code. The list and the descriptor are guarded by one mutex; GDB reads
 * them only while the process is stopped in __jit_debug_register_code or at
 * an attach. */
#include "gdb_jit.h"

#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kernel_image.h"
#include "module_internal.h"
#include "status_internal.h"

/* The descriptor and the function GDB breaks in, under internal names that
 * the runtime's own code uses, and exported (dynamic symbols, which survive
 * `strip`) under GDB's names as aliases. The runtime never refers to GDB's
 * names, so another JIT's copies in the process (LLVM's) cannot interpose on
 * them: each library keeps its own list, and GDB reads every one. */
__attribute__((visibility("hidden"))) struct jit_descriptor kiln_jit_descriptor = {
    1, KILN_JIT_NOACTION, NULL, NULL};
extern struct jit_descriptor __jit_debug_descriptor
    __attribute__((alias("kiln_jit_descriptor"), visibility("default")));

/* GDB's breakpoint lands here: it must exist, not be inlined, and do nothing
 * the compiler could move across the list update. */
__attribute__((noinline, used, visibility("hidden"))) void kiln_jit_register_code(void) {
  __asm__ __volatile__("" ::: "memory");
}
void __jit_debug_register_code(void)
    __attribute__((alias("kiln_jit_register_code"), visibility("default")));

static pthread_mutex_t g_jit_lock = PTHREAD_MUTEX_INITIALIZER;

struct kiln_gdb_jit_entry {
  struct jit_code_entry code; /* first: what GDB's list links */
  struct kiln_gdb_jit_entry* next_in_module;
  char* symfile;
};

#if defined(__x86_64__)
#define KILN_ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define KILN_ELF_MACHINE EM_AARCH64
#elif defined(__riscv)
#define KILN_ELF_MACHINE EM_RISCV
#elif defined(__i386__)
#define KILN_ELF_MACHINE EM_386
#elif defined(__arm__)
#define KILN_ELF_MACHINE EM_ARM
#else
#define KILN_ELF_MACHINE EM_NONE
#endif

#if __SIZEOF_POINTER__ == 8
#define KILN_ELF_CLASS ELFCLASS64
#else
#define KILN_ELF_CLASS ELFCLASS32
#endif

enum { SEC_NULL, SEC_TEXT, SEC_SYMTAB, SEC_STRTAB, SEC_SHSTRTAB, SEC_COUNT };
static const char kShstrtab[] = "\0.text\0.symtab\0.strtab\0.shstrtab";
enum { NAME_TEXT = 1, NAME_SYMTAB = 7, NAME_STRTAB = 15, NAME_SHSTRTAB = 23 };

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

/* The symfile: [Ehdr | Shdr x 5 | .symtab | .strtab | .shstrtab]. */
static char* build_symfile(uint64_t address, uint64_t size, const kiln_gdb_jit_symbol_t* symbols,
                           size_t count, size_t* out_size) {
  size_t strtab_size = 1;
  for (size_t i = 0; i < count; ++i) strtab_size += strlen(symbols[i].name) + 1;
  size_t shdr_at = align8(sizeof(ElfW(Ehdr)));
  size_t symtab_at = shdr_at + SEC_COUNT * sizeof(ElfW(Shdr));
  size_t symtab_size = (count + 1) * sizeof(ElfW(Sym));
  size_t strtab_at = symtab_at + symtab_size;
  size_t shstrtab_at = strtab_at + strtab_size;
  size_t total = shstrtab_at + sizeof kShstrtab;
  char* f = calloc(1, total);
  if (!f) return NULL;

  ElfW(Ehdr)* eh = (ElfW(Ehdr)*)f;
  memcpy(eh->e_ident, ELFMAG, SELFMAG);
  eh->e_ident[EI_CLASS] = KILN_ELF_CLASS;
  eh->e_ident[EI_DATA] = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB;
  eh->e_ident[EI_VERSION] = EV_CURRENT;
  eh->e_ident[EI_OSABI] = ELFOSABI_SYSV;
  eh->e_type = ET_REL;
  eh->e_machine = KILN_ELF_MACHINE;
  eh->e_version = EV_CURRENT;
  eh->e_shoff = shdr_at;
  eh->e_ehsize = sizeof(ElfW(Ehdr));
  eh->e_shentsize = sizeof(ElfW(Shdr));
  eh->e_shnum = SEC_COUNT;
  eh->e_shstrndx = SEC_SHSTRTAB;

  ElfW(Shdr)* sh = (ElfW(Shdr)*)(f + shdr_at);
  sh[SEC_TEXT].sh_name = NAME_TEXT;
  sh[SEC_TEXT].sh_type = SHT_NOBITS;
  sh[SEC_TEXT].sh_flags = SHF_ALLOC | SHF_EXECINSTR;
  sh[SEC_TEXT].sh_addr = (ElfW(Addr))address;
  sh[SEC_TEXT].sh_size = size;
  sh[SEC_TEXT].sh_addralign = 16;
  sh[SEC_SYMTAB].sh_name = NAME_SYMTAB;
  sh[SEC_SYMTAB].sh_type = SHT_SYMTAB;
  sh[SEC_SYMTAB].sh_offset = symtab_at;
  sh[SEC_SYMTAB].sh_size = symtab_size;
  sh[SEC_SYMTAB].sh_link = SEC_STRTAB;
  sh[SEC_SYMTAB].sh_info = 1; /* the first global symbol */
  sh[SEC_SYMTAB].sh_addralign = 8;
  sh[SEC_SYMTAB].sh_entsize = sizeof(ElfW(Sym));
  sh[SEC_STRTAB].sh_name = NAME_STRTAB;
  sh[SEC_STRTAB].sh_type = SHT_STRTAB;
  sh[SEC_STRTAB].sh_offset = strtab_at;
  sh[SEC_STRTAB].sh_size = strtab_size;
  sh[SEC_STRTAB].sh_addralign = 1;
  sh[SEC_SHSTRTAB].sh_name = NAME_SHSTRTAB;
  sh[SEC_SHSTRTAB].sh_type = SHT_STRTAB;
  sh[SEC_SHSTRTAB].sh_offset = shstrtab_at;
  sh[SEC_SHSTRTAB].sh_size = sizeof kShstrtab;
  sh[SEC_SHSTRTAB].sh_addralign = 1;

  ElfW(Sym)* sym = (ElfW(Sym)*)(f + symtab_at);
  char* names = f + strtab_at;
  size_t name_at = 1;
  for (size_t i = 0; i < count; ++i) {
    ElfW(Sym)* s = &sym[i + 1];
    size_t n = strlen(symbols[i].name);
    memcpy(names + name_at, symbols[i].name, n + 1);
    s->st_name = (uint32_t)name_at;
    s->st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    s->st_shndx = SEC_TEXT;
    s->st_value = (ElfW(Addr))symbols[i].offset;
    s->st_size = symbols[i].size;
    name_at += n + 1;
  }
  memcpy(f + shstrtab_at, kShstrtab, sizeof kShstrtab);
  *out_size = total;
  return f;
}

kiln_status_t kiln_gdb_jit_register(uint64_t address, uint64_t size,
                                    const kiln_gdb_jit_symbol_t* symbols, size_t count,
                                    kiln_gdb_jit_entry_t** out) {
  if (!out || (count && !symbols))
    return kiln_make_status(KILN_INVALID_ARGUMENT, "gdb_jit_register: out or symbols is NULL");
  *out = NULL;
  for (size_t i = 0; i < count; ++i)
    if (!symbols[i].name || symbols[i].offset > size || symbols[i].size > size - symbols[i].offset)
      return kiln_make_status(KILN_INVALID_ARGUMENT,
                              "gdb_jit_register: symbol %zu lies outside the %llu-byte region",
                              i, (unsigned long long)size);
  kiln_gdb_jit_entry_t* e = calloc(1, sizeof *e);
  size_t symfile_size = 0;
  if (e) e->symfile = build_symfile(address, size, symbols, count, &symfile_size);
  if (!e || !e->symfile) {
    free(e);
    return kiln_make_status(KILN_OUT_OF_MEMORY, "building a GDB symfile for %zu kernels", count);
  }
  e->code.symfile_addr = e->symfile;
  e->code.symfile_size = symfile_size;
  pthread_mutex_lock(&g_jit_lock);
  e->code.next_entry = kiln_jit_descriptor.first_entry;
  if (e->code.next_entry) e->code.next_entry->prev_entry = &e->code;
  kiln_jit_descriptor.first_entry = &e->code;
  kiln_jit_descriptor.relevant_entry = &e->code;
  kiln_jit_descriptor.action_flag = KILN_JIT_REGISTER_FN;
  kiln_jit_register_code();
  kiln_jit_descriptor.action_flag = KILN_JIT_NOACTION;
  kiln_jit_descriptor.relevant_entry = NULL;
  pthread_mutex_unlock(&g_jit_lock);
  *out = e;
  return NULL;
}

void kiln_gdb_jit_unregister(kiln_gdb_jit_entry_t* e) {
  if (!e) return;
  pthread_mutex_lock(&g_jit_lock);
  if (e->code.prev_entry) e->code.prev_entry->next_entry = e->code.next_entry;
  else kiln_jit_descriptor.first_entry = e->code.next_entry;
  if (e->code.next_entry) e->code.next_entry->prev_entry = e->code.prev_entry;
  kiln_jit_descriptor.relevant_entry = &e->code;
  kiln_jit_descriptor.action_flag = KILN_JIT_UNREGISTER_FN;
  kiln_jit_register_code();
  kiln_jit_descriptor.action_flag = KILN_JIT_NOACTION;
  kiln_jit_descriptor.relevant_entry = NULL;
  pthread_mutex_unlock(&g_jit_lock);
  free(e->symfile);
  free(e);
}

int kiln_gdb_jit_requested_by_environment(void) {
  const char* v = getenv("KILN_GDB_JIT");
  return v && (!strcmp(v, "1") || !strcasecmp(v, "on") || !strcasecmp(v, "true") ||
               !strcasecmp(v, "yes"));
}

/* Kernels in address order, for grouping by image. */
static int by_address(const void* a, const void* b) {
  uintptr_t x = (uintptr_t)(*(const kiln_kernel_info_t* const*)a)->fn;
  uintptr_t y = (uintptr_t)(*(const kiln_kernel_info_t* const*)b)->fn;
  return x < y ? -1 : x > y;
}

void kiln_gdb_jit_unregister_module(kiln_gdb_jit_entry_t* entries) {
  while (entries) {
    kiln_gdb_jit_entry_t* next = entries->next_in_module;
    kiln_gdb_jit_unregister(entries);
    entries = next;
  }
}

kiln_status_t kiln_gdb_jit_register_module(const kiln_module_t* m, kiln_gdb_jit_entry_t** out) {
  kiln_status_t s = NULL;
  *out = NULL;
  if (!m->kernel_count) return NULL;
  const kiln_kernel_info_t** sorted = calloc(m->kernel_count, sizeof *sorted);
  kiln_gdb_jit_symbol_t* symbols = calloc(m->kernel_count, sizeof *symbols);
  if (!sorted || !symbols) {
    s = kiln_make_status(KILN_OUT_OF_MEMORY, "registering %u kernels with GDB",
                         (unsigned)m->kernel_count);
    goto done;
  }
  for (uint32_t i = 0; i < m->kernel_count; ++i) sorted[i] = &m->kernels[i];
  qsort(sorted, m->kernel_count, sizeof *sorted, by_address);
  /* Each image's kernels: those at or above its text start and below the
   * next image's (images are separate mappings); the region ends where its
   * last kernel does (a kernel's code runs to the next entry or the text's
   * end: kiln_kernel_info_t.code_size). */
  for (uint32_t i = 0; i < m->image_count && !s; ++i) {
    uintptr_t base = (uintptr_t)kiln_kernel_image_entry(m->images[i], 0);
    uintptr_t limit = UINTPTR_MAX;
    for (uint32_t j = 0; j < m->image_count; ++j) {
      uintptr_t other = (uintptr_t)kiln_kernel_image_entry(m->images[j], 0);
      if (other > base && other < limit) limit = other;
    }
    size_t n = 0;
    uint64_t end = 0;
    for (uint32_t k = 0; k < m->kernel_count; ++k) {
      uintptr_t at = (uintptr_t)sorted[k]->fn;
      if (at < base || at >= limit) continue;
      symbols[n].name = sorted[k]->name;
      symbols[n].offset = at - base;
      symbols[n].size = sorted[k]->code_size;
      if (symbols[n].offset + symbols[n].size > end) end = symbols[n].offset + symbols[n].size;
      n++;
    }
    if (!n) continue;
    kiln_gdb_jit_entry_t* e = NULL;
    if ((s = kiln_gdb_jit_register(base, end, symbols, n, &e))) break;
    e->next_in_module = *out;
    *out = e;
  }
done:
  if (s) {
    kiln_gdb_jit_unregister_module(*out);
    *out = NULL;
    s = kiln_status_annotate(s, "module '%s'", m->name);
  }
  free(sorted);
  free(symbols);
  return s;
}
