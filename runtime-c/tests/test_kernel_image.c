/* Kernel images: load the test kernel's raw text, call it, relocations,
 * W^X page protections, bounds-check rejections, host support checks.
 * argv[1]: the test kernel's flattened .text (built by CMake). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>
#if (defined(__aarch64__) || defined(__riscv)) && defined(__linux__)
#include <sys/auxv.h>
#endif
#if defined(__riscv) && defined(__linux__)
#include <sys/syscall.h>
#endif
#include <unistd.h>

#include "instance_internal.h"
#include "kernel_image.h"
#include "kiln_io.h"
#include "pool.h"
#include "test_util.h"

#define ALIGN 4096

static void put_reloc(uint8_t* p, uint64_t offset, int64_t addend) {
  for (int i = 0; i < 8; ++i) p[i] = (uint8_t)(offset >> (8 * i));
  for (int i = 0; i < 8; ++i) p[8 + i] = (uint8_t)((uint64_t)addend >> (8 * i));
}

/* Runs `action(arg)` in a child process; true when the child did not exit
 * cleanly (a fault: the page protection worked). The child's stderr goes to
 * /dev/null so a sanitizer's report of the expected fault stays quiet. */
static int child_faults(void (*action)(void*), void* arg) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return 0;
  if (pid == 0) {
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) dup2(fd, 2);
    action(arg);
    _exit(0);
  }
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) return 0;
  return !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void write_byte(void* p) { *(volatile uint8_t*)p = 0x5a; }

static void call_code(void* p) {
  void (*fn)(void);
  memcpy(&fn, &p, sizeof(fn));
  fn();
}

/* A function that just returns, as machine code. */
#if defined(__x86_64__)
static const uint8_t kReturn[] = {0xc3};
#elif defined(__aarch64__)
static const uint8_t kReturn[] = {0xc0, 0x03, 0x5f, 0xd6};
#elif defined(__riscv)
static const uint8_t kReturn[] = {0x67, 0x80, 0x00, 0x00}; /* jalr x0, 0(ra) */
#endif

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_kernel_image TEST_KERNEL.bin\n");
    return 2;
  }
  uint8_t* text = NULL;
  size_t text_len = 0;
  kiln_status_t status = kiln_io_read_file(argv[1], &text, &text_len);
  if (status) {
    fprintf(stderr, "%s\n", kiln_status_message(status));
    kiln_status_free(status);
    return 2;
  }
  CHECK(text_len > 0 && text_len <= ALIGN - 64);

  /* Image: [text padded to 4096 | 64 bytes of rodata]. */
  size_t text_size = ALIGN;
  size_t code_size = ALIGN + 64;
  uint8_t* code = calloc(1, code_size);
  memcpy(code, text, text_len);
  for (int i = 0; i < 64; ++i) code[ALIGN + i] = (uint8_t)(0xA0 + i);
  memcpy(code + ALIGN + 32, kReturn, sizeof(kReturn));     /* rodata: not executable */
  memcpy(code + ALIGN - 64, kReturn, sizeof(kReturn));     /* text: executable */
  uint8_t relocs[3 * 16];
  put_reloc(relocs, ALIGN + 0, ALIGN + 16);   /* pointer to rodata */
  put_reloc(relocs + 16, ALIGN + 8, 0);       /* pointer to the entry point */
  put_reloc(relocs + 32, ALIGN + 21, (int64_t)code_size); /* unaligned, one past the end */

  kiln_kernel_image_t* image = NULL;
  CHECK_OK(kiln_kernel_image_load(code, code_size, text_size, ALIGN, relocs, 3, &image));
  if (image) {
    kiln_kernel_fn_t fn = kiln_kernel_image_entry(image, 0);
    CHECK(fn != NULL);
    CHECK(kiln_kernel_image_entry(image, text_size) == NULL);
    CHECK(kiln_kernel_image_entry(image, UINT64_MAX) == NULL);
    const uint8_t* base = NULL;
    memcpy(&base, &fn, sizeof(base));
    const uint8_t* rodata = base + ALIGN;
    uint64_t slot0, slot1, slot2;
    memcpy(&slot0, rodata, 8);
    memcpy(&slot1, rodata + 8, 8);
    memcpy(&slot2, rodata + 21, 8);
    CHECK(slot0 == (uint64_t)(uintptr_t)(base + ALIGN + 16));
    CHECK(slot1 == (uint64_t)(uintptr_t)base);
    CHECK(slot2 == (uint64_t)(uintptr_t)(base + code_size));
    CHECK(rodata[16] == 0xA0 + 16 && rodata[63] == 0xA0 + 63 && rodata[32] == kReturn[0]);

    /* W^X, checked by effect: text and rodata are not writable, rodata is
     * not executable (it holds a `ret` at offset 32), while an ordinary
     * writable buffer and the return stub copied into text behave normally. */
    static uint8_t scratch[64];
    CHECK(!child_faults(write_byte, scratch));
    CHECK(child_faults(write_byte, (void*)base));
    CHECK(child_faults(write_byte, (void*)(rodata + 40)));
    if ((size_t)sysconf(_SC_PAGESIZE) <= ALIGN) {
      CHECK(child_faults(call_code, (void*)(rodata + 32)));
    }
    CHECK(!child_faults(call_code, (void*)(base + ALIGN - 64)));

    /* Call it directly: mode 0 adds pc[1] over one workgroup. */
    int32_t in[10], out[10];
    for (int i = 0; i < 10; ++i) in[i] = i * 3, out[i] = -1;
    void* bindings[2] = {in, out};
    int64_t push[3] = {0, 100, 10};
    kiln_dispatch_args_t args = {bindings, push, 1, 0};
    CHECK(fn(&args, 0) == 0);
    int ok = 1;
    for (int i = 0; i < 10; ++i) ok &= out[i] == i * 3 + 100;
    CHECK(ok);

    /* Through the pool: 1000 elements over 7 workgroups on 3 workers. */
    kiln_pool_t* pool = NULL;
    CHECK_OK(kiln_pool_create(3, &pool));
    if (pool) {
      int32_t big_in[1000], big_out[1000];
      for (int i = 0; i < 1000; ++i) big_in[i] = i, big_out[i] = 0;
      void* b2[2] = {big_in, big_out};
      int64_t p2[3] = {0, -5, 1000};
      kiln_dispatch_args_t a2 = {b2, p2, 7, 0};
      CHECK_OK(kiln_pool_dispatch(pool, "add", fn, &a2, 7));
      ok = 1;
      for (int i = 0; i < 1000; ++i) ok &= big_out[i] == i - 5;
      CHECK(ok);
      /* mode 1: every workgroup exactly once. */
      int32_t marks[300] = {0};
      void* b3[1] = {marks};
      int64_t p3[1] = {1};
      kiln_dispatch_args_t a3 = {b3, p3, 300, 0};
      CHECK_OK(kiln_pool_dispatch(pool, "mark", fn, &a3, 300));
      ok = 1;
      for (int i = 0; i < 300; ++i) ok &= marks[i] == i + 1;
      CHECK(ok);
      /* mode 2: native failure code. */
      int64_t p4[3] = {2, 17, 123};
      kiln_dispatch_args_t a4 = {NULL, p4, 50, 0};
      CHECK_ERROR(kiln_pool_dispatch(pool, "native_fail", fn, &a4, 50), KILN_INTERNAL,
                  "'native_fail'", "code 123", "workgroup 17 of 50");
      kiln_pool_free(pool);
    }
    kiln_kernel_image_free(image);
  }
  kiln_kernel_image_free(NULL);

  /* A small segment_align (below the page size): the whole image is R+X. */
  CHECK_OK(kiln_kernel_image_load(code, text_len, 0, 1, NULL, 0, &image));
  kiln_kernel_image_free(image);
  CHECK_OK(kiln_kernel_image_load(code, code_size, ALIGN, 64, relocs, 3, &image));
  if (image) {
    kiln_kernel_fn_t fn = kiln_kernel_image_entry(image, 0);
    int32_t in[4] = {1, 2, 3, 4}, out[4] = {0};
    void* bindings[2] = {in, out};
    int64_t push[3] = {0, 1, 4};
    kiln_dispatch_args_t args = {bindings, push, 1, 0};
    CHECK(fn && fn(&args, 0) == 0 && out[3] == 5);
    kiln_kernel_image_free(image);
  }

  /* Rejections: every bound is checked before anything is mapped. */
  uint8_t bad[16];
  put_reloc(bad, code_size - 7, 0);
  CHECK_ERROR(kiln_kernel_image_load(code, code_size, text_size, ALIGN, bad, 1, &image),
              KILN_DATA_LOSS, "relocation 0", "exceeds the code size");
  CHECK(image == NULL);
  put_reloc(bad, UINT64_MAX - 3, 0);
  CHECK_ERROR(kiln_kernel_image_load(code, code_size, text_size, ALIGN, bad, 1, &image),
              KILN_DATA_LOSS, "relocation 0", "offset");
  put_reloc(bad, 8, -1);
  CHECK_ERROR(kiln_kernel_image_load(code, code_size, text_size, ALIGN, bad, 1, &image),
              KILN_DATA_LOSS, "addend -1");
  put_reloc(bad, 8, (int64_t)code_size + 1);
  CHECK_ERROR(kiln_kernel_image_load(code, code_size, text_size, ALIGN, bad, 1, &image),
              KILN_DATA_LOSS, "outside the image");
  uint8_t two[32];
  put_reloc(two, 0, 0);
  put_reloc(two + 16, code_size, 0);
  CHECK_ERROR(kiln_kernel_image_load(code, code_size, text_size, ALIGN, two, 2, &image),
              KILN_DATA_LOSS, "relocation 1");
  CHECK_ERROR(kiln_kernel_image_load(code, code_size, code_size + 4096, ALIGN, NULL, 0, &image),
              KILN_DATA_LOSS, "text_size", "exceeds");
  CHECK_ERROR(kiln_kernel_image_load(code, code_size, 100, 64, NULL, 0, &image),
              KILN_DATA_LOSS, "not a multiple of segment_align 64");
  CHECK_ERROR(kiln_kernel_image_load(code, code_size, 0, 48, NULL, 0, &image),
              KILN_DATA_LOSS, "segment_align 48", "power of two");
  CHECK_ERROR(kiln_kernel_image_load(code, 0, 0, 64, NULL, 0, &image), KILN_DATA_LOSS,
              "empty");
  CHECK_ERROR(kiln_kernel_image_load(code, code_size, 0, 64, NULL, 2, &image),
              KILN_DATA_LOSS, "relocation table");

  /* Host support. */
  char reason[256];
#if defined(__x86_64__)
  const char* host = "x86_64-unknown-linux-gnu";
  const char* other = "aarch64-unknown-linux-gnu";
  const char* baseline = "+sse,+sse2,+cx8,+64bit";
  const char* missing_arch = "aarch64";
#elif defined(__aarch64__)
  const char* host = "aarch64-unknown-linux-gnu";
  const char* other = "x86_64-unknown-linux-gnu";
  const char* baseline = "+neon,+fp-armv8";
  const char* missing_arch = "x86_64";
#elif defined(__riscv)
  const char* host = "riscv64-unknown-linux-gnu";
  const char* other = "x86_64-unknown-linux-gnu";
  const char* baseline = "+64bit,+i,+m,+a,+f,+d,+c,-relax";  /* -relax: never checked */
  const char* missing_arch = "x86_64";
#endif
#if defined(__x86_64__) || defined(__aarch64__) || defined(__riscv)
  CHECK(kiln_host_supports(host, "", reason, sizeof(reason)) == 1);
  CHECK(kiln_host_supports(host, NULL, reason, sizeof(reason)) == 1);
  CHECK(kiln_host_supports(host, baseline, reason, sizeof(reason)) == 1);
  CHECK(kiln_host_supports(host, "-avx512f,-sve,-amx-tile", reason, sizeof(reason)) == 1);
  CHECK(kiln_host_supports(other, "", reason, sizeof(reason)) == 0);
  CHECK(strstr(reason, missing_arch) != NULL);
  CHECK(kiln_host_supports(host, "+not-a-feature", reason, sizeof(reason)) == 0);
  CHECK(strstr(reason, "unknown CPU feature '+not-a-feature'") != NULL);
  char with_bogus[128];
  snprintf(with_bogus, sizeof(with_bogus), "%s,+bogus", baseline);
  CHECK(kiln_host_supports(host, with_bogus, reason, sizeof(reason)) == 0);
  CHECK(strstr(reason, "'+bogus'") != NULL);
  CHECK(kiln_host_supports("", "", reason, sizeof(reason)) == 0);
  const char* third = strcmp(host, "riscv64-unknown-linux-gnu") ? "riscv64-unknown-linux-gnu"
                                                                 : "aarch64-unknown-linux-gnu";
  CHECK(kiln_host_supports(third, "", reason, sizeof(reason)) == 0);
  CHECK(strstr(reason, third[0] == 'r' ? "riscv64" : "aarch64") != NULL);
  CHECK(kiln_host_supports("x86_64-pc-windows-msvc", "", reason, 8) == 0);
  char long_feature[200];
  memset(long_feature, 'z', sizeof(long_feature) - 1);
  long_feature[0] = '+';
  long_feature[sizeof(long_feature) - 1] = '\0';
  CHECK(kiln_host_supports(host, long_feature, reason, sizeof(reason)) == 0);
  CHECK(kiln_host_supports(host, "+bogus", NULL, 0) == 0);
#endif
#if defined(__x86_64__)
  /* Features this host has are accepted: check against the compiler's view
   * of the build machine where it says so. */
#if defined(__AVX2__)
  CHECK(kiln_host_supports(host, "+avx2,+avx", reason, sizeof(reason)) == 1);
#endif
  CHECK(kiln_host_supports(host, "+sse4.2,+popcnt,+avx,+fma,+avx2", reason, sizeof(reason)) ==
        (__builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("popcnt") &&
         __builtin_cpu_supports("avx") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("avx2")));
  CHECK(kiln_host_supports(host, "+avx512f", reason, sizeof(reason)) ==
        (__builtin_cpu_supports("avx512f") ? 1 : 0));
  if (!__builtin_cpu_supports("avx512f")) CHECK(strstr(reason, "lacks") != NULL);
#endif

#if defined(__aarch64__) && defined(__linux__)
  /* Features the kernel reports are accepted, others refused. */
  unsigned long hw = getauxval(AT_HWCAP);
  CHECK(kiln_host_supports(host, "+sve", reason, sizeof(reason)) == (int)((hw >> 22) & 1));
  CHECK(kiln_host_supports(host, "+lse,+crc", reason, sizeof(reason)) ==
        (((hw >> 8) & 1) && ((hw >> 7) & 1)));
  CHECK(kiln_host_supports(host, "+dotprod", reason, sizeof(reason)) == (int)((hw >> 20) & 1));
#endif

#if defined(__x86_64__) || (defined(__aarch64__) && defined(__linux__))
  /* KILN_HIDE_CPU_FEATURES: the named features read as absent. A missing
   * feature that does not gate loading (schemas/cpu_features.toml) is
   * recorded but not required; a gating one is refused by name. */
  {
#if defined(__x86_64__)
    const char *free_one = "xsave", *gated = "sse2";
#else
    const char *free_one = "ssbs", *gated = "neon";
#endif
    char hide[64], one[32];
    snprintf(hide, sizeof hide, "+%s,%s", free_one, gated);
    CHECK(setenv("KILN_HIDE_CPU_FEATURES", hide, 1) == 0);
    CHECK(kiln_host_cpu_feature(free_one) == 0 && kiln_host_cpu_feature(gated) == 0);
    CHECK(kiln_host_cpu_feature("no-such-feature") == -1);
    snprintf(one, sizeof one, "+%s", free_one);
    CHECK(kiln_host_supports(host, one, reason, sizeof(reason)) == 1);
    snprintf(one, sizeof one, "+%s", gated);
    CHECK(kiln_host_supports(host, one, reason, sizeof(reason)) == 0);
    CHECK(strstr(reason, "which this host CPU lacks") != NULL && strstr(reason, one) != NULL);
    CHECK(unsetenv("KILN_HIDE_CPU_FEATURES") == 0);
    CHECK(kiln_host_cpu_feature(gated) == 1);
    CHECK(kiln_host_supports(host, one, reason, sizeof(reason)) == 1);
  }
#endif

#if defined(__riscv) && defined(__linux__)
  /* The single-letter extensions the kernel reports (AT_HWCAP) are accepted, others refused. */
  unsigned long rv = getauxval(AT_HWCAP);
  CHECK(kiln_host_supports(host, "+v", reason, sizeof(reason)) == (int)((rv >> ('v' - 'a')) & 1));
  CHECK(kiln_host_supports(host, "+q", reason, sizeof(reason)) == 0);
  CHECK(strstr(reason, "unknown CPU feature '+q'") != NULL);
  /* Multi-letter extensions through riscv_hwprobe (none when the kernel lacks the call). */
  struct { int64_t key; uint64_t value; } pair = {4, 0};
  uint64_t ext0 = syscall(258, &pair, (size_t)1, (size_t)0, (void*)0, 0u) == 0 && pair.key == 4 ? pair.value : 0;
  CHECK(kiln_host_supports(host, "+zba", reason, sizeof(reason)) == (int)((ext0 >> 3) & 1));
  if (!((ext0 >> 3) & 1)) CHECK(strstr(reason, "'+zba' which this host CPU lacks") != NULL);
  CHECK(kiln_host_supports(host, "+zbb,+zbs", reason, sizeof(reason)) == (int)(((ext0 >> 4) & 3) == 3));
#endif

  free(code);
  free(text);
  TEST_MAIN_END();
}
