/* Scope handles from C against real controllers, as alice in the virtual machine: built on the host
 * by scripts/test-vm.sh against the C tarball (whose library alice unpacked into ~/.local/lib),
 *   cc -std=c11 -Wall -Wextra -Werror -pedantic handles.c -lsynaps_scope -Wl,-rpath,/home/alice/.local/lib
 * stats() reads what the cgroup's own files hold; ending() tells a handle's kill and a tool that
 * ended on its own apart, asked after the exit status is in and the scope is collected. */
#define _POSIX_C_SOURCE 200809L
#include <synaps_scope.h>

#include "check.h"

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static unsigned long long read_number(const scope_handle *handle, const char *file) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", scope_handle_cgroup(handle), file);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "%s", path);
    unsigned long long value = 0;
    CHECK(fscanf(f, "%llu", &value) == 1, "%s", path);
    fclose(f);
    return value;
}

/* Spawns `argv` in a scope of its own; returns its handle once it runs there. */
static scope_handle *launch(scope_launcher *launcher, const char **argv, pid_t *pid) {
    scope_argv *wrapped = NULL;
    CHECK(scope_wrap_argv(launcher, argv, NULL, NULL, &wrapped) == SCOPE_RESULT_OK, "wrap: %s", scope_last_error());
    CHECK(posix_spawnp(pid, scope_argv_ptr(wrapped)[0], NULL, NULL, scope_argv_ptr(wrapped), environ) == 0, "spawn");
    scope_handle *handle = NULL;
    for (int i = 0; i < 1000 && scope_handle_from_pid(scope_argv_unit(wrapped), (uint32_t)*pid, &handle) != SCOPE_RESULT_OK; i++)
        sleep_ms(10);
    CHECK(handle != NULL, "never in its scope: %s", scope_last_error());
    scope_argv_free(wrapped);
    return handle;
}

static void wait_collected(const scope_handle *handle) {
    struct stat st;
    for (int i = 0; i < 1000 && stat(scope_handle_cgroup(handle), &st) == 0; i++) sleep_ms(10);
    CHECK(stat(scope_handle_cgroup(handle), &st) != 0, "the manager never collected %s", scope_handle_cgroup(handle));
}

int main(void) {
    scope_launcher *launcher = NULL;
    CHECK(scope_launcher_for_env(NULL, SCOPE_KIND_TOOL, &launcher) == SCOPE_RESULT_OK && launcher != NULL,
          "no launcher: %s", scope_last_error());
    /* tail holds the one endless line of NULs it reads: about 48 MB, in three processes. */
    const char *holder[] = {"sh", "-c", "head -c 50000000 /dev/zero | tail; sleep 300", NULL};
    pid_t pid;
    scope_handle *handle = launch(launcher, holder, &pid);
    scope_stats stats = {0, 0, 0};
    for (int i = 0; i < 3000; i++) {
        CHECK(scope_handle_stats(handle, &stats) == SCOPE_RESULT_OK, "stats: %s", scope_last_error());
        if (stats.memory_current != SCOPE_STAT_UNKNOWN && stats.memory_current > 40000000ULL) break;
        sleep_ms(10);
    }
    unsigned long long memory = read_number(handle, "memory.current"), tasks = read_number(handle, "pids.current");
    CHECK(stats.memory_current > 40000000ULL, "memory.current %llu", (unsigned long long)stats.memory_current);
    CHECK(stats.memory_current + 4194304ULL > memory && memory + 4194304ULL > stats.memory_current, "stats %llu, file %llu",
          (unsigned long long)stats.memory_current, memory);
    CHECK(stats.pids_current == tasks && tasks == 3, "pids %llu, file %llu", (unsigned long long)stats.pids_current, tasks);
    printf("ok: C: stats of %s: memory.current %llu MB (file %llu MB), pids.current %llu (file %llu)\n",
           scope_handle_unit(handle), (unsigned long long)stats.memory_current >> 20, memory >> 20,
           (unsigned long long)stats.pids_current, tasks);

    CHECK(scope_handle_kill(handle, 10000) == SCOPE_RESULT_OK, "kill: %s", scope_last_error());
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status), "the tool's exit status");
    wait_collected(handle);
    scope_ending ending;
    CHECK(scope_handle_ending(handle, NULL, 3000, &ending) == SCOPE_RESULT_OK, "ending: %s", scope_last_error());
    CHECK(ending.kind == SCOPE_ENDING_KIND_HANDLE_KILL && ending.evidence == SCOPE_EVIDENCE_OWN_KILL && !ending.forgeable,
          "kind %d, evidence %d", (int)ending.kind, (int)ending.evidence);
    printf("ok: C: after the kill, the exit status and the collection, ending() says a handle's kill, on its own kill\n");
    scope_handle_free(handle);

    const char *quiet[] = {"sh", "-c", "sleep 1; exit 7", NULL};
    handle = launch(launcher, quiet, &pid);
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 7, "exit 7");
    wait_collected(handle);
    CHECK(scope_handle_ending(handle, NULL, 3000, &ending) == SCOPE_RESULT_OK, "ending: %s", scope_last_error());
    CHECK(ending.kind == SCOPE_ENDING_KIND_ON_ITS_OWN && ending.kernel_oom_kills == 0 &&
              ending.evidence == SCOPE_EVIDENCE_MEMORY_EVENTS && !ending.forgeable,
          "kind %d, evidence %d", (int)ending.kind, (int)ending.evidence);
    printf("ok: C: a tool that exited 7: ending() says it ended on its own, on the kernel's memory.events\n");
    scope_handle_free(handle);
    scope_launcher_free(launcher);
    return 0;
}
