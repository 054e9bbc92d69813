/* A training step of GpuCluster._advance_steady (adapters/datacenter/cluster.py), in C: two calls.
 *
 * cosim_dc_configure, when the running jobs, their caps, n_alloc or the step length change: each running
 * job's speed and per-GPU power (uncapped: every cap at TDP), GPU count, class, stall shares and
 * whole-step work, gathered by job id. cosim_dc_step, every step: the running jobs' progress (remaining
 * work, work done, running time, and whether every job runs the whole step or one finishes) and the
 * step's sums over them (GPUs busy, power, slowdown and work, per class, stall and checkpoint GPUs).
 *
 * Element for element what the numpy expressions of cluster.py and kernels.py do, so the numbers are the
 * same to the last bit: each value is one IEEE double operation (subtract, add, multiply, divide, floor,
 * the smaller or larger of two with numpy's NaN rule) on the same operands in the same order, which C
 * rounds as numpy's loops round (gcc -O2, no fast-math, no FMA contraction: `make build`). Reductions:
 * minima (the same in any order), np.bincount's weighted sums (in job order, as numpy adds them), and
 * numpy's dot products (`g @ x`), which are its BLAS's ddot: the function numpy calls is handed in
 * (a[A_DDOT]) and called with the same arguments, so its rounding (FMA, several accumulators) is
 * numpy's. A numpy call on these short arrays costs ~0.5 us, and a step made 8 to 40 of them. The
 * loader (adapters/datacenter/kernels.py) checks both functions against numpy when it loads, and
 * tests/adapters/datacenter/test_dc_kernels.py compares whole runs; without the library numpy does
 * the same.
 */
#include <math.h>
#include <stdint.h>

typedef double (*ddot_fn)(int64_t n, const double *x, int64_t incx, const double *y, int64_t incy);

/* a: int64 count and addresses (kernels.py packs them; its A_* constants are these). Rows by position
 * in the running jobs (scratch), the rest indexed by job id. */
enum {
    A_N, A_RUN, A_REMAINING, A_WORK_DONE, A_RAN, A_FULL, A_FLOOR, A_ACTIVE, A_SPEED, A_P_GPU, A_G, A_PRIO,
    A_STALL, A_CKPT, A_TMP, A_ONES, A_CAPS, A_DDOT,
    /* by job id */
    A_SPEED_UNC, A_POWER_UNC, A_P_UNC, A_RATE, A_N_ALLOC, A_JOB_PRIO, A_STALL_MEAN, A_CKPT_MEAN, A_SCHED_SPEED,
    A_COUNT
};

/* io: doubles in and out (kernels.py's IO_* constants are these). */
enum {
    IO_DT, IO_SURE, IO_WHOLE, IO_BOUND, IO_LEFT, IO_SUMS, IO_MADE, IO_BUSY, IO_GPU_DOT, IO_SLOW, IO_WORK,
    IO_WORK_CLASS, IO_CLASS_W = IO_WORK_CLASS + 3, IO_STALL = IO_CLASS_W + 3, IO_CKPT, IO_TDP, IO_IDLE,
    IO_GIVEN, IO_CAPPED, IO_NAN_STALL, IO_COUNT
};

#define N_CLASSES 3

static inline double np_min(double x, double y) { return x != x ? x : (y != y ? y : (x < y ? x : y)); }
static inline double np_max(double x, double y) { return x != x ? x : (y != y ? y : (x > y ? x : y)); }
#define ROW(k) ((double *)(intptr_t)a[k])

/* The running jobs' per-position values for step length io[IO_DT] (kernels.numpy_configure):
 * io[IO_GIVEN] = 0: speed and per-GPU power of uncapped jobs (every caps[i] == io[IO_TDP]): speed =
 *   speed_unc[j], power = max(min(p_unc[j] * power_unc[j], caps[i]), io[IO_IDLE]); a cap below TDP sets
 *   io[IO_CAPPED] = 1 and returns (numpy interpolates the Zeus curves; its rows come back given);
 * io[IO_GIVEN] = 1: speed and power rows given.
 * Then sched_speed[j] = speed, g = n_alloc[j], prio = job_prio[j], stall = stall_mean[j] (io[IO_NAN_STALL]
 * = 1 if one is NaN: not filled yet), ckpt = ckpt_mean[j], full = speed * rate[j] * dt, floor = max(full,
 * 1e-12), ones = 1. */
void cosim_dc_configure(const int64_t *a, double *io) {
    int64_t n = a[A_N];
    const int64_t *run = (const int64_t *)(intptr_t)a[A_RUN];
    double *speed = ROW(A_SPEED), *p_gpu = ROW(A_P_GPU), *caps = ROW(A_CAPS);
    if (io[IO_GIVEN] == 0.0) {
        double tdp = io[IO_TDP], idle = io[IO_IDLE];
        for (int64_t i = 0; i < n; i++) {
            if (!(caps[i] == tdp)) {
                io[IO_CAPPED] = 1.0;
                return;
            }
        }
        const double *speed_unc = ROW(A_SPEED_UNC), *power_unc = ROW(A_POWER_UNC), *p_unc = ROW(A_P_UNC);
        for (int64_t i = 0; i < n; i++) {
            int64_t j = run[i];
            speed[i] = speed_unc[j];
            p_gpu[i] = np_max(np_min(p_unc[j] * power_unc[j], caps[i]), idle);
        }
    }
    io[IO_CAPPED] = 0.0;
    const double *rate = ROW(A_RATE), *stall_mean = ROW(A_STALL_MEAN), *ckpt_mean = ROW(A_CKPT_MEAN);
    const int64_t *n_alloc = (const int64_t *)(intptr_t)a[A_N_ALLOC];
    const int64_t *job_prio = (const int64_t *)(intptr_t)a[A_JOB_PRIO];
    int64_t *prio = (int64_t *)(intptr_t)a[A_PRIO];
    double *sched_speed = ROW(A_SCHED_SPEED), *g = ROW(A_G), *stall = ROW(A_STALL), *ckpt = ROW(A_CKPT);
    double *full = ROW(A_FULL), *floor_s = ROW(A_FLOOR), *ones = ROW(A_ONES);
    double dt_s = io[IO_DT];
    int nan_stall = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = run[i];
        sched_speed[j] = speed[i];
        g[i] = (double)n_alloc[j];
        prio[i] = job_prio[j];
        stall[i] = stall_mean[j];
        if (stall[i] != stall[i]) nan_stall = 1;
        ckpt[i] = ckpt_mean[j];
        full[i] = speed[i] * rate[j] * dt_s;
        floor_s[i] = np_max(full[i], 1e-12);
        ones[i] = 1.0;
    }
    io[IO_NAN_STALL] = nan_stall;
}

/* One step of the configured jobs (kernels.numpy_progress, then kernels.numpy_sums).
 * in  io[IO_DT] = dt_s, io[IO_SURE] = 1 for a step _sure_steps vouched for (whole; no finishing test),
 *     io[IO_SUMS] = 0: no sums, 1: sums unless every job runs the whole step, 2: sums;
 * out io[IO_WHOLE] = 1 if every job runs the whole step (ratio = rem / floor >= 1 for all, none NaN),
 *     io[IO_BOUND] = the least _sure_steps bound (whole and not sure; NaN if one is NaN),
 *     io[IO_LEFT] = the least work left (not sure; NaN if one is NaN),
 *     io[IO_MADE] = 1 if the sums were made, into io[IO_BUSY ...].
 * Not whole: active[i] = min(1, ratio) (np.minimum: NaN stays NaN), work = full * active, running time
 * dt_s * active. Whole: work = full, running time dt_s. Then remaining = rem - work, work_done += work,
 * ran += running time. */
void cosim_dc_step(const int64_t *a, double *io) {
    int64_t n = a[A_N];
    const int64_t *run = (const int64_t *)(intptr_t)a[A_RUN];
    double *remaining = ROW(A_REMAINING), *work_done = ROW(A_WORK_DONE), *ran = ROW(A_RAN);
    const double *full = ROW(A_FULL), *floor_s = ROW(A_FLOOR);
    double *active = ROW(A_ACTIVE);
    double dt_s = io[IO_DT];
    int sure = io[IO_SURE] != 0.0;
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
            io[IO_BOUND] = nan ? NAN : least;
        }
    }
    io[IO_WHOLE] = whole;
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
    io[IO_LEFT] = nan_left ? NAN : least_left;
    int sums = (int)io[IO_SUMS];
    io[IO_MADE] = 0.0;
    if (sums == 0 || (sums == 1 && whole)) return;
    /* the sums: numpy_sums with active (not whole) or without (whole: every share 1, no products) */
    ddot_fn ddot = (ddot_fn)(intptr_t)a[A_DDOT];
    const double *g = ROW(A_G), *speed = ROW(A_SPEED), *p_gpu = ROW(A_P_GPU);
    const double *stall = ROW(A_STALL), *ckpt = ROW(A_CKPT), *ones = ROW(A_ONES);
    const int64_t *prio = (const int64_t *)(intptr_t)a[A_PRIO];
    double *tmp = ROW(A_TMP);
    double *by_class = io + IO_WORK_CLASS, *by_class_w = io + IO_CLASS_W;
    for (int c = 0; c < N_CLASSES; c++) by_class[c] = by_class_w[c] = 0.0;
    if (whole) {
        io[IO_BUSY] = ddot(n, g, 1, ones, 1);
        io[IO_GPU_DOT] = ddot(n, g, 1, p_gpu, 1);
        for (int64_t i = 0; i < n; i++) tmp[i] = 1.0 - speed[i];
        io[IO_SLOW] = ddot(n, g, 1, tmp, 1);
        io[IO_WORK] = ddot(n, g, 1, speed, 1);
        for (int64_t i = 0; i < n; i++) {
            by_class[prio[i]] += g[i] * speed[i];
            by_class_w[prio[i]] += g[i] * p_gpu[i];
        }
        io[IO_STALL] = ddot(n, g, 1, stall, 1);
        io[IO_CKPT] = ddot(n, g, 1, ckpt, 1);
    } else {
        io[IO_BUSY] = ddot(n, g, 1, active, 1);
        for (int64_t i = 0; i < n; i++) tmp[i] = p_gpu[i] * active[i];
        io[IO_GPU_DOT] = ddot(n, g, 1, tmp, 1);
        for (int64_t i = 0; i < n; i++) tmp[i] = (1.0 - speed[i]) * active[i];
        io[IO_SLOW] = ddot(n, g, 1, tmp, 1);
        for (int64_t i = 0; i < n; i++) tmp[i] = speed[i] * active[i];
        io[IO_WORK] = ddot(n, g, 1, tmp, 1);
        for (int64_t i = 0; i < n; i++) {
            by_class[prio[i]] += g[i] * speed[i] * active[i];
            by_class_w[prio[i]] += g[i] * p_gpu[i] * active[i];
        }
        for (int64_t i = 0; i < n; i++) tmp[i] = active[i] * stall[i];
        io[IO_STALL] = ddot(n, g, 1, tmp, 1);
        for (int64_t i = 0; i < n; i++) tmp[i] = active[i] * ckpt[i];
        io[IO_CKPT] = ddot(n, g, 1, tmp, 1);
    }
    io[IO_MADE] = 1.0;
}

/* The SHA-256 of the source this library was built from (make build defines it; cosim.sdk.load_library compares
   it with the source's now and does not use a library built from another text). */
#ifndef COSIM_SOURCE_SHA256
#define COSIM_SOURCE_SHA256 ""
#endif
const char *cosim_source_sha256(void) { return COSIM_SOURCE_SHA256; }
