/* Scope handles from C as a normal user in a login session (scripts/test-session.sh), built against
 * the unpacked C tarball with the release's compiler:
 *   cc -std=c11 -Wall -Wextra -Werror -pedantic handles.c $(pkg-config --cflags --libs synaps_scope)
 *   ./handles OTHER-USERS-PID
 * A scoped tree with a setsid escapee is listed and killed through its handle, leaving this process
 * alone; this process's own cgroup and another user's scope are refused (SCOPE_RESULT_NOT_OURS),
 * the latter with a message naming its owner. Exit 0 when all of that held. */
#define _POSIX_C_SOURCE 200809L
#include <synaps_scope.h>

#include "check.h"

#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv) {
    CHECK(argc == 2, "usage: %s OTHER-USERS-PID", argv[0]);
    uint32_t other = (uint32_t)strtoul(argv[1], NULL, 10);
    scope_launcher *launcher = NULL;
    CHECK(scope_launcher_for_env(NULL, SCOPE_KIND_TOOL, &launcher) == SCOPE_RESULT_OK && launcher != NULL,
          "no launcher: %s", scope_last_error());
    const char *tree[] = {"sh", "-c", "setsid sleep 300 & sleep 300 & wait", NULL};
    scope_argv *wrapped = NULL;
    CHECK(scope_wrap_argv(launcher, tree, NULL, NULL, &wrapped) == SCOPE_RESULT_OK, "wrap: %s", scope_last_error());
    const char *unit = scope_argv_unit(wrapped);
    pid_t pid;
    CHECK(posix_spawnp(&pid, scope_argv_ptr(wrapped)[0], NULL, NULL, scope_argv_ptr(wrapped), environ) == 0, "spawn");

    scope_handle *handle = NULL;
    for (int i = 0; i < 1000 && scope_handle_from_pid(unit, (uint32_t)pid, &handle) != SCOPE_RESULT_OK; i++) sleep_ms(10);
    CHECK(handle != NULL, "the tree never reached %s: %s", unit, scope_last_error());
    char delegated[128];
    snprintf(delegated, sizeof delegated, "/user@%u.service/app.slice/", (unsigned)getuid());
    CHECK(strstr(scope_handle_cgroup(handle), delegated) != NULL, "not in the user's own subtree: %s",
          scope_handle_cgroup(handle));
    uint32_t *pids = NULL;
    size_t count = 0;
    for (int i = 0; i < 1000; i++) {
        CHECK(scope_handle_pids(handle, &pids, &count) == SCOPE_RESULT_OK, "pids: %s", scope_last_error());
        if (count >= 3) break;
        scope_pids_free(pids, count);
        pids = NULL;
        sleep_ms(10);
    }
    CHECK(count >= 3, "%zu processes in the scope", count);
    scope_pids_free(pids, count);
    scope_stats stats;
    CHECK(scope_handle_stats(handle, &stats) == SCOPE_RESULT_OK, "stats: %s", scope_last_error());
    uint32_t *killed = NULL;
    size_t killed_count = 0;
    CHECK(scope_handle_kill_pids(handle, 10000, &killed, &killed_count) == SCOPE_RESULT_OK, "kill: %s",
          scope_last_error());
    CHECK(killed_count >= 3, "%zu killed", killed_count);
    scope_pids_free(killed, killed_count);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the tree died of it");
    scope_handle_free(handle);

    scope_handle *refused = NULL;
    CHECK(scope_handle_of_process((uint32_t)getpid(), &refused) == SCOPE_RESULT_NOT_OURS && refused == NULL,
          "this process's own cgroup refused");
    CHECK(scope_handle_of_process(other, &refused) == SCOPE_RESULT_NOT_OURS && refused == NULL,
          "another user's scope refused");
    char expected[128];
    snprintf(expected, sizeof expected, "not to this user (uid %u); refusing it", (unsigned)getuid());
    CHECK(strstr(scope_last_error(), "belongs to uid ") != NULL && strstr(scope_last_error(), expected) != NULL,
          "the message names the owner: %s", scope_last_error());
    printf("C handles: %zu processes of %s listed and killed; refused: %s\n", killed_count, unit, scope_last_error());
    scope_argv_free(wrapped);
    scope_launcher_free(launcher);
    return 0;
}
