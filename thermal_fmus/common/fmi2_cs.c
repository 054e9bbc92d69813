/* Shared FMI 2.0 co-simulation glue for every cosim thermal FMU (written once).
 *
 * Compiled together with one model's model.c, with that model's folder first on the
 * include path so "config.h" is the model's. Implements the FMI 2.0 common and
 * co-simulation API on top of model.h: values live in ModelData.r[] indexed by value
 * reference, and fmi2DoStep integrates the states with explicit Euler substeps of at most
 * MAX_SUBSTEP_S seconds. No global state: many instances may run in one process.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmi2Functions.h"
#include "model.h"

typedef enum { ST_INSTANTIATED, ST_INIT, ST_STEP, ST_TERMINATED, ST_ERROR } Phase;

typedef struct {
    ModelData m;
    fmi2CallbackFunctions cb;
    char name[128];
    fmi2Boolean logging;
    Phase phase;
} Instance;

static void logmsg(Instance *c, fmi2Status status, const char *category, const char *text) {
    if (c->cb.logger == NULL) return;
    if (status == fmi2OK && !c->logging) return;
    /* pass the text as an argument so a '%' in it is never read as a format */
    c->cb.logger(c->cb.componentEnvironment, c->name, status, category, "%s", text);
}

void model_fail(ModelData *m, const char *variable, double value, const char *why) {
    if (m->error) return; /* keep the first problem */
    snprintf(m->error_text, sizeof m->error_text, "t = %g s: %s = %g: %s", m->time, variable, value, why);
    m->error = m->error_text;
}

static fmi2Status check_model(Instance *c, const char *function) {
    if (!c->m.error) return fmi2OK;
    char text[400];
    snprintf(text, sizeof text, "%s: %s", function, c->m.error);
    logmsg(c, fmi2Error, "logStatusError", text);
    c->phase = ST_ERROR;
    return fmi2Error;
}

static int nonfinite(const ModelData *m) {
    for (int i = 0; i < N_REALS; i++) if (!isfinite(m->r[i])) return i;
    return -1;
}

#define COMPONENT(fn)                                                         \
    Instance *c = (Instance *)comp;                                           \
    if (c == NULL) return fmi2Error;                                          \
    if (c->phase == ST_ERROR) {                                               \
        logmsg(c, fmi2Error, "logStatusError", fn ": the instance is in an error state"); \
        return fmi2Error;                                                     \
    }

/* ---- inquiry -------------------------------------------------------------------------- */
const char *fmi2GetTypesPlatform(void) { return fmi2TypesPlatform; }
const char *fmi2GetVersion(void) { return fmi2Version; }

fmi2Status fmi2SetDebugLogging(fmi2Component comp, fmi2Boolean on, size_t n, const fmi2String cats[]) {
    (void)n; (void)cats;
    if (comp == NULL) return fmi2Error;
    ((Instance *)comp)->logging = on;
    return fmi2OK;
}

/* ---- creation and destruction ------------------------------------------------------------- */
fmi2Component fmi2Instantiate(fmi2String name, fmi2Type type, fmi2String token, fmi2String resources,
                              const fmi2CallbackFunctions *functions, fmi2Boolean visible, fmi2Boolean logging) {
    (void)resources; (void)visible;
    if (functions == NULL) return NULL;
    if (type != fmi2CoSimulation || token == NULL || strcmp(token, INSTANTIATION_TOKEN) != 0) {
        if (functions->logger)
            functions->logger(functions->componentEnvironment, name ? name : "?", fmi2Error, "logStatusError",
                              "%s", type != fmi2CoSimulation ? "fmi2Instantiate: this FMU supports co-simulation only"
                                                            : "fmi2Instantiate: wrong GUID for this binary");
        return NULL;
    }
    Instance *c = (Instance *)calloc(1, sizeof(Instance));
    if (c == NULL) return NULL;
    c->cb = *functions;
    snprintf(c->name, sizeof c->name, "%s", name ? name : "instance");
    c->logging = logging;
    c->phase = ST_INSTANTIATED;
    model_start(&c->m);
    return c;
}

void fmi2FreeInstance(fmi2Component comp) { free(comp); }

fmi2Status fmi2SetupExperiment(fmi2Component comp, fmi2Boolean tolDefined, fmi2Real tol, fmi2Real start,
                               fmi2Boolean stopDefined, fmi2Real stop) {
    (void)tolDefined; (void)tol; (void)stopDefined; (void)stop;
    COMPONENT("fmi2SetupExperiment")
    c->m.time = start;
    return fmi2OK;
}

fmi2Status fmi2EnterInitializationMode(fmi2Component comp) {
    COMPONENT("fmi2EnterInitializationMode")
    c->phase = ST_INIT;
    return fmi2OK;
}

fmi2Status fmi2ExitInitializationMode(fmi2Component comp) {
    COMPONENT("fmi2ExitInitializationMode")
    model_initialize(&c->m);
    model_update(&c->m);
    c->phase = ST_STEP;
    return check_model(c, "fmi2ExitInitializationMode");
}

fmi2Status fmi2Terminate(fmi2Component comp) {
    COMPONENT("fmi2Terminate")
    c->phase = ST_TERMINATED;
    return fmi2OK;
}

fmi2Status fmi2Reset(fmi2Component comp) {
    if (comp == NULL) return fmi2Error;
    Instance *c = (Instance *)comp;
    memset(&c->m, 0, sizeof c->m);
    model_start(&c->m);
    c->phase = ST_INSTANTIATED;
    return fmi2OK;
}

/* ---- getting and setting values -------------------------------------------------------------- */
static fmi2Status bad_vr(Instance *c, const char *fn, fmi2ValueReference vr) {
    char text[160];
    snprintf(text, sizeof text, "%s: unknown value reference %u (this model has 0..%d)", fn, vr, N_REALS - 1);
    logmsg(c, fmi2Error, "logStatusError", text);
    return fmi2Error;
}

fmi2Status fmi2GetReal(fmi2Component comp, const fmi2ValueReference vr[], size_t n, fmi2Real value[]) {
    COMPONENT("fmi2GetReal")
    for (size_t i = 0; i < n; i++) {
        if (vr[i] >= N_REALS) return bad_vr(c, "fmi2GetReal", vr[i]);
        value[i] = c->m.r[vr[i]];
    }
    return fmi2OK;
}

fmi2Status fmi2SetReal(fmi2Component comp, const fmi2ValueReference vr[], size_t n, const fmi2Real value[]) {
    COMPONENT("fmi2SetReal")
    for (size_t i = 0; i < n; i++) {
        if (vr[i] >= N_REALS) return bad_vr(c, "fmi2SetReal", vr[i]);
        c->m.r[vr[i]] = value[i];
    }
    return fmi2OK;
}

#define NO_VALUES(fn, T, CONST)                                                          \
    fmi2Status fn(fmi2Component comp, const fmi2ValueReference vr[], size_t n, CONST T value[]) { \
        (void)value;                                                                     \
        COMPONENT(#fn)                                                                   \
        return n == 0 ? fmi2OK : bad_vr(c, #fn, vr[0]);                                  \
    }
NO_VALUES(fmi2GetInteger, fmi2Integer, )
NO_VALUES(fmi2GetBoolean, fmi2Boolean, )
NO_VALUES(fmi2GetString, fmi2String, )
NO_VALUES(fmi2SetInteger, fmi2Integer, const)
NO_VALUES(fmi2SetBoolean, fmi2Boolean, const)
NO_VALUES(fmi2SetString, fmi2String, const)

/* ---- capabilities this glue does not declare ---------------------------------------------------- */
static fmi2Status unsupported(fmi2Component comp, const char *fn) {
    if (comp) logmsg((Instance *)comp, fmi2Error, "logStatusError", fn);
    return fmi2Error;
}
fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate *s) { (void)s; return unsupported(c, "fmi2GetFMUstate: not supported"); }
fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate s) { (void)s; return unsupported(c, "fmi2SetFMUstate: not supported"); }
fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate *s) { (void)s; return unsupported(c, "fmi2FreeFMUstate: not supported"); }
fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate s, size_t *n) { (void)s; (void)n; return unsupported(c, "fmi2SerializedFMUstateSize: not supported"); }
fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate s, fmi2Byte b[], size_t n) { (void)s; (void)b; (void)n; return unsupported(c, "fmi2SerializeFMUstate: not supported"); }
fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte b[], size_t n, fmi2FMUstate *s) { (void)b; (void)n; (void)s; return unsupported(c, "fmi2DeSerializeFMUstate: not supported"); }
fmi2Status fmi2GetDirectionalDerivative(fmi2Component c, const fmi2ValueReference u[], size_t nu, const fmi2ValueReference z[],
                                        size_t nz, const fmi2Real dv[], fmi2Real dz[]) {
    (void)u; (void)nu; (void)z; (void)nz; (void)dv; (void)dz;
    return unsupported(c, "fmi2GetDirectionalDerivative: not supported");
}
fmi2Status fmi2SetRealInputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2Integer o[], const fmi2Real v[]) {
    (void)vr; (void)n; (void)o; (void)v;
    return unsupported(c, "fmi2SetRealInputDerivatives: not supported");
}
fmi2Status fmi2GetRealOutputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2Integer o[], fmi2Real v[]) {
    (void)vr; (void)n; (void)o; (void)v;
    return unsupported(c, "fmi2GetRealOutputDerivatives: not supported");
}

/* ---- co-simulation ------------------------------------------------------------------------------ */
fmi2Status fmi2DoStep(fmi2Component comp, fmi2Real t, fmi2Real h, fmi2Boolean noSetPrior) {
    (void)noSetPrior;
    COMPONENT("fmi2DoStep")
    if (c->phase != ST_STEP) return unsupported(comp, "fmi2DoStep: call fmi2ExitInitializationMode first");
    if (!(h > 0.0)) return unsupported(comp, "fmi2DoStep: communication step size must be > 0");
    ModelData *m = &c->m;
    m->time = t;
    int n = (int)ceil(h / MAX_SUBSTEP_S - 1e-9);
    if (n < 1) n = 1;
    double dt = h / n;
    for (int k = 0; k < n; k++) {
        model_update(m);  /* derivatives at the start of the substep */
        if (m->error) return check_model(c, "fmi2DoStep");
        for (int i = 0; i < N_STATES; i++) m->x[i] += dt * m->dx[i];
        m->time = t + (k + 1) * dt;
    }
    model_update(m);  /* outputs consistent with the final states */
    int bad = nonfinite(m);
    if (bad >= 0 && !m->error) model_fail(m, "value reference", bad, "became NaN or infinite");
    return check_model(c, "fmi2DoStep");
}

fmi2Status fmi2CancelStep(fmi2Component c) { return unsupported(c, "fmi2CancelStep: steps are never asynchronous"); }

fmi2Status fmi2GetStatus(fmi2Component c, const fmi2StatusKind s, fmi2Status *v) { (void)s; (void)v; return unsupported(c, "fmi2GetStatus: not supported"); }
fmi2Status fmi2GetRealStatus(fmi2Component comp, const fmi2StatusKind s, fmi2Real *v) {
    COMPONENT("fmi2GetRealStatus")
    if (s != fmi2LastSuccessfulTime) return unsupported(comp, "fmi2GetRealStatus: only fmi2LastSuccessfulTime");
    *v = c->m.time;
    return fmi2OK;
}
fmi2Status fmi2GetIntegerStatus(fmi2Component c, const fmi2StatusKind s, fmi2Integer *v) { (void)s; (void)v; return unsupported(c, "fmi2GetIntegerStatus: not supported"); }
fmi2Status fmi2GetBooleanStatus(fmi2Component comp, const fmi2StatusKind s, fmi2Boolean *v) {
    COMPONENT("fmi2GetBooleanStatus")
    if (s != fmi2Terminated) return unsupported(comp, "fmi2GetBooleanStatus: only fmi2Terminated");
    *v = fmi2False;
    return fmi2OK;
}
fmi2Status fmi2GetStringStatus(fmi2Component c, const fmi2StatusKind s, fmi2String *v) { (void)s; (void)v; return unsupported(c, "fmi2GetStringStatus: not supported"); }
