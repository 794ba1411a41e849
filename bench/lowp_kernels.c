/*
 * lowp_kernels.c - the host backend's reduction kernels alone: bytes per
 * second of each float type against float32's, per op and number of
 * sources, for each kernel set, in one run (no ranks, no copies).
 *
 * Build it with the host backend's own sources (their functions are hidden
 * in the shared library) and run it from the repository root:
 *
 *   gcc -std=c11 -O2 -pthread -Isrc -Ihost -o /tmp/lowp_kernels bench/lowp_kernels.c \
 *       $(find host -name '*.c' ! -name 'test_*') -lrt -lm
 *   NCCL4PY_HOST_KERNELS=avx512 /tmp/lowp_kernels [BYTES_PER_SOURCE]
 *
 * BYTES_PER_SOURCE (default 256 KiB: the sources and the result stay in the
 * L2 cache; 8 MiB measures memory instead).  Each row is the best of 7
 * timed blocks of 20 calls of n4p_reduce() on values drawn uniformly from
 * [-2, 2) and rounded to each type (mulsum's scalar is 0.5), in GB/s of one source's bytes, and each type's ratio to
 * float32's at the same bytes: the figure the collectives' bus bandwidth
 * follows where the reduction is what limits them.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "lowp.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    const size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : (size_t)256 << 10;
    static const int types[] = {ncclFloat32, ncclFloat16, ncclBfloat16, ncclFloat8e4m3,
                                ncclFloat8e5m2};
    static const char *const names[] = {"float32", "half", "bfloat16", "f8e4m3", "f8e5m2"};
    static const size_t esz[] = {4, 2, 2, 1, 1};
    static const int ops[] = {ncclSum, ncclAvg, ncclMax, N4P_OP_PREMUL};
    static const char *const opnames[] = {"sum", "avg", "max", "mulsum"};
    enum { NSRC_MAX = 8 };
    unsigned char *buf[5][NSRC_MAX + 1];
    if (bytes < 64 || bytes > ((size_t)1 << 32)) {
        fprintf(stderr, "usage: %s [BYTES_PER_SOURCE, 64..4G]\n", argv[0]);
        return 2;
    }
    srand(1);
    for (int t = 0; t < 5; t++) {
        for (int k = 0; k <= NSRC_MAX; k++) {
            buf[t][k] = aligned_alloc(64, bytes + 64);
            if (buf[t][k] == NULL)
                return 1;
            for (size_t i = 0; i < bytes / esz[t]; i++) {
                /* uniform in [-2, 2), each type's rounding of it */
                const float f = (float)rand() / ((float)RAND_MAX + 1.0f) * 4.0f - 2.0f;
                unsigned char *q = buf[t][k] + i * esz[t];
                uint16_t h;
                switch (t) {
                case 0: memcpy(q, &f, sizeof f); break;
                case 1: h = n4p_half_encode(f); memcpy(q, &h, sizeof h); break;
                case 2: h = n4p_bf16_encode(f); memcpy(q, &h, sizeof h); break;
                case 3: *q = n4p_e4m3_encode(f); break;
                default: *q = n4p_e5m2_encode(f); break;
                }
            }
        }
    }
    printf("# n4p_reduce, %zu bytes per source; GB/s of one source, type / float32 (kernels: "
           "NCCL4PY_HOST_KERNELS=%s)\n",
           bytes, getenv("NCCL4PY_HOST_KERNELS") ? getenv("NCCL4PY_HOST_KERNELS") : "auto");
    printf("%-7s %4s %9s", "op", "srcs", "float32");
    for (int t = 1; t < 5; t++)
        printf(" %9s", names[t]);
    printf("\n");
    static const int nsrcs[] = {2, 3, 4, 8};
    for (int oi = 0; oi < 4; oi++) {
        for (int ni = 0; ni < 4; ni++) {
            const int nsrc = nsrcs[ni];
            double base = 0;
            printf("%-7s %4d", opnames[oi], nsrc);
            for (int t = 0; t < 5; t++) {
                n4p_redspec rs;
                memset(&rs, 0, sizeof rs);
                rs.dtype = types[t];
                rs.op = ops[oi];
                rs.nranks = nsrc;
                /* PreMulSum's scalar: 0.5 in the type (little-endian codes) */
                static const unsigned char half_codes[5][4] = {
                    {0x00, 0x00, 0x00, 0x3f}, {0x00, 0x38}, {0x00, 0x3f}, {0x30}, {0x38}};
                memcpy(rs.scalar, half_codes[t], esz[t]);
                const size_t count = bytes / esz[t];
                const void *srcs[NSRC_MAX];
                for (int k = 0; k < nsrc; k++)
                    srcs[k] = buf[t][k];
                double best = 1e30;
                for (int rep = 0; rep < 7; rep++) {
                    const double t0 = now();
                    for (int j = 0; j < 20; j++)
                        n4p_reduce(&rs, buf[t][NSRC_MAX], srcs, nsrc, count);
                    const double dt = (now() - t0) / 20;
                    best = dt < best ? dt : best;
                }
                const double gbs = (double)bytes / best / 1e9;
                if (t == 0) {
                    base = gbs;
                    printf(" %9.2f", gbs);
                } else {
                    printf(" %8.2fx", gbs / base);
                }
            }
            printf("\n");
        }
    }
    return 0;
}
