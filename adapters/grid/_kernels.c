/* The pandapower engine's per-step arithmetic around lightsim2grid's Newton solve, in C.
 *
 * Each function does, operation for operation, what the numpy expressions in
 * adapters/grid/pandapower_flow.py do (PowerFlow.solve's injection sum, the V it builds from the
 * solver's magnitudes and angles, PowerFlow._results), so the results are the same to the last
 * bit: tests/adapters/test_grid_kernels.py and test_grid_cases.py compare both on every
 * pandapower case up to 3,000 buses and the catalogue's networks, and the grid adapter's outputs
 * (cosim_summary: GridSim's numpy forms). A numpy call on these small arrays costs ~1-3 us, and a
 * step made ~40 of them. Where numpy has algorithms of its own, they are reproduced and checked
 * against numpy when the library loads: its complex product and absolute value (fused where its
 * SIMD loops fuse), its pairwise sums, and its complex exp, which is libm's cexp. Complex numbers are
 * interleaved (re, im) doubles, as numpy stores complex128. Build: `make build` (gcc -O2, no
 * fast-math, no FMA contraction: the products and sums must round as numpy's loops round them).
 * Without the library, or when its load-time check against numpy fails, the numpy forms are used.
 */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* numpy's complex128 product a * b. Its loop is ar*br - ai*bi, ar*bi + ai*br; where the CPU has
 * FMA, numpy's SIMD loop fuses one product of each (measured: re = fma(ar, br, -(ai*bi)),
 * im = fma(ar, bi, ai*br), bit for bit on 10^5 random pairs). Which one this machine's numpy does is
 * found at load time (PowerFlow's loader compares cosim_cmul with numpy and sets cosim_fused). */
static int fused = 0;

void cosim_set_fused(int on) { fused = on; }

static inline void cmul(double ar, double ai, double br, double bi, double *re, double *im) {
    if (fused) {
        *re = fma(ar, br, -(ai * bi));
        *im = fma(ar, bi, ai * br);
    } else {
        *re = ar * br - ai * bi;
        *im = ar * bi + ai * br;
    }
}

/* out = a * b elementwise (n complex): the load-time check of cmul against numpy */
void cosim_cmul(int64_t n, const double *a, const double *b, double *out) {
    for (int64_t k = 0; k < n; k++) cmul(a[2 * k], a[2 * k + 1], b[2 * k], b[2 * k + 1], &out[2 * k], &out[2 * k + 1]);
}

/* scipy's csr_matvec for a complex matrix and vector: y = A x, each row summed from 0 in stored order.
 * (scipy's loop multiplies as numpy's plain formula does, unfused: checked at load time too) */
static void matvec(int64_t n_rows, const int32_t *indptr, const int32_t *indices, const double *data,
                   const double *x, double *y) {
    for (int64_t r = 0; r < n_rows; r++) {
        double sr = 0.0, si = 0.0;
        for (int32_t k = indptr[r]; k < indptr[r + 1]; k++) {
            const int32_t c = indices[k];
            const double ar = data[2 * k], ai = data[2 * k + 1], br = x[2 * c], bi = x[2 * c + 1];
            sr += ar * br - ai * bi;
            si += ar * bi + ai * br;
        }
        y[2 * r] = sr;
        y[2 * r + 1] = si;
    }
}

void cosim_matvec(int64_t n_rows, const int32_t *indptr, const int32_t *indices, const double *data,
                  const double *x, double *y) {
    matvec(n_rows, indptr, indices, data, x, y);
}

/* a and b are the same double, bit for bit (-0.0 is not 0.0; a NaN is its own bits) */
static inline int same_bits(double a, double b) {
    return memcmp(&a, &b, sizeof a) == 0;
}

/* numpy's maximum: NaN if either is NaN */
static inline double nan_max(double a, double b) {
    return (a >= b || isnan(a)) ? a : b;
}

/* sbus = s_const + (bincount(bus, p * f, n + 1)[:n] + 1j * bincount(bus, q * f, n + 1)[:n]) / base_mva
 *
 * p, q: element powers (table order of load, sgen, storage); f: their sign x scaling x in_service;
 * bus: their solver bus (n: none); acc: 2n scratch. The division is numpy's complex one (Smith's
 * method with a divisor base_mva + 0j: a scale 1 / base_mva, then products), the 1j * x its product.
 * Returns 1 when sbus held these very bits already (the injections of the last call again), else 0.
 */
int64_t cosim_sbus(int64_t n_el, const double *p, const double *q, const double *f, const int64_t *bus,
                   int64_t n, const double *s_const, double base_mva, double *acc, double *sbus) {
    for (int64_t b = 0; b < 2 * n; b++) acc[b] = 0.0;
    for (int64_t i = 0; i < n_el; i++) {  /* bincount: in element order, from 0.0 */
        int64_t b = bus[i];
        if (b >= 0 && b < n) acc[b] += p[i] * f[i];
    }
    for (int64_t i = 0; i < n_el; i++) {
        int64_t b = bus[i];
        if (b >= 0 && b < n) acc[n + b] += q[i] * f[i];
    }
    /* numpy's complex division by (base_mva + 0j): |base_mva| >= |0| */
    const double rat = 0.0 / base_mva;
    const double scl = 1.0 / (base_mva + 0.0 * rat);
    int64_t same = 1;
    for (int64_t b = 0; b < n; b++) {
        double jr, ji;
        cmul(0.0, 1.0, acc[n + b], 0.0, &jr, &ji);  /* 1j * im */
        const double er = acc[b] + jr, ei = 0.0 + ji;  /* re (as re + 0j) + 1j * im */
        const double dr = (er + ei * rat) * scl, di = (ei - er * rat) * scl;
        const double sr = s_const[2 * b] + dr, si = s_const[2 * b + 1] + di;
        same = same && same_bits(sbus[2 * b], sr) && same_bits(sbus[2 * b + 1], si);
        sbus[2 * b] = sr;
        sbus[2 * b + 1] = si;
    }
    return same;
}

/* After a converged solve, part 1: v = vm * exp(1j * va) and the currents [Yf; Yt; slack rows] @ v.
 *
 * vm: the solver's magnitudes (n); e: np.exp(1j * va), computed by numpy (its exp, not ours);
 * vc: out, v (n) then the currents (n_rows), complex: numpy takes their magnitudes next (its
 * complex abs is its own SIMD algorithm, not libm's hypot, so it is left to numpy).
 * y_out: CSR (indptr, indices, complex data), multiplied as scipy's csr_matvec does.
 * Returns 1 when v is bit for bit the v vc held before (the last call's), else 0.
 */
int64_t cosim_voltages(int64_t n, const double *vm, const double *e, int64_t n_rows, const int32_t *indptr,
                       const int32_t *indices, const double *data, double *vc) {
    double *v = vc, *cur = vc + 2 * n;
    int64_t same = 1;
    for (int64_t b = 0; b < n; b++) {  /* vm (as vm + 0j) * e */
        double re, im;
        cmul(vm[b], 0.0, e[2 * b], e[2 * b + 1], &re, &im);
        same = same && same_bits(v[2 * b], re) && same_bits(v[2 * b + 1], im);
        v[2 * b] = re;
        v[2 * b + 1] = im;
    }
    matvec(n_rows, indptr, indices, data, v, cur);
    return same;
}

/* Part 2, with mag = np.abs(vc): the results of PowerFlow._results.
 *
 * vm_ext (n + 1, last NaN) and loading_ext (n_br + 1, last 0) are written up to their last entry.
 * fbus, tbus: each branch's buses; c_f, c_t: loading factors. loss_re: out, the real part of each
 * branch's loss in loss_br order (n_loss); ref_s: out, v[ref] * conj(I_ref) - sbus[ref] (2 n_ref).
 * bus_map (n_bus_net), line_br (n_line), trafo_br (n_trafo): gathers into vm_pu, line, trafo.
 */
void cosim_results(int64_t n, const double *vc, const double *mag, double *vm_ext, int64_t n_br,
                   const int64_t *fbus, const int64_t *tbus, const double *c_f, const double *c_t,
                   double *loading_ext, int64_t n_loss, const int64_t *loss_br, double *loss_re,
                   int64_t n_ref, const int64_t *ref, const double *sbus, double *ref_s,
                   int64_t n_bus_net, const int64_t *bus_map, double *vm_pu,
                   int64_t n_line, const int64_t *line_br, double *line,
                   int64_t n_trafo, const int64_t *trafo_br, double *trafo) {
    const double *v = vc, *cur = vc + 2 * n, *cur_mag = mag + n;
    for (int64_t b = 0; b < n; b++) vm_ext[b] = mag[b];
    for (int64_t k = 0; k < n_br; k++)  /* np.maximum(|i_f| * c_f, |i_t| * c_t) */
        loading_ext[k] = nan_max(cur_mag[k] * c_f[k], cur_mag[n_br + k] * c_t[k]);
    for (int64_t j = 0; j < n_loss; j++) {  /* (v[f] * conj(i_f) + v[t] * conj(i_t)).real at loss_br */
        const int64_t k = loss_br[j];
        const double *i_f = cur + 2 * k, *i_t = cur + 2 * (n_br + k);
        double ar, ai, br, bi;
        cmul(v[2 * fbus[k]], v[2 * fbus[k] + 1], i_f[0], -i_f[1], &ar, &ai);
        cmul(v[2 * tbus[k]], v[2 * tbus[k] + 1], i_t[0], -i_t[1], &br, &bi);
        loss_re[j] = ar + br;
    }
    for (int64_t j = 0; j < n_ref; j++) {  /* v[ref] * conj(currents[2 n_br:]) - sbus[ref] */
        const double *i_r = cur + 2 * (2 * n_br + j);
        double sr, si;
        cmul(v[2 * ref[j]], v[2 * ref[j] + 1], i_r[0], -i_r[1], &sr, &si);
        ref_s[2 * j] = sr - sbus[2 * ref[j]];
        ref_s[2 * j + 1] = si - sbus[2 * ref[j] + 1];
    }
    for (int64_t i = 0; i < n_bus_net; i++) vm_pu[i] = vm_ext[bus_map[i]];
    for (int64_t i = 0; i < n_line; i++) line[i] = loading_ext[line_br[i]];
    for (int64_t i = 0; i < n_trafo; i++) trafo[i] = loading_ext[trafo_br[i]];
}

/* numpy's pairwise summation of a contiguous float64 array (blocks of at most 128 summed with 8
 * accumulators, larger ranges halved at a multiple of 8) */
static double pairwise_sum(const double *a, int64_t n) {
    if (n < 8) {
        double res = 0.0;
        for (int64_t i = 0; i < n; i++) res += a[i];
        return res;
    }
    if (n <= 128) {
        double r[8];
        int64_t i;
        for (int k = 0; k < 8; k++) r[k] = a[k];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int k = 0; k < 8; k++) r[k] += a[i + k];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

/* numpy's float64 add.reduce of a contiguous array: 0.0 (its identity, the start) + the pairwise sum
 * (so a sum of -0.0s is 0.0, as numpy's); checked against numpy at load time */
static double numpy_sum(const double *a, int64_t n) { return 0.0 + pairwise_sum(a, n); }

double cosim_sum(int64_t n, const double *a) { return numpy_sum(a, n); }

/* voltage_band.nan_extremes: lowest and highest of the values that are not NaN; NaN for both when
 * none is finite. (Min and max are exact; the values hold no -0.0: magnitudes and loadings.) */
static void nan_extremes(int64_t n, const double *x, double *lo, double *hi) {
    int64_t n_finite = 0;
    double mn = NAN, mx = NAN;
    for (int64_t i = 0; i < n; i++) {
        const double v = x[i];
        if (isnan(v)) continue;
        n_finite += isfinite(v) != 0;
        if (isnan(mn) || v < mn) mn = v;
        if (isnan(mx) || v > mx) mx = v;
    }
    *lo = n_finite ? mn : NAN;
    *hi = n_finite ? mx : NAN;
}

/* After cosim_results, the Grid's summary (GridSim._fill_grid_outputs' numpy forms, voltage_band's
 * functions): res = [vm_min, vm_max, max_loading, allbus_min, allbus_max, allbus_violation,
 * n_allbus_violating, n_unsupplied, n_dead]. vm (n_net) then loading (n_load) are the outputs block;
 * mon: the monitored bus positions (n_mon); dead0: per bus, dead in the network as given (n_dead0 ==
 * n_net, else not used); under, over: 2 x n_mon scratch. band_stats' sums are numpy's over the
 * finite monitored voltages in order (pairwise; fewer than 8 values: in order from 0.0, as its
 * plain-float form; its count there is of values outside either side). */
void cosim_summary(int64_t n_net, const double *vm, int64_t n_load, const double *loading, int64_t n_mon,
                   const int64_t *mon, double low, double high, int64_t n_dead0, const uint8_t *dead0,
                   double *under, double *over, double *res) {
    nan_extremes(n_net, vm, &res[0], &res[1]);
    double ignored;
    nan_extremes(n_load, loading, &ignored, &res[2]);
    int64_t n = 0, n_under = 0, n_over = 0, n_either = 0;
    double mn = 0.0, mx = 0.0;
    for (int64_t j = 0; j < n_mon; j++) {
        const double v = vm[mon[j]];
        if (!isfinite(v)) continue;
        if (n == 0 || v < mn) mn = v;
        if (n == 0 || v > mx) mx = v;
        under[n] = low - v > 0.0 ? low - v : 0.0;  /* np.maximum(low - v, 0.0), max(low - v, 0.0) */
        over[n] = v - high > 0.0 ? v - high : 0.0;
        n_under += v < low;
        n_over += v > high;
        n_either += (under[n] > 0.0 || over[n] > 0.0);
        n++;
    }
    if (n == 0) {
        res[3] = res[4] = res[5] = NAN;
        res[6] = 0.0;
    } else {
        res[3] = mn;
        res[4] = mx;
        res[5] = numpy_sum(under, n) + numpy_sum(over, n);
        res[6] = (double)(n_mon < 8 ? n_either : n_under + n_over);
    }
    int64_t n_dead = 0, n_new = 0;
    for (int64_t i = 0; i < n_net; i++) {
        if (!isnan(vm[i])) continue;
        n_dead++;
        n_new += n_dead0 == n_net ? !dead0[i] : 1;
    }
    res[7] = (double)n_new;
    res[8] = (double)n_dead;
}

/* numpy's complex128 add.reduce of a contiguous array (its pairwise summation over the interleaved
 * doubles d[0..2n): blocks of at most 128 doubles with 8 accumulators, real and imaginary parts apart;
 * then added to its identity 0j); checked against numpy at load time. */
static void pairwise_csum(const double *d, int64_t n_dbl, double *rr, double *ri) {
    if (n_dbl < 8) {
        double sr = 0.0, si = 0.0;
        for (int64_t i = 0; i < n_dbl; i += 2) {
            sr += d[i];
            si += d[i + 1];
        }
        *rr = sr;
        *ri = si;
    } else if (n_dbl <= 128) {
        double r[8];
        int64_t i;
        for (int k = 0; k < 8; k++) r[k] = d[k];
        for (i = 8; i < n_dbl - (n_dbl % 8); i += 8)
            for (int k = 0; k < 8; k++) r[k] += d[i + k];
        double sr = (r[0] + r[2]) + (r[4] + r[6]), si = (r[1] + r[3]) + (r[5] + r[7]);
        for (; i < n_dbl; i += 2) {
            sr += d[i];
            si += d[i + 1];
        }
        *rr = sr;
        *ri = si;
    } else {
        int64_t n2 = n_dbl / 2;
        n2 -= n2 % 8;
        double r1, i1, r2, i2;
        pairwise_csum(d, n2, &r1, &i1);
        pairwise_csum(d + n2, n_dbl - n2, &r2, &i2);
        *rr = r1 + r2;
        *ri = i1 + i2;
    }
}

void cosim_csum(int64_t n, const double *a, double *out) {
    double rr, ri;
    pairwise_csum(a, 2 * n, &rr, &ri);
    out[0] = 0.0 + rr;
    out[1] = 0.0 + ri;
}

/* numpy's complex128 absolute value: its SIMD loop's hypot, larger * sqrt(1 + (smaller / larger)^2)
 * with the 1 + r * r fused where the CPU has FMA (found at load time, as for cmul), inf before NaN,
 * 0 for 0 (not libm's hypot, whose rounding differs) */
static int abs_fused = 0;

void cosim_set_abs_fused(int on) { abs_fused = on; }

static inline double numpy_cabs(double re, double im) {
    re = fabs(re);
    im = fabs(im);
    if (isinf(re) || isinf(im)) return INFINITY;
    if (isnan(re) || isnan(im)) return NAN;
    const double larger = re > im ? re : im, smaller = re > im ? im : re;
    if (larger == 0.0) return 0.0;
    const double ratio = smaller / larger;
    return sqrt(abs_fused ? fma(ratio, ratio, 1.0) : ratio * ratio + 1.0) * larger;
}

void cosim_cabs(int64_t n, const double *z, double *out) {
    for (int64_t i = 0; i < n; i++) out[i] = numpy_cabs(z[2 * i], z[2 * i + 1]);
}

/* numpy's np.exp(1j * va): the product as numpy's (cmul), then libm's cexp, which numpy's complex exp
 * calls (checked at load time) */
void cosim_exp_j(int64_t n, const double *va, double *e) {
    for (int64_t b = 0; b < n; b++) {
        double jr, ji;
        cmul(0.0, 1.0, va[b], 0.0, &jr, &ji);
        const double complex z = cexp(CMPLX(jr, ji));
        e[2 * b] = creal(z);
        e[2 * b + 1] = cimag(z);
    }
}

/* The entry points PowerFlow calls: one argument, an int64 array holding the arguments above in
 * order (pointers as addresses, sizes as numbers, base_mva as the address of a double), so a call
 * converts one pointer instead of 10-26 arguments (ctypes' conversions cost ~1 us per argument). */
#define P(k) ((void *)(intptr_t)s[k])
int64_t cosim_sbus_s(const int64_t *s) {
    return cosim_sbus(s[0], P(1), P(2), P(3), P(4), s[5], P(6), *(const double *)P(7), P(8), P(9));
}

int64_t cosim_voltages_s(const int64_t *s) {
    return cosim_voltages(s[0], P(1), P(2), s[3], P(4), P(5), P(6), P(7));
}

void cosim_results_s(const int64_t *s);

/* Everything after a solve that lightsim2grid reports converged: 0 when vm or va sums to a NaN or
 * inf (PowerFlow.solve's check, numpy's sums), else (1, or 2 when V is bit for bit the V of the last
 * call: cosim_voltages) V, the currents and their magnitudes,
 * cosim_results (and the summary), then totals = [losses, p_import, q_import]:
 * numpy_sum(loss_re) * base_mva and (sum(ref_s) + s_gen_ref) * base_mva, numpy's complex scalar
 * product by (base_mva + 0j). s: [voltages spec, results spec, n, vm, va, e, n + n_rows, vc, mag,
 * n_loss, loss_re, n_ref, ref_s, &s_gen_ref (complex), &base_mva, totals]. */
int64_t cosim_solved_s(const int64_t *s) {
    const int64_t n = s[2];
    const double *vm = P(3), *va = P(4);
    if (!isfinite(numpy_sum(vm, n)) || !isfinite(numpy_sum(va, n))) return 0;
    cosim_exp_j(n, va, P(5));
    const int64_t same = cosim_voltages_s(P(0));
    cosim_cabs(s[6], P(7), P(8));
    cosim_results_s(P(1));
    const double *gen = P(13), base = *(const double *)P(14);
    double *totals = P(15), sum[2];
    totals[0] = numpy_sum(P(10), s[9]) * base;
    cosim_csum(s[11], P(12), sum);
    const double re = sum[0] + gen[0], im = sum[1] + gen[1];
    totals[1] = re * base - im * 0.0;
    totals[2] = re * 0.0 + im * base;
    return 1 + same;
}

void cosim_results_s(const int64_t *s) {
    cosim_results(s[0], P(1), P(2), P(3), s[4], P(5), P(6), P(7), P(8), P(9), s[10], P(11), P(12), s[13], P(14),
                  P(15), P(16), s[17], P(18), P(19), s[20], P(21), P(22), s[23], P(24), P(25));
    if (s[26])  /* the summary too, when the adapter gave its band (26-38: its arguments) */
        cosim_summary(s[27], P(28), s[29], P(30), s[31], P(32), *(const double *)P(33), *(const double *)P(34), s[35],
                      P(36), P(37), P(38), P(39));
}

/* The SHA-256 of the source this library was built from (make build defines it; cosim.sdk.load_library compares
   it with the source's now and does not use a library built from another text). */
#ifndef COSIM_SOURCE_SHA256
#define COSIM_SOURCE_SHA256 ""
#endif
const char *cosim_source_sha256(void) { return COSIM_SOURCE_SHA256; }
