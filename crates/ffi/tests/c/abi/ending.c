/* How a scope ended, from C: a handle made while the tool runs tells it after the tool's exit
 * status is in and the manager has collected the scope, with what the answer rests on. The rig has
 * no memory controller and no system bus: an ending without evidence of a kill is unknown here. */
#include "abi.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/xattr.h>

/* Waits until the manager has removed the scope's cgroup. */
static int collected(const scope_handle *handle) {
    struct stat st;
    for (int i = 0; i < 2000; i++) {
        if (stat(scope_handle_cgroup(handle), &st) != 0) return 1;
        sleep_ms(5);
    }
    return 0;
}

/* The pid of the user manager on $XDG_RUNTIME_DIR/systemd/private (its peer credentials). */
static pid_t manager_pid(void) {
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s/systemd/private", getenv("XDG_RUNTIME_DIR"));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct ucred cred = {0, 0, 0};
    socklen_t len = sizeof cred;
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        cred.pid = 0;
    if (fd >= 0) close(fd);
    return cred.pid;
}

/* Runs the wrapped command with its stdin and stdout on pipes: writes to in[1] reach it, its
 * output comes from out[0]. The pipes are close-on-exec, so the tool holds only its own ends and
 * closing in[1] is its EOF. The pid, or -1. */
static pid_t spawn_piped(scope_argv *wrapped, int in[2], int out[2]) {
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        execvp(scope_argv_ptr(wrapped)[0], (char *const *)scope_argv_ptr(wrapped));
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    return pid;
}

/* The rig's manager, stopped (SIGSTOP) until manager_continue: a scope that empties meanwhile stays
 * uncollected. Should this process die first, a watchdog continues it after 5 s; `drop` is a
 * descriptor of this process's that the watchdog must not hold (the write end of a tool's stdin). */
struct stopped_manager {
    pid_t manager, watchdog;
};

static struct stopped_manager manager_stop(int drop) {
    struct stopped_manager stopped = {manager_pid(), -1};
    CHECK(stopped.manager > 0, "the manager's pid");
    stopped.watchdog = fork();
    CHECK(stopped.watchdog >= 0, "fork the watchdog");
    if (stopped.watchdog == 0) {
        close(drop);
        sleep(5);
        kill(stopped.manager, SIGCONT);
        _exit(0);
    }
    CHECK(kill(stopped.manager, SIGSTOP) == 0, "stop the manager");
    return stopped;
}

static void manager_continue(struct stopped_manager stopped) {
    CHECK(kill(stopped.manager, SIGCONT) == 0, "continue the manager");
    kill(stopped.watchdog, SIGKILL);
    waitpid(stopped.watchdog, NULL, 0);
}

/* Waits until the tool on `out` (spawn_piped's) says "ready": it runs itself, the launcher program
 * done with the manager. */
static void tool_ready(int out[2]) {
    char ready[6] = {0};
    CHECK(read(out[0], ready, sizeof ready) == 6 && memcmp(ready, "ready\n", 6) == 0, "the tool runs");
    close(out[0]);
}

/* A tool that says "ready", then waits for its stdin to close and exits 0, wrapped by `launcher`
 * (into *wrapped) and spawned on pipes (spawn_piped's `in` and `out`), and a handle on its scope. */
static scope_handle *ready_tool(scope_launcher *launcher, scope_argv **wrapped, int in[2], int out[2], pid_t *pid) {
    const char *argv[] = {"sh", "-c", "echo ready; read x; exit 0", NULL};
    *wrapped = must_wrap(launcher, argv);
    *pid = spawn_piped(*wrapped, in, out);
    CHECK(*pid > 0, "spawn the tool");
    return must_handle(scope_argv_unit(*wrapped), *pid);
}

/* A daemon reaps its tool, then kills the scope to sweep up, before the manager has collected it
 * (held here by stopping the manager): the kill finds nobody, and the scope did not end by it. */
static int clean_up_kill(scope_launcher *launcher) {
    scope_argv *wrapped = NULL;
    int in[2], out[2];
    pid_t pid = 0;
    scope_handle *handle = ready_tool(launcher, &wrapped, in, out, &pid);
    /* The tool itself runs (the wrapper is done with the manager) before the manager is stopped. */
    tool_ready(out);
    struct stopped_manager stopped = manager_stop(in[1]);
    close(in[1]);
    int status = wait_exit(pid);
    struct stat st;
    int left = stat(scope_handle_cgroup(handle), &st) == 0;
    scope_result killed = scope_handle_kill(handle, 5000);
    manager_continue(stopped);
    CHECK(status == 0, "the tool exited 0: %d", status);
    CHECK(left, "the stopped manager left the scope");
    CHECK(killed == SCOPE_RESULT_OK, "the clean-up kill");
    CHECK(collected(handle), "the manager collected the scope");
    scope_ending ending = {SCOPE_ENDING_KIND_RUNNING, SCOPE_OOMD_RULE_UNKNOWN, 0, SCOPE_EVIDENCE_CGROUP_EVENTS, true};
    CHECK(scope_handle_ending(handle, NULL, 3000, &ending) == SCOPE_RESULT_OK, "ending");
    CHECK(ending.kind == SCOPE_ENDING_KIND_UNKNOWN && ending.evidence == SCOPE_EVIDENCE_NONE && !ending.forgeable,
          "a clean-up kill of an empty scope: kind %d, evidence %d", (int)ending.kind, (int)ending.evidence);
    scope_handle_free(handle);
    scope_argv_free(wrapped);
    return 0;
}

/* Whether the cgroup `dir` holds no process. */
static int cgroup_empty(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    size_t len = 0;
    free(read_file(path, &len));
    return len == 0;
}

/* oomd (a stand-in: its kill, then the mark every version writes after it, user.oomd_kill, the
 * only one before 251) kills the cgroup the tool made below its scope; the daemon then kills the
 * scope to sweep up the tool itself: what ended the tool was oomd's. */
static int oomd_kill_swept_up(scope_launcher *launcher) {
    const char *argv[] = {"sh", "-c", "read dir; sleep 100 & echo $! > \"$dir/leaf/cgroup.procs\"; echo moved; exec sleep 100", NULL};
    scope_argv *wrapped = must_wrap(launcher, argv);
    int in[2], out[2];
    pid_t pid = spawn_piped(wrapped, in, out);
    CHECK(pid > 0, "spawn the tool");
    scope_handle *handle = must_handle(scope_argv_unit(wrapped), pid);
    char leaf[4096];
    snprintf(leaf, sizeof leaf, "%s/leaf", scope_handle_cgroup(handle));
    CHECK(mkdir(leaf, 0755) == 0, "mkdir %s", leaf);
    char line[4200];
    int n = snprintf(line, sizeof line, "%s\n", scope_handle_cgroup(handle));
    CHECK(write(in[1], line, (size_t)n) == n, "the scope's directory to the tool");
    char moved[6] = {0};
    CHECK(read(out[0], moved, sizeof moved) == 6 && memcmp(moved, "moved\n", 6) == 0, "the worker moved below the scope");
    char kill_file[4200];
    snprintf(kill_file, sizeof kill_file, "%s/cgroup.kill", leaf);
    write_file(kill_file, "1");
    for (int i = 0; i < 2000 && !cgroup_empty(leaf); i++) sleep_ms(5);
    CHECK(cgroup_empty(leaf), "the kill emptied the cgroup below");
    CHECK(setxattr(leaf, "user.oomd_kill", "1", 1, 0) == 0, "oomd's mark after its kill");
    CHECK(scope_handle_kill(handle, 5000) == SCOPE_RESULT_OK, "the sweep");
    CHECK(wait_exit(pid) == 128 + SIGKILL, "the tool was killed");
    CHECK(collected(handle), "the manager collected the scope");
    scope_ending ending = {SCOPE_ENDING_KIND_RUNNING, SCOPE_OOMD_RULE_SWAP, 0, SCOPE_EVIDENCE_NONE, false};
    CHECK(scope_handle_ending(handle, NULL, 3000, &ending) == SCOPE_RESULT_OK, "ending");
    CHECK(ending.kind == SCOPE_ENDING_KIND_OOMD && ending.rule == SCOPE_OOMD_RULE_UNKNOWN &&
              ending.evidence == SCOPE_EVIDENCE_OOMD_MARK && ending.forgeable,
          "an oomd kill swept up: kind %d, evidence %d", (int)ending.kind, (int)ending.evidence);
    close(in[1]);
    close(out[0]);
    scope_handle_free(handle);
    scope_argv_free(wrapped);
    return 0;
}

/* Whether this process's inotify instance watches the inode `ino` (its fdinfo lists each watch). */
static int watched(ino_t ino) {
    char wanted[64], link[64], path[300], line[512];
    snprintf(wanted, sizeof wanted, " ino:%llx ", (unsigned long long)ino);
    int found = 0;
    DIR *fds = opendir("/proc/self/fd");
    if (!fds) return 0;
    for (struct dirent *fd; !found && (fd = readdir(fds)) != NULL;) {
        snprintf(path, sizeof path, "/proc/self/fd/%s", fd->d_name);
        ssize_t len = readlink(path, link, sizeof link - 1);
        if (len < 0) continue;
        link[len] = '\0';
        if (strcmp(link, "anon_inode:inotify") != 0) continue;
        snprintf(path, sizeof path, "/proc/self/fdinfo/%s", fd->d_name);
        FILE *info = fopen(path, "r");
        if (!info) continue;
        while (!found && fgets(line, sizeof line, info))
            found = strncmp(line, "inotify ", 8) == 0 && strstr(line, wanted) != NULL;
        fclose(info);
    }
    closedir(fds);
    return found;
}

/* What watches an empty scope goes with its last handle, before the manager removes it (a process
 * that exits with a watch in place waits out the kernel's teardown of it); one handle among others
 * leaves it to the rest; a scope that still runs stays watched without a handle. */
static int last_handle_takes_watches(scope_launcher *launcher) {
    const char *sleeping[] = {"sleep", "100", NULL};
    scope_argv *running = must_wrap(launcher, sleeping);
    pid_t sleeper = spawn(scope_argv_ptr(running), 0);
    scope_handle *first = must_handle(scope_argv_unit(running), sleeper);
    struct stat st;
    CHECK(stat(scope_handle_cgroup(first), &st) == 0, "the running scope's cgroup");
    scope_handle_free(first);
    CHECK(watched(st.st_ino), "a running scope stays watched without a handle");
    kill(sleeper, SIGKILL);
    CHECK(wait_exit(sleeper) == 128 + SIGKILL, "the sleeper killed");
    scope_argv_free(running);

    scope_argv *wrapped = NULL;
    int in[2], out[2];
    pid_t pid = 0;
    scope_handle *handle = ready_tool(launcher, &wrapped, in, out, &pid);
    scope_handle *other = SENTINEL;
    CHECK(scope_handle_of_process((uint32_t)pid, &other) == SCOPE_RESULT_OK, "another handle on it");
    CHECK(stat(scope_handle_cgroup(handle), &st) == 0, "the scope's cgroup");
    tool_ready(out);
    CHECK(watched(st.st_ino), "the running scope is watched");
    /* Nothing ends this process while the manager is stopped: what is seen is checked after. */
    struct stopped_manager stopped = manager_stop(in[1]);
    close(in[1]);
    int status = wait_exit(pid);
    char dir[512];
    snprintf(dir, sizeof dir, "%s", scope_handle_cgroup(handle));
    int emptied = 0;
    for (int i = 0; i < 2000 && !(emptied = cgroup_empty(dir)); i++) sleep_ms(5);
    scope_handle_free(handle);
    int kept_for_other = watched(st.st_ino);
    scope_handle_free(other);
    int left_after_last = watched(st.st_ino);
    manager_continue(stopped);
    CHECK(status == 0, "the tool exited 0: %d", status);
    CHECK(emptied, "the scope emptied");
    CHECK(kept_for_other, "another handle still asks about the scope");
    CHECK(!left_after_last, "no handle is left on the empty scope, so no watch");
    scope_argv_free(wrapped);
    return 0;
}

int scenario_ending(void) {
    scope_launcher *launcher = must_launcher(NULL);
    const char *argv[] = {"sh", "-c", "sleep 100 & exec sleep 100", NULL};
    scope_argv *wrapped = must_wrap(launcher, argv);
    const char *unit = scope_argv_unit(wrapped);
    pid_t pid = spawn(scope_argv_ptr(wrapped), 0);
    scope_handle *handle = must_handle(unit, pid);

    scope_ending ending = {SCOPE_ENDING_KIND_UNKNOWN, SCOPE_OOMD_RULE_UNKNOWN, 7, SCOPE_EVIDENCE_NONE, true};
    CHECK(scope_handle_ending(handle, NULL, 3000, &ending) == SCOPE_RESULT_OK, "ending");
    CHECK(ending.kind == SCOPE_ENDING_KIND_RUNNING && ending.kernel_oom_kills == 0 &&
              ending.evidence == SCOPE_EVIDENCE_CGROUP_EVENTS && !ending.forgeable,
          "running: %d", (int)ending.kind);
    scope_ending untouched = {SCOPE_ENDING_KIND_OOMD, SCOPE_OOMD_RULE_SWAP, 9, SCOPE_EVIDENCE_OOMD_SIGNAL, false};
    CHECK(scope_handle_ending(NULL, NULL, 3000, &untouched) == SCOPE_RESULT_NULL_PARAMETER, "NULL handle refused");
    CHECK(scope_handle_ending(handle, NULL, 3000, NULL) == SCOPE_RESULT_NULL_PARAMETER, "NULL out refused");
    const char *bad_env[] = {"NO_EQUALS_SIGN", NULL};
    CHECK(scope_handle_ending(handle, bad_env, 3000, &untouched) == SCOPE_RESULT_INVALID_ARGUMENT, "malformed env refused");
    CHECK(scope_handle_ending(handle, NULL, 0, &untouched) == SCOPE_RESULT_INVALID_ARGUMENT, "a zero bound refused");
    CHECK(untouched.kind == SCOPE_ENDING_KIND_OOMD && untouched.rule == SCOPE_OOMD_RULE_SWAP && untouched.kernel_oom_kills == 9 &&
              untouched.evidence == SCOPE_EVIDENCE_OOMD_SIGNAL && !untouched.forgeable,
          "out written only on success");

    scope_handle *other = SENTINEL;
    CHECK(scope_handle_of_process((uint32_t)pid, &other) == SCOPE_RESULT_OK, "another handle on it");
    CHECK(scope_handle_kill(handle, 5000) == SCOPE_RESULT_OK, "kill");
    CHECK(wait_exit(pid) == 128 + SIGKILL, "the tool's exit status is in");
    CHECK(collected(handle), "the manager collected the scope");
    /* The killing handle knows its own kill; the other knows it by the mark alone, forgeable. */
    scope_handle *both[] = {handle, other};
    scope_evidence evidence[] = {SCOPE_EVIDENCE_OWN_KILL, SCOPE_EVIDENCE_KILL_MARK};
    for (size_t i = 0; i < 2; i++) {
        CHECK(scope_handle_ending(both[i], NULL, 3000, &ending) == SCOPE_RESULT_OK, "ending after collection");
        CHECK(ending.kind == SCOPE_ENDING_KIND_HANDLE_KILL && ending.rule == SCOPE_OOMD_RULE_UNKNOWN &&
                  ending.evidence == evidence[i] && ending.forgeable == (i == 1),
              "handle %zu: kind %d, evidence %d", i, (int)ending.kind, (int)ending.evidence);
        scope_handle_free(both[i]);
    }
    scope_argv_free(wrapped);
    int failed = clean_up_kill(launcher) || oomd_kill_swept_up(launcher) || last_handle_takes_watches(launcher);
    scope_launcher_free(launcher);
    return failed;
}

/* A tool in the cgroup `name` it made below its scope, and a handle on the scope made with the
 * bus's environment once the tool said it moved (it runs only once its scope is made). */
static scope_handle *scoped_below(scope_launcher *launcher, const char *name, struct oomd_bus *bus, pid_t *pid,
                                  scope_argv **wrapped) {
    const char *argv[] = {"sh", "-c",
                          "d=\"/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)/$1\"; mkdir \"$d\" && "
                          "echo $$ > \"$d/cgroup.procs\" && echo moved && exec sleep 100",
                          "sh", name, NULL};
    *wrapped = must_wrap(launcher, argv);
    int in[2], out[2];
    *pid = spawn_piped(*wrapped, in, out);
    CHECK(*pid > 0, "spawn the tool");
    char moved[6] = {0};
    CHECK(read(out[0], moved, sizeof moved) == 6 && memcmp(moved, "moved\n", 6) == 0, "the tool moved below its scope");
    close(in[1]);
    close(out[0]);
    scope_handle *handle = SENTINEL;
    CHECK(scope_handle_from_manager(scope_argv_unit(*wrapped), bus->env, 3000, &handle) == SCOPE_RESULT_OK, "a handle on the scope");
    return handle;
}

/* oomd's kill of the cgroup `below` the scope of `handle`: its mark, the kill, its signal. */
static void oomd_kills(const scope_handle *handle, const char *below, struct oomd_bus *bus, const char *reason) {
    char leaf[4200], kill_file[4300], cgroup[4300];
    snprintf(leaf, sizeof leaf, "%s/%s", scope_handle_cgroup(handle), below);
    CHECK(setxattr(leaf, "user.oomd_ooms", "1", 1, 0) == 0, "oomd's mark before its kill");
    snprintf(kill_file, sizeof kill_file, "%s/cgroup.kill", leaf);
    write_file(kill_file, "1");
    snprintf(cgroup, sizeof cgroup, "%s/%s", scope_handle_cgroup(handle) + strlen("/sys/fs/cgroup"), below);
    oomd_bus_killed(bus, cgroup, reason);
}

/* What a request answered on its own thread handed back, and when. */
struct answer {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int calls;
    scope_result result;
    scope_ending ending;
    uint32_t pids[8];
    size_t len;
};

static void answer_in(struct answer *answer) {
    pthread_mutex_lock(&answer->lock);
    answer->calls++;
    pthread_cond_signal(&answer->cond);
    pthread_mutex_unlock(&answer->lock);
}

static void ending_ready(void *userdata, scope_result result, const scope_ending *ending, const char *error) {
    struct answer *answer = userdata;
    answer->result = result;
    if (ending) answer->ending = *ending;
    (void)error;
    answer_in(answer);
}

static void pids_ready(void *userdata, scope_result result, const uint32_t *pids, size_t len, const char *error) {
    struct answer *answer = userdata;
    answer->result = result;
    answer->len = len;
    for (size_t i = 0; i < len && i < 8; i++) answer->pids[i] = pids[i];
    (void)error;
    answer_in(answer);
}

static void done_ready(void *userdata, scope_result result, const char *error) {
    struct answer *answer = userdata;
    answer->result = result;
    (void)error;
    answer_in(answer);
}

/* Waits until the request's callback ran (once). */
static void answered(struct answer *answer) {
    pthread_mutex_lock(&answer->lock);
    while (answer->calls == 0) pthread_cond_wait(&answer->cond, &answer->lock);
    pthread_mutex_unlock(&answer->lock);
    sleep_ms(20);
    CHECK(answer->calls == 1, "the callback ran once, not %d times", answer->calls);
}

/* oomd's kill of a cgroup below a scope (the leaf case) and of a cgroup a tool named after another
 * tool's scope (the framing case), signalled by a stand-in oomd on a bus standing for the system
 * bus: each told by the signal, to the scope it hit alone, with its rule; the answers asked on
 * the request's own thread (scope_handle_ending_async), the handle freed as soon as it started. */
int scenario_ending_oomd_signal(void) {
    struct oomd_bus bus;
    oomd_bus_start(&bus);
    scope_launcher *launcher = must_launcher(bus.env);

    /* The leaf case, oomd's signal 1 s after its kill (busy in the same turn of its loop) and
     * after the question: the answer waits for it. */
    pid_t leaf_pid;
    scope_argv *leaf_wrapped;
    scope_handle *leaf = scoped_below(launcher, "leaf", &bus, &leaf_pid, &leaf_wrapped);
    char leaf_dir[4200], leaf_cgroup[4300];
    snprintf(leaf_dir, sizeof leaf_dir, "%s/leaf", scope_handle_cgroup(leaf));
    snprintf(leaf_cgroup, sizeof leaf_cgroup, "%s/leaf", scope_handle_cgroup(leaf) + strlen("/sys/fs/cgroup"));
    oomd_bus_kill_begun(&bus, leaf_dir, leaf_cgroup, "memory-pressure", 1000);
    CHECK(wait_exit(leaf_pid) == 128 + SIGKILL, "oomd's kill ended the tool");
    CHECK(collected(leaf), "the manager collected the scope");
    struct answer told = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, SCOPE_RESULT_PANIC, {0}, {0}, 0};
    CHECK(scope_handle_ending_async(leaf, bus.env, 3000, ending_ready, &told) == SCOPE_RESULT_OK, "ending, asked async");
    scope_handle_free(leaf);
    answered(&told);
    CHECK(told.result == SCOPE_RESULT_OK && told.ending.kind == SCOPE_ENDING_KIND_OOMD &&
              told.ending.rule == SCOPE_OOMD_RULE_MEMORY_PRESSURE && told.ending.evidence == SCOPE_EVIDENCE_OOMD_SIGNAL &&
              !told.ending.forgeable,
          "the leaf case: result %d, kind %d, rule %d, evidence %d", (int)told.result, (int)told.ending.kind,
          (int)told.ending.rule, (int)told.ending.evidence);
    oomd_bus_sent(&bus);
    scope_argv_free(leaf_wrapped);

    /* The framing case: B ends on its own; A makes a cgroup named after B's unit below its own
     * scope, where oomd kills it. */
    const char *b_argv[] = {"sh", "-c", "echo ready; read _; exit 0", NULL};
    scope_argv *b_wrapped = must_wrap(launcher, b_argv);
    int b_in[2], b_out[2];
    pid_t b_pid = spawn_piped(b_wrapped, b_in, b_out);
    char ready[6] = {0};
    CHECK(read(b_out[0], ready, sizeof ready) == 6 && memcmp(ready, "ready\n", 6) == 0, "B runs");
    scope_handle *b = SENTINEL;
    CHECK(scope_handle_from_manager(scope_argv_unit(b_wrapped), bus.env, 3000, &b) == SCOPE_RESULT_OK, "a handle on B");
    pid_t a_pid;
    scope_argv *a_wrapped;
    scope_handle *a = scoped_below(launcher, scope_argv_unit(b_wrapped), &bus, &a_pid, &a_wrapped);
    oomd_kills(a, scope_argv_unit(b_wrapped), &bus, "memory-used");
    struct answer emptied = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, SCOPE_RESULT_PANIC, {0}, {0}, 0};
    CHECK(scope_handle_wait_empty_async(a, 5000, done_ready, &emptied) == SCOPE_RESULT_OK, "wait for A, async");
    answered(&emptied);
    CHECK(emptied.result == SCOPE_RESULT_OK, "A emptied: %d", (int)emptied.result);
    CHECK(wait_exit(a_pid) == 128 + SIGKILL, "oomd's kill ended A");
    close(b_in[1]);
    close(b_out[0]);
    CHECK(wait_exit(b_pid) == 0, "B ended on its own");
    CHECK(collected(a) && collected(b), "the manager collected both scopes");
    scope_ending ending = {SCOPE_ENDING_KIND_RUNNING, SCOPE_OOMD_RULE_UNKNOWN, 0, SCOPE_EVIDENCE_NONE, true};
    CHECK(scope_handle_ending(a, bus.env, 3000, &ending) == SCOPE_RESULT_OK, "A's ending");
    CHECK(ending.kind == SCOPE_ENDING_KIND_OOMD && ending.rule == SCOPE_OOMD_RULE_SWAP &&
              ending.evidence == SCOPE_EVIDENCE_OOMD_SIGNAL && !ending.forgeable,
          "A: kind %d, rule %d, evidence %d", (int)ending.kind, (int)ending.rule, (int)ending.evidence);
    CHECK(scope_handle_ending(b, bus.env, 3000, &ending) == SCOPE_RESULT_OK, "B's ending");
    CHECK(ending.kind != SCOPE_ENDING_KIND_OOMD && ending.evidence != SCOPE_EVIDENCE_OOMD_SIGNAL && !ending.forgeable,
          "B was framed: kind %d, evidence %d", (int)ending.kind, (int)ending.evidence);
    scope_handle_free(a);
    scope_handle_free(b);
    scope_argv_free(a_wrapped);
    scope_argv_free(b_wrapped);

    /* A kill on the request's own thread hands back the pids it found; bad arguments are refused
     * and the callback never runs. */
    const char *k_argv[] = {"sleep", "100", NULL};
    scope_argv *k_wrapped = must_wrap(launcher, k_argv);
    pid_t k_pid = spawn(scope_argv_ptr(k_wrapped), 0);
    scope_handle *k = must_handle(scope_argv_unit(k_wrapped), k_pid);
    struct answer killed = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, SCOPE_RESULT_PANIC, {0}, {0}, 0};
    CHECK(scope_handle_kill_async(NULL, 5000, pids_ready, &killed) == SCOPE_RESULT_NULL_PARAMETER, "NULL handle refused");
    CHECK(scope_handle_kill_async(k, 5000, NULL, &killed) == SCOPE_RESULT_NULL_PARAMETER, "NULL callback refused");
    CHECK(scope_handle_kill_async(k, 0, pids_ready, &killed) == SCOPE_RESULT_INVALID_ARGUMENT, "a zero bound refused");
    CHECK(scope_handle_ending_async(k, NULL, 0, ending_ready, &killed) == SCOPE_RESULT_INVALID_ARGUMENT, "a zero bound refused");
    CHECK(scope_handle_wait_empty_async(NULL, 5000, done_ready, &killed) == SCOPE_RESULT_NULL_PARAMETER, "NULL handle refused");
    CHECK(scope_handle_kill_async(k, 5000, pids_ready, &killed) == SCOPE_RESULT_OK, "kill, async");
    scope_handle_free(k);
    answered(&killed);
    CHECK(killed.result == SCOPE_RESULT_OK && killed.len == 1 && killed.pids[0] == (uint32_t)k_pid,
          "the kill found the tool: result %d, %zu pids", (int)killed.result, killed.len);
    CHECK(wait_exit(k_pid) == 128 + SIGKILL, "the async kill ended the tool");
    scope_argv_free(k_wrapped);

    scope_launcher_free(launcher);
    oomd_bus_stop(&bus);
    return 0;
}
