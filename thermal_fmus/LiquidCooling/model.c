/* LiquidCooling equations (see README.md): cold plates -> CDU -> facility water -> dry cooler. */
#include <math.h>
#include "model.h"

#define CP_WATER 4186.0  /* [J/(kg K)]; the coolant loop is treated as water */

static double clamp(double v, double lo, double hi) { return v < lo ? lo : (v > hi ? hi : v); }

void model_start(ModelData *m) {
    double *r = m->r;
    r[vr_q_it] = 1.5e6;
    r[vr_t_dry] = 303.15;
    r[vr_t_facility_supply_setpoint] = 305.15;
    r[vr_q_design] = 2.0e6;
    r[vr_liquid_capture_frac] = 0.8;
    r[vr_dt_facility_design] = 10.0;
    r[vr_dt_tcs_design] = 10.0;
    r[vr_dt_cdu_approach] = 3.0;
    r[vr_ua_dry_cooler] = 1.1e5;
    r[vr_p_fan_design] = 4.0e4;
    r[vr_p_pump_design] = 2.7e4;
    r[vr_fan_min_frac] = 0.1;
    r[vr_flow_min_frac] = 0.3;
    r[vr_c_loop] = 4.0e7;
    r[vr_t_facility_return_start] = 315.15;
}

void model_initialize(ModelData *m) {
    m->x[x_t_facility_return] = m->r[vr_t_facility_return_start];
    m->x[x_e_heat_in] = 0.0;
    m->x[x_e_rejected] = 0.0;
}

static int params_ok(ModelData *m) {
    const double *r = m->r;
    if (!(r[vr_q_design] > 0)) model_fail(m, "q_design", r[vr_q_design], "must be > 0");
    else if (!(r[vr_liquid_capture_frac] > 0 && r[vr_liquid_capture_frac] <= 1)) model_fail(m, "liquid_capture_frac", r[vr_liquid_capture_frac], "must be in (0, 1]");
    else if (!(r[vr_dt_facility_design] > 0)) model_fail(m, "dt_facility_design", r[vr_dt_facility_design], "must be > 0");
    else if (!(r[vr_dt_tcs_design] > 0)) model_fail(m, "dt_tcs_design", r[vr_dt_tcs_design], "must be > 0");
    else if (!(r[vr_ua_dry_cooler] > 0)) model_fail(m, "ua_dry_cooler", r[vr_ua_dry_cooler], "must be > 0");
    else if (!(r[vr_c_loop] > 0)) model_fail(m, "c_loop", r[vr_c_loop], "must be > 0");
    else if (!(r[vr_q_it] >= 0)) model_fail(m, "q_it", r[vr_q_it], "IT heat must be >= 0");
    else if (!(r[vr_t_dry] > 200 && r[vr_t_dry] < 340)) model_fail(m, "t_dry", r[vr_t_dry], "outside 200..340 K: is it in kelvin?");
    return m->error == NULL;
}

void model_update(ModelData *m) {
    double *r = m->r;
    if (!params_ok(m)) return;
    const double q_liq = r[vr_q_it] * r[vr_liquid_capture_frac];
    const double q_liq_design = r[vr_q_design] * r[vr_liquid_capture_frac];
    const double flow = clamp(q_liq / q_liq_design, r[vr_flow_min_frac], 1.0);
    const double mcp_fw = flow * q_liq_design / r[vr_dt_facility_design];   /* facility water [W/K] */
    const double mcp_tcs = flow * q_liq_design / r[vr_dt_tcs_design];       /* CDU secondary [W/K] */
    const double p_pump = r[vr_p_pump_design] * flow * flow * flow;
    const double q_in = q_liq + p_pump;  /* pump work ends up as heat in the water */
    const double t_dry = r[vr_t_dry];
    const double t_ret = m->x[x_t_facility_return];

    /* fans run just fast enough to reject q_in with the return water at setpoint + design rise;
     * dry-cooler conductance ~ airflow^0.8 */
    const double t_ret_target = r[vr_t_facility_supply_setpoint] + q_in / mcp_fw;
    const double ua = r[vr_ua_dry_cooler];
    double fan = 1.0;
    if (t_ret_target > t_dry) fan = clamp(pow(q_in / (ua * (t_ret_target - t_dry)), 1.25), r[vr_fan_min_frac], 1.0);
    const double conductance = fmin(ua * pow(fan, 0.8), mcp_fw);  /* effectiveness <= 1 */
    const double q_rej = fmax(conductance * (t_ret - t_dry), 0.0);
    const double t_sup = t_ret - q_rej / mcp_fw;
    const double t_gpu_in = t_sup + r[vr_dt_cdu_approach];
    const double p_fan = r[vr_p_fan_design] * fan * fan * fan;

    r[vr_p_fans] = p_fan;
    r[vr_p_pumps] = p_pump;
    r[vr_p_cooling] = p_fan + p_pump;
    r[vr_t_facility_supply] = t_sup;
    r[vr_t_facility_return] = t_ret;
    r[vr_t_coolant_gpu] = t_gpu_in;
    r[vr_t_coolant_gpu_out] = t_gpu_in + q_liq / mcp_tcs;
    r[vr_q_liquid] = q_liq;
    r[vr_q_air] = r[vr_q_it] - q_liq;
    r[vr_q_rejected] = q_rej;
    r[vr_fan_speed_frac] = fan;
    r[vr_e_heat_in] = m->x[x_e_heat_in];
    r[vr_e_rejected] = m->x[x_e_rejected];
    m->dx[x_t_facility_return] = (q_in - q_rej) / r[vr_c_loop];
    m->dx[x_e_heat_in] = q_in;
    m->dx[x_e_rejected] = q_rej;
}
