/* The OpenDSS engine's loadings and losses from the node voltages and each PD element's Yprim, in C.
 *
 * (Also each node's voltage magnitude, as AllBusVmagPu computes it: cosim_vm_pu.)
 *
 * OpenDSS computes a power-delivery (PD) element's terminal currents as I = Yprim · V over the
 * element's conductors (TPDElement.GetCurrents: its Vterminal from the node voltages, then
 * TcMatrix.MvMult: row i summed from 0 over the columns j in order, Yprim stored column by
 * column), and its losses and loading from those currents (adapters/grid/opendss_reads.py says
 * how, with OpenDSS's source). cosim_pd_reads does the same operations in the same order for
 * every element from Yprims read once, so the currents, losses and loadings are OpenDSS's to
 * the bit; opendss_reads.py checks that against OpenDSS's own reads (PDElements.AllCurrents) at a
 * circuit's first read and whenever a solve may have changed a Yprim. Grounded conductors (node 0)
 * are left out: a column's term is Yprim(i, j) · 0 = ±0, which leaves every sum as it is (a sum
 * from +0 is never -0), and a row's current is used by neither the losses nor, unless it is one
 * of the phases whose loading is read, the loading. Build: `make build` (gcc -O2, no fast-math, no
 * FMA contraction: each product and sum must round as OpenDSS's unfused Pascal does).
 */
#include <math.h>
#include <stdint.h>

/* Elements with more conductors (x terminals) are not taken here (the caller checks). */
#define COSIM_MAX_ORDER 64

/* One element: nr rows (its conductors row[i], node row_node[i]) by nc columns (nodes col_node[j]) of
 * its Yprim at ye (complex, column-major). Its currents to out[row[i]] (when out is not NULL), the
 * largest |I|^2 of the rows among its first n_phase conductors to *big, its losses returned. Inlined
 * with nr, nc constants for the common shapes (the loops unrolled, the sums held in registers); the
 * operations and their order are the same for every shape. */
static inline __attribute__((always_inline)) double element(const int32_t nr, const int32_t nc, const double *ye,
                                                            const int32_t *row, const int32_t *row_node,
                                                            const int32_t *col_node, const double *v,
                                                            int32_t n_phase, double *out, double *big) {
    double sr[COSIM_MAX_ORDER], si[COSIM_MAX_ORDER];
#pragma GCC unroll 8
    for (int32_t i = 0; i < nr; i++) sr[i] = si[i] = 0.0;
#pragma GCC unroll 8
    for (int32_t j = 0; j < nc; j++) {  /* column by column: every row's sum still runs over j in order */
        const double br = v[2 * col_node[j]], bi = v[2 * col_node[j] + 1];
        const double *col = ye + 2 * (int64_t)j * nr;
#pragma GCC unroll 8
        for (int32_t i = 0; i < nr; i++) {
            const double ar = col[2 * i], ai = col[2 * i + 1];
            sr[i] += ar * br - ai * bi;
            si[i] += ar * bi + ai * br;
        }
    }
    double largest = 0.0, loss = 0.0;
#pragma GCC unroll 8
    for (int32_t i = 0; i < nr; i++) {
        if (out) {
            out[2 * row[i]] = sr[i];
            out[2 * row[i] + 1] = si[i];
        }
        if (row[i] < n_phase) largest = fmax(largest, sr[i] * sr[i] + si[i] * si[i]);  /* fmax skips NaN */
        if (row_node[i] > 0) loss += v[2 * row_node[i]] * sr[i] + v[2 * row_node[i] + 1] * si[i];
    }
    *big = largest;
    return loss;
}

/* For each PD element e (OpenDSS's order) of shape[2e] rows by shape[2e + 1] columns (0 rows: not
 * computed; its largest is 0): its Yprim's kept rows and columns at y + 2 * y_at[e] (complex,
 * column-major), the rows' conductors (from 0) and nodes at row + row_at[e] and row_node + row_at[e],
 * the columns' nodes at col_node + col_at[e], node voltages v (complex, by node number). Writes the
 * currents to cur + 2 * at[e] (the layout of PDElements.AllCurrents; not when cur is NULL), the
 * largest |I|^2 of its first n_phase[e] conductors to largest[e], each loading
 * 100 * sqrt(largest[pd[k]]) / rating[k] (0 where on[k] is 0) to loading[k], and returns the sum of
 * the losses (Re V · conj(I) over the rows with a node, from 0, row by row) of the elements with
 * counted[e], added in element order. [A^2, %, W] */
double cosim_pd_reads(int64_t n_el, const int32_t *shape, const int64_t *y_at, const int64_t *row_at,
                      const int64_t *col_at, const int64_t *at, const int32_t *row, const int32_t *row_node,
                      const int32_t *col_node, const double *y, const double *v, const int8_t *counted,
                      const int32_t *n_phase, double *largest, double *cur, int64_t n_load, const int64_t *pd,
                      const double *rating, const int8_t *on, double *loading) {
    double total = 0.0;
    for (int64_t e = 0; e < n_el; e++) {
        const int32_t nr = shape[2 * e], nc = shape[2 * e + 1];
        const double *ye = y + 2 * y_at[e];
        const int32_t *r = row + row_at[e], *rn = row_node + row_at[e], *cn = col_node + col_at[e];
        double *out = cur ? cur + 2 * at[e] : 0, loss;
        double *big = &largest[e];
        const int32_t np = n_phase[e];
        largest[e] = 0.0;
        if (nr == nc) {
            switch (nr) {
                case 2: loss = element(2, 2, ye, r, rn, cn, v, np, out, big); goto done;
                case 3: loss = element(3, 3, ye, r, rn, cn, v, np, out, big); goto done;
                case 4: loss = element(4, 4, ye, r, rn, cn, v, np, out, big); goto done;
                case 6: loss = element(6, 6, ye, r, rn, cn, v, np, out, big); goto done;
                default: break;
            }
        }
        if (nr <= 0 || nr > COSIM_MAX_ORDER) continue;
        loss = element(nr, nc, ye, r, rn, cn, v, np, out, big);
    done:
        if (counted[e]) total += loss;
    }
    for (int64_t k = 0; k < n_load; k++) loading[k] = on[k] ? 100.0 * sqrt(largest[pd[k]]) / rating[k] : 0.0;
    return total;
}

/* Every node's voltage magnitude in pu, as Circuit.AllBusVmagPu computes it (Cabs = sqrt(re^2 + im^2),
 * divided by its bus's 1000 * kVBase, or by 1 where the bus has none): out[k] for node number node[k]
 * (AllBusVmagPu's order: bus by bus), with base[k] its divisor. [pu] */
void cosim_vm_pu(int64_t n, const int32_t *node, const double *base, const double *v, double *out) {
    for (int64_t k = 0; k < n; k++) {
        const double re = v[2 * node[k]], im = v[2 * node[k] + 1];
        out[k] = sqrt(re * re + im * im) / base[k];
    }
}

/* The SHA-256 of the source this library was built from (make build defines it; cosim.sdk.load_library compares
   it with the source's now and does not use a library built from another text). */
#ifndef COSIM_SOURCE_SHA256
#define COSIM_SOURCE_SHA256 ""
#endif
const char *cosim_source_sha256(void) { return COSIM_SOURCE_SHA256; }
