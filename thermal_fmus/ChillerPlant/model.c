/* ChillerPlant equations (see README.md for the sources of every curve and default). */
#include <math.h>
#include "model.h"

#define CP_WATER 4186.0   /* [J/(kg K)] */
#define RHO_WATER 1000.0  /* [kg/m3] */
#define H_FG 2.43e6       /* latent heat of evaporation near 30 C [J/kg] */

/* DOE-2 / EnergyPlus Chiller:Electric:EIR curves of "ElectricEIRChiller York YT 1403kW/6.94COP/VSD"
 * (EnergyPlus Chillers.idf dataset): temperatures in C, leaving chilled water and entering
 * condenser water, clamped to the curve's range as EnergyPlus does. */
static const double CAPFT[6] = {-3.447077E-02, 1.273138E-01, -9.716868E-03, 8.863546E-02, -3.165958E-03, 2.521351E-03};
static const double EIRFT[6] = {3.983846E-01, 2.396665E-02, -6.601871E-03, 2.944077E-02, -4.570885E-04, 1.873209E-03};
static const double EIRFPLR[3] = {3.272242E-02, 3.873540E-01, 5.789579E-01};
#define T_EVA_MIN 4.44
#define T_EVA_MAX 8.89
#define T_CON_MIN 12.78
#define T_CON_MAX 29.44

static double clamp(double v, double lo, double hi) { return v < lo ? lo : (v > hi ? hi : v); }

static double biquadratic(const double *a, double x, double y) {
    return a[0] + a[1] * x + a[2] * x * x + a[3] * y + a[4] * y * y + a[5] * x * y;
}

void model_start(ModelData *m) {
    double *r = m->r;
    r[vr_q_load] = 1.5e6;
    r[vr_t_wet] = 297.15;
    r[vr_t_chw_supply_setpoint] = 285.15;
    r[vr_q_chiller_ref] = 1.4031e6;
    r[vr_n_chillers] = 2.0;
    r[vr_cop_ref_ratio] = 6.94;
    r[vr_plr_min_frac] = 0.10;
    r[vr_dt_chw] = 6.0;
    r[vr_dt_tower_approach] = 3.9;
    r[vr_dt_tower_range] = 5.6;
    r[vr_t_cw_min] = 288.15;
    r[vr_dt_hx_approach] = 1.5;
    r[vr_wse_enable_frac] = 1.0;
    r[vr_p_tower_fan_ref] = 4.0e4;
    r[vr_dp_chw] = 3.0e5;
    r[vr_dp_cw] = 2.0e5;
    r[vr_eta_pump_frac] = 0.7;
    r[vr_cycles_of_concentration_ratio] = 4.0;
}

void model_initialize(ModelData *m) {
    m->x[x_water] = 0.0;
    m->x[x_e_cooling] = 0.0;
}

static int params_ok(ModelData *m) {
    const double *r = m->r;
    if (!(r[vr_q_chiller_ref] > 0)) model_fail(m, "q_chiller_ref", r[vr_q_chiller_ref], "must be > 0");
    else if (!(r[vr_n_chillers] >= 1)) model_fail(m, "n_chillers", r[vr_n_chillers], "must be >= 1");
    else if (!(r[vr_cop_ref_ratio] > 0)) model_fail(m, "cop_ref_ratio", r[vr_cop_ref_ratio], "must be > 0");
    else if (!(r[vr_dt_chw] > 0)) model_fail(m, "dt_chw", r[vr_dt_chw], "must be > 0");
    else if (!(r[vr_dt_tower_range] > 0)) model_fail(m, "dt_tower_range", r[vr_dt_tower_range], "must be > 0");
    else if (!(r[vr_eta_pump_frac] > 0 && r[vr_eta_pump_frac] <= 1)) model_fail(m, "eta_pump_frac", r[vr_eta_pump_frac], "must be in (0, 1]");
    else if (!(r[vr_cycles_of_concentration_ratio] > 1)) model_fail(m, "cycles_of_concentration_ratio", r[vr_cycles_of_concentration_ratio], "must be > 1");
    else if (!isfinite(r[vr_q_load])) model_fail(m, "q_load", r[vr_q_load], "must be finite");
    else if (!(r[vr_t_wet] > 200 && r[vr_t_wet] < 340)) model_fail(m, "t_wet", r[vr_t_wet], "outside 200..340 K: is it in kelvin?");
    return m->error == NULL;
}

typedef struct { double q_ch, q_met, q_wse, p_ch, n_on, plr, t_tw, t_cw, fan; } Plant;

/* One pass of the plant for a guess of the heat rejected [W]. */
static Plant solve(const double *r, double q, double q_rej) {
    Plant s = {0};
    const double t_set = r[vr_t_chw_supply_setpoint], t_ret = t_set + r[vr_dt_chw];
    const double t_wet = r[vr_t_wet], t_cw_min = r[vr_t_cw_min], dt_hx = r[vr_dt_hx_approach];
    const double q_ref = r[vr_q_chiller_ref], cop_ref = r[vr_cop_ref_ratio], n = floor(r[vr_n_chillers]);
    const double q_rej_design = n * q_ref * (1.0 + 1.0 / cop_ref);
    const double approach_full = r[vr_dt_tower_approach] * fmax(q_rej, 0.0) / q_rej_design; /* at full fan */
    const double t_tw_cold = t_wet + approach_full;
    const double mcp_chw = q / r[vr_dt_chw];  /* chilled-water flow times cp at design delta-T [W/K] */

    /* tower fan speed s gives approach_full / s^0.8 (air-side conductance ~ airflow^0.8) */
    #define FAN_FOR(target) clamp(pow(approach_full / fmax((target) - t_wet, 1e-6), 1.25), 0.1, 1.0)
    int wse = r[vr_wse_enable_frac] >= 0.5 && q > 0 && t_tw_cold + dt_hx < t_ret;
    if (wse && t_tw_cold + dt_hx <= t_set) {            /* full free cooling */
        s.fan = FAN_FOR(t_set - dt_hx);
        s.t_tw = t_wet + approach_full / pow(s.fan, 0.8);
        s.q_wse = q;
    } else if (wse) {                                   /* integrated economizer + chillers */
        s.fan = 1.0;
        s.t_tw = t_tw_cold;
        s.q_wse = clamp(mcp_chw * (t_ret - t_tw_cold - dt_hx), 0.0, q);
    } else {                                            /* chillers only */
        s.fan = t_tw_cold >= t_cw_min ? 1.0 : FAN_FOR(t_cw_min);
        s.t_tw = t_wet + approach_full / pow(s.fan, 0.8);
    }
    s.t_cw = fmax(s.t_tw, t_cw_min);                    /* mixing valve keeps condensers above the minimum */
    s.q_ch = q - s.q_wse;
    if (s.q_ch <= 0) { s.q_met = q; return s; }

    const double te = clamp(t_set - 273.15, T_EVA_MIN, T_EVA_MAX), tc = clamp(s.t_cw - 273.15, T_CON_MIN, T_CON_MAX);
    const double q_avail = q_ref * biquadratic(CAPFT, te, tc);  /* one chiller [W] */
    s.n_on = clamp(ceil(s.q_ch / q_avail - 1e-9), 1.0, n);
    const double q_ch_met = fmin(s.q_ch, s.n_on * q_avail);
    s.plr = q_ch_met / (s.n_on * q_avail);
    const double plr_min = r[vr_plr_min_frac];
    const double plr_eff = fmax(s.plr, plr_min);
    const double cycling = s.plr < plr_min ? s.plr / plr_min : 1.0;
    const double eirfplr = EIRFPLR[0] + EIRFPLR[1] * plr_eff + EIRFPLR[2] * plr_eff * plr_eff;
    s.p_ch = s.n_on * q_avail / cop_ref * biquadratic(EIRFT, te, tc) * eirfplr * cycling;
    s.q_met = s.q_wse + q_ch_met;
    return s;
}

void model_update(ModelData *m) {
    double *r = m->r;
    if (!params_ok(m)) return;
    const double q = fmax(r[vr_q_load], 0.0);  /* a net negative load (tank discharging more) idles the plant */
    const double cop_ref = r[vr_cop_ref_ratio];
    double q_rej = q * (1.0 + 1.0 / cop_ref);
    Plant s = solve(r, q, q_rej);
    for (int k = 0; k < 4; k++) {  /* heat rejected depends on compressor power: fixed point */
        q_rej = s.q_met + s.p_ch;
        s = solve(r, q, q_rej);
    }
    q_rej = s.q_met + s.p_ch;
    const double eta = r[vr_eta_pump_frac];
    const double p_chw = q / (CP_WATER * r[vr_dt_chw]) / RHO_WATER * r[vr_dp_chw] / eta;
    const double p_cw = q_rej / (CP_WATER * r[vr_dt_tower_range]) / RHO_WATER * r[vr_dp_cw] / eta;
    const double p_fan = q_rej > 0 ? r[vr_p_tower_fan_ref] * s.fan * s.fan * s.fan : 0.0;
    const double evaporation = q_rej / H_FG;
    const double makeup = evaporation * (1.0 + 1.0 / (r[vr_cycles_of_concentration_ratio] - 1.0));
    const double unmet = q - s.q_met;

    r[vr_p_chillers] = s.p_ch;
    r[vr_p_tower_fans] = p_fan;
    r[vr_p_pumps] = p_chw + p_cw;
    r[vr_p_cooling] = s.p_ch + p_fan + p_chw + p_cw;
    r[vr_t_chw_return] = r[vr_t_chw_supply_setpoint] + r[vr_dt_chw];
    r[vr_t_chw_supply] = r[vr_t_chw_supply_setpoint] + (q > 0 ? unmet / (q / r[vr_dt_chw]) : 0.0);
    r[vr_t_cw_supply] = s.t_cw;
    r[vr_q_chillers] = s.q_met - s.q_wse;
    r[vr_q_economizer] = s.q_wse;
    r[vr_q_unmet] = unmet;
    r[vr_q_rejected] = q_rej;
    r[vr_cop_plant_ratio] = r[vr_p_cooling] > 0 ? s.q_met / r[vr_p_cooling] : 0.0;
    r[vr_cop_chillers_ratio] = s.p_ch > 0 ? (s.q_met - s.q_wse) / s.p_ch : 0.0;
    r[vr_plr_frac] = s.plr;
    r[vr_n_chillers_on] = s.n_on;
    r[vr_mdot_water_makeup] = makeup;
    r[vr_water] = m->x[x_water];
    r[vr_e_cooling] = m->x[x_e_cooling];
    m->dx[x_water] = makeup / RHO_WATER;
    m->dx[x_e_cooling] = r[vr_p_cooling];
}
