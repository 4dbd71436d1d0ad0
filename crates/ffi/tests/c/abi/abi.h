/* What the C ABI scenarios share: the includes, CHECK, the sentinel, and the helpers of
 * support.c. Each scenario file holds the scenarios of one concept; main.c runs one by name. */
#ifndef ABI_H
#define ABI_H
#define _GNU_SOURCE
#include "synaps_scope.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;
extern char sentinel_storage;
extern const char *const NO_BUS[];
extern pthread_mutex_t log_lock;

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                             \
            fprintf(stderr, " (scope_last_error: %s)\n", scope_last_error());        \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

/* A sentinel that must survive any failed call: out-parameters are written only on success. */
#define SENTINEL ((void *)&sentinel_storage)

/* support.c */
const char *scratch_dir(void);
char *scratch_path(const char *name);
const char **env_edit(const char *const *drop, const char *const *add);
char *read_file(const char *path, size_t *len);
void write_file(const char *path, const char *text);
pid_t spawn(char *const *argv, int new_group);
int wait_exit(pid_t pid);
int ends_with(const char *text, const char *suffix);
void sleep_ms(long ms);
int alive(pid_t pid);
scope_launcher *must_launcher(const char *const *envp);
scope_argv *must_wrap(const scope_launcher *launcher, const char *const *argv);
scope_handle *must_handle(const char *unit, pid_t pid);
void check_cgroup_file(const char *path, const char *unit);
double now_ms(void);

/* A bus standing for the system bus with a stand-in systemd-oomd on it (tests/tools/oomd_bus.py,
 * named by SYNAPS_OOMD_BUS; the real oomd acts in the virtual machine): its process, the pipes to
 * it, and the environment that names it. */
struct oomd_bus {
    pid_t pid;
    int to;
    FILE *from;
    char address[4200];
    const char **env;
};
void oomd_bus_start(struct oomd_bus *bus);
void oomd_bus_start_slow(struct oomd_bus *bus, const char *slow_set_up);
void oomd_bus_killed(struct oomd_bus *bus, const char *cgroup, const char *reason);
void oomd_bus_kill_begun(struct oomd_bus *bus, const char *dir, const char *cgroup, const char *reason, int busy_ms);
void oomd_bus_sent(struct oomd_bus *bus);
void oomd_bus_stop(struct oomd_bus *bus);

/* The scenarios, each in the file of its concept. */
int scenario_abi_version(void);
int scenario_scoped_spawn(void);
int scenario_login_shell(void);
int scenario_nonutf8_argv(void);
int scenario_direct_no_manager(void);
int scenario_direct_in_pid_namespace(void);
int scenario_from_a_pid_namespace(void);
int scenario_systemd_run_behind_a_relay(void);
int scenario_refused_slice(void);
int scenario_default_log_stderr(void);
int scenario_required(void);
int scenario_taken_name(void);
int scenario_user_switch(void);
int scenario_scope_kill(void);
int scenario_other_users_scope(void);
int scenario_bad_input(void);
int scenario_threads(void);
int scenario_stopped_manager_requests(void);
int scenario_burst(void);
int scenario_holds_caller(void);
int scenario_log_callback_replaced(void);
int scenario_busy_slice_check(void);
int scenario_flush_warnings(void);
int scenario_concurrent_slice_warning(void);
int scenario_doctor(void);
int scenario_removed_while_read(void);
int scenario_ending_oomd_signal(void);
int scenario_oomd_slow_set_up(void);
int scenario_ending(void);
int scenario_fork(void);
int scenario_fork_host_ticket(void);
int scenario_held_turn(void);
int scenario_limits(void);
int scenario_oomd_watch(void);
int scenario_queue(void);

#endif
