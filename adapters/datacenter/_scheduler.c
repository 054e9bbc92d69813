/* The training scheduler's hot paths in C, one call each (driven by scheduler_kernel.py): the scheduling pass of
 * the default policies (cosim_dc_easy_pass, below), a cluster's pause knob (cosim_dc_pause_flexible) and the
 * scheduler's per-state views (cosim_dc_views), each described where it is defined.
 *
 * cosim_dc_easy_pass: the pass of easy and fifo (policies/_base.py's Policy.schedule) with first-fit placement
 * anywhere (locality "any") and no node sleep.
 *
 * What the Python pass does, in the same order, with the same numbers:
 *   1. the queued jobs in priority class, then submission time, then id (Scheduler.queue_order's np.lexsort;
 *      the three keys order every pair of jobs, so any correct sort gives the same order; a NaN submission
 *      time sorts after every number, as numpy sorts it);
 *   2. jobs start in that order while the next one's GPUs are free (a job of n GPUs takes the n lowest-numbered
 *      free GPUs: Policy.try_start, place_first_fit, Scheduler.lowest_free and Scheduler.start);
 *   3. with backfill, the jobs among the next n_backfill behind the first that did not start (the head) that
 *      fit the free GPUs: none, and the pass ends; else the head's reservation (Scheduler.reservation: the
 *      running jobs' expected ends time + remaining / max(speed, 1e-9), in a stable order of those ends with
 *      NaN last, as np.argsort(kind="stable"); the first end at which the free GPUs plus those freed reach the
 *      head's need is the shadow time, the GPUs then spare its extra), then each of them in turn starts now if
 *      it fits the free GPUs and either ends by the shadow time or needs no more than the extra (which it then
 *      uses up), until no GPU is free (Policy._backfill).
 * A start writes what Scheduler.start writes: owner, n_alloc, state; and, at a job's first start, its
 * first_start_s and, when its submission counts (stat_submit_s >= 0), the wait sum (time - submission, added
 * in start order as Python adds it) and the started count. The caller updates the free count, alloc_version
 * and the free-GPU caches. Every floating-point value is one IEEE double operation on the operands numpy uses
 * (gcc -O2, no fast-math, no FMA contraction: `make build`); the rest is integers.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* a: int64 sizes and addresses (scheduler_kernel.py packs them; its P_* constants are these) */
enum {
    P_N_JOBS, P_N_GPUS,
    P_STATE,        /* int8 per job */
    P_OWNER,        /* int64 per GPU: the job holding it, -1 free */
    P_N_ALLOC,      /* int64 per job */
    P_JOB_GPUS,     /* int64 per job: the GPUs a job asks for (jobs.n_gpus) */
    P_PRIO,         /* int64 per job */
    P_SUBMIT,       /* double per job: jobs.submit_s (the queue's order) */
    P_STAT_SUBMIT,  /* double per job: the submission the wait statistics count from */
    P_REMAINING,    /* double per job */
    P_SPEED,        /* double per job */
    P_FIRST_START,  /* double per job */
    P_ORDER,        /* int64 scratch, n_jobs: the queue */
    P_RUN,          /* int64 scratch, n_jobs: the running jobs */
    P_POS,          /* int64 scratch, n_jobs: positions in the running jobs by expected end */
    P_TMP,          /* int64 scratch, n_jobs: the merge sort's */
    P_ENDS,         /* double scratch, n_jobs: expected ends of the running jobs, by position */
    P_STARTED,      /* int64 out, n_jobs: the jobs started, in start order */
    P_COUNT
};

/* io: doubles in and out (scheduler_kernel.py's IO_* constants are these) */
enum {
    IO_TIME,        /* in: the pass's time [s] */
    IO_N_FREE,      /* in and out: free GPUs (out -1: fewer free GPUs in owner than the count said) */
    IO_BACKFILL,    /* in: 1 to backfill */
    IO_N_BEHIND,    /* in: jobs behind the head a backfill looks at */
    IO_WAIT_SUM,    /* in and out: Scheduler.wait_sum_s */
    IO_N_STARTED,   /* out: jobs started by this pass */
    IO_N_FIRST,     /* out: of them, first starts whose submission counts (Scheduler.n_started's increase) */
    IO_COUNT
};

enum { QUEUED = 1, RUNNING = 2 };

#define ARR(type, k) ((type *)(intptr_t)a[k])

static inline double np_max(double x, double y) { return x != x ? x : (y != y ? y : (x > y ? x : y)); }

/* x before y in the queue: priority, then submission (NaN last), then id. */
static int queue_before(const int64_t *prio, const double *submit, int64_t x, int64_t y) {
    if (prio[x] != prio[y]) return prio[x] < prio[y];
    double sx = submit[x], sy = submit[y];
    int nx = sx != sx, ny = sy != sy;
    if (nx != ny) return ny;  /* a number before NaN */
    if (!nx && sx != sy) return sx < sy;
    return x < y;
}

/* position x before y by expected end (NaN last), then position: np.argsort(kind="stable"). */
static int end_before(const double *ends, int64_t x, int64_t y) {
    double ex = ends[x], ey = ends[y];
    int nx = ex != ex, ny = ey != ey;
    if (nx != ny) return ny;
    if (!nx && ex != ey) return ex < ey;
    return x < y;
}

/* Bottom-up merge sort of v[0..n) by the queue's order (ends NULL) or by expected end; tmp as long as v.
 * Both orders are total (ties end at the id or position), so the result is the one ordering they define. */
static void merge_sort(const int64_t *prio, const double *submit, const double *ends, int64_t *v, int64_t *tmp,
                       int64_t n) {
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int right_first = ends == NULL ? queue_before(prio, submit, v[j], v[i]) : end_before(ends, v[j], v[i]);
                tmp[k++] = right_first ? v[j++] : v[i++];
            }
            while (i < mid) tmp[k++] = v[i++];
            while (j < hi) tmp[k++] = v[j++];
        }
        for (int64_t k = 0; k < n; k++) v[k] = tmp[k];
    }
}

/* Start `job` on the `need` lowest free GPUs at or above *cursor (every GPU below it is taken: a pass only
 * takes GPUs); 0 if owner has fewer free GPUs than that (the caller's count was wrong). */
static int start(const int64_t *a, double *io, int64_t job, int64_t need, int64_t *cursor, int64_t *n_free) {
    int64_t *owner = ARR(int64_t, P_OWNER);
    int64_t g = *cursor, taken = 0, n_gpus = a[P_N_GPUS];
    for (int64_t h = g, seen = 0; seen < need; h++) {  /* the GPUs first, so that a failure books nothing */
        if (h >= n_gpus) return 0;
        if (owner[h] < 0) seen++;
    }
    while (taken < need) {
        if (owner[g] < 0) {
            owner[g] = job;
            taken++;
        }
        g++;
    }
    *cursor = g;
    *n_free -= need;
    ARR(int64_t, P_N_ALLOC)[job] = need;
    ARR(int8_t, P_STATE)[job] = RUNNING;
    double *first = ARR(double, P_FIRST_START);
    if (first[job] != first[job]) {
        double t = io[IO_TIME], submit = ARR(double, P_STAT_SUBMIT)[job];
        first[job] = t;
        if (submit >= 0) {
            io[IO_WAIT_SUM] = io[IO_WAIT_SUM] + (t - submit);
            io[IO_N_FIRST] += 1.0;
        }
    }
    ARR(int64_t, P_STARTED)[(int64_t)io[IO_N_STARTED]] = job;
    io[IO_N_STARTED] += 1.0;
    return 1;
}

void cosim_dc_easy_pass(const int64_t *a, double *io) {
    int64_t n_jobs = a[P_N_JOBS];
    const int8_t *state = ARR(int8_t, P_STATE);
    const int64_t *need_of = ARR(int64_t, P_JOB_GPUS), *prio = ARR(int64_t, P_PRIO);
    const double *submit = ARR(double, P_SUBMIT);
    int64_t *order = ARR(int64_t, P_ORDER), *tmp = ARR(int64_t, P_TMP);
    double t = io[IO_TIME];
    int64_t n_free = (int64_t)io[IO_N_FREE], cursor = 0;
    io[IO_N_STARTED] = io[IO_N_FIRST] = 0.0;
    int64_t nq = 0;
    for (int64_t j = 0; j < n_jobs; j++)
        if (state[j] == QUEUED) order[nq++] = j;
    merge_sort(prio, submit, NULL, order, tmp, nq);
    int64_t i = 0;
    while (i < nq && need_of[order[i]] <= n_free) {
        if (!start(a, io, order[i], need_of[order[i]], &cursor, &n_free)) goto broken;
        i++;
    }
    if (i < nq && io[IO_BACKFILL] != 0.0) {
        int64_t head = i, stop = head + 1 + (int64_t)io[IO_N_BEHIND];
        if (stop > nq) stop = nq;
        int64_t n_fit = 0;  /* those behind that fit the free GPUs now (they only shrink in the pass) */
        for (int64_t k = head + 1; k < stop; k++)
            if (need_of[order[k]] <= n_free) order[head + 1 + n_fit++] = order[k];
        if (n_fit > 0) {  /* else no reservation to make */
            const double *remaining = ARR(double, P_REMAINING), *speed = ARR(double, P_SPEED);
            const int64_t *n_alloc = ARR(int64_t, P_N_ALLOC);
            int64_t *run = ARR(int64_t, P_RUN), *pos = ARR(int64_t, P_POS);
            double *ends = ARR(double, P_ENDS);
            int64_t nr = 0;
            for (int64_t j = 0; j < n_jobs; j++)
                if (state[j] == RUNNING) run[nr++] = j;
            for (int64_t k = 0; k < nr; k++) {
                ends[k] = t + remaining[run[k]] / np_max(speed[run[k]], 1e-9);
                pos[k] = k;
            }
            merge_sort(prio, submit, ends, pos, tmp, nr);
            /* the head's reservation: the first end at which the free GPUs and those freed reach its need */
            int64_t need = need_of[order[head]], freed = n_free, k;
            double shadow = INFINITY;
            int64_t extra = 0;
            for (k = 0; k < nr; k++) {
                freed += n_alloc[run[pos[k]]];
                if (freed >= need) break;
            }
            if (k < nr) {
                shadow = ends[pos[k]];
                extra = freed - need;
            }
            for (k = head + 1; k < head + 1 + n_fit; k++) {
                int64_t job = order[k], job_need = need_of[job];
                double end_s = t + remaining[job] / np_max(speed[job], 1e-9);
                if (job_need > n_free) continue;
                int in_time = end_s <= shadow;
                if (in_time || job_need <= extra) {
                    if (!start(a, io, job, job_need, &cursor, &n_free)) goto broken;
                    if (!in_time) extra -= job_need;
                }
                if (n_free == 0) break;
            }
        }
    }
    io[IO_N_FREE] = (double)n_free;
    return;
broken:
    io[IO_N_FREE] = -1.0;
}

/* The pause knob of a cluster (GpuCluster._pause_flexible with _pause and _resume), in one call. The pool is the flexible jobs queued, running or paused; the target,
 * round(frac * pool) with ties to even as Python's round; the jobs the knob paused (paused_by 1). More of them than
 * the target: the most important resume first (class, then id), a job never started back to the queue as it was,
 * one started with the restore cost added to its work, one held on its GPUs running again at that cost. Fewer:
 * running jobs of the lowest class and highest id first, then queued ones, pause; a running one pays the
 * checkpoint loss, its work done becomes its checkpoint, and its GPUs are freed (or kept, held, with
 * hold_paused_gpus). */
enum {
    K_N_JOBS, K_N_GPUS,
    K_STATE,        /* int8 per job */
    K_PAUSED_BY,    /* int8 per job: 0 none, 1 the knob, 2 the facility limit */
    K_FLEXIBLE,     /* bool (uint8) per job */
    K_PRIO,         /* int64 per job */
    K_FIRST_START,  /* double per job */
    K_REMAINING,    /* double per job */
    K_EXTRA_WORK,   /* double per job */
    K_CKPT_WORK,    /* double per job */
    K_WORK_DONE,    /* double per job */
    K_HELD,         /* bool (uint8) per job: paused on its own GPUs */
    K_OWNER,        /* int64 per GPU */
    K_RELEASING,    /* uint8 scratch, n_jobs + 1 */
    K_LIST,         /* int64 scratch, n_jobs */
    K_TMP,          /* int64 scratch, n_jobs */
    K_COUNT
};

enum {
    KIO_FRAC,       /* in: pause_flexible_frac */
    KIO_RESTORE,    /* in: restore_s */
    KIO_LOSS,       /* in: checkpoint_loss_s */
    KIO_HOLD,       /* in: 1 to hold paused running jobs on their GPUs (hold_paused_gpus) */
    KIO_BRANCH,     /* out: 0 nothing to do, 1 jobs resumed, 2 jobs paused (maybe none: no candidate left) */
    KIO_CHANGED,    /* out: jobs paused or resumed */
    KIO_FREED,      /* out: GPUs freed */
    KIO_COUNT
};

enum { PAUSED = 3 };

/* x resumes before y: class, then id */
static int resume_before(const int64_t *prio, int64_t x, int64_t y) {
    return prio[x] != prio[y] ? prio[x] < prio[y] : x < y;
}

/* x pauses before y: running first, then the higher class number (the least important), then the higher id */
static int pause_before(const int8_t *state, const int64_t *prio, int64_t x, int64_t y) {
    int qx = state[x] != RUNNING, qy = state[y] != RUNNING;
    if (qx != qy) return qx < qy;
    if (prio[x] != prio[y]) return prio[x] > prio[y];
    return x > y;
}

static void sort_jobs(const int8_t *state, const int64_t *prio, int pausing, int64_t *v, int64_t *tmp, int64_t n) {
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int right_first = pausing ? pause_before(state, prio, v[j], v[i]) : resume_before(prio, v[j], v[i]);
                tmp[k++] = right_first ? v[j++] : v[i++];
            }
            while (i < mid) tmp[k++] = v[i++];
            while (j < hi) tmp[k++] = v[j++];
        }
        for (int64_t k = 0; k < n; k++) v[k] = tmp[k];
    }
}

void cosim_dc_pause_flexible(const int64_t *a, double *io) {
    int64_t n = a[K_N_JOBS], n_gpus = a[K_N_GPUS];
    int8_t *state = ARR(int8_t, K_STATE), *paused_by = ARR(int8_t, K_PAUSED_BY);
    const uint8_t *flexible = ARR(uint8_t, K_FLEXIBLE);
    const int64_t *prio = ARR(int64_t, K_PRIO);
    const double *first = ARR(double, K_FIRST_START), *work_done = ARR(double, K_WORK_DONE);
    double *remaining = ARR(double, K_REMAINING), *extra = ARR(double, K_EXTRA_WORK);
    double *ckpt = ARR(double, K_CKPT_WORK);
    int64_t *owner = ARR(int64_t, K_OWNER), *list = ARR(int64_t, K_LIST), *tmp = ARR(int64_t, K_TMP);
    uint8_t *releasing = ARR(uint8_t, K_RELEASING), *held = ARR(uint8_t, K_HELD);
    double frac = io[KIO_FRAC], restore = io[KIO_RESTORE], loss = io[KIO_LOSS];
    int hold = io[KIO_HOLD] != 0.0;
    io[KIO_BRANCH] = io[KIO_CHANGED] = io[KIO_FREED] = 0.0;
    int64_t n_paused = 0, n_pool = 0;
    for (int64_t j = 0; j < n; j++) {
        if (paused_by[j] == 1) n_paused++;
        if (flexible[j] && state[j] >= QUEUED && state[j] <= PAUSED) n_pool++;
    }
    if (frac == 0.0 && n_paused == 0) return;
    int64_t target = (int64_t)nearbyint(frac * (double)n_pool);
    if (target == n_paused) return;
    int64_t m = 0;
    if (target < n_paused) {
        for (int64_t j = 0; j < n; j++)
            if (paused_by[j] == 1) list[m++] = j;
        sort_jobs(state, prio, 0, list, tmp, m);
        for (int64_t k = 0; k < n_paused - target; k++) {
            int64_t j = list[k];
            /* held: running again on its GPUs; else back to the queue, at no cost if it never started */
            double cost = !held[j] && first[j] != first[j] ? 0.0 : restore;
            state[j] = held[j] ? RUNNING : QUEUED;
            held[j] = 0;
            remaining[j] = remaining[j] + cost;
            extra[j] = extra[j] + cost;
            paused_by[j] = 0;
        }
        io[KIO_BRANCH] = 1.0;
        io[KIO_CHANGED] = (double)(n_paused - target);
        return;
    }
    for (int64_t j = 0; j < n; j++)
        if (flexible[j] && paused_by[j] == 0 && (state[j] == QUEUED || state[j] == RUNNING)) list[m++] = j;
    sort_jobs(state, prio, 1, list, tmp, m);
    int64_t take = target - n_paused < m ? target - n_paused : m, n_running = 0;
    for (int64_t k = 0; k < take; k++) {
        int64_t j = list[k];
        releasing[j] = 0;
        if (state[j] == RUNNING) {
            remaining[j] = remaining[j] + loss;
            ckpt[j] = work_done[j];
            if (hold) held[j] = 1;
            else releasing[j] = 1;
            n_running++;
        }
    }
    if (n_running > 0 && !hold) {
        int64_t freed = 0;
        for (int64_t g = 0; g < n_gpus; g++) {
            int64_t j = owner[g];
            if (j >= 0 && j < n && releasing[j]) {
                owner[g] = -1;
                freed++;
            }
        }
        io[KIO_FREED] = (double)freed;
    }
    for (int64_t k = 0; k < take; k++) {
        int64_t j = list[k];
        releasing[j] = 0;
        state[j] = PAUSED;
        paused_by[j] = 1;
    }
    io[KIO_BRANCH] = 2.0;
    io[KIO_CHANGED] = (double)take;
}

/* The scheduler's per-state views in one pass over the jobs (Scheduler._views and _counts): the running jobs in
 * ascending order, the jobs per state and class, per state, and the GPUs the queued and paused jobs ask for
 * (integers: exact). out[V_OK] = 0 if a state or class is outside the table (left to the Python forms). */
enum { V_N_JOBS, V_N_STATES, V_N_CLASSES, V_STATE, V_PRIO, V_JOB_GPUS, V_RUN, V_COUNT };
enum { V_N_RUNNING, V_OK, V_WAITING, V_TABLE };  /* out: then the jobs per state and class, then per state */

void cosim_dc_views(const int64_t *a, int64_t *out) {
    int64_t n = a[V_N_JOBS], n_states = a[V_N_STATES], n_classes = a[V_N_CLASSES];
    const int8_t *state = ARR(int8_t, V_STATE);
    const int64_t *prio = ARR(int64_t, V_PRIO), *gpus = ARR(int64_t, V_JOB_GPUS);
    int64_t *run = ARR(int64_t, V_RUN), *table = out + V_TABLE, *by_state = table + n_states * n_classes;
    for (int64_t k = 0; k < n_states * n_classes + n_states; k++) table[k] = 0;
    int64_t n_run = 0, waiting = 0;
    out[V_OK] = 0;
    for (int64_t j = 0; j < n; j++) {
        int64_t s = state[j], c = prio[j];
        if (s < 0 || s >= n_states || c < 0 || c >= n_classes) return;
        table[s * n_classes + c]++;
        if (s == RUNNING) run[n_run++] = j;
        else if (s == QUEUED || s == PAUSED) waiting += gpus[j];
    }
    for (int64_t s = 0; s < n_states; s++) {
        int64_t sum = 0;
        for (int64_t c = 0; c < n_classes; c++) sum += table[s * n_classes + c];
        by_state[s] = sum;
    }
    out[V_N_RUNNING] = n_run;
    out[V_WAITING] = waiting;
    out[V_OK] = 1;
}

/* The SHA-256 of the source this library was built from (make build defines it; cosim.sdk.load_library compares
   it with the source's now and does not use a library built from another text). */
#ifndef COSIM_SOURCE_SHA256
#define COSIM_SOURCE_SHA256 ""
#endif
const char *cosim_source_sha256(void) { return COSIM_SOURCE_SHA256; }
