/* Bad input, threads, bounds and bursts from C. */
#include "abi.h"

static void expect(scope_result got, scope_result want, const char *what) {
    CHECK(got == want, "%s: result %u (%s), expected %u", what, (unsigned)got, scope_result_name(got), (unsigned)want);
    CHECK(strlen(scope_last_error()) > 0, "%s: a message explains it", what);
}

int scenario_bad_input(void) {
    scope_launcher *launcher = must_launcher(NULL);
    scope_launcher *out = SENTINEL;
    const char *no_equals[] = {"PATH=/usr/bin:/bin", "NOEQUALS", NULL};
    const char *empty_key[] = {"=value", NULL};

    /* Issue 13, item 14: a script without #! is left unwrapped, so posix_spawn fails on it as it
     * does direct (ENOEXEC), instead of running through /bin/sh (no binfmt_misc formats here). */
    char *bare = scratch_path("bare");
    write_file(bare, "exit 0\n");
    CHECK(chmod(bare, 0755) == 0, "chmod");
    const char *bare_argv[] = {bare, NULL};
    scope_argv *left = NULL;
    CHECK(scope_wrap_argv(launcher, bare_argv, NULL, NULL, &left) == SCOPE_RESULT_OK, "wrap: %s", scope_last_error());
    CHECK(scope_argv_unit(left) == NULL && scope_argv_len(left) == 1, "a script without #! is left unwrapped");
    pid_t never;
    CHECK(posix_spawn(&never, scope_argv_ptr(left)[0], NULL, NULL, scope_argv_ptr(left), environ) == ENOEXEC,
          "posix_spawn refuses it as a direct spawn does");
    scope_argv_free(left);
    free(bare);

    expect(scope_launcher_for_env(NULL, SCOPE_KIND_TOOL, NULL), SCOPE_RESULT_NULL_PARAMETER, "NULL out");
    expect(scope_launcher_for_env(no_equals, SCOPE_KIND_TOOL, &out), SCOPE_RESULT_INVALID_ARGUMENT, "entry without =");
    CHECK(strstr(scope_last_error(), "envp: environment entry 1") != NULL, "names the entry: %s", scope_last_error());
    expect(scope_launcher_for_env(empty_key, SCOPE_KIND_TOOL, &out), SCOPE_RESULT_INVALID_ARGUMENT, "empty key");
    expect(scope_launcher_for_env(NULL, 7, &out), SCOPE_RESULT_INVALID_KIND, "kind 7");
    scope_kind named = 99;
    CHECK(scope_kind_from_name("daemon", &named) == SCOPE_RESULT_OK && named == SCOPE_KIND_DAEMON, "daemon by name");
    named = 99;
    expect(scope_kind_from_name("Tool", &named), SCOPE_RESULT_INVALID_KIND, "kind Tool");
    CHECK(named == 99, "out untouched by an unknown name");
    expect(scope_kind_from_name(NULL, &named), SCOPE_RESULT_NULL_PARAMETER, "a NULL name");
    expect(scope_flush_warnings(0), SCOPE_RESULT_INVALID_ARGUMENT, "flush for 0 ms");
    expect(scope_launcher_for_env_timeout(NULL, SCOPE_KIND_TOOL, 0, &out), SCOPE_RESULT_INVALID_ARGUMENT, "0 ms");
    CHECK(out == SENTINEL, "out untouched by every failure");

    /* A shell command inside the scope: its words as sh -c takes them, or joined as Node does. */
    const char *positional[] = {"test \"$0 $1\" = \"x y\"", "x", "y", NULL};
    const char *joined[] = {"test", "a", "=", "a", NULL};
    const char *const *shell_words[] = {positional, joined};
    const scope_shell_words hows[] = {SCOPE_SHELL_WORDS_POSITIONAL, SCOPE_SHELL_WORDS_JOINED};
    for (size_t i = 0; i < 2; i++) {
        scope_argv *shell = NULL;
        CHECK(scope_wrap_shell(launcher, NULL, shell_words[i], hows[i], NULL, NULL, &shell) == SCOPE_RESULT_OK,
              "wrap_shell: %s", scope_last_error());
        size_t n = scope_argv_len(shell);
        CHECK(scope_argv_unit(shell) != NULL, "a shell command gets its scope");
        CHECK(strcmp(scope_argv_get(shell, n - (i == 0 ? 5 : 3), NULL), "/bin/sh") == 0, "/bin/sh -c …");
        pid_t child;
        CHECK(posix_spawn(&child, scope_argv_ptr(shell)[0], NULL, NULL, scope_argv_ptr(shell), environ) == 0, "spawn");
        CHECK(wait_exit(child) == 0, "the shell saw its words as %s", i == 0 ? "$0 $1" : "one command");
        scope_argv_free(shell);
    }
    scope_argv *no_shell = SENTINEL;
    expect(scope_wrap_shell(launcher, NULL, joined, 7, NULL, NULL, &no_shell), SCOPE_RESULT_INVALID_ARGUMENT, "how 7");
    CHECK(no_shell == SENTINEL, "out untouched");

    const char *argv[] = {"echo", "a", NULL, "b", NULL};
    const char *empty[] = {NULL};
    scope_argv *wrapped = SENTINEL;
    expect(scope_wrap_argv(NULL, argv, NULL, NULL, &wrapped), SCOPE_RESULT_NULL_PARAMETER, "NULL launcher");
    CHECK(strstr(scope_last_error(), "launch directly") != NULL, "hint: %s", scope_last_error());
    expect(scope_wrap_argv(launcher, NULL, NULL, NULL, &wrapped), SCOPE_RESULT_NULL_PARAMETER, "NULL argv");
    /* An empty argv is left unwrapped, as an unresolvable program is (R4). */
    CHECK(scope_wrap_argv(launcher, empty, NULL, NULL, &wrapped) == SCOPE_RESULT_OK, "empty argv");
    CHECK(scope_argv_len(wrapped) == 0 && scope_argv_ptr(wrapped)[0] == NULL && scope_argv_unit(wrapped) == NULL,
          "returned empty, without a unit");
    scope_argv_free(wrapped);
    wrapped = SENTINEL;
    expect(scope_wrap_argv(launcher, argv, no_equals, NULL, &wrapped), SCOPE_RESULT_INVALID_ARGUMENT, "bad envp");
    expect(scope_wrap_argv(launcher, argv, NULL, NULL, NULL), SCOPE_RESULT_NULL_PARAMETER, "NULL out");
    CHECK(wrapped == SENTINEL, "out untouched by every failure");
    CHECK(scope_wrap_argv(launcher, argv, NULL, NULL, &wrapped) == SCOPE_RESULT_OK, "NULL in the middle ends argv");
    size_t len = scope_argv_len(wrapped);
    CHECK(strcmp(scope_argv_get(wrapped, len - 1, NULL), "a") == 0, "argv ends at the first NULL");
    CHECK(scope_argv_get(wrapped, len, NULL) == NULL, "out of range");
    scope_argv_free(wrapped);

    const char *missing[] = {"synaps-no-such-program", "x", NULL};
    wrapped = must_wrap(launcher, missing);
    CHECK(scope_argv_unit(wrapped) == NULL && scope_argv_len(wrapped) == 2, "a missing program is left unwrapped");
    CHECK(strcmp(scope_argv_get(wrapped, 0, NULL), "synaps-no-such-program") == 0, "unchanged");
    scope_argv_free(wrapped);

    const char *file = scope_library_file();
    CHECK(file != NULL && file[0] == '/' && strstr(file, "libsynaps_scope") != NULL, "the library names its file");
    CHECK(scope_library_file() == file, "the same static string each time");

    scope_handle *handle = SENTINEL;
    expect(scope_handle_from_pid(NULL, 1, &handle), SCOPE_RESULT_NULL_PARAMETER, "NULL unit");
    expect(scope_handle_from_pid("\xff.scope", 1, &handle), SCOPE_RESULT_INVALID_UTF8, "non-UTF-8 unit");
    expect(scope_handle_from_pid("app.slice", 1, &handle), SCOPE_RESULT_NOT_OURS, "foreign unit");
    /* Which numbers are pids is the library's one rule: 1 to 2^31 - 1 (pid_t). */
    const uint32_t not_pids[] = {0, 2147483648u, 4294967295u};
    for (size_t i = 0; i < sizeof not_pids / sizeof not_pids[0]; i++) {
        expect(scope_handle_of_process(not_pids[i], &handle), SCOPE_RESULT_INVALID_ARGUMENT, "no pid");
        CHECK(strstr(scope_last_error(), "pid must be a whole number from 1 to 2147483647") != NULL, "the rule named");
        expect(scope_handle_from_pid("synaps-tool-0123456789abcdef0123456789abcdef.scope", not_pids[i], &handle),
               SCOPE_RESULT_INVALID_ARGUMENT, "no pid");
    }
    expect(scope_handle_from_manager("synaps-tool-0123456789abcdef0123456789abcdef.scope", NULL, 3000, &handle),
           SCOPE_RESULT_NOT_FOUND, "no such scope");
    expect(scope_handle_kill(NULL, 1000), SCOPE_RESULT_NULL_PARAMETER, "NULL handle");
    CHECK(handle == SENTINEL, "out untouched by every failure");

    char *path = SENTINEL;
    expect(scope_resolve_program("synaps-no-such-program", NULL, NULL, &path), SCOPE_RESULT_NOT_FOUND, "missing");
    expect(scope_resolve_program(NULL, NULL, NULL, &path), SCOPE_RESULT_NULL_PARAMETER, "NULL program");
    CHECK(path == SENTINEL, "out untouched");
    CHECK(scope_resolve_program("sh", NULL, "/", &path) == SCOPE_RESULT_OK && path[0] == '/', "sh resolves");
    scope_string_free(path);
    expect(scope_set_log_level(9), SCOPE_RESULT_INVALID_ARGUMENT, "log level 9");

    scope_launcher_free(NULL);
    scope_argv_free(NULL);
    scope_handle_free(NULL);
    scope_string_free(NULL);
    scope_pids_free(NULL, 0);
    CHECK(scope_argv_len(NULL) == 0 && scope_argv_ptr(NULL) == NULL && scope_argv_unit(NULL) == NULL, "NULL getters");
    CHECK(scope_argv_get(NULL, 0, NULL) == NULL && scope_launcher_slice(NULL) == NULL, "NULL getters");
    CHECK(scope_launcher_systemd_version(NULL) == 0 && scope_handle_unit(NULL) == NULL, "NULL getters");
    scope_launcher_free(launcher);
    return 0;
}

#define THREADS 32

struct thread_job {
    const scope_launcher *launcher;
    int index;
    char unit[128];
    int ok;
};

/* Runs, wrapped by `launcher`, a shell that appends its cgroup to the scratch file `name` (so a
 * second run would show); its unit goes to `unit`. Whether the shell exited 0. The shell's
 * builtins alone: a burst of 256 has no CPU to spare for a grep each. */
static int run_reporting(const scope_launcher *launcher, const char *name, char *unit, size_t unit_size) {
    char *report = scratch_path(name);
    const char *argv[] = {"sh", "-c",
                          "while IFS= read -r line; do case $line in 0::*) "
                          "printf '%s\\n' \"$line\" >> \"$0\";; esac; done < /proc/$$/cgroup",
                          report, NULL};
    scope_argv *wrapped = must_wrap(launcher, argv);
    snprintf(unit, unit_size, "%s", scope_argv_unit(wrapped));
    int ok = wait_exit(spawn(scope_argv_ptr(wrapped), 0)) == 0;
    scope_argv_free(wrapped);
    free(report);
    return ok;
}

static void *thread_launch(void *arg) {
    struct thread_job *job = arg;
    char name[32];
    snprintf(name, sizeof name, "thread-%d", job->index);
    job->ok = run_reporting(job->launcher, name, job->unit, sizeof job->unit);
    char *report = scratch_path(name);
    check_cgroup_file(report, job->unit);
    free(report);
    return NULL;
}

int scenario_threads(void) {
    scope_launcher *launcher = must_launcher(NULL);
    struct thread_job jobs[THREADS];
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (struct thread_job){.launcher = launcher, .index = i};
        CHECK(pthread_create(&threads[i], NULL, thread_launch, &jobs[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(threads[i], NULL) == 0, "pthread_join");
    for (int i = 0; i < THREADS; i++) {
        CHECK(jobs[i].ok, "thread %d's child failed", i);
        for (int j = 0; j < i; j++) CHECK(strcmp(jobs[i].unit, jobs[j].unit) != 0, "threads %d and %d share a unit", i, j);
    }
    scope_launcher_free(launcher);
    return 0;
}

/* 64 requests at once against a stopped manager (the test stops it): each answers within its own
 * bound + 100 ms, from 64 threads and from 64 async requests. */
#define STOPPED_REQUESTS 64
#define STOPPED_BOUND_MS 500

struct stopped_job {
    double took_ms;
    scope_result result;
    int direct;
};

static void *stopped_request(void *arg) {
    struct stopped_job *job = arg;
    double started = now_ms();
    scope_launcher *launcher = NULL;
    job->result = scope_launcher_for_env_timeout(NULL, SCOPE_KIND_TOOL, STOPPED_BOUND_MS, &launcher);
    job->took_ms = now_ms() - started;
    job->direct = launcher == NULL;
    scope_launcher_free(launcher);
    return NULL;
}

struct async_requests {
    pthread_mutex_t lock;
    pthread_cond_t done;
    int answered;
};

/* One async request: when it was made, and what it came to. */
struct async_request {
    struct async_requests *all;
    double started;
    double took_ms;
    int direct;
};

static void async_ready(void *userdata, scope_result result, scope_launcher *launcher, const char *error) {
    struct async_request *request = userdata;
    struct async_requests *all = request->all;
    (void)error;
    pthread_mutex_lock(&all->lock);
    /* From its own call: the bound is each request's, and the later requests were made after the
     * earlier ones' threads were started. */
    request->took_ms = now_ms() - request->started;
    request->direct = result == SCOPE_RESULT_OK && launcher == NULL;
    all->answered++;
    pthread_cond_signal(&all->done);
    pthread_mutex_unlock(&all->lock);
    scope_launcher_free(launcher);
}

int scenario_stopped_manager_requests(void) {
    static struct stopped_job jobs[STOPPED_REQUESTS];
    pthread_t threads[STOPPED_REQUESTS];
    for (int i = 0; i < STOPPED_REQUESTS; i++)
        CHECK(pthread_create(&threads[i], NULL, stopped_request, &jobs[i]) == 0, "pthread_create");
    for (int i = 0; i < STOPPED_REQUESTS; i++) CHECK(pthread_join(threads[i], NULL) == 0, "pthread_join");
    for (int i = 0; i < STOPPED_REQUESTS; i++) {
        CHECK(jobs[i].result == SCOPE_RESULT_OK && jobs[i].direct, "thread %d: result %d", i, (int)jobs[i].result);
        CHECK(jobs[i].took_ms < STOPPED_BOUND_MS + 100, "thread %d answered after %.0f ms", i, jobs[i].took_ms);
    }

    static struct async_requests all = {.lock = PTHREAD_MUTEX_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};
    static struct async_request requests[STOPPED_REQUESTS];
    for (int i = 0; i < STOPPED_REQUESTS; i++) {
        requests[i] = (struct async_request){.all = &all, .started = now_ms()};
        CHECK(scope_launcher_for_env_async(NULL, SCOPE_KIND_TOOL, STOPPED_BOUND_MS, async_ready, &requests[i]) ==
                  SCOPE_RESULT_OK,
              "async request %d: %s", i, scope_last_error());
    }
    pthread_mutex_lock(&all.lock);
    while (all.answered < STOPPED_REQUESTS) pthread_cond_wait(&all.done, &all.lock);
    pthread_mutex_unlock(&all.lock);
    for (int i = 0; i < STOPPED_REQUESTS; i++) {
        CHECK(requests[i].direct, "async request %d was not answered with a direct launch", i);
        CHECK(requests[i].took_ms < STOPPED_BOUND_MS + 100, "async request %d was answered after %.0f ms", i,
              requests[i].took_ms);
    }
    CHECK(scope_launcher_for_env_async(NULL, SCOPE_KIND_TOOL, STOPPED_BOUND_MS, NULL, NULL) == SCOPE_RESULT_NULL_PARAMETER,
          "a NULL callback is refused");
    /* The detached request threads may still be unwinding: let them finish before exit. */
    nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 100 * 1000 * 1000}, NULL);
    return 0;
}

/* A burst (issue 22): 256 threads at once, each with a request of its own, a wrap and a
 * posix_spawn; each command appends its cgroup to a report of its own as it starts. None goes
 * direct, every command starts in its own scope, and runs once. */
#define BURST 256

struct burst_job {
    pthread_barrier_t *start;
    int index;
    char unit[128];
    int direct;
    int ok;
};

static void *burst_launch(void *arg) {
    struct burst_job *job = arg;
    char name[32];
    snprintf(name, sizeof name, "burst-%d", job->index);
    pthread_barrier_wait(job->start);
    scope_launcher *launcher = NULL;
    scope_result r = scope_launcher_for_env(NULL, SCOPE_KIND_TOOL, &launcher);
    CHECK(r == SCOPE_RESULT_OK, "scope_launcher_for_env returned %u", (unsigned)r);
    job->direct = launcher == NULL;
    if (launcher) {
        job->ok = run_reporting(launcher, name, job->unit, sizeof job->unit);
        scope_launcher_free(launcher);
    }
    return NULL;
}

int scenario_burst(void) {
    pthread_barrier_t start;
    CHECK(pthread_barrier_init(&start, NULL, BURST) == 0, "pthread_barrier_init");
    static struct burst_job jobs[BURST];
    pthread_t threads[BURST];
    double began = now_ms();
    for (int i = 0; i < BURST; i++) {
        jobs[i] = (struct burst_job){.start = &start, .index = i};
        CHECK(pthread_create(&threads[i], NULL, burst_launch, &jobs[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < BURST; i++) CHECK(pthread_join(threads[i], NULL) == 0, "pthread_join");
    double took = now_ms() - began;
    pthread_barrier_destroy(&start);
    for (int i = 0; i < BURST; i++) {
        CHECK(!jobs[i].direct, "launch %d went direct", i);
        CHECK(jobs[i].ok, "launch %d's command failed", i);
        char name[32];
        snprintf(name, sizeof name, "burst-%d", i);
        char *report = scratch_path(name);
        char *text = read_file(report, NULL);
        char *newline = strchr(text, '\n');
        CHECK(newline && newline[1] == '\0', "launch %d ran once: %s", i, text);
        free(text);
        check_cgroup_file(report, jobs[i].unit);
        free(report);
    }
    fprintf(stderr, "%d launches at once from C threads: all scoped, each once, in %.0f ms\n", BURST, took);
    return 0;
}
