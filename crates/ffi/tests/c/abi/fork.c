/* Hosts that fork: a child forked while other threads are in requests, or replacing the log
 * callback, gets its first answer within its own bound, and can replace the callback it inherited
 * without waiting for anything of its parent's threads. */
#include "abi.h"

#define FORKS 40
#define ASKERS 3
#define CHILD_BOUND_MS 1000

static atomic_int stop_asking;
static atomic_long replacements;

static void quiet_callback(void *userdata, scope_log_level level, const char *message, size_t len) {
    (void)userdata, (void)level, (void)message, (void)len;
}

static void *keep_replacing_the_callback(void *arg) {
    (void)arg;
    while (!atomic_load(&stop_asking)) {
        scope_set_log_callback(quiet_callback, NULL);
        atomic_fetch_add(&replacements, 1);
    }
    return NULL;
}

static void *keep_asking(void *arg) {
    (void)arg;
    while (!atomic_load(&stop_asking)) {
        scope_launcher *launcher = NULL;
        scope_launcher_for_env(NULL, SCOPE_KIND_TOOL, &launcher);
        scope_launcher_free(launcher);
    }
    return NULL;
}

/* The child's last warning, which says why a launch went direct. */
static char child_warning[512];

static void keep_last_warning(void *userdata, scope_log_level level, const char *message, size_t len) {
    (void)userdata;
    if (level <= SCOPE_LOG_LEVEL_WARN) snprintf(child_warning, sizeof child_warning, "%.*s", (int)len, message);
}

/* One request of the child's, within its bound: 0 scoped, 1 past its bound, 2 direct because the
 * manager did not answer within the bound, 3 direct for any other reason. */
static int one_request(void) {
    child_warning[0] = '\0';
    double started = now_ms();
    scope_launcher *launcher = NULL;
    scope_result result = scope_launcher_for_env_timeout(NULL, SCOPE_KIND_TOOL, CHILD_BOUND_MS, &launcher);
    double took = now_ms() - started;
    int scoped = result == SCOPE_RESULT_OK && launcher != NULL;
    scope_launcher_free(launcher);
    if (took > CHILD_BOUND_MS + 100) return 1;
    if (scoped) return 0;
    return strstr(child_warning, "timed out after") ? 2 : 3;
}

/* The child: replaces the callback it inherited, then asks, each request within its own bound.
 * On a busy machine the manager may not answer one within the bound, and the library then keeps
 * its promise by going direct and saying so; what it must never do is carry anything of its
 * parent's into the child. So a request that went direct for the manager's silence is followed by
 * one more, which must be scoped: a child that waited on its parent's state would wait again. */
static int child_request(void) {
    scope_set_log_callback(keep_last_warning, NULL);
    int first = one_request();
    if (first == 2) {
        int second = one_request();
        if (second == 2) fprintf(stderr, "child %d: direct twice: %s\n", (int)getpid(), child_warning);
        return second;
    }
    if (first == 3) fprintf(stderr, "child %d: direct: %s\n", (int)getpid(), child_warning);
    return first;
}

/* Where the first hung child is: its system call and wait channel, and every thread's stack where
 * gdb is installed, on stderr (which the test shows with the failure). */
static void show_where_it_hangs(pid_t child) {
    static int shown;
    if (shown++) return;
    const char *files[] = {"syscall", "wchan"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[64], line[256] = "";
        snprintf(path, sizeof path, "/proc/%d/%s", (int)child, files[i]);
        FILE *f = fopen(path, "r");
        if (f) {
            if (!fgets(line, sizeof line, f)) line[0] = '\0';
            fclose(f);
        }
        fprintf(stderr, "hung child %d, %s: %s\n", (int)child, files[i], line);
    }
    char command[160];
    snprintf(command, sizeof command,
             "command -v gdb >/dev/null && gdb -q -batch -p %d -ex 'thread apply all bt' </dev/null 1>&2", (int)child);
    if (system(command) != 0) fprintf(stderr, "hung child %d: no stack (gdb missing or failed)\n", (int)child);
}

/* The child's exit status within 5 s, or -1 (it hung, and was killed). */
static int status_within_5s(pid_t child) {
    double end = now_ms() + 5000;
    for (;;) {
        int status;
        pid_t done = waitpid(child, &status, WNOHANG);
        if (done == child) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (now_ms() > end) {
            show_where_it_hangs(child);
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
            return -1;
        }
        sleep_ms(5);
    }
}

int scenario_fork(void) {
    pthread_t askers[ASKERS];
    for (int i = 0; i < ASKERS; i++)
        CHECK(pthread_create(&askers[i], NULL, i == 0 ? keep_replacing_the_callback : keep_asking, NULL) == 0,
              "pthread_create");
    int hung = 0, late = 0, direct = 0;
    for (int i = 0; i < FORKS; i++) {
        pid_t child = fork();
        CHECK(child >= 0, "fork: %s", strerror(errno));
        if (child == 0) _exit(child_request());
        int status = status_within_5s(child);
        hung += status == -1;
        late += status == 1;
        direct += status == 2 || status == 3;
        sleep_ms(3);
    }
    atomic_store(&stop_asking, 1);
    for (int i = 0; i < ASKERS; i++) CHECK(pthread_join(askers[i], NULL) == 0, "pthread_join");
    scope_set_log_callback(NULL, NULL);
    CHECK(atomic_load(&replacements) > 0, "a thread kept replacing the callback");
    CHECK(hung == 0 && late == 0 && direct == 0,
          "of %d children forked amid requests: %d hung, %d past their bound, %d launched directly (twice, or not for the manager's silence)", FORKS, hung,
          late, direct);
    return 0;
}

/* The request whose turn is stuck: the harness's stand-in holds its authentication 3 s. */
static void *hold_a_stuck_turn(void *scoped) {
    scope_launcher *launcher = NULL;
    scope_result result = scope_launcher_for_env_timeout(NULL, SCOPE_KIND_TOOL, 5000, &launcher);
    *(int *)scoped = result == SCOPE_RESULT_OK && launcher != NULL;
    scope_launcher_free(launcher);
    return NULL;
}

/* A host whose request stopped waiting for a turn (one stuck ahead of it) forks a child that
 * never calls the library and exits; once the stuck turn ends, another process's request takes its
 * turn at once while that child lives: the host's ticket went with the host. */
int scenario_fork_host_ticket(void) {
    int stuck_scoped = 0;
    pthread_t holder;
    CHECK(pthread_create(&holder, NULL, hold_a_stuck_turn, &stuck_scoped) == 0, "pthread_create");
    sleep_ms(300);
    int pipe_fds[2];
    CHECK(pipe(pipe_fds) == 0, "pipe");
    pid_t host = fork();
    CHECK(host >= 0, "fork: %s", strerror(errno));
    if (host == 0) {
        /* Its turn does not come within 300 ms; its ticket waits on in a thread of its own. */
        scope_launcher *launcher = NULL;
        scope_launcher_for_env_timeout(NULL, SCOPE_KIND_TOOL, 300, &launcher);
        scope_launcher_free(launcher);
        pid_t grandchild = fork();
        if (grandchild == 0) {
            sleep_ms(8000);
            _exit(0);
        }
        _exit(write(pipe_fds[1], &grandchild, sizeof grandchild) == sizeof grandchild ? 0 : 1);
    }
    close(pipe_fds[1]);
    CHECK(status_within_5s(host) == 0, "the host exits");
    pid_t grandchild = 0;
    CHECK(read(pipe_fds[0], &grandchild, sizeof grandchild) == sizeof grandchild && grandchild > 0, "its child's pid");
    close(pipe_fds[0]);
    CHECK(pthread_join(holder, NULL) == 0, "pthread_join");
    CHECK(stuck_scoped, "the stuck request still ends scoped");
    double started = now_ms();
    pid_t asker = fork();
    CHECK(asker >= 0, "fork: %s", strerror(errno));
    if (asker == 0) _exit(one_request());
    int status = status_within_5s(asker);
    double took = now_ms() - started;
    kill(grandchild, SIGKILL);
    CHECK(status == 0, "the request of another process: status %d", status);
    CHECK(took < 250, "a request took %.0f ms while the child of a host that had a ticket lived", took);
    return 0;
}
