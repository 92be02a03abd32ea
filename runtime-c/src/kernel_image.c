/* Kernel images: copy a module's linked native code into fresh pages, apply
 * its absolute relocations, then make text read+execute and rodata read-only
 * (W^X: never writable and executable at once). No dlopen, no temp files. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

#include "kernel_image.h"
#include "status_internal.h"

struct kiln_kernel_image {
  uint8_t* base;
  size_t mapped_size;
  size_t code_size;
  size_t text_size;
};

static uint64_t kiln_read_u64le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

static void kiln_write_u64_native(uint8_t* p, uint64_t v) { memcpy(p, &v, 8); }

kiln_status_t kiln_kernel_image_load(const uint8_t* code, size_t code_size,
                                     size_t text_size, size_t segment_align,
                                     const uint8_t* relocs, size_t reloc_count,
                                     kiln_kernel_image_t** out) {
  if (!out) return kiln_make_status(KILN_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (code_size == 0 || !code) {
    return kiln_make_status(KILN_DATA_LOSS, "kernel image is empty");
  }
  if (segment_align == 0 || (segment_align & (segment_align - 1)) != 0) {
    return kiln_make_status(KILN_DATA_LOSS,
                            "kernel image segment_align %zu is not a power of two",
                            segment_align);
  }
  if (text_size > code_size) {
    return kiln_make_status(KILN_DATA_LOSS,
                            "kernel image text_size %zu exceeds its code size %zu",
                            text_size, code_size);
  }
  if (text_size % segment_align != 0) {
    return kiln_make_status(KILN_DATA_LOSS,
                            "kernel image text_size %zu is not a multiple of "
                            "segment_align %zu",
                            text_size, segment_align);
  }
  if (reloc_count > 0 && !relocs) {
    return kiln_make_status(KILN_DATA_LOSS, "kernel image relocation table is missing");
  }
  /* Check every relocation before touching memory. */
  for (size_t i = 0; i < reloc_count; ++i) {
    uint64_t offset = kiln_read_u64le(relocs + 16 * i);
    int64_t addend = (int64_t)kiln_read_u64le(relocs + 16 * i + 8);
    if (code_size < 8 || offset > (uint64_t)code_size - 8) {
      return kiln_make_status(KILN_DATA_LOSS,
                              "kernel image relocation %zu: offset %llu + 8 "
                              "exceeds the code size %zu",
                              i, (unsigned long long)offset, code_size);
    }
    if (addend < 0 || (uint64_t)addend > (uint64_t)code_size) {
      return kiln_make_status(KILN_DATA_LOSS,
                              "kernel image relocation %zu: addend %lld is "
                              "outside the image [0, %zu]",
                              i, (long long)addend, code_size);
    }
  }

  long page_long = sysconf(_SC_PAGESIZE);
  size_t page = page_long > 0 ? (size_t)page_long : 4096;
  if (code_size > SIZE_MAX - page) {
    return kiln_make_status(KILN_DATA_LOSS, "kernel image size %zu is too large",
                            code_size);
  }
  size_t mapped_size = (code_size + page - 1) / page * page;
  void* mem = mmap(NULL, mapped_size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    return kiln_make_status(KILN_OUT_OF_MEMORY,
                            "cannot map %zu bytes for a kernel image", mapped_size);
  }
  uint8_t* base = mem;
  memcpy(base, code, code_size);
  for (size_t i = 0; i < reloc_count; ++i) {
    uint64_t offset = kiln_read_u64le(relocs + 16 * i);
    int64_t addend = (int64_t)kiln_read_u64le(relocs + 16 * i + 8);
    kiln_write_u64_native(base + offset, (uint64_t)(uintptr_t)base + (uint64_t)addend);
  }

  int rc = 0;
  if (page <= segment_align) {
    /* text_size is a multiple of segment_align, hence of the page size. */
    if (text_size > 0) rc = mprotect(base, text_size, PROT_READ | PROT_EXEC);
    if (rc == 0 && mapped_size > text_size) {
      rc = mprotect(base + text_size, mapped_size - text_size, PROT_READ);
    }
  } else {
    /* Segments share pages: the whole image is read+execute (never writable). */
    rc = mprotect(base, mapped_size, PROT_READ | PROT_EXEC);
  }
  if (rc != 0) {
    munmap(base, mapped_size);
    return kiln_make_status(KILN_FAILED_PRECONDITION,
                            "cannot make a kernel image executable (mprotect "
                            "failed; is W^X memory allowed here?)");
  }
  if (text_size > 0) {
    __builtin___clear_cache((char*)base, (char*)base + text_size);
  }

  kiln_kernel_image_t* image = malloc(sizeof(*image));
  if (!image) {
    munmap(base, mapped_size);
    return kiln_make_status(KILN_OUT_OF_MEMORY, "cannot allocate a kernel image");
  }
  image->base = base;
  image->mapped_size = mapped_size;
  image->code_size = code_size;
  image->text_size = text_size;
  *out = image;
  return NULL;
}

void kiln_kernel_image_free(kiln_kernel_image_t* image) {
  if (!image) return;
  munmap(image->base, image->mapped_size);
  free(image);
}

kiln_kernel_fn_t kiln_kernel_image_entry(const kiln_kernel_image_t* image,
                                         uint64_t offset) {
  if (!image || offset >= image->text_size) return NULL;
  kiln_kernel_fn_t fn;
  void* address = image->base + offset;
  /* Object pointer to function pointer: POSIX guarantees this works. */
  memcpy(&fn, &address, sizeof(fn));
  return fn;
}

/* ---- host support ------------------------------------------------------ */

static void kiln_reason(char* reason, size_t reason_size, const char* format,
                        const char* a, const char* b) {
  if (reason && reason_size) snprintf(reason, reason_size, format, a, b);
}

#if defined(__x86_64__)
#define KILN_HOST_ARCH "x86_64"
#elif defined(__aarch64__)
#define KILN_HOST_ARCH "aarch64"
#else
#define KILN_HOST_ARCH "unknown"
#endif

/* The canonical architecture of a triple's first component. */
static const char* kiln_canonical_arch(const char* arch, size_t len) {
  static const struct { const char* name; const char* canonical; } names[] = {
      {"x86_64", "x86_64"}, {"amd64", "x86_64"}, {"x86-64", "x86_64"},
      {"aarch64", "aarch64"}, {"arm64", "aarch64"},
  };
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
    if (strlen(names[i].name) == len && strncmp(arch, names[i].name, len) == 0) {
      return names[i].canonical;
    }
  }
  return NULL;
}

#if defined(__x86_64__)
typedef struct {
  uint32_t l1_ecx, l1_edx;
  uint32_t l7_ebx, l7_ecx, l7_edx;
  uint32_t l7s1_eax, l7s1_edx;
  uint32_t ld1_eax;
  uint32_t e1_ecx, e1_edx;
  uint32_t e8_ebx;
  uint32_t l14_ebx;
  uint32_t l19_ebx;
  uint32_t l1e1_eax;
  uint32_t l24_ebx;
  int avx_save, avx512_save, amx_save, apx_save;
} kiln_x86_cpu_t;

static void kiln_x86_read(kiln_x86_cpu_t* c) {
  memset(c, 0, sizeof(*c));
  unsigned a, b, cx, d;
  unsigned max_leaf = __get_cpuid_max(0, NULL);
  if (max_leaf >= 1) {
    __cpuid_count(1, 0, a, b, cx, d);
    c->l1_ecx = cx;
    c->l1_edx = d;
  }
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, cx, d);
    c->l7_ebx = b;
    c->l7_ecx = cx;
    c->l7_edx = d;
    unsigned max_sub = a;
    if (max_sub >= 1) {
      __cpuid_count(7, 1, a, b, cx, d);
      c->l7s1_eax = a;
      c->l7s1_edx = d;
    }
  }
  if (max_leaf >= 0xD) {
    __cpuid_count(0xD, 1, a, b, cx, d);
    c->ld1_eax = a;
  }
  if (max_leaf >= 0x14) {
    __cpuid_count(0x14, 0, a, b, cx, d);
    c->l14_ebx = b;
  }
  if (max_leaf >= 0x19) {
    __cpuid_count(0x19, 0, a, b, cx, d);
    c->l19_ebx = b;
  }
  if (max_leaf >= 0x1e) {
    __cpuid_count(0x1e, 1, a, b, cx, d);
    c->l1e1_eax = a;
  }
  if (max_leaf >= 0x24) {
    __cpuid_count(0x24, 0, a, b, cx, d);
    c->l24_ebx = b;
  }
  unsigned max_ext = __get_cpuid_max(0x80000000u, NULL);
  if (max_ext >= 0x80000001u) {
    __cpuid_count(0x80000001u, 0, a, b, cx, d);
    c->e1_ecx = cx;
    c->e1_edx = d;
  }
  if (max_ext >= 0x80000008u) {
    __cpuid_count(0x80000008u, 0, a, b, cx, d);
    c->e8_ebx = b;
  }
  /* The OS must save the wider registers: OSXSAVE, then XCR0's bits. */
  if ((c->l1_ecx >> 27) & 1) {
    uint32_t xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    (void)xcr0_hi;
    c->avx_save = ((c->l1_ecx >> 28) & 1) && (xcr0_lo & 0x6) == 0x6;
    c->avx512_save = c->avx_save && (xcr0_lo & 0xe0) == 0xe0;
    c->amx_save = (xcr0_lo & 0x60000) == 0x60000;
    c->apx_save = (xcr0_lo & 0x80000) == 0x80000;
  }
}

#define BIT(reg, n) (((reg) >> (n)) & 1u)

/* LLVM's x86 feature names (as llvm::sys::getHostCPUFeatures reports them).
 * Returns -1 for a name this table does not know. */
static int kiln_x86_has(const kiln_x86_cpu_t* c, const char* f) {
  const int avx = c->avx_save, avx512 = c->avx512_save, amx = c->amx_save;
  const int apx = BIT(c->l7s1_edx, 21) && c->apx_save;
  const int avx10 = BIT(c->l7s1_edx, 19) && avx512;
  const unsigned avx10_version = avx10 ? (c->l24_ebx & 0xffu) : 0;
  static const char* always[] = {"64bit", "x87", "cx8", "cmov", "mmx", "fxsr",
                                 "sse", "sse2", "nopl"};
  for (size_t i = 0; i < sizeof(always) / sizeof(always[0]); ++i) {
    /* Baseline of every x86_64 CPU (still checked where cpuid says). */
    if (strcmp(f, always[i]) == 0) {
      if (strcmp(f, "cx8") == 0) return BIT(c->l1_edx, 8);
      if (strcmp(f, "cmov") == 0) return BIT(c->l1_edx, 15);
      if (strcmp(f, "mmx") == 0) return BIT(c->l1_edx, 23);
      if (strcmp(f, "fxsr") == 0) return BIT(c->l1_edx, 24);
      if (strcmp(f, "sse") == 0) return BIT(c->l1_edx, 25);
      if (strcmp(f, "sse2") == 0) return BIT(c->l1_edx, 26);
      if (strcmp(f, "x87") == 0) return BIT(c->l1_edx, 0);
      return 1;
    }
  }
  const struct { const char* name; int value; } table[] = {
      {"sse3", BIT(c->l1_ecx, 0)},
      {"pclmul", BIT(c->l1_ecx, 1)},
      {"ssse3", BIT(c->l1_ecx, 9)},
      {"fma", BIT(c->l1_ecx, 12) && avx},
      {"cx16", BIT(c->l1_ecx, 13)},
      {"sse4.1", BIT(c->l1_ecx, 19)},
      {"sse4.2", BIT(c->l1_ecx, 20)},
      {"crc32", BIT(c->l1_ecx, 20)},
      {"movbe", BIT(c->l1_ecx, 22)},
      {"popcnt", BIT(c->l1_ecx, 23)},
      {"aes", BIT(c->l1_ecx, 25)},
      {"xsave", BIT(c->l1_ecx, 26) && avx},
      {"avx", avx},
      {"f16c", BIT(c->l1_ecx, 29) && avx},
      {"rdrnd", BIT(c->l1_ecx, 30)},
      {"sahf", BIT(c->e1_ecx, 0)},
      {"lzcnt", BIT(c->e1_ecx, 5)},
      {"abm", BIT(c->e1_ecx, 5)},
      {"sse4a", BIT(c->e1_ecx, 6)},
      {"prfchw", BIT(c->e1_ecx, 8)},
      {"xop", BIT(c->e1_ecx, 11) && avx},
      {"lwp", BIT(c->e1_ecx, 15)},
      {"fma4", BIT(c->e1_ecx, 16) && avx},
      {"tbm", BIT(c->e1_ecx, 21)},
      {"mwaitx", BIT(c->e1_ecx, 29)},
      {"clzero", BIT(c->e8_ebx, 0)},
      {"rdpru", BIT(c->e8_ebx, 4)},
      {"wbnoinvd", BIT(c->e8_ebx, 9)},
      {"fsgsbase", BIT(c->l7_ebx, 0)},
      {"sgx", BIT(c->l7_ebx, 2)},
      {"bmi", BIT(c->l7_ebx, 3)},
      {"avx2", BIT(c->l7_ebx, 5) && avx},
      {"bmi2", BIT(c->l7_ebx, 8)},
      {"ermsb", BIT(c->l7_ebx, 9)},
      {"invpcid", BIT(c->l7_ebx, 10)},
      {"rtm", BIT(c->l7_ebx, 11)},
      {"avx512f", BIT(c->l7_ebx, 16) && avx512},
      {"evex512", BIT(c->l7_ebx, 16) && avx512},
      {"avx512dq", BIT(c->l7_ebx, 17) && avx512},
      {"rdseed", BIT(c->l7_ebx, 18)},
      {"adx", BIT(c->l7_ebx, 19)},
      {"avx512ifma", BIT(c->l7_ebx, 21) && avx512},
      {"clflushopt", BIT(c->l7_ebx, 23)},
      {"clwb", BIT(c->l7_ebx, 24)},
      {"avx512pf", BIT(c->l7_ebx, 26) && avx512},
      {"avx512er", BIT(c->l7_ebx, 27) && avx512},
      {"avx512cd", BIT(c->l7_ebx, 28) && avx512},
      {"sha", BIT(c->l7_ebx, 29)},
      {"avx512bw", BIT(c->l7_ebx, 30) && avx512},
      {"avx512vl", BIT(c->l7_ebx, 31) && avx512},
      {"prefetchwt1", BIT(c->l7_ecx, 0)},
      {"avx512vbmi", BIT(c->l7_ecx, 1) && avx512},
      {"pku", BIT(c->l7_ecx, 4)},
      {"waitpkg", BIT(c->l7_ecx, 5)},
      {"avx512vbmi2", BIT(c->l7_ecx, 6) && avx512},
      {"shstk", BIT(c->l7_ecx, 7)},
      {"gfni", BIT(c->l7_ecx, 8)},
      {"vaes", BIT(c->l7_ecx, 9) && avx},
      {"vpclmulqdq", BIT(c->l7_ecx, 10) && avx},
      {"avx512vnni", BIT(c->l7_ecx, 11) && avx512},
      {"avx512bitalg", BIT(c->l7_ecx, 12) && avx512},
      {"avx512vpopcntdq", BIT(c->l7_ecx, 14) && avx512},
      {"rdpid", BIT(c->l7_ecx, 22)},
      {"kl", BIT(c->l7_ecx, 23)},
      {"cldemote", BIT(c->l7_ecx, 25)},
      {"movdiri", BIT(c->l7_ecx, 27)},
      {"movdir64b", BIT(c->l7_ecx, 28)},
      {"enqcmd", BIT(c->l7_ecx, 29)},
      {"uintr", BIT(c->l7_edx, 5)},
      {"avx512vp2intersect", BIT(c->l7_edx, 8) && avx512},
      {"serialize", BIT(c->l7_edx, 14)},
      {"tsxldtrk", BIT(c->l7_edx, 16)},
      {"pconfig", BIT(c->l7_edx, 18)},
      {"amx-bf16", BIT(c->l7_edx, 22) && amx},
      {"avx512fp16", BIT(c->l7_edx, 23) && avx512},
      {"amx-tile", BIT(c->l7_edx, 24) && amx},
      {"amx-int8", BIT(c->l7_edx, 25) && amx},
      {"sha512", BIT(c->l7s1_eax, 0) && avx},
      {"sm3", BIT(c->l7s1_eax, 1) && avx},
      {"sm4", BIT(c->l7s1_eax, 2) && avx},
      {"raoint", BIT(c->l7s1_eax, 3)},
      {"avxvnni", BIT(c->l7s1_eax, 4) && avx},
      {"avx512bf16", BIT(c->l7s1_eax, 5) && avx512},
      {"cmpccxadd", BIT(c->l7s1_eax, 7)},
      {"amx-fp16", BIT(c->l7s1_eax, 21) && amx},
      {"hreset", BIT(c->l7s1_eax, 22)},
      {"avxifma", BIT(c->l7s1_eax, 23) && avx},
      {"avxvnniint8", BIT(c->l7s1_edx, 4) && avx},
      {"avxneconvert", BIT(c->l7s1_edx, 5) && avx},
      {"amx-complex", BIT(c->l7s1_edx, 8) && amx},
      {"avxvnniint16", BIT(c->l7s1_edx, 10) && avx},
      {"prefetchi", BIT(c->l7s1_edx, 14)},
      {"usermsr", BIT(c->l7s1_edx, 15)},
      {"xsaveopt", BIT(c->ld1_eax, 0) && avx},
      {"xsavec", BIT(c->ld1_eax, 1) && avx},
      {"xsaves", BIT(c->ld1_eax, 3) && avx},
      {"ptwrite", BIT(c->l14_ebx, 4)},
      {"widekl", BIT(c->l19_ebx, 2)},
      {"movrs", BIT(c->l7s1_eax, 31)},
      {"amx-fp8", BIT(c->l1e1_eax, 4) && amx},
      {"amx-tf32", BIT(c->l1e1_eax, 6) && amx},
      {"amx-avx512", BIT(c->l1e1_eax, 7) && amx && avx512},
      {"amx-movrs", BIT(c->l1e1_eax, 8) && amx},
      /* AVX10 (converged AVX-512) and APX (extended GPRs). */
      {"avx10.1", avx10_version >= 1},
      {"avx10.1-256", avx10_version >= 1},
      {"avx10.1-512", avx10_version >= 1},
      {"avx10.2", avx10_version >= 2},
      {"avx10.2-256", avx10_version >= 2},
      {"avx10.2-512", avx10_version >= 2},
      {"egpr", apx},
      {"push2pop2", apx},
      {"ppx", apx},
      {"ndd", apx},
      {"ccmp", apx},
      {"nf", apx},
      {"cf", apx},
      {"zu", apx},
  };
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); ++i) {
    if (strcmp(f, table[i].name) == 0) return table[i].value ? 1 : 0;
  }
  return -1;
}
#undef BIT
#endif /* __x86_64__ */

#if defined(__aarch64__)
/* LLVM's AArch64 feature names, from the kernel's hwcaps (Linux). */
static int kiln_aarch64_has(const char* f) {
  static const char* baseline[] = {"neon", "fp-armv8", "v8a", "v8.0a"};
  for (size_t i = 0; i < sizeof(baseline) / sizeof(baseline[0]); ++i) {
    if (strcmp(f, baseline[i]) == 0) return 1;
  }
#if defined(__linux__)
  unsigned long hw = getauxval(AT_HWCAP);
  unsigned long hw2 = getauxval(AT_HWCAP2);
  /* Bits of asm/hwcap.h (a stable kernel ABI); a feature needs all of its
   * bits in AT_HWCAP and AT_HWCAP2. */
#define H(n) (1ul << (n))
  const struct { const char* name; unsigned long hw; unsigned long hw2; } table[] = {
      {"aes", H(3) | H(4), 0},             /* AES + PMULL */
      {"sha2", H(6), 0},
      {"crypto", H(3) | H(4) | H(5) | H(6), 0},
      {"crc", H(7), 0},
      {"lse", H(8), 0},
      {"fullfp16", H(9) | H(10), 0},
      {"rdm", H(12), 0},
      {"jsconv", H(13), 0},
      {"fcma", H(14), 0},
      {"rcpc", H(15), 0},
      {"ccpp", H(16), 0},                  /* DC CVAP */
      {"sha3", H(17) | H(21), 0},          /* SHA3 + SHA512 */
      {"sm4", H(18) | H(19), 0},           /* SM3 + SM4 */
      {"dotprod", H(20), 0},
      {"sve", H(22), 0},
      {"fp16fml", H(23), 0},
      {"dit", H(24), 0},
      {"rcpc-immo", H(26), 0},
      {"flagm", H(27), 0},
      {"ssbs", H(28), 0},
      {"sb", H(29), 0},
      {"pauth", H(30) | H(31), 0},
      {"v8.1a", H(7) | H(8) | H(12), 0},   /* CRC, LSE, RDM */
      {"v8.2a", H(7) | H(8) | H(12) | H(16), 0},
      {"ccdp", 0, H(0)},
      {"sve2", 0, H(1)},
      {"sve2-aes", 0, H(2) | H(3)},
      {"sve2-bitperm", 0, H(4)},
      {"sve2-sha3", 0, H(5)},
      {"sve2-sm4", 0, H(6)},
      {"flagm2", 0, H(7)},
      {"frint3264", 0, H(8)},
      {"i8mm", 0, H(13)},
      {"bf16", 0, H(14)},
      {"rand", 0, H(16)},
      {"bti", 0, H(17)},
      {"mte", 0, H(18)},
  };
#undef H
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); ++i) {
    if (strcmp(f, table[i].name) == 0) {
      return (hw & table[i].hw) == table[i].hw && (hw2 & table[i].hw2) == table[i].hw2;
    }
  }
#endif
  return -1;
}
#endif /* __aarch64__ */

#if defined(__x86_64__)
static kiln_x86_cpu_t kiln_cpu;
static pthread_once_t kiln_cpu_once = PTHREAD_ONCE_INIT;
static void kiln_cpu_init(void) { kiln_x86_read(&kiln_cpu); }
#endif

/* 1 supported, 0 not supported, -1 unknown name. */
static int kiln_host_has_feature(const char* name) {
#if defined(__x86_64__)
  pthread_once(&kiln_cpu_once, kiln_cpu_init);
  return kiln_x86_has(&kiln_cpu, name);
#elif defined(__aarch64__)
  return kiln_aarch64_has(name);
#else
  (void)name;
  return -1;
#endif
}

int kiln_host_supports(const char* target_triple, const char* cpu_features,
                       char* reason, size_t reason_size) {
  if (reason && reason_size) reason[0] = '\0';
  if (!target_triple || !*target_triple) {
    kiln_reason(reason, reason_size, "kernel image has no target triple%s%s", "", "");
    return 0;
  }
  size_t arch_len = strcspn(target_triple, "-");
  const char* arch = kiln_canonical_arch(target_triple, arch_len);
  if (!arch || strcmp(arch, KILN_HOST_ARCH) != 0) {
    char got[64];
    snprintf(got, sizeof(got), "%.*s", (int)(arch_len < 60 ? arch_len : 60),
             target_triple);
    kiln_reason(reason, reason_size,
                "kernel image targets architecture '%s' but this host is '%s'",
                got, KILN_HOST_ARCH);
    return 0;
  }
#if !defined(_WIN32)
  if (strstr(target_triple, "windows") || strstr(target_triple, "win32")) {
    kiln_reason(reason, reason_size,
                "kernel image targets '%s' (Windows calling convention) but "
                "this host is %s",
                target_triple, "not Windows");
    return 0;
  }
#endif
  const char* p = cpu_features ? cpu_features : "";
  while (*p) {
    size_t len = strcspn(p, ",");
    char feature[64];
    if (len > 0) {
      char sign = p[0];
      const char* name = p;
      size_t name_len = len;
      if (sign == '+' || sign == '-') {
        name++;
        name_len--;
      }
      /* Disabled features ('-x') never stop an image from running. */
      if (sign != '-' && name_len > 0) {
        if (name_len >= sizeof(feature)) {
          snprintf(feature, sizeof(feature), "%.*s...", 40, name);
          kiln_reason(reason, reason_size,
                      "kernel image requires unknown CPU feature '+%s' "
                      "(target %s)", feature, target_triple);
          return 0;
        }
        memcpy(feature, name, name_len);
        feature[name_len] = '\0';
        int has = kiln_host_has_feature(feature);
        if (has < 0) {
          kiln_reason(reason, reason_size,
                      "kernel image requires unknown CPU feature '+%s' (target "
                      "%s): this runtime cannot check it on the host",
                      feature, target_triple);
          return 0;
        }
        if (has == 0) {
          kiln_reason(reason, reason_size,
                      "kernel image requires CPU feature '+%s' which this host "
                      "CPU lacks (target %s)",
                      feature, target_triple);
          return 0;
        }
      }
    }
    p += len;
    if (*p == ',') p++;
  }
  return 1;
}
