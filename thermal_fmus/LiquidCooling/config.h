/* LiquidCooling: identity, sizes and value references (must match modelDescription.xml;
 * tests/thermal_fmus checks that they do). */
#ifndef CONFIG_H
#define CONFIG_H

#define MODEL_IDENTIFIER LiquidCooling
#define INSTANTIATION_TOKEN "{5290d279-f942-58d5-9370-33a0f001fbda}"
#define N_REALS 28
#define N_STATES 3
#define MAX_SUBSTEP_S 10.0

enum {
    vr_q_it = 0,
    vr_t_dry = 1,
    vr_t_facility_supply_setpoint = 2,
    vr_q_design = 3,
    vr_liquid_capture_frac = 4,
    vr_dt_facility_design = 5,
    vr_dt_tcs_design = 6,
    vr_dt_cdu_approach = 7,
    vr_ua_dry_cooler = 8,
    vr_p_fan_design = 9,
    vr_p_pump_design = 10,
    vr_fan_min_frac = 11,
    vr_flow_min_frac = 12,
    vr_c_loop = 13,
    vr_t_facility_return_start = 14,
    vr_p_cooling = 15,
    vr_p_fans = 16,
    vr_p_pumps = 17,
    vr_t_facility_supply = 18,
    vr_t_facility_return = 19,
    vr_t_coolant_gpu = 20,
    vr_t_coolant_gpu_out = 21,
    vr_q_liquid = 22,
    vr_q_air = 23,
    vr_q_rejected = 24,
    vr_fan_speed_frac = 25,
    vr_e_heat_in = 26,
    vr_e_rejected = 27
};

enum { x_t_facility_return, x_e_heat_in, x_e_rejected };

#endif
