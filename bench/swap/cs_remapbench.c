/* cs_remapbench: what showing pinned host memory at a second address costs
 * on the real driver (issue 19: memory off the GPU stays mapped at its
 * address to its backing, which is mapped a second time there).
 *
 *   cs_remapbench [--gib N] [--piece-mib M] [--reps R]
 *
 * Pins N GiB of HOST-located cuMemCreate memory in M MiB pieces mapped at
 * one reserved range (as the hook's swap backing is), then times, per rep:
 * mapping the pieces again at a second range (cuMemRetainAllocationHandle +
 * cuMemMap per piece), cuMemSetAccess for the device over that range,
 * unmapping it; and for comparison device memory of the same size: create,
 * map, set access, unmap, release. Prints a markdown table of medians.
 * GPU only; no cushare involved. Built by hand:
 *   gcc -O2 -I$CUDA/include bench/swap/cs_remapbench.c -o cs_remapbench -lcuda
 */
#define _POSIX_C_SOURCE 200809L
#include "../gpu/cuprobe.h"
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


static CUmemAccessDesc acc(int dev)
{
    CUmemAccessDesc a;
    memset(&a, 0, sizeof a);
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = dev;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return a;
}

int main(int argc, char **argv)
{
    size_t gib = 2, piece_mib = 64;
    int reps = 5;
    static const struct option opts[] = {{"gib", 1, 0, 'g'}, {"piece-mib", 1, 0, 'p'},
                                         {"reps", 1, 0, 'r'}, {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        if (c == 'g')
            gib = strtoul(optarg, NULL, 10);
        else if (c == 'p')
            piece_mib = strtoul(optarg, NULL, 10);
        else if (c == 'r')
            reps = atoi(optarg);
        else
            return 2;
    }
    size_t size = gib << 30, piece = piece_mib << 20, n = size / piece;
    CUdevice dev;
    probe_primary(&dev);
    CUmemAllocationProp hp, dp;
    memset(&hp, 0, sizeof hp);
    hp.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    hp.location.type = CU_MEM_LOCATION_TYPE_HOST;
    dp = hp;
    dp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    dp.location.id = (int)dev;
    CUmemAccessDesc a = acc((int)dev);
    CUdeviceptr back, view;
    CK(cuMemAddressReserve(&back, size, 2ull << 20, 0, 0));
    CK(cuMemAddressReserve(&view, size, 2ull << 20, 0, 0));
    double t0 = probe_now();
    for (size_t i = 0; i < n; i++) {
        CUmemGenericAllocationHandle h;
        CK(cuMemCreate(&h, piece, &hp, 0));
        CK(cuMemMap(back + i * piece, piece, 0, h, 0));
        CK(cuMemRelease(h));
        CK(cuMemSetAccess(back + i * piece, piece, &a, 1));
    }
    double pin = probe_now() - t0;
    double *tmap = calloc((size_t)reps, sizeof(double)), *tacc = calloc((size_t)reps, sizeof(double)),
           *tacc1 = calloc((size_t)reps, sizeof(double)), *tun = calloc((size_t)reps, sizeof(double)),
           *dmap = calloc((size_t)reps, sizeof(double)), *dun = calloc((size_t)reps, sizeof(double));
    for (int r = 0; r < reps; r++) {
        t0 = probe_now();
        for (size_t i = 0; i < n; i++) {
            CUmemGenericAllocationHandle h;
            CK(cuMemRetainAllocationHandle(&h, (void *)(back + i * piece)));
            CK(cuMemMap(view + i * piece, piece, 0, h, 0));
            CK(cuMemRelease(h));
        }
        tmap[r] = probe_now() - t0;
        t0 = probe_now();
        CK(cuMemSetAccess(view, size, &a, 1)); /* one call over every piece */
        tacc[r] = probe_now() - t0;
        t0 = probe_now();
        for (size_t i = 0; i < n; i++)
            CK(cuMemUnmap(view + i * piece, piece));
        tun[r] = probe_now() - t0;
        /* again, access per piece */
        for (size_t i = 0; i < n; i++) {
            CUmemGenericAllocationHandle h;
            CK(cuMemRetainAllocationHandle(&h, (void *)(back + i * piece)));
            CK(cuMemMap(view + i * piece, piece, 0, h, 0));
            CK(cuMemRelease(h));
        }
        t0 = probe_now();
        for (size_t i = 0; i < n; i++)
            CK(cuMemSetAccess(view + i * piece, piece, &a, 1));
        tacc1[r] = probe_now() - t0;
        for (size_t i = 0; i < n; i++)
            CK(cuMemUnmap(view + i * piece, piece));
        /* device memory of the same size, as a placement does */
        t0 = probe_now();
        CUmemGenericAllocationHandle dh;
        CK(cuMemCreate(&dh, size, &dp, 0));
        CK(cuMemMap(view, size, 0, dh, 0));
        CK(cuMemSetAccess(view, size, &a, 1));
        dmap[r] = probe_now() - t0;
        t0 = probe_now();
        CK(cuMemUnmap(view, size));
        CK(cuMemRelease(dh));
        dun[r] = probe_now() - t0;
    }
    printf("| GiB | piece MiB | pin s | host view: map ms | access (one call) ms | access (per piece) ms | unmap ms | device: create+map+access ms | unmap+release ms |\n");
    printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    printf("| %zu | %zu | %.2f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", gib, piece_mib, pin,
           probe_median(tmap, reps) * 1e3, probe_median(tacc, reps) * 1e3, probe_median(tacc1, reps) * 1e3,
           probe_median(tun, reps) * 1e3, probe_median(dmap, reps) * 1e3, probe_median(dun, reps) * 1e3);
    return 0;
}
