/* An inference fleet's requests in one step (adapters/datacenter/prefill.py's WaitQueue.serve), in C.
 *
 * What the Python form does with the step's served requests once the batch curves are read: how many
 * are served and kept, the FIFO queue of arrival cohorts (WaitQueue.step and _keep), the share of the
 * served that meet the TTFT deadline (share_within) and the 99th percentile of their waits (quantile:
 * a 50-step bisection, each step a pass over the segments, the loop of scalar float math that costs
 * Python ~60 us a step whenever a queue forms). Every value is the same IEEE double operation on the
 * same operands in the same order as the Python form's, which C rounds as Python rounds (gcc -O2, no
 * fast-math, no FMA contraction: `make build`); Python's min(a, b) and max(a, b) are written out with
 * their NaN behaviour (b < a ? b : a keeps a NaN a). The serve needs no transcendental function; the fleets'
 * step below takes numpy's own (see there).
 * The loader (adapters/datacenter/inference_kernel.py) checks the function against the Python form when it
 * loads, and tests/adapters/datacenter/test_dc_serve_kernel.py compares whole runs; without the library
 * Python does the same.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

/* io (doubles), in: [0] dt_s, [1] offered requests, [2] arrived requests, [3] capacity (requests the
 *   active replicas can serve in the step), [4] max_wait_s, [5] TTFT limit on the wait, [6] 1 for a
 *   quiet step (no share or quantile), [7] the quantile's fraction;
 * state: [8] clock_s, [9] cohorts queued, [10] room for cohorts (at least [9] + 1);
 * out: [16] served, [17] left (not served), [18] kept (queued), [19] segments written, [20] served
 *   requests whose wait is within the limit, [21] the quantile of the waits (both 0 in a quiet step),
 *   [22] 1 when the quantile is left to Python (a NaN among the segments, more point masses than
 *   quantile_points holds, or none reaching the quantile), 2 when the segments did not fit (see below), [23] cohorts queued;
 * from [32]: the cohorts (n_req, start_s, end_s) x room, then the segments (n_req, lo_s, hi_s) x (room + 2): a
 *   step serves each queued cohort once and the last one at most twice (the second time only the rounding
 *   left of the first: served - done is then exact, and done + it is served), so room + 2 hold them. */

#define IN_DT 0
#define OUT 16
#define DATA 32

static double py_min(double a, double b) { return b < a ? b : a; }
static double py_max(double a, double b) { return b > a ? b : a; }

/* share_within: sum of n * (limit >= lo for a point, else clip((limit - lo) / (hi - lo), 0, 1)). */
static double share_within(const double *seg, int64_t n_seg, double limit_s) {
    double total = 0.0;
    for (int64_t i = 0; i < n_seg; i++) {
        double n = seg[3 * i], lo = seg[3 * i + 1], hi = seg[3 * i + 2], share;
        if (hi <= lo) {
            share = limit_s >= lo ? 1.0 : 0.0;
        } else {
            share = py_min(py_max((limit_s - lo) / (hi - lo), 0.0), 1.0);
        }
        total += n * share;
    }
    return total;
}

/* quantile of point masses: sorted by (lo, n) as Python sorts the tuples, the first whose running sum
 * (np.cumsum: in order) reaches ``target`` (np.searchsorted, side left); 1 when none does (Python's
 * index is then out of range: it raises). At most ROOM_POINTS masses of n > 0, else 1 (Python does it). */
#define ROOM_POINTS 64
static int quantile_points(const double *seg, int64_t n_seg, double target, double *out) {
    double lo[ROOM_POINTS], n[ROOM_POINTS];
    if (n_seg > ROOM_POINTS) return 1;
    for (int64_t i = 0; i < n_seg; i++) {  /* insertion sort: stable, and equal tuples are alike */
        double l = seg[3 * i + 1], m = seg[3 * i];
        if (!(m > 0.0)) return 1;  /* (a running sum that may fall: numpy's binary search, not a scan) */
        int64_t j = i;
        while (j > 0 && (lo[j - 1] > l || (lo[j - 1] == l && n[j - 1] > m))) {
            lo[j] = lo[j - 1];
            n[j] = n[j - 1];
            j--;
        }
        lo[j] = l;
        n[j] = m;
    }
    double cum = 0.0;
    for (int64_t i = 0; i < n_seg; i++) {
        cum = i == 0 ? n[0] : cum + n[i];
        if (cum >= target) {
            *out = lo[i];
            return 0;
        }
    }
    return 1;
}

/* quantile; returns 1 (and leaves *out) where Python must do it. */
static int quantile(const double *seg, int64_t n_seg, double q_frac, double *out) {
    double total = 0.0;  /* left to right from 0.0, as prefill.quantile adds */
    int points = 1;
    for (int64_t i = 0; i < n_seg; i++) {
        double n = seg[3 * i], lo = seg[3 * i + 1], hi = seg[3 * i + 2];
        if (n != n || lo != lo || hi != hi) return 1;
        total += n;
        if (!(hi <= lo)) points = 0;
    }
    if (total != total) return 1;
    if (!(total > 0.0)) {  /* total <= 0 */
        *out = 0.0;
        return 0;
    }
    double low = seg[1], high = seg[2];
    for (int64_t i = 1; i < n_seg; i++) {
        low = py_min(low, seg[3 * i + 1]);
        high = py_max(high, seg[3 * i + 2]);
    }
    if (points) {
        if (n_seg == 1 && q_frac <= 1.0) {
            *out = seg[1];
            return 0;
        }
        return quantile_points(seg, n_seg, q_frac * total * (1.0 - 1e-12), out);
    }
    double target = q_frac * total;
    for (int k = 0; k < 50; k++) {
        double mid = 0.5 * (low + high);
        if (share_within(seg, n_seg, mid) < target) low = mid;
        else high = mid;
    }
    *out = high;
    return 0;
}

void cosim_dc_serve(double *io) {
    double dt_s = io[IN_DT], offered = io[1], arrived = io[2], capacity = io[3], max_wait_s = io[4];
    double t0 = io[8];
    int64_t count = (int64_t)io[9], room = (int64_t)io[10];
    double *coh = io + DATA, *seg = io + DATA + 3 * room;
    double served = py_min(offered, capacity);
    double left = offered - served;
    double keep = py_min(left, max_wait_s * served / dt_s);
    /* WaitQueue.step */
    if (arrived > 0) {
        coh[3 * count] = arrived;
        coh[3 * count + 1] = t0;
        coh[3 * count + 2] = t0 + dt_s;
        count++;
    }
    int64_t head = 0, n_seg = 0;
    double done = 0.0, rate = served / dt_s;
    int64_t seg_room = room + 2;
    while (served - done > 1e-12 && head < count) {
        if (n_seg == seg_room) {  /* (cannot happen, see above; the caller raises) */
            io[OUT + 6] = 2.0;
            return;
        }
        double *c = coh + 3 * head;
        double n_req = c[0], start_s = c[1];
        double take = py_min(n_req, served - done);
        double last = start_s + (c[2] - start_s) * take / n_req;  /* Cohort.arrival_s(take) */
        double lo = t0 + done / rate - start_s;
        double hi = t0 + (done + take) / rate - last;
        seg[3 * n_seg] = take;
        seg[3 * n_seg + 1] = py_max(lo, 0.0);
        seg[3 * n_seg + 2] = py_max(hi, 0.0);
        n_seg++;
        done += take;
        if (take >= n_req - 1e-12) {
            head++;
        } else {
            c[0] = n_req - take;
            c[1] = last;
        }
    }
    if (head > 0) {
        count -= head;
        memmove(coh, coh + 3 * head, (size_t)(3 * count) * sizeof(double));
    }
    if (count > 0) {  /* WaitQueue._keep: drop the newest beyond keep */
        double extra = 0.0;
        for (int64_t i = 0; i < count; i++) extra += coh[3 * i];
        extra = extra - keep;
        while (extra > 1e-12 && count > 0) {
            double *tail = coh + 3 * (count - 1);
            if (tail[0] <= extra + 1e-12) {
                extra -= tail[0];
                count--;
            } else {
                tail[2] = tail[1] + (tail[2] - tail[1]) * (tail[0] - extra) / tail[0];  /* arrival_s(n - extra) */
                tail[0] -= extra;
                extra = 0.0;
            }
        }
    }
    io[8] = t0 + dt_s;
    io[9] = (double)count;
    io[OUT] = served;
    io[OUT + 1] = left;
    io[OUT + 2] = keep;
    io[OUT + 3] = (double)n_seg;
    io[OUT + 7] = (double)count;
    double within = 0.0, q = 0.0;
    int python = 0;
    if (io[6] == 0.0) {
        within = share_within(seg, n_seg, io[5]);
        if (n_seg > 0) python = quantile(seg, n_seg, io[7], &q);
    }
    io[OUT + 4] = within;
    io[OUT + 5] = q;
    io[OUT + 6] = (double)python;
}

/* ---- GpuCluster._serve's fleets in one call (adapters/datacenter/inference_kernel.py's ServeFleets) ----
 *
 * Fleet.advance (with its arrival rate given, no power cap, every fleet with replicas active) for each
 * fleet, then the sums _serve makes of them, in the Python form's order and operations. The logarithm
 * and the exponential are numpy's own float64 loops (np.log and np.exp of one value: their function
 * pointers, read from the ufunc objects by the loader, called on one element), not the C library's,
 * whose exp differs from numpy's SIMD one in the last bit for some arguments.
 *
 * mem (doubles): [0] fleets, [1] dt_s, [2] 1 for a quiet step (no outputs), [3] the quantile's fraction;
 *   out: [8..20] _serve's sums in its dict's order (p_it_w, p_gpu_w, tokens_per_s, good_req, done_req,
 *   dropped_req, queued_req, itl_p99_ms, n_gpus_busy, liquid_w, ttft_good_req, itl_good_req, ttft_p99_ms),
 *   [21] fleets whose quantile is left to Python (their ttft_p99_ms then too, and the sum's);
 *   from [32], FLEET doubles per fleet: see the F_ names.
 * ptrs (int64): [0] np.exp's loop, [1] its data, [2] np.log's loop, [3] its data; per fleet k from [4]: its
 *   wait queue's array (cosim_dc_serve's io), its throughput table and its batch table (FLEET_T_N long).
 * Returns 0; -1 (nothing done) when a queue has no room for a new cohort (the caller grows it and calls
 * again); 2 when a step's segments did not fit (cannot happen; the caller raises). */
typedef void (*ufunc_loop)(char **args, const intptr_t *dimensions, const intptr_t *steps, void *data);

static double numpy_one(int64_t fn, int64_t data, double x) {
    double in = x, out = 0.0;
    char *args[2] = {(char *)&in, (char *)&out};
    intptr_t n[1] = {1}, steps[2] = {sizeof(double), sizeof(double)};
    ((ufunc_loop)(intptr_t)fn)(args, n, steps, (void *)(intptr_t)data);
    return out;
}

static double horner(const double *coef, int64_t n, double x) {  /* inference._horner: y = y * x + c from 0.0 */
    double y = 0.0;
    for (int64_t i = 0; i < n; i++) y = y * x + coef[i];
    return y;
}

/* inference.interp_one: np.interp of one value, its operations in its order (bisect_right for the interval) */
static double interp_one(double x, const double *xp, const double *fp, int64_t n, double right) {
    int64_t last = n - 1;
    if (last == 0) return x < xp[0] ? fp[0] : x > xp[0] ? right : fp[0];
    if (x != x) return x;
    if (x > xp[last]) return right;
    if (x < xp[0]) return fp[0];
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (x < xp[mid]) hi = mid;
        else lo = mid + 1;
    }
    int64_t j = lo - 1;
    if (j == last || xp[j] == x) return fp[j];
    double slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j]);
    double value = slope * (x - xp[j]) + fp[j];
    if (value != value) {
        value = slope * (x - xp[j + 1]) + fp[j + 1];
        if (value != value && fp[j] == fp[j + 1]) value = fp[j];
    }
    return value;
}

#define FLEETS 32
#define FLEET 64
#define COEFS 8
enum {  /* a fleet's doubles (inference_kernel._F names them as Fleet does, with units) */
    F_RATE_REQ_S = 0, F_OUTPUT_TOKENS, F_IDLE_W, F_B_MIN, F_B_MAX, F_POWER_AT_B_MIN_W, F_INPUT_TOKENS, F_PREFILL_TOK_S,
    F_MAX_WAIT_S, F_TTFT_SLO_S, F_ITL_SLO_MS, F_MAX_BATCH, F_N_REPLICAS_ACTIVE, F_N_TABLE, F_N_ACTIVE_GPUS,
    F_IDLE_GPUS_W, F_OTHER_W, F_LIQUID_FRAC, F_N_POWER, F_N_TPUT, F_N_ITL_P99, F_QUEUE_REQ = 22,
    F_COEF_POWER = 24, F_COEF_TPUT = F_COEF_POWER + COEFS, F_COEF_ITL_P99 = F_COEF_TPUT + COEFS,
    /* out: Fleet.advance's tuple (batch, p_gpu_w, tokens_per_s, NaN (the median ITL, not asked), itl_p99_ms,
       served, good, dropped, queued, ttft_p99_ms, ttft_good, itl_good), then the serve's Python flag, its
       segments and the prefill time [s] */
    F_OUT = 48, F_PYTHON_QUANTILE = F_OUT + 12, F_N_SEGMENTS, F_PREFILL_S
};

int64_t cosim_dc_serve_fleets(double *mem, const int64_t *ptrs) {
    int64_t n = (int64_t)mem[0];
    double dt_s = mem[1], q_frac = mem[3];
    int quiet = mem[2] != 0.0;
    for (int64_t k = 0; k < n; k++) {  /* room for this step's cohort in every queue, before any is stepped */
        double *q = (double *)(intptr_t)ptrs[4 + 3 * k];
        if (q[9] >= q[10]) return -1;
    }
    double p_it_w = 0.0, p_gpu_w = 0.0, liquid_w = 0.0, n_gpus_busy = 0.0;
    double tokens_per_s = 0.0, good_req = 0.0, done_req = 0.0, dropped_req = 0.0, queued_req = 0.0;
    double ttft_good_req = 0.0, itl_good_req = 0.0, itl_p99_ms = 0.0, ttft_p99_ms = 0.0;
    int64_t n_python = 0;
    for (int64_t k = 0; k < n; k++) {
        double *f = mem + FLEETS + FLEET * k;
        double *q = (double *)(intptr_t)ptrs[4 + 3 * k];
        const double *tput = (const double *)(intptr_t)ptrs[5 + 3 * k], *grid = (const double *)(intptr_t)ptrs[6 + 3 * k];
        double rate = f[F_RATE_REQ_S], out_tokens = f[F_OUTPUT_TOKENS], active = f[F_N_REPLICAS_ACTIVE];
        double b_min = f[F_B_MIN], b_max = f[F_B_MAX];
        double offered = f[F_QUEUE_REQ] + rate * dt_s;
        double need_tps = offered * out_tokens / dt_s / active;
        double batch = need_tps <= 0 ? 0.0 : interp_one(need_tps, tput, grid, (int64_t)f[F_N_TABLE], f[F_MAX_BATCH]);
        double x = numpy_one(ptrs[2], ptrs[3], py_min(py_max(batch, b_min), b_max));
        double tokens = numpy_one(ptrs[0], ptrs[1], horner(f + F_COEF_TPUT, (int64_t)f[F_N_TPUT], x));
        if (batch < b_min) tokens = tokens * batch / b_min;  /* BatchCurves._tokens */
        double p_w = 0.0, itl_p99 = 0.0;
        if (!quiet) {  /* BatchCurves.at_batch (the median ITL not asked) */
            double idle_w = f[F_IDLE_W];
            p_w = batch < b_min ? idle_w + (f[F_POWER_AT_B_MIN_W] - idle_w) * batch / b_min
                                : horner(f + F_COEF_POWER, (int64_t)f[F_N_POWER], x);
            itl_p99 = numpy_one(ptrs[0], ptrs[1], horner(f + F_COEF_ITL_P99, (int64_t)f[F_N_ITL_P99], x));
        }
        double speed = 1.0;
        double capacity_req = tokens * speed * active * dt_s / out_tokens;
        double prefill_s = quiet ? 0.0 : f[F_INPUT_TOKENS] / (f[F_PREFILL_TOK_S] * speed);
        q[0] = dt_s; q[1] = offered; q[2] = rate * dt_s; q[3] = capacity_req; q[4] = f[F_MAX_WAIT_S];
        q[5] = f[F_TTFT_SLO_S] - prefill_s; q[6] = quiet ? 1.0 : 0.0; q[7] = q_frac;
        cosim_dc_serve(q);
        double served = q[OUT], left = q[OUT + 1], keep = q[OUT + 2], within = q[OUT + 4], wait_q = q[OUT + 5];
        double python = q[OUT + 6];
        if (python == 2.0) return 2;
        f[F_QUEUE_REQ] = keep;
        if (quiet) continue;
        itl_p99 = itl_p99 / speed;
        double itl_good = itl_p99 <= f[F_ITL_SLO_MS] ? served : 0.0;
        double ttft_p99 = served > 0 ? 1e3 * (wait_q + prefill_s) : 0.0;
        double good = itl_good > 0 ? within : 0.0, dropped = left - keep, tokens_out = served * out_tokens / dt_s;
        double *o = f + F_OUT;
        o[0] = batch; o[1] = p_w; o[2] = tokens_out; o[3] = NAN; o[4] = itl_p99; o[5] = served; o[6] = good;
        o[7] = dropped; o[8] = keep; o[9] = ttft_p99; o[10] = within; o[11] = itl_good;
        f[F_PYTHON_QUANTILE] = python; f[F_N_SEGMENTS] = q[OUT + 3]; f[F_PREFILL_S] = prefill_s;
        n_python += python != 0.0;
        tokens_per_s += tokens_out;
        good_req += good;
        done_req += served + dropped;
        dropped_req += dropped;
        queued_req += keep;
        ttft_good_req += within;
        itl_good_req += itl_good;
        itl_p99_ms = py_max(itl_p99_ms, itl_p99);
        ttft_p99_ms = py_max(ttft_p99_ms, ttft_p99);
        double n_active_gpus = f[F_N_ACTIVE_GPUS];
        double gpu_w = n_active_gpus * p_w + f[F_IDLE_GPUS_W];
        p_gpu_w += gpu_w;
        double fleet_it_w = gpu_w + f[F_OTHER_W];
        p_it_w += fleet_it_w;
        liquid_w += f[F_LIQUID_FRAC] * fleet_it_w;
        n_gpus_busy += n_active_gpus;
    }
    double sums[13] = {p_it_w, p_gpu_w, tokens_per_s, good_req, done_req, dropped_req, queued_req, itl_p99_ms,
                       n_gpus_busy, liquid_w, ttft_good_req, itl_good_req, ttft_p99_ms};
    memcpy(mem + 8, sums, sizeof sums);
    mem[21] = (double)n_python;
    return 0;
}

/* The SHA-256 of the source this library was built from (make build defines it; cosim.sdk.load_library compares
   it with the source's now and does not use a library built from another text). */
#ifndef COSIM_SOURCE_SHA256
#define COSIM_SOURCE_SHA256 ""
#endif
const char *cosim_source_sha256(void) { return COSIM_SOURCE_SHA256; }
