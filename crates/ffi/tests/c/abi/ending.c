/* How a scope ended, from C: a handle made while the tool runs tells it after the tool's exit
 * status is in and the manager has collected the scope. */
#include "abi.h"

#include <sys/stat.h>

/* Waits until the manager has removed the scope's cgroup. */
static int collected(const scope_handle *handle) {
    struct stat st;
    for (int i = 0; i < 2000; i++) {
        if (stat(scope_handle_cgroup(handle), &st) != 0) return 1;
        sleep_ms(5);
    }
    return 0;
}

int scenario_ending(void) {
    scope_launcher *launcher = must_launcher(NULL);
    const char *argv[] = {"sh", "-c", "sleep 100 & exec sleep 100", NULL};
    scope_argv *wrapped = must_wrap(launcher, argv);
    const char *unit = scope_argv_unit(wrapped);
    pid_t pid = spawn(scope_argv_ptr(wrapped), 0);
    scope_handle *handle = must_handle(unit, pid);

    scope_ending ending = {SCOPE_ENDING_KIND_UNKNOWN, SCOPE_OOMD_RULE_UNKNOWN, 7};
    CHECK(scope_handle_ending(handle, NULL, 3000, &ending) == SCOPE_RESULT_OK, "ending");
    CHECK(ending.kind == SCOPE_ENDING_KIND_RUNNING && ending.kernel_oom_kills == 0, "running: %d", (int)ending.kind);
    scope_ending untouched = {SCOPE_ENDING_KIND_OOMD, SCOPE_OOMD_RULE_SWAP, 9};
    CHECK(scope_handle_ending(NULL, NULL, 3000, &untouched) == SCOPE_RESULT_NULL_PARAMETER, "NULL handle refused");
    CHECK(scope_handle_ending(handle, NULL, 3000, NULL) == SCOPE_RESULT_NULL_PARAMETER, "NULL out refused");
    const char *bad_env[] = {"NO_EQUALS_SIGN", NULL};
    CHECK(scope_handle_ending(handle, bad_env, 3000, &untouched) == SCOPE_RESULT_INVALID_ARGUMENT, "malformed env refused");
    CHECK(scope_handle_ending(handle, NULL, 0, &untouched) == SCOPE_RESULT_INVALID_ARGUMENT, "a zero bound refused");
    CHECK(untouched.kind == SCOPE_ENDING_KIND_OOMD && untouched.rule == SCOPE_OOMD_RULE_SWAP && untouched.kernel_oom_kills == 9,
          "out written only on success");

    scope_handle *other = SENTINEL;
    CHECK(scope_handle_of_process((uint32_t)pid, &other) == SCOPE_RESULT_OK, "another handle on it");
    CHECK(scope_handle_kill(handle, 5000) == SCOPE_RESULT_OK, "kill");
    CHECK(wait_exit(pid) == 128 + SIGKILL, "the tool's exit status is in");
    CHECK(collected(handle), "the manager collected the scope");
    scope_handle *both[] = {handle, other};
    for (size_t i = 0; i < 2; i++) {
        CHECK(scope_handle_ending(both[i], NULL, 3000, &ending) == SCOPE_RESULT_OK, "ending after collection");
        CHECK(ending.kind == SCOPE_ENDING_KIND_HANDLE_KILL && ending.rule == SCOPE_OOMD_RULE_UNKNOWN, "handle %zu: kind %d", i,
              (int)ending.kind);
        scope_handle_free(both[i]);
    }
    scope_argv_free(wrapped);
    scope_launcher_free(launcher);
    return 0;
}
