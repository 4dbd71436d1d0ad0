/* oomd's Killed signal from C where the system bus is slow to answer the subscription's set-up. */
#include "abi.h"

#include <sys/xattr.h>

/* A system bus slow to answer the subscription's set-up (oomd's introspection held 1 s, as a
 * machine amid the thrash oomd acts on was seen to answer past the quarter second a handle
 * waits): the handle is made without waiting for it, and oomd's kill once the set-up is done is
 * told by its signal. */
int scenario_oomd_slow_set_up(void) {
    struct oomd_bus bus;
    oomd_bus_start_slow(&bus, "1");
    scope_launcher *launcher = must_launcher(bus.env);
    const char *argv[] = {"sleep", "100", NULL};
    scope_argv *wrapped = must_wrap(launcher, argv);
    pid_t pid = spawn(scope_argv_ptr(wrapped), 0);
    CHECK(pid > 0, "spawn the tool");
    char proc_cgroup[64];
    snprintf(proc_cgroup, sizeof proc_cgroup, "/proc/%d/cgroup", (int)pid);
    int in_scope = 0;
    for (int i = 0; i < 1000 && !in_scope; i++) {
        char *cgroup = read_file(proc_cgroup, NULL);
        in_scope = cgroup != NULL && strstr(cgroup, scope_argv_unit(wrapped)) != NULL;
        free(cgroup);
        if (!in_scope) sleep_ms(5);
    }
    CHECK(in_scope, "the tool reached its scope");

    double asked = now_ms();
    scope_handle *handle = SENTINEL;
    CHECK(scope_handle_from_manager(scope_argv_unit(wrapped), bus.env, 3000, &handle) == SCOPE_RESULT_OK,
          "a handle on the scope");
    double waited = now_ms() - asked;
    CHECK(waited < 900, "the handle waited %.0f ms for the slow bus", waited);
    sleep_ms(3000); /* the set-up done: its held question answered 1 s after it was asked */

    const char *dir = scope_handle_cgroup(handle);
    char kill_file[4300];
    CHECK(setxattr(dir, "user.oomd_ooms", "1", 1, 0) == 0, "oomd's mark before its kill");
    snprintf(kill_file, sizeof kill_file, "%s/cgroup.kill", dir);
    write_file(kill_file, "1");
    oomd_bus_killed(&bus, dir + strlen("/sys/fs/cgroup"), "memory-used");
    CHECK(wait_exit(pid) == 128 + SIGKILL, "oomd's kill ended the tool");
    struct stat st;
    for (int i = 0; i < 2000 && stat(dir, &st) == 0; i++) sleep_ms(5);
    scope_ending ending = {SCOPE_ENDING_KIND_RUNNING, SCOPE_OOMD_RULE_UNKNOWN, 0, SCOPE_EVIDENCE_NONE, true};
    CHECK(scope_handle_ending(handle, bus.env, 3000, &ending) == SCOPE_RESULT_OK, "the ending");
    CHECK(ending.kind == SCOPE_ENDING_KIND_OOMD && ending.rule == SCOPE_OOMD_RULE_SWAP &&
              ending.evidence == SCOPE_EVIDENCE_OOMD_SIGNAL && !ending.forgeable,
          "kind %d, rule %d, evidence %d", (int)ending.kind, (int)ending.rule, (int)ending.evidence);

    scope_handle_free(handle);
    scope_argv_free(wrapped);
    scope_launcher_free(launcher);
    oomd_bus_stop(&bus);
    return 0;
}
