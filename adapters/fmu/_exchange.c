/* One step of an FMI 2.0 co-simulation FMU in one call from Python (adapters/fmu/instance.py).
 *
 * The calls the adapter otherwise makes one by one through ctypes, in the same order and with
 * the same arguments: fmi2SetReal of this step's inputs, then fmi2DoStep and fmi2GetReal of
 * every scalar real output (fmi2GetReal first when the outputs are sampled at the step's start),
 * each through the function pointer fmpy loaded. Each call's status is checked as the adapter
 * checks it (above fmi2Warning is a failure): the first failing call ends the exchange, says
 * which it was and leaves its status; nothing after it is called. The outputs are then
 * converted to scenario units, value * scale + offset, two IEEE operations as Python does them
 * (built with -ffp-contract=off: no fused multiply-add; checked at load).
 *
 * Built by `make build`:
 *   gcc -O2 -fPIC -shared -std=c11 -ffp-contract=off -fno-fast-math -Wall -o _exchange.so _exchange.c
 */
#include <stddef.h>

#define FMI2_WARNING 1

typedef int (*fmi2_set_real)(void *, const unsigned int *, size_t, const double *);
typedef int (*fmi2_do_step)(void *, double, double, int);
typedef int (*fmi2_get_real)(void *, const unsigned int *, size_t, double *);

/* Laid out as _ExchangeArgs in instance.py. */
typedef struct {
    fmi2_set_real set_real;
    fmi2_do_step do_step;
    fmi2_get_real get_real;
    void *component;
    const unsigned int *in_vr; /* this step's inputs: value references, count, values [FMU units] */
    size_t n_in;
    const double *in_values;
    const unsigned int *out_vr; /* the scalar real outputs */
    size_t n_out;
    double *out_fmu;            /* as the FMU gives them [FMU units] */
    const double *scale;        /* Port.from_fmu of each */
    const double *offset;
    double *out;                /* [scenario units] */
    double t;                   /* fmi2DoStep's communication point and step size [s] */
    double h;
    int outputs_first;          /* read the outputs before the step (outputs_at = "step_start") */
    int status;                 /* the failing call's fmi2Status */
} cosim_fmi2_exchange_t;

enum { EXCHANGED = 0, SET_FAILED = 1, STEP_FAILED = 2, GET_FAILED = 3 };

void cosim_scale_offset(size_t n, const double *values, const double *scale, const double *offset, double *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = values[i] * scale[i] + offset[i];
}

static int get_outputs(cosim_fmi2_exchange_t *x)
{
    if (x->n_out == 0)
        return EXCHANGED;
    int status = x->get_real(x->component, x->out_vr, x->n_out, x->out_fmu);
    if (status > FMI2_WARNING) {
        x->status = status;
        return GET_FAILED;
    }
    cosim_scale_offset(x->n_out, x->out_fmu, x->scale, x->offset, x->out);
    return EXCHANGED;
}

/* fmi2True for noSetFMUStatePriorToCurrentPoint, as fmpy's doStep passes it. */
int cosim_fmi2_exchange(cosim_fmi2_exchange_t *x)
{
    int status, failed;
    if (x->n_in > 0) {
        status = x->set_real(x->component, x->in_vr, x->n_in, x->in_values);
        if (status > FMI2_WARNING) {
            x->status = status;
            return SET_FAILED;
        }
    }
    if (x->outputs_first && (failed = get_outputs(x)) != EXCHANGED)
        return failed;
    status = x->do_step(x->component, x->t, x->h, 1);
    if (status > FMI2_WARNING) {
        x->status = status;
        return STEP_FAILED;
    }
    return x->outputs_first ? EXCHANGED : get_outputs(x);
}

/* The SHA-256 of the source this library was built from (make build defines it; cosim.sdk.load_library compares
   it with the source's now and does not use a library built from another text). */
#ifndef COSIM_SOURCE_SHA256
#define COSIM_SOURCE_SHA256 ""
#endif
const char *cosim_source_sha256(void) { return COSIM_SOURCE_SHA256; }
