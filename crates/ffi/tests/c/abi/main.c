/* The C ABI, exercised from C against a real systemd user manager. Compiled with
 * -Wall -Wextra -Werror -pedantic under AddressSanitizer and UBSan by tests/c_abi.rs, which runs
 * each scenario (argv[1]) in its own process. Exit 0 means the scenario held. */
#include "abi.h"

int main(int argc, char **argv) {
    static const struct {
        const char *name;
        int (*run)(void);
    } scenarios[] = {
        {"abi_version", scenario_abi_version},       {"scoped_spawn", scenario_scoped_spawn},
        {"nonutf8_argv", scenario_nonutf8_argv},     {"direct_no_manager", scenario_direct_no_manager},
        {"direct_in_pid_namespace", scenario_direct_in_pid_namespace},
        {"from_a_pid_namespace", scenario_from_a_pid_namespace},
        {"systemd_run_behind_a_relay", scenario_systemd_run_behind_a_relay},
        {"refused_slice", scenario_refused_slice},   {"default_log_stderr", scenario_default_log_stderr},
        {"required", scenario_required},             {"scope_kill", scenario_scope_kill},
        {"bad_input", scenario_bad_input},           {"threads", scenario_threads},
        {"login_shell", scenario_login_shell},       {"stopped_manager_requests", scenario_stopped_manager_requests},
        {"busy_slice_check", scenario_busy_slice_check}, {"flush_warnings", scenario_flush_warnings},
        {"holds_caller", scenario_holds_caller},     {"log_callback_replaced", scenario_log_callback_replaced},
        {"doctor", scenario_doctor},                 {"removed_while_read", scenario_removed_while_read},
        {"other_users_scope", scenario_other_users_scope}, {"taken_name", scenario_taken_name},
        {"concurrent_slice_warning", scenario_concurrent_slice_warning},
        {"burst", scenario_burst},                   {"user_switch", scenario_user_switch},
        {"ending", scenario_ending},                 {"fork", scenario_fork},
        {"ending_oomd_signal", scenario_ending_oomd_signal}, {"oomd_slow_set_up", scenario_oomd_slow_set_up},
        {"fork_host_ticket", scenario_fork_host_ticket}, {"held_turn", scenario_held_turn},
        {"limits", scenario_limits},                 {"oomd_watch", scenario_oomd_watch},
        {"queue", scenario_queue},
    };
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCENARIO\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        if (strcmp(argv[1], scenarios[i].name) == 0) {
            int status = scenarios[i].run();
            char command[300];
            snprintf(command, sizeof command, "rm -rf '%s'", scratch_dir());
            if (system(command) != 0) fprintf(stderr, "could not remove %s\n", scratch_dir());
            return status;
        }
    }
    fprintf(stderr, "unknown scenario %s\n", argv[1]);
    return 2;
}
