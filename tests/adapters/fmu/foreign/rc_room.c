/* A tiny FMI 2.0 FMU written independently of thermal_fmus/ (its own glue, both interfaces):
 * a room as one RC node heated by P and losing heat to ambient through R.
 *
 *   C dT/dt = P - (T - Ta) / R          (states: T; inputs: P [W], Ta [K]; params C, R)
 *   T(t) = Ta + P R + (T0 - Ta - P R) exp(-t / (R C))   for constant inputs
 *
 * Value references: 0 T, 1 der(T), 2 P, 3 Ta, 4 C, 5 R, 6 T0.
 * Co-simulation integrates with classical RK4 over 1 s substeps. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "fmi2Functions.h"

#define GUID "{5f1c0a52-9a43-4c1b-8a0e-5d1c2b7a0f01}"
enum { T_, DER_T, P_, TA_, C_, R_, T0_, NV };

typedef struct { double v[NV]; double time; fmi2CallbackFunctions cb; int cosim; } Comp;

static double deriv(const Comp *c, double T) { return (c->v[P_] - (T - c->v[TA_]) / c->v[R_]) / c->v[C_]; }
static void refresh(Comp *c) { c->v[DER_T] = deriv(c, c->v[T_]); }

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
    c->v[P_] = 100.0; c->v[TA_] = 283.15; c->v[C_] = 1.0e5; c->v[R_] = 0.05; c->v[T0_] = 293.15;
    c->v[T_] = c->v[T0_];
    return c;
}
void fmi2FreeInstance(fmi2Component c) { free(c); }
fmi2Status fmi2SetupExperiment(fmi2Component c, fmi2Boolean a, fmi2Real b, fmi2Real t0, fmi2Boolean d, fmi2Real e) {
    (void)a; (void)b; (void)d; (void)e; ((Comp *)c)->time = t0; return fmi2OK;
}
fmi2Status fmi2EnterInitializationMode(fmi2Component c) { (void)c; return fmi2OK; }
fmi2Status fmi2ExitInitializationMode(fmi2Component comp) { Comp *c = comp; c->v[T_] = c->v[T0_]; refresh(c); return fmi2OK; }
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
        if (vr[i] >= NV || vr[i] == T_ || vr[i] == DER_T) return fmi2Error;
        if (vr[i] == R_ && !(v[i] > 0)) {
            c->cb.logger(c->cb.componentEnvironment, "rc", fmi2Error, "logStatusError", "R must be > 0");
            return fmi2Error;
        }
        c->v[vr[i]] = v[i];
    }
    return fmi2OK;
}
#define NOVAL(fn, T, K) fmi2Status fn(fmi2Component c, const fmi2ValueReference vr[], size_t n, K T v[]) { (void)c; (void)vr; (void)v; return n ? fmi2Error : fmi2OK; }
NOVAL(fmi2GetInteger, fmi2Integer, )
NOVAL(fmi2GetBoolean, fmi2Boolean, )
NOVAL(fmi2GetString, fmi2String, )
NOVAL(fmi2SetInteger, fmi2Integer, const)
NOVAL(fmi2SetBoolean, fmi2Boolean, const)
NOVAL(fmi2SetString, fmi2String, const)
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
fmi2Status fmi2EnterEventMode(fmi2Component c) { (void)c; return fmi2OK; }
fmi2Status fmi2NewDiscreteStates(fmi2Component c, fmi2EventInfo *e) { (void)c; memset(e, 0, sizeof *e); return fmi2OK; }
fmi2Status fmi2EnterContinuousTimeMode(fmi2Component c) { (void)c; return fmi2OK; }
fmi2Status fmi2CompletedIntegratorStep(fmi2Component c, fmi2Boolean a, fmi2Boolean *ev, fmi2Boolean *term) { (void)c; (void)a; *ev = fmi2False; *term = fmi2False; return fmi2OK; }
fmi2Status fmi2SetTime(fmi2Component c, fmi2Real t) { ((Comp *)c)->time = t; return fmi2OK; }
fmi2Status fmi2SetContinuousStates(fmi2Component c, const fmi2Real x[], size_t n) { if (n != 1) return fmi2Error; ((Comp *)c)->v[T_] = x[0]; return fmi2OK; }
fmi2Status fmi2GetDerivatives(fmi2Component c, fmi2Real dx[], size_t n) { if (n != 1) return fmi2Error; dx[0] = deriv(c, ((Comp *)c)->v[T_]); return fmi2OK; }
fmi2Status fmi2GetEventIndicators(fmi2Component c, fmi2Real z[], size_t n) { (void)c; (void)z; return n ? fmi2Error : fmi2OK; }
fmi2Status fmi2GetContinuousStates(fmi2Component c, fmi2Real x[], size_t n) { if (n != 1) return fmi2Error; x[0] = ((Comp *)c)->v[T_]; return fmi2OK; }
fmi2Status fmi2GetNominalsOfContinuousStates(fmi2Component c, fmi2Real x[], size_t n) { (void)c; if (n != 1) return fmi2Error; x[0] = 300.0; return fmi2OK; }

/* co-simulation */
fmi2Status fmi2SetRealInputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2Integer o[], const fmi2Real v[]) { (void)c; (void)vr; (void)n; (void)o; (void)v; return fmi2Error; }
fmi2Status fmi2GetRealOutputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2Integer o[], fmi2Real v[]) { (void)c; (void)vr; (void)n; (void)o; (void)v; return fmi2Error; }
fmi2Status fmi2DoStep(fmi2Component comp, fmi2Real t, fmi2Real h, fmi2Boolean nsp) {
    (void)nsp;
    Comp *c = comp;
    int n = (int)ceil(h - 1e-9);
    double dt = h / n, T = c->v[T_];
    for (int k = 0; k < n; k++) {
        double k1 = deriv(c, T), k2 = deriv(c, T + dt / 2 * k1), k3 = deriv(c, T + dt / 2 * k2), k4 = deriv(c, T + dt * k3);
        T += dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4);
    }
    c->v[T_] = T;
    c->time = t + h;
    return fmi2OK;
}
fmi2Status fmi2CancelStep(fmi2Component c) { (void)c; return fmi2Error; }
fmi2Status fmi2GetStatus(fmi2Component c, const fmi2StatusKind s, fmi2Status *v) { (void)c; (void)s; (void)v; return fmi2Error; }
fmi2Status fmi2GetRealStatus(fmi2Component c, const fmi2StatusKind s, fmi2Real *v) { (void)s; *v = ((Comp *)c)->time; return fmi2OK; }
fmi2Status fmi2GetIntegerStatus(fmi2Component c, const fmi2StatusKind s, fmi2Integer *v) { (void)c; (void)s; (void)v; return fmi2Error; }
fmi2Status fmi2GetBooleanStatus(fmi2Component c, const fmi2StatusKind s, fmi2Boolean *v) { (void)c; (void)s; *v = fmi2False; return fmi2OK; }
fmi2Status fmi2GetStringStatus(fmi2Component c, const fmi2StatusKind s, fmi2String *v) { (void)c; (void)s; (void)v; return fmi2Error; }
