/* A STREAM-like memory bandwidth measurement (after John McCalpin's STREAM), independent of kiln.
 *
 *   stream N REPETITIONS THREADS
 *
 * Three arrays of N doubles; each repetition times copy (c = a), scale (b = s*c), add (c = a+b)
 * and triad (a = b + s*c), every thread working on its own contiguous slice (first touched by
 * that thread). Prints one JSON object: the best (shortest) repetition of each kernel as GB/s
 * (10^9 bytes/s), counted as STREAM counts them: 16 bytes per element for copy and scale, 24 for
 * add and triad (what is read plus what is written; no write-allocate traffic). Compiled at run
 * time by benchmarks/stream.py with the system C compiler (-O2, -pthread). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { COPY, SCALE, ADD, TRIAD, KERNELS };
static const char* const names[KERNELS] = {"copy", "scale", "add", "triad"};
static const double bytes_per_element[KERNELS] = {16, 16, 24, 24};

static double *a, *b, *c;
static long n, repetitions;
static int threads;
static pthread_barrier_t barrier;
static double best[KERNELS];

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void* worker(void* arg) {
  long id = (long)arg;
  long lo = n * id / threads, hi = n * (id + 1) / threads;
  const double s = 3.0;
  for (long i = lo; i < hi; ++i) {
    a[i] = 1.0;
    b[i] = 2.0;
    c[i] = 0.0;
  }
  for (long r = 0; r < repetitions; ++r) {
    for (int k = 0; k < KERNELS; ++k) {
      double start = 0;
      pthread_barrier_wait(&barrier);
      if (id == 0) start = now();
      switch (k) {
        case COPY: for (long i = lo; i < hi; ++i) c[i] = a[i]; break;
        case SCALE: for (long i = lo; i < hi; ++i) b[i] = s * c[i]; break;
        case ADD: for (long i = lo; i < hi; ++i) c[i] = a[i] + b[i]; break;
        default: for (long i = lo; i < hi; ++i) a[i] = b[i] + s * c[i]; break;
      }
      pthread_barrier_wait(&barrier);
      if (id == 0) {
        double t = now() - start;
        if (r == 0 || t < best[k]) best[k] = t;
      }
    }
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: stream N REPETITIONS THREADS\n");
    return 2;
  }
  n = atol(argv[1]);
  repetitions = atol(argv[2]);
  threads = atoi(argv[3]);
  if (n < threads || repetitions < 1 || threads < 1) {
    fprintf(stderr, "stream: need N >= THREADS >= 1 and REPETITIONS >= 1\n");
    return 2;
  }
  a = aligned_alloc(64, ((size_t)n * sizeof(double) + 63) / 64 * 64);
  b = aligned_alloc(64, ((size_t)n * sizeof(double) + 63) / 64 * 64);
  c = aligned_alloc(64, ((size_t)n * sizeof(double) + 63) / 64 * 64);
  if (!a || !b || !c) {
    fprintf(stderr, "stream: cannot allocate 3 x %ld doubles\n", n);
    return 1;
  }
  pthread_barrier_init(&barrier, NULL, (unsigned)threads);
  pthread_t* ids = malloc(sizeof(pthread_t) * (size_t)threads);
  for (long t = 1; t < threads; ++t) pthread_create(&ids[t], NULL, worker, (void*)t);
  worker((void*)0);
  for (long t = 1; t < threads; ++t) pthread_join(ids[t], NULL);
  /* The values every element must hold after the repetitions (so nothing was skipped). */
  double ea = 1.0, eb = 2.0, ec = 0.0;
  for (long r = 0; r < repetitions; ++r) {
    ec = ea;
    eb = 3.0 * ec;
    ec = ea + eb;
    ea = eb + 3.0 * ec;
  }
  int ok = 1;
  for (long i = 0; i < n; i += 1 + n / 1024)
    if (fabs(a[i] - ea) > 1e-8 * fabs(ea) || fabs(b[i] - eb) > 1e-8 * fabs(eb) || fabs(c[i] - ec) > 1e-8 * fabs(ec))
      ok = 0;
  printf("{\"n\": %ld, \"repetitions\": %ld, \"threads\": %d, \"verified\": %s", n, repetitions, threads,
         ok ? "true" : "false");
  for (int k = 0; k < KERNELS; ++k)
    printf(", \"%s_gb_per_s\": %.6g", names[k], bytes_per_element[k] * (double)n / best[k] / 1e9);
  printf("}\n");
  free(ids);
  free(a);
  free(b);
  free(c);
  return ok ? 0 : 1;
}
