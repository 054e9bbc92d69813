/* DataHall: identity, sizes and value references (must match modelDescription.xml;
 * tests/thermal_fmus checks that they do). */
#ifndef CONFIG_H
#define CONFIG_H

#define MODEL_IDENTIFIER DataHall
#define INSTANTIATION_TOKEN "{10963e39-a14f-5bcc-a285-b93dd0c6cd8a}"
#define N_REALS 22
#define N_STATES 3
#define MAX_SUBSTEP_S 5.0

enum {
    vr_q_it = 0,
    vr_t_air_supply_setpoint = 1,
    vr_t_chw_supply = 2,
    vr_q_it_design = 3,
    vr_dt_air_design = 4,
    vr_dp_fan = 5,
    vr_eta_fan_frac = 6,
    vr_airflow_min_frac = 7,
    vr_recirculation_frac = 8,
    vr_dt_coil_approach = 9,
    vr_c_room = 10,
    vr_t_air_return_start = 11,
    vr_q_coil = 12,
    vr_p_fans = 13,
    vr_t_air_supply = 14,
    vr_t_air_return = 15,
    vr_t_rack_inlet = 16,
    vr_dt_inlet_excursion = 17,
    vr_mdot_air = 18,
    vr_airflow_frac = 19,
    vr_e_heat_in = 20,
    vr_e_coil = 21
};

enum { x_t_air_return, x_e_heat_in, x_e_coil };

#endif
