/* ChillerPlant: identity, sizes and value references (must match modelDescription.xml;
 * tests/thermal_fmus checks that they do). */
#ifndef CONFIG_H
#define CONFIG_H

#define MODEL_IDENTIFIER ChillerPlant
#define INSTANTIATION_TOKEN "{b925544d-3e39-59e8-8a2b-d36e9d78623f}"
#define N_REALS 36
#define N_STATES 2
#define MAX_SUBSTEP_S 60.0

enum {
    vr_q_load = 0,
    vr_t_wet = 1,
    vr_t_chw_supply_setpoint = 2,
    vr_q_chiller_ref = 3,
    vr_n_chillers = 4,
    vr_cop_ref_ratio = 5,
    vr_plr_min_frac = 6,
    vr_dt_chw = 7,
    vr_dt_tower_approach = 8,
    vr_dt_tower_range = 9,
    vr_t_cw_min = 10,
    vr_dt_hx_approach = 11,
    vr_wse_enable_frac = 12,
    vr_p_tower_fan_ref = 13,
    vr_dp_chw = 14,
    vr_dp_cw = 15,
    vr_eta_pump_frac = 16,
    vr_cycles_of_concentration_ratio = 17,
    vr_p_cooling = 18,
    vr_p_chillers = 19,
    vr_p_tower_fans = 20,
    vr_p_pumps = 21,
    vr_t_chw_supply = 22,
    vr_t_chw_return = 23,
    vr_t_cw_supply = 24,
    vr_q_chillers = 25,
    vr_q_economizer = 26,
    vr_q_unmet = 27,
    vr_q_rejected = 28,
    vr_cop_plant_ratio = 29,
    vr_cop_chillers_ratio = 30,
    vr_plr_frac = 31,
    vr_n_chillers_on = 32,
    vr_mdot_water_makeup = 33,
    vr_water = 34,
    vr_e_cooling = 35
};

enum { x_water, x_e_cooling };

#endif
