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
 * circuit's first read and whenever a solve may have changed a Yprim. A grounded conductor
 * (node 0) is skipped: its term is Yprim(i, j) · 0 = ±0, which leaves every sum as it is (a sum
 * from +0 is never -0). Build: `make build` (gcc -O2, no fast-math, no FMA contraction: each
 * product and sum must round as OpenDSS's unfused Pascal does).
 */
#include <math.h>
#include <stdint.h>

/* Elements of a larger order (conductors x terminals) are not taken here (the caller checks). */
#define COSIM_MAX_ORDER 64

/* For each PD element e (OpenDSS's order) of order n = order[e] (0: not computed; its largest is 0):
 * Yprim at y + 2 * y_at[e] (complex, column-major), its conductors' node numbers at refs + at[e],
 * node voltages v (complex, indexed by node number). Writes the currents to cur + 2 * at[e] (the
 * layout of PDElements.AllCurrents), the largest |I|^2 of the first n_phase[e] conductors to
 * largest[e], each loading 100 * sqrt(largest[pd[k]]) / rating[k] (0 where on[k] is 0) to
 * loading[k], and returns the sum of the losses (Re V · conj(I) over conductors with a node, from 0,
 * conductor by conductor) of the elements with counted[e], added in element order. [A^2, %, W] */
/* One element of order n: its currents to out, its largest |I|^2 over the first n_phase to *big,
 * and its losses returned. Inlined with n a constant for the common orders (the loops then unrolled,
 * the sums held in registers); the operations and their order are the same for every n. */
static inline __attribute__((always_inline)) double element(const int32_t n, const double *ye, const int32_t *node,
                                                            const double *v, int32_t n_phase, double *out, double *big) {
    double sr[COSIM_MAX_ORDER], si[COSIM_MAX_ORDER];
#pragma GCC unroll 8
    for (int32_t i = 0; i < n; i++) sr[i] = si[i] = 0.0;
#pragma GCC unroll 8
    for (int32_t j = 0; j < n; j++) {  /* column by column: every row's sum still runs over j in order */
        if (node[j] <= 0) continue;
        const double br = v[2 * node[j]], bi = v[2 * node[j] + 1];
        const double *col = ye + 2 * (int64_t)j * n;
#pragma GCC unroll 8
        for (int32_t i = 0; i < n; i++) {
            const double ar = col[2 * i], ai = col[2 * i + 1];
            sr[i] += ar * br - ai * bi;
            si[i] += ar * bi + ai * br;
        }
    }
    double largest = 0.0, loss = 0.0;
#pragma GCC unroll 8
    for (int32_t i = 0; i < n; i++) {
        out[2 * i] = sr[i];
        out[2 * i + 1] = si[i];
        if (i < n_phase) largest = fmax(largest, sr[i] * sr[i] + si[i] * si[i]);  /* fmax skips NaN */
        if (node[i] > 0) loss += v[2 * node[i]] * sr[i] + v[2 * node[i] + 1] * si[i];
    }
    *big = largest;
    return loss;
}

/* For each PD element e (OpenDSS's order) of order n = order[e] (0: not computed; its largest is 0):
 * Yprim at y + 2 * y_at[e] (complex, column-major), its conductors' node numbers at refs + at[e],
 * node voltages v (complex, indexed by node number). Writes the currents to cur + 2 * at[e] (the
 * layout of PDElements.AllCurrents), the largest |I|^2 of the first n_phase[e] conductors to
 * largest[e], each loading 100 * sqrt(largest[pd[k]]) / rating[k] (0 where on[k] is 0) to
 * loading[k], and returns the sum of the losses (Re V · conj(I) over conductors with a node, from 0,
 * conductor by conductor) of the elements with counted[e], added in element order. [A^2, %, W] */
double cosim_pd_reads(int64_t n_el, const int32_t *order, const int64_t *y_at, const int64_t *at,
                      const int32_t *refs, const double *y, const double *v, const int8_t *counted,
                      const int32_t *n_phase, double *largest, double *cur, int64_t n_load,
                      const int64_t *pd, const double *rating, const int8_t *on, double *loading) {
    double total = 0.0;
    for (int64_t e = 0; e < n_el; e++) {
        const int32_t n = order[e];
        const double *ye = y + 2 * y_at[e];
        const int32_t *node = refs + at[e];
        double *out = cur + 2 * at[e], loss;
        largest[e] = 0.0;
        switch (n) {
            case 2: loss = element(2, ye, node, v, n_phase[e], out, &largest[e]); break;
            case 4: loss = element(4, ye, node, v, n_phase[e], out, &largest[e]); break;
            case 6: loss = element(6, ye, node, v, n_phase[e], out, &largest[e]); break;
            case 8: loss = element(8, ye, node, v, n_phase[e], out, &largest[e]); break;
            default:
                if (n <= 0 || n > COSIM_MAX_ORDER) continue;
                loss = element(n, ye, node, v, n_phase[e], out, &largest[e]);
        }
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
