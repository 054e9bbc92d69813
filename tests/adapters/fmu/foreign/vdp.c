/* Van der Pol as an FMI 2.0 FMU (model exchange + co-simulation), written for the adapter's
 * tests; a strict FMU that checks what the importer does:
 *
 *   dx/dt = v,   dv/dt = mu (1 - x^2) v - x + u          (mu = 1, x(0) = 2, v(0) = 0)
 *
 * Outputs: x, v, y = gain x + bias (bias: a discrete Real input, gain: a tunable parameter),
 * mode_out = mode (a discrete Integer input), on_out = on (a discrete Boolean input) and
 * n_events (how often fmi2EnterEventMode was called). u is a continuous input.
 * Model exchange: a discrete input or a tunable parameter set in continuous-time mode is an
 * error (FMI 2.0, section 3.2.3: only in event or initialization mode). At t_stop the FMU asks
 * to terminate: a time event whose fmi2NewDiscreteStates says terminateSimulation (model
 * exchange), or fmi2DoStep returning fmi2Discard with fmi2Terminated true (co-simulation).
 *
 * Value references: 0 x, 1 der(x), 2 v, 3 der(v), 4 mu, 5 x0, 6 v0, 7 bias, 8 mode, 9 on,
 * 10 y, 11 mode_out, 12 on_out, 13 t_stop, 14 u, 15 n_events, 16 gain.
 * Co-simulation integrates with classical RK4 over substeps of at most 1 ms. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fmi2Functions.h"

#define GUID "{8c4e2a1f-3b7d-4e59-a6c2-0d9f1e7b3a55}"
enum { X_, DER_X, V_, DER_V, MU_, X0_, V0_, BIAS_, MODE_, ON_, Y_, MODE_OUT, ON_OUT, TSTOP_, U_, NEV_, GAIN_, NV };
enum { INSTANTIATED, INIT, EVENT, CONT };

typedef struct {
    double v[NV];
    int mode, on, n_events, state, cosim, terminated;
    double time;
    fmi2CallbackFunctions cb;
} Comp;

static void fail(Comp *c, const char *msg) { c->cb.logger(c->cb.componentEnvironment, "vdp", fmi2Error, "logStatusError", "%s", msg); }
static double dv(const Comp *c, double x, double v) { return c->v[MU_] * (1.0 - x * x) * v - x + c->v[U_]; }
static void refresh(Comp *c) {
    c->v[DER_X] = c->v[V_];
    c->v[DER_V] = dv(c, c->v[X_], c->v[V_]);
    c->v[Y_] = c->v[GAIN_] * c->v[X_] + c->v[BIAS_];
}
/* model exchange forbids setting this value reference in continuous-time mode */
static int event_only(fmi2ValueReference vr) { return vr == BIAS_ || vr == MODE_ || vr == ON_ || vr == GAIN_; }
static int refuse_in_cont(Comp *c, fmi2ValueReference vr) {
    if (c->cosim || c->state != CONT || !event_only(vr)) return 0;
    char msg[96];
    snprintf(msg, sizeof msg, "value reference %u is discrete: set it in event mode, not in continuous-time mode", vr);
    fail(c, msg);
    return 1;
}

const char *fmi2GetTypesPlatform(void) { return fmi2TypesPlatform; }
const char *fmi2GetVersion(void) { return fmi2Version; }
fmi2Status fmi2SetDebugLogging(fmi2Component c, fmi2Boolean on, size_t n, const fmi2String k[]) { (void)c; (void)on; (void)n; (void)k; return fmi2OK; }

fmi2Component fmi2Instantiate(fmi2String name, fmi2Type type, fmi2String guid, fmi2String res,
                              const fmi2CallbackFunctions *cb, fmi2Boolean vis, fmi2Boolean log) {
    (void)name; (void)res; (void)vis; (void)log;
    if (!guid || strcmp(guid, GUID)) return NULL;
    Comp *c = calloc(1, sizeof *c);
    c->cb = *cb;
    c->cosim = type == fmi2CoSimulation;
    c->v[MU_] = 1.0; c->v[X0_] = 2.0; c->v[V0_] = 0.0; c->v[TSTOP_] = 1e300; c->v[GAIN_] = 1.0;
    c->state = INSTANTIATED;
    return c;
}
void fmi2FreeInstance(fmi2Component c) { free(c); }
fmi2Status fmi2SetupExperiment(fmi2Component c, fmi2Boolean a, fmi2Real b, fmi2Real t0, fmi2Boolean d, fmi2Real e) {
    (void)a; (void)b; (void)d; (void)e; ((Comp *)c)->time = t0; return fmi2OK;
}
fmi2Status fmi2EnterInitializationMode(fmi2Component c) { ((Comp *)c)->state = INIT; return fmi2OK; }
fmi2Status fmi2ExitInitializationMode(fmi2Component comp) {
    Comp *c = comp;
    c->v[X_] = c->v[X0_]; c->v[V_] = c->v[V0_];
    c->state = EVENT;  /* model exchange: initialization is followed by event mode */
    refresh(c);
    return fmi2OK;
}
fmi2Status fmi2Terminate(fmi2Component c) { (void)c; return fmi2OK; }
fmi2Status fmi2Reset(fmi2Component c) { (void)c; return fmi2Error; }

fmi2Status fmi2GetReal(fmi2Component comp, const fmi2ValueReference vr[], size_t n, fmi2Real v[]) {
    Comp *c = comp; refresh(c);
    for (size_t i = 0; i < n; i++) { if (vr[i] >= NV) return fmi2Error; v[i] = c->v[vr[i]]; }
    return fmi2OK;
}
fmi2Status fmi2SetReal(fmi2Component comp, const fmi2ValueReference vr[], size_t n, const fmi2Real v[]) {
    Comp *c = comp;
    for (size_t i = 0; i < n; i++) {
        if (vr[i] >= NV || vr[i] == X_ || vr[i] == V_ || vr[i] == DER_X || vr[i] == DER_V) return fmi2Error;
        if (refuse_in_cont(c, vr[i])) return fmi2Error;
        c->v[vr[i]] = v[i];
    }
    return fmi2OK;
}
fmi2Status fmi2GetInteger(fmi2Component comp, const fmi2ValueReference vr[], size_t n, fmi2Integer v[]) {
    Comp *c = comp;
    for (size_t i = 0; i < n; i++) {
        if (vr[i] == MODE_ || vr[i] == MODE_OUT) v[i] = c->mode;
        else if (vr[i] == NEV_) v[i] = c->n_events;
        else return fmi2Error;
    }
    return fmi2OK;
}
fmi2Status fmi2SetInteger(fmi2Component comp, const fmi2ValueReference vr[], size_t n, const fmi2Integer v[]) {
    Comp *c = comp;
    for (size_t i = 0; i < n; i++) {
        if (vr[i] != MODE_ || refuse_in_cont(c, vr[i])) return fmi2Error;
        c->mode = v[i];
    }
    return fmi2OK;
}
fmi2Status fmi2GetBoolean(fmi2Component comp, const fmi2ValueReference vr[], size_t n, fmi2Boolean v[]) {
    Comp *c = comp;
    for (size_t i = 0; i < n; i++) { if (vr[i] != ON_ && vr[i] != ON_OUT) return fmi2Error; v[i] = c->on; }
    return fmi2OK;
}
fmi2Status fmi2SetBoolean(fmi2Component comp, const fmi2ValueReference vr[], size_t n, const fmi2Boolean v[]) {
    Comp *c = comp;
    for (size_t i = 0; i < n; i++) {
        if (vr[i] != ON_ || refuse_in_cont(c, vr[i])) return fmi2Error;
        c->on = v[i] != fmi2False;
    }
    return fmi2OK;
}
fmi2Status fmi2GetString(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2String v[]) { (void)c; (void)vr; (void)v; return n ? fmi2Error : fmi2OK; }
fmi2Status fmi2SetString(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2String v[]) { (void)c; (void)vr; (void)v; return n ? fmi2Error : fmi2OK; }
fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate *s) { (void)c; (void)s; return fmi2Error; }
fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate s) { (void)c; (void)s; return fmi2Error; }
fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate *s) { (void)c; (void)s; return fmi2Error; }
fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate s, size_t *n) { (void)c; (void)s; (void)n; return fmi2Error; }
fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate s, fmi2Byte b[], size_t n) { (void)c; (void)s; (void)b; (void)n; return fmi2Error; }
fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte b[], size_t n, fmi2FMUstate *s) { (void)c; (void)b; (void)n; (void)s; return fmi2Error; }
fmi2Status fmi2GetDirectionalDerivative(fmi2Component c, const fmi2ValueReference a[], size_t na, const fmi2ValueReference b[], size_t nb, const fmi2Real x[], fmi2Real y[]) {
    (void)c; (void)a; (void)na; (void)b; (void)nb; (void)x; (void)y; return fmi2Error;
}

/* model exchange */
fmi2Status fmi2EnterEventMode(fmi2Component comp) { Comp *c = comp; c->state = EVENT; c->n_events++; return fmi2OK; }
fmi2Status fmi2NewDiscreteStates(fmi2Component comp, fmi2EventInfo *e) {
    Comp *c = comp;
    memset(e, 0, sizeof *e);
    if (c->state != EVENT) { fail(c, "fmi2NewDiscreteStates outside event mode"); return fmi2Error; }
    if (c->time >= c->v[TSTOP_] - 1e-9) {
        e->terminateSimulation = fmi2True;
    } else if (c->v[TSTOP_] < 1e299) {
        e->nextEventTimeDefined = fmi2True;
        e->nextEventTime = c->v[TSTOP_];
    }
    return fmi2OK;
}
fmi2Status fmi2EnterContinuousTimeMode(fmi2Component c) { ((Comp *)c)->state = CONT; return fmi2OK; }
fmi2Status fmi2CompletedIntegratorStep(fmi2Component c, fmi2Boolean a, fmi2Boolean *ev, fmi2Boolean *term) { (void)c; (void)a; *ev = fmi2False; *term = fmi2False; return fmi2OK; }
fmi2Status fmi2SetTime(fmi2Component c, fmi2Real t) { ((Comp *)c)->time = t; return fmi2OK; }
fmi2Status fmi2SetContinuousStates(fmi2Component comp, const fmi2Real x[], size_t n) {
    Comp *c = comp; if (n != 2) return fmi2Error; c->v[X_] = x[0]; c->v[V_] = x[1]; return fmi2OK;
}
fmi2Status fmi2GetDerivatives(fmi2Component comp, fmi2Real dx[], size_t n) {
    Comp *c = comp; if (n != 2) return fmi2Error; dx[0] = c->v[V_]; dx[1] = dv(c, c->v[X_], c->v[V_]); return fmi2OK;
}
fmi2Status fmi2GetEventIndicators(fmi2Component c, fmi2Real z[], size_t n) { (void)c; (void)z; return n ? fmi2Error : fmi2OK; }
fmi2Status fmi2GetContinuousStates(fmi2Component comp, fmi2Real x[], size_t n) {
    Comp *c = comp; if (n != 2) return fmi2Error; x[0] = c->v[X_]; x[1] = c->v[V_]; return fmi2OK;
}
fmi2Status fmi2GetNominalsOfContinuousStates(fmi2Component c, fmi2Real x[], size_t n) { (void)c; if (n != 2) return fmi2Error; x[0] = x[1] = 1.0; return fmi2OK; }

/* co-simulation */
static void rk4(Comp *c, double h) {
    double x = c->v[X_], v = c->v[V_];
    double k1x = v, k1v = dv(c, x, v);
    double k2x = v + h / 2 * k1v, k2v = dv(c, x + h / 2 * k1x, v + h / 2 * k1v);
    double k3x = v + h / 2 * k2v, k3v = dv(c, x + h / 2 * k2x, v + h / 2 * k2v);
    double k4x = v + h * k3v, k4v = dv(c, x + h * k3x, v + h * k3v);
    c->v[X_] = x + h / 6 * (k1x + 2 * k2x + 2 * k3x + k4x);
    c->v[V_] = v + h / 6 * (k1v + 2 * k2v + 2 * k3v + k4v);
}
fmi2Status fmi2SetRealInputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2Integer o[], const fmi2Real v[]) { (void)c; (void)vr; (void)n; (void)o; (void)v; return fmi2Error; }
fmi2Status fmi2GetRealOutputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2Integer o[], fmi2Real v[]) { (void)c; (void)vr; (void)n; (void)o; (void)v; return fmi2Error; }
fmi2Status fmi2DoStep(fmi2Component comp, fmi2Real t, fmi2Real h, fmi2Boolean nsp) {
    (void)nsp;
    Comp *c = comp;
    double end = t + h, stop = c->v[TSTOP_];
    int ends_early = end > stop + 1e-9;
    if (ends_early) end = stop;
    int n = (int)ceil((end - t) / 1e-3 - 1e-9);
    for (int k = 0; k < n; k++) rk4(c, (end - t) / n);
    c->time = end;
    if (ends_early) { c->terminated = 1; return fmi2Discard; }
    return fmi2OK;
}
fmi2Status fmi2CancelStep(fmi2Component c) { (void)c; return fmi2Error; }
fmi2Status fmi2GetStatus(fmi2Component c, const fmi2StatusKind s, fmi2Status *v) { (void)c; (void)s; (void)v; return fmi2Error; }
fmi2Status fmi2GetRealStatus(fmi2Component c, const fmi2StatusKind s, fmi2Real *v) {
    if (s != fmi2LastSuccessfulTime) return fmi2Error;
    *v = ((Comp *)c)->time; return fmi2OK;
}
fmi2Status fmi2GetIntegerStatus(fmi2Component c, const fmi2StatusKind s, fmi2Integer *v) { (void)c; (void)s; (void)v; return fmi2Error; }
fmi2Status fmi2GetBooleanStatus(fmi2Component c, const fmi2StatusKind s, fmi2Boolean *v) {
    if (s != fmi2Terminated) return fmi2Error;
    *v = ((Comp *)c)->terminated ? fmi2True : fmi2False; return fmi2OK;
}
fmi2Status fmi2GetStringStatus(fmi2Component c, const fmi2StatusKind s, fmi2String *v) { (void)c; (void)s; (void)v; return fmi2Error; }
