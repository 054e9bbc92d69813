/* ChilledWaterTank: identity, sizes and value references (must match modelDescription.xml;
 * tests/thermal_fmus checks that they do). */
#ifndef CONFIG_H
#define CONFIG_H

#define MODEL_IDENTIFIER ChilledWaterTank
#define INSTANTIATION_TOKEN "{4824137d-8537-51dc-b827-48d021551b08}"
#define N_REALS 16
#define N_STATES 3
#define MAX_SUBSTEP_S 5.0

enum {
    vr_q_charge_cmd = 0,
    vr_t_ambient = 1,
    vr_volume = 2,
    vr_dt_design = 3,
    vr_t_cold = 4,
    vr_thermocline_frac = 5,
    vr_q_max = 6,
    vr_ua_loss = 7,
    vr_soc_start_frac = 8,
    vr_q_tank = 9,
    vr_q_loss = 10,
    vr_soc_frac = 11,
    vr_e_stored = 12,
    vr_e_capacity = 13,
    vr_e_charged = 14,
    vr_e_lost = 15
};

enum { x_e_stored, x_e_charged, x_e_lost };

#endif
