/* Host CPU feature detection from the generated tables of
 * schemas/cpu_features.toml: cpuid and XCR0 on x86_64, the kernel's hwcaps
 * on aarch64 Linux, AT_HWCAP and riscv_hwprobe on riscv64 Linux. */
#include "cpu_features.h"

#include "kiln/runtime.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if (defined(__aarch64__) || defined(__riscv)) && defined(__linux__)
#include <sys/auxv.h>
#endif
#if defined(__riscv) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "generated/cpu_features.h"

#if defined(__x86_64__)
static const kiln_x86_feature_t kiln_x86_features[] = KILN_X86_FEATURES_INIT;

typedef struct {
  unsigned max_leaf, max_ext;
  unsigned states;       /* KILN_X86_STATE_* the OS saves */
  unsigned avx10_version; /* 0: no AVX10 */
} kiln_x86_host_t;

static kiln_x86_host_t kiln_x86_host;
static pthread_once_t kiln_x86_once = PTHREAD_ONCE_INIT;

/* One cpuid register, 0 for a leaf the CPU does not have. */
static uint32_t kiln_cpuid_reg(unsigned leaf, unsigned subleaf, unsigned reg) {
  unsigned r[4] = {0, 0, 0, 0};
  unsigned max = leaf >= 0x80000000u ? kiln_x86_host.max_ext : kiln_x86_host.max_leaf;
  if (leaf > max) return 0;
  if (leaf == 7 && subleaf > 0) { /* leaf 7's subleaves go up to the count in its eax */
    unsigned a, b, c, d;
    __cpuid_count(7, 0, a, b, c, d);
    (void)b, (void)c, (void)d;
    if (subleaf > a) return 0;
  }
  __cpuid_count(leaf, subleaf, r[0], r[1], r[2], r[3]);
  return r[reg & 3];
}

static void kiln_x86_init(void) {
  kiln_x86_host_t* h = &kiln_x86_host;
  memset(h, 0, sizeof *h);
  h->max_leaf = __get_cpuid_max(0, NULL);
  h->max_ext = __get_cpuid_max(0x80000000u, NULL);
  uint32_t ecx1 = kiln_cpuid_reg(1, 0, 2);
  /* The OS must save the wider registers: OSXSAVE, then XCR0's bits. */
  if ((ecx1 >> 27) & 1) {
    uint32_t xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    (void)xcr0_hi;
    int avx = ((ecx1 >> 28) & 1) && (xcr0_lo & 0x6) == 0x6;
    if (avx) h->states |= KILN_X86_STATE_AVX;
    if (avx && (xcr0_lo & 0xe0) == 0xe0) h->states |= KILN_X86_STATE_AVX512;
    if ((xcr0_lo & 0x60000) == 0x60000) h->states |= KILN_X86_STATE_AMX;
    if ((xcr0_lo & 0x80000) == 0x80000) h->states |= KILN_X86_STATE_APX;
  }
  if ((h->states & KILN_X86_STATE_AVX512) && ((kiln_cpuid_reg(7, 1, 3) >> 19) & 1))
    h->avx10_version = kiln_cpuid_reg(0x24, 0, 1) & 0xffu;
}

static int kiln_host_detect(const char* name, int* gates_load) {
  pthread_once(&kiln_x86_once, kiln_x86_init);
  for (size_t i = 0; i < sizeof kiln_x86_features / sizeof kiln_x86_features[0]; ++i) {
    const kiln_x86_feature_t* f = &kiln_x86_features[i];
    if (strcmp(name, f->name) != 0) continue;
    *gates_load = f->gates_load;
    if (f->always) return 1;
    if ((f->state & kiln_x86_host.states) != f->state) return 0;
    if (f->avx10 && kiln_x86_host.avx10_version < f->avx10) return 0;
    return (kiln_cpuid_reg(f->leaf, f->subleaf, f->reg) >> f->bit) & 1u;
  }
  return -1;
}

#elif defined(__aarch64__)
static const kiln_aarch64_feature_t kiln_aarch64_features[] = KILN_AARCH64_FEATURES_INIT;

static int kiln_host_detect(const char* name, int* gates_load) {
  for (size_t i = 0; i < sizeof kiln_aarch64_features / sizeof kiln_aarch64_features[0]; ++i) {
    const kiln_aarch64_feature_t* f = &kiln_aarch64_features[i];
    if (strcmp(name, f->name) != 0) continue;
    *gates_load = f->gates_load;
    if (f->always) return 1;
#if defined(__linux__)
    {
      uint64_t hw = (uint64_t)getauxval(AT_HWCAP), hw2 = (uint64_t)getauxval(AT_HWCAP2);
      return (hw & f->hwcap) == f->hwcap && (hw2 & f->hwcap2) == f->hwcap2;
    }
#else
    return 0;
#endif
  }
  return -1;
}

#elif defined(__riscv) && __riscv_xlen == 64
/* riscv64 Linux: the single-letter ISA extensions are bits of AT_HWCAP; the
 * multi-letter ones come from the riscv_hwprobe system call (Linux 6.4), key
 * RISCV_HWPROBE_KEY_IMA_EXT_0. Without the call (ENOSYS: older kernels, qemu-user
 * before 8.1) or the key, none of them is reported: a module needing one is
 * refused, never run unchecked. */
static const kiln_riscv64_feature_t kiln_riscv64_features[] = KILN_RISCV64_FEATURES_INIT;
static uint64_t kiln_riscv64_ext0;
static pthread_once_t kiln_riscv64_once = PTHREAD_ONCE_INIT;

static void kiln_riscv64_init(void) {
#if defined(__linux__)
  struct { int64_t key; uint64_t value; } pair = {4 /* RISCV_HWPROBE_KEY_IMA_EXT_0 */, 0};
  if (syscall(258 /* __NR_riscv_hwprobe */, &pair, (size_t)1, (size_t)0, (void*)0, 0u) == 0 &&
      pair.key == 4)
    kiln_riscv64_ext0 = pair.value;
#endif
}

static int kiln_host_detect(const char* name, int* gates_load) {
  pthread_once(&kiln_riscv64_once, kiln_riscv64_init);
  for (size_t i = 0; i < sizeof kiln_riscv64_features / sizeof kiln_riscv64_features[0]; ++i) {
    const kiln_riscv64_feature_t* f = &kiln_riscv64_features[i];
    if (strcmp(name, f->name) != 0) continue;
    *gates_load = f->gates_load;
    if (f->always) return 1;
#if defined(__linux__)
    return ((uint64_t)getauxval(AT_HWCAP) & f->hwcap) == f->hwcap &&
           (kiln_riscv64_ext0 & f->hwprobe) == f->hwprobe;
#else
    return 0;
#endif
  }
  return -1;
}

#else
static int kiln_host_detect(const char* name, int* gates_load) {
  (void)name, (void)gates_load;
  return -1;
}
#endif

/* KILN_HIDE_CPU_FEATURES=a,b (a testing aid): the runtime answers as if the
 * host lacked these features. It can only make loading stricter. */
static int kiln_feature_hidden(const char* name) {
  const char* p = getenv("KILN_HIDE_CPU_FEATURES");
  size_t n = strlen(name);
  while (p && *p) {
    size_t len = strcspn(p, ",");
    const char* item = p;
    if (len && (*item == '+')) item++, len--;
    if (len == n && strncmp(item, name, n) == 0) return 1;
    p += strcspn(p, ",");
    if (*p == ',') p++;
  }
  return 0;
}

int kiln_host_has_feature(const char* name) {
  int gates_load = 1;
  int has = kiln_host_detect(name, &gates_load);
  return has == 1 && kiln_feature_hidden(name) ? 0 : has;
}

int kiln_feature_gates_load(const char* name) {
  int gates_load = 1;
  return kiln_host_detect(name, &gates_load) < 0 ? 1 : gates_load;
}

int kiln_host_cpu_feature(const char* name) {
  return name ? kiln_host_has_feature(name) : -1;
}
