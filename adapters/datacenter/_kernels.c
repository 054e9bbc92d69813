/* The running jobs' progress in a step of GpuCluster._advance_steady (adapters/datacenter/cluster.py), in C.
 *
 * Element for element what its numpy expressions do to each running job's remaining work, work
 * done and running time, so the numbers are the same to the last bit: each value is one IEEE
 * double operation (subtract, add, multiply, divide, floor, the smaller of two) on the same
 * operands in the same order, which C rounds as numpy's loops round (gcc -O2, no fast-math, no FMA
 * contraction: `make build`); the only reductions are minima, the same in any order. A numpy call
 * on these short arrays costs ~0.5 us, and a step made 8 to 20 of them. The loader
 * (adapters/datacenter/kernels.py) checks the function against numpy when it loads, and
 * tests/adapters/datacenter/test_dc_kernels.py compares whole runs; without the library numpy
 * does the same.
 */
#include <math.h>
#include <stdint.h>

/* One step of the running jobs ``run`` (a whole step's work ``full``, ``floor = max(full, 1e-12)``).
 *
 * a: {n, run, remaining, work_done, ran, full, floor, active} (int64 count and addresses; run
 *    int64, the rest double; remaining, work_done and ran indexed by job, the others by position)
 * io: in  io[0] = dt_s, io[1] = 1 for a step _sure_steps vouched for (whole; no finishing test);
 *     out io[2] = 1 if every job runs the whole step (ratio = rem / floor >= 1 for all, none NaN),
 *         io[3] = the least _sure_steps bound (whole and not sure; NaN if one is NaN),
 *         io[4] = the least work left (not sure; NaN if one is NaN).
 * Not whole: active[i] = min(1, ratio) (np.minimum: NaN stays NaN), work = full * active, running
 * time dt_s * active. Whole: work = full, running time dt_s. Then remaining = rem - work,
 * work_done += work, ran += running time.
 */
void cosim_dc_progress(const int64_t *a, double *io) {
    int64_t n = a[0];
    const int64_t *run = (const int64_t *)(intptr_t)a[1];
    double *remaining = (double *)(intptr_t)a[2], *work_done = (double *)(intptr_t)a[3];
    double *ran = (double *)(intptr_t)a[4];
    const double *full = (const double *)(intptr_t)a[5], *floor_s = (const double *)(intptr_t)a[6];
    double *active = (double *)(intptr_t)a[7];
    double dt_s = io[0];
    int sure = io[1] != 0.0;
    int whole = 1;
    if (!sure) {
        for (int64_t i = 0; i < n; i++) {
            double ratio = remaining[run[i]] / floor_s[i];
            active[i] = ratio;
            if (!(ratio >= 1.0)) whole = 0;
        }
        if (whole) { /* _sure_steps: floor((rem - floor - 1e-6) / (full + rem * 2**-52)) - 2, its minimum */
            double least = INFINITY;
            int nan = 0;
            for (int64_t i = 0; i < n; i++) {
                double rem = remaining[run[i]];
                double bound = floor((rem - floor_s[i] - 1e-6) / (full[i] + rem * 0x1p-52)) - 2.0;
                if (bound != bound) nan = 1;
                else if (bound < least) least = bound;
            }
            io[3] = nan ? NAN : least;
        }
    }
    io[2] = whole;
    double least_left = INFINITY;
    int nan_left = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = run[i];
        double work, ran_step;
        if (whole) {
            work = full[i];
            ran_step = dt_s;
        } else {
            double ratio = active[i];
            double act = ratio != ratio ? ratio : (ratio < 1.0 ? ratio : 1.0);  /* np.minimum(1.0, ratio) */
            active[i] = act;
            work = full[i] * act;
            ran_step = dt_s * act;
        }
        double left = remaining[j] - work;
        remaining[j] = left;
        work_done[j] = work_done[j] + work;
        ran[j] = ran[j] + ran_step;
        if (left != left) nan_left = 1;
        else if (left < least_left) least_left = left;
    }
    io[4] = nan_left ? NAN : least_left;
}

/* The SHA-256 of the source this library was built from (make build defines it; cosim.sdk.load_library compares
   it with the source's now and does not use a library built from another text). */
#ifndef COSIM_SOURCE_SHA256
#define COSIM_SOURCE_SHA256 ""
#endif
const char *cosim_source_sha256(void) { return COSIM_SOURCE_SHA256; }
