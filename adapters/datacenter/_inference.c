/* An inference fleet's requests in one step (adapters/datacenter/prefill.py's WaitQueue.serve), in C.
 *
 * What the Python form does with the step's served requests once the batch curves are read: how many
 * are served and kept, the FIFO queue of arrival cohorts (WaitQueue.step and _keep), the share of the
 * served that meet the TTFT deadline (share_within) and the 99th percentile of their waits (quantile:
 * a 50-step bisection, each step a pass over the segments, the loop of scalar float math that costs
 * Python ~60 us a step whenever a queue forms). Every value is the same IEEE double operation on the
 * same operands in the same order as the Python form's, which C rounds as Python rounds (gcc -O2, no
 * fast-math, no FMA contraction: `make build`); Python's min(a, b) and max(a, b) are written out with
 * their NaN behaviour (b < a ? b : a keeps a NaN a). Transcendental functions are not needed here.
 * The loader (adapters/datacenter/inference_kernel.py) checks the function against the Python form when it
 * loads, and tests/adapters/datacenter/test_dc_serve_kernel.py compares whole runs; without the library
 * Python does the same.
 */
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

/* The SHA-256 of the source this library was built from (make build defines it; cosim.sdk.load_library compares
   it with the source's now and does not use a library built from another text). */
#ifndef COSIM_SOURCE_SHA256
#define COSIM_SOURCE_SHA256 ""
#endif
const char *cosim_source_sha256(void) { return COSIM_SOURCE_SHA256; }
