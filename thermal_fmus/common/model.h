/* The interface between the shared FMI 2.0 co-simulation glue (fmi2_cs.c) and one model.
 *
 * A model folder supplies config.h (MODEL_IDENTIFIER, INSTANTIATION_TOKEN, N_REALS,
 * N_STATES, MAX_SUBSTEP_S and an enum of value references, which index `r[]`) and model.c
 * with the three functions below: only the equations, no FMI calls.
 *
 * All variables are SI (W, K, kg/s, m3, J) and real-valued; value reference i is r[i].
 * States x[] are integrated by the glue with explicit Euler substeps no longer than
 * MAX_SUBSTEP_S, so a model only states derivatives dx[].
 */
#ifndef COSIM_MODEL_H
#define COSIM_MODEL_H

#include <stddef.h>

#include "config.h"

typedef struct {
    double r[N_REALS];                       /* every variable, indexed by value reference */
    double x[N_STATES > 0 ? N_STATES : 1];   /* continuous states */
    double dx[N_STATES > 0 ? N_STATES : 1];  /* their derivatives, set by model_update */
    double time;                             /* [s] */
    const char *error;                       /* set by a model to fail the current call */
    char error_text[256];
} ModelData;

/* Set the start value of every variable and state. */
void model_start(ModelData *m);

/* Initialise states from parameters (called when leaving initialization mode). */
void model_initialize(ModelData *m);

/* From inputs, parameters and states: set every output and the derivatives dx[].
 * On out-of-domain input set m->error (via model_fail) and return. */
void model_update(ModelData *m);

/* Record an error message naming the variable; the glue returns fmi2Error. */
void model_fail(ModelData *m, const char *variable, double value, const char *why);

#endif
