/* STREAM-style reference kernels for bench/profiler_vs_references.py.
 *
 * Three kernels over arrays of doubles, each run NTIMES. Each prints two rates: the confirmed best
 * (the second-fastest trial, the estimator the profiler uses) and the fastest trial (as STREAM,
 * J. McCalpin, reports its best):
 *   read:    s += a[i]        bytes counted: n * 8
 *   copy:    c[i] = a[i]      bytes counted: n * 16 (read + write), ordinary stores: the core
 *                             reads each line of c before writing it (read for ownership), so
 *                             the memory moves 24 bytes per element for the 16 counted
 *   copy_nt: the same copy with non-temporal (streaming) stores, which skip that read, where
 *            the compiler offers them (x86 SSE2); otherwise ordinary stores again
 * torch's CPU copy_ takes the ordinary-store path (it calls no memcpy for large tensors, whose
 * glibc version streams), so "copy" is its like-for-like reference; "copy_nt" shows what the
 * store path is worth on this CPU.
 * Usage: stream BYTES_PER_ARRAY NTIMES   (threads from OMP_NUM_THREADS)
 * Prints: "read <confirmed bytes/s> <fastest bytes/s>\ncopy <confirmed> <fastest>\n"
 *         "copy_nt <confirmed> <fastest>\n".
 *
 * Background load: stream --burst BYTES_PER_ARRAY ON_SECONDS OFF_SECONDS
 * copies for ON_SECONDS, sleeps for OFF_SECONDS, and repeats until it is killed.
 */
#include <omp.h>
#include <stdio.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int burst(size_t n, double on, double off) {
    double *a = malloc(n * sizeof(double)), *c = malloc(n * sizeof(double));
    if (!a || !c) { fprintf(stderr, "out of memory\n"); return 1; }
    for (size_t i = 0; i < n; i++) { a[i] = 1.0; c[i] = 0.0; }
    struct timespec pause = {(time_t)off, (long)((off - (double)(time_t)off) * 1e9)};
    for (;;) {
        double until = omp_get_wtime() + on;
        while (omp_get_wtime() < until)
            for (size_t i = 0; i < n; i++) c[i] = a[i] + c[i] * 1e-9;
        nanosleep(&pause, NULL);
    }
}

static double best_of(double *t, int n) {
    double best = t[0];
    for (int i = 1; i < n; i++) if (t[i] < best) best = t[i];
    return best;
}

/* The second-fastest time: the fastest that a second trial also reaches. */
static double confirmed_of(double *t, int n) {
    if (n < 2) return t[0];
    double best = t[0] < t[1] ? t[0] : t[1], second = t[0] < t[1] ? t[1] : t[0];
    for (int i = 2; i < n; i++) {
        if (t[i] < best) { second = best; best = t[i]; }
        else if (t[i] < second) second = t[i];
    }
    return second;
}

/* c = a with non-temporal stores where available; n a multiple of 8, both 64-byte aligned. */
static void copy_streaming(double *c, const double *a, size_t n) {
#ifdef __SSE2__
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i += 2) _mm_stream_pd(c + i, _mm_load_pd(a + i));
    _mm_sfence();
#else
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) c[i] = a[i];
#endif
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "--burst") == 0)
        return burst((size_t)atoll(argv[2]) / sizeof(double), atof(argv[3]), atof(argv[4]));
    if (argc != 3) { fprintf(stderr, "usage: stream BYTES_PER_ARRAY NTIMES\n"); return 2; }
    size_t n = (size_t)atoll(argv[1]) / sizeof(double);
    int ntimes = atoi(argv[2]);
    n -= n % 8; /* whole cache lines, so the streaming copy needs no tail */
    double *a = aligned_alloc(64, n * sizeof(double)), *c = aligned_alloc(64, n * sizeof(double));
    double *tr = malloc(ntimes * sizeof(double)), *tc = malloc(ntimes * sizeof(double));
    double *tn = malloc(ntimes * sizeof(double));
    if (!a || !c || !tr || !tc || !tn) { fprintf(stderr, "out of memory\n"); return 1; }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) { a[i] = 1.0 + (double)(i % 7); c[i] = 0.0; }
    volatile double sink = 0.0;
    for (int k = 0; k < ntimes; k++) {
        double s = 0.0, t0 = omp_get_wtime();
#pragma omp parallel for simd reduction(+ : s) schedule(static)
        for (size_t i = 0; i < n; i++) s += a[i];
        tr[k] = omp_get_wtime() - t0;
        sink += s;
        t0 = omp_get_wtime();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) c[i] = a[i];
        tc[k] = omp_get_wtime() - t0;
        t0 = omp_get_wtime();
        copy_streaming(c, a, n);
        tn[k] = omp_get_wtime() - t0;
    }
    printf("read %.6e %.6e\ncopy %.6e %.6e\ncopy_nt %.6e %.6e\n", n * 8.0 / confirmed_of(tr, ntimes),
           n * 8.0 / best_of(tr, ntimes), n * 16.0 / confirmed_of(tc, ntimes),
           n * 16.0 / best_of(tc, ntimes), n * 16.0 / confirmed_of(tn, ntimes),
           n * 16.0 / best_of(tn, ntimes));
    return sink == 42.0 && c[0] == 42.0;  /* keeps the work observable to the compiler */
}
