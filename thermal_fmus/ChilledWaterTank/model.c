/* ChilledWaterTank equations (see README.md): an ideal stratified (two-zone) tank. */
#include <math.h>
#include "model.h"

#define CP_WATER 4186.0  /* [J/(kg K)] */
#define RHO_WATER 1000.0 /* [kg/m3] */
#define EDGE_S 60.0      /* charging tapers over the last minute of headroom, so Euler substeps never overshoot [s] */

static double clamp(double v, double lo, double hi) { return v < lo ? lo : (v > hi ? hi : v); }

static double capacity(const double *r) {
    return RHO_WATER * r[vr_volume] * CP_WATER * r[vr_dt_design] * (1.0 - r[vr_thermocline_frac]);
}

void model_start(ModelData *m) {
    double *r = m->r;
    r[vr_q_charge_cmd] = 0.0;
    r[vr_t_ambient] = 298.15;
    r[vr_volume] = 1000.0;
    r[vr_dt_design] = 10.0;
    r[vr_t_cold] = 280.15;
    r[vr_thermocline_frac] = 0.1;
    r[vr_q_max] = 2.0e6;
    r[vr_ua_loss] = 200.0;
    r[vr_soc_start_frac] = 0.5;
}

void model_initialize(ModelData *m) {
    m->x[x_e_stored] = clamp(m->r[vr_soc_start_frac], 0.0, 1.0) * capacity(m->r);
    m->x[x_e_charged] = 0.0;
    m->x[x_e_lost] = 0.0;
}

static int params_ok(ModelData *m) {
    const double *r = m->r;
    if (!(r[vr_volume] > 0)) model_fail(m, "volume", r[vr_volume], "must be > 0");
    else if (!(r[vr_dt_design] > 0)) model_fail(m, "dt_design", r[vr_dt_design], "must be > 0");
    else if (!(r[vr_thermocline_frac] >= 0 && r[vr_thermocline_frac] < 1)) model_fail(m, "thermocline_frac", r[vr_thermocline_frac], "must be in [0, 1)");
    else if (!(r[vr_q_max] > 0)) model_fail(m, "q_max", r[vr_q_max], "must be > 0");
    else if (!(r[vr_ua_loss] >= 0)) model_fail(m, "ua_loss", r[vr_ua_loss], "must be >= 0");
    else if (!(r[vr_soc_start_frac] >= 0 && r[vr_soc_start_frac] <= 1)) model_fail(m, "soc_start_frac", r[vr_soc_start_frac], "must be in [0, 1]");
    else if (!isfinite(r[vr_q_charge_cmd])) model_fail(m, "q_charge_cmd", r[vr_q_charge_cmd], "must be finite");
    return m->error == NULL;
}

void model_update(ModelData *m) {
    double *r = m->r;
    if (!params_ok(m)) return;
    const double e_cap = capacity(r);
    const double e = m->x[x_e_stored];
    const double room = fmax(e_cap - e, 0.0), stored = fmax(e, 0.0);
    /* standing loss: ambient heat into the cold zone, only while there is cooling to destroy */
    const double q_loss = fmin(fmax(r[vr_ua_loss] * (r[vr_t_ambient] - r[vr_t_cold]), 0.0), stored / EDGE_S);
    double q = clamp(r[vr_q_charge_cmd], -r[vr_q_max], r[vr_q_max]);
    q = clamp(q, -stored / EDGE_S, room / EDGE_S);

    r[vr_q_tank] = q;
    r[vr_q_loss] = q_loss;
    r[vr_e_stored] = e;
    r[vr_e_capacity] = e_cap;
    r[vr_soc_frac] = e / e_cap;
    r[vr_e_charged] = m->x[x_e_charged];
    r[vr_e_lost] = m->x[x_e_lost];
    m->dx[x_e_stored] = q - q_loss;
    m->dx[x_e_charged] = q;
    m->dx[x_e_lost] = q_loss;
}
