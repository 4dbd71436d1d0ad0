/* Spawn a command in its own systemd scope with posix_spawn:
 *   cc spawn.c $(pkg-config --cflags --libs synaps_scope) -o spawn && ./spawn sleep 1 */
#include <synaps_scope.h>

#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

extern char **environ;

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PROGRAM [ARGS...]\n", argv[0]);
        return 2;
    }
    if (scope_abi_version() != SCOPE_ABI_VERSION) {
        fprintf(stderr, "libsynaps_scope has ABI %u, this program was built for %d\n", scope_abi_version(),
                SCOPE_ABI_VERSION);
        return 1;
    }
    /* A fresh probe of the user manager, bounded at 3 s. NULL afterwards means: launch directly. */
    scope_launcher *launcher = NULL;
    if (scope_launcher_for_env(NULL, SCOPE_KIND_TOOL, &launcher) != SCOPE_RESULT_OK) {
        fprintf(stderr, "no scope: %s\n", scope_last_error()); /* only in process_scopes = required */
        return 1;
    }
    scope_argv *wrapped = NULL;
    char *const *child_argv = argv + 1;
    if (launcher && scope_wrap_argv(launcher, (const char *const *)(argv + 1), NULL, NULL, &wrapped) == SCOPE_RESULT_OK)
        child_argv = scope_argv_ptr(wrapped);
    const char *unit = scope_argv_unit(wrapped); /* NULL when direct or when the program is missing */

    pid_t pid;
    int status = 127;
    int err = posix_spawnp(&pid, child_argv[0], NULL, NULL, child_argv, environ);
    if (err != 0) {
        /* Never retried without the scope: the command may already have run. */
        fprintf(stderr, "cannot run %s: %s\n", argv[1], strerror(err));
    } else {
        printf("pid %d in %s\n", (int)pid, unit ? unit : "this process's cgroup (direct launch)");
        fflush(stdout);
        if (waitpid(pid, &status, 0) == pid) status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    scope_argv_free(wrapped);
    scope_launcher_free(launcher);
    return status;
}
