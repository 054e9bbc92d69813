/* DataHall equations (see README.md): one lumped hall-air node, CRAH coil and fans. */
#include <math.h>
#include "model.h"

#define CP_AIR 1005.0    /* [J/(kg K)] */
#define RHO_AIR 1.2      /* [kg/m3] */
#define A1_LOW 291.15    /* ASHRAE A1 recommended rack inlet band, 18..27 C [K] */
#define A1_HIGH 300.15

static double clamp(double v, double lo, double hi) { return v < lo ? lo : (v > hi ? hi : v); }

void model_start(ModelData *m) {
    double *r = m->r;
    r[vr_q_it] = 1.5e6;
    r[vr_t_air_supply_setpoint] = 295.15;
    r[vr_t_chw_supply] = 285.15;
    r[vr_q_it_design] = 2.0e6;
    r[vr_dt_air_design] = 12.0;
    r[vr_dp_fan] = 500.0;
    r[vr_eta_fan_frac] = 0.6;
    r[vr_airflow_min_frac] = 0.3;
    r[vr_recirculation_frac] = 0.05;
    r[vr_dt_coil_approach] = 3.0;
    r[vr_c_room] = 2.0e7;
    r[vr_t_air_return_start] = 307.15;
}

void model_initialize(ModelData *m) {
    m->x[x_t_air_return] = m->r[vr_t_air_return_start];
    m->x[x_e_heat_in] = 0.0;
    m->x[x_e_coil] = 0.0;
}

static int params_ok(ModelData *m) {
    const double *r = m->r;
    if (!(r[vr_q_it_design] > 0)) model_fail(m, "q_it_design", r[vr_q_it_design], "must be > 0");
    else if (!(r[vr_dt_air_design] > 0)) model_fail(m, "dt_air_design", r[vr_dt_air_design], "must be > 0");
    else if (!(r[vr_c_room] > 0)) model_fail(m, "c_room", r[vr_c_room], "must be > 0");
    else if (!(r[vr_eta_fan_frac] > 0 && r[vr_eta_fan_frac] <= 1)) model_fail(m, "eta_fan_frac", r[vr_eta_fan_frac], "must be in (0, 1]");
    else if (!(r[vr_recirculation_frac] >= 0 && r[vr_recirculation_frac] < 1)) model_fail(m, "recirculation_frac", r[vr_recirculation_frac], "must be in [0, 1)");
    else if (!(r[vr_q_it] >= 0)) model_fail(m, "q_it", r[vr_q_it], "IT heat must be >= 0");
    return m->error == NULL;
}

void model_update(ModelData *m) {
    double *r = m->r;
    if (!params_ok(m)) return;
    const double q_it = r[vr_q_it];
    const double mdot_design = r[vr_q_it_design] / (CP_AIR * r[vr_dt_air_design]);
    const double flow = clamp(q_it / r[vr_q_it_design], r[vr_airflow_min_frac], 1.0);  /* fans track IT load */
    const double mdot = flow * mdot_design;
    const double p_fan_design = mdot_design / RHO_AIR * r[vr_dp_fan] / r[vr_eta_fan_frac];
    const double p_fan = p_fan_design * flow * flow * flow;  /* fan affinity law */
    const double t_ret = m->x[x_t_air_return];
    const double t_sup = fmax(r[vr_t_air_supply_setpoint], r[vr_t_chw_supply] + r[vr_dt_coil_approach]);
    const double q_coil = fmax(mdot * CP_AIR * (t_ret - t_sup), 0.0);  /* a cooling coil never heats */
    const double t_in = t_sup + r[vr_recirculation_frac] * (t_ret - t_sup);

    r[vr_q_coil] = q_coil;
    r[vr_p_fans] = p_fan;
    r[vr_t_air_supply] = t_sup;
    r[vr_t_air_return] = t_ret;
    r[vr_t_rack_inlet] = t_in;
    r[vr_dt_inlet_excursion] = fmax(t_in - A1_HIGH, 0.0) + fmax(A1_LOW - t_in, 0.0);
    r[vr_mdot_air] = mdot;
    r[vr_airflow_frac] = flow;
    r[vr_e_heat_in] = m->x[x_e_heat_in];
    r[vr_e_coil] = m->x[x_e_coil];
    m->dx[x_t_air_return] = (q_it + p_fan - q_coil) / r[vr_c_room];
    m->dx[x_e_heat_in] = q_it + p_fan;
    m->dx[x_e_coil] = q_coil;
}
