/* What the library says, through the log callback or on stderr: refused slices, slices without
 * limits, a child that switches user, a callback replaced while it runs. */
#include "abi.h"

static int refused_warnings;

static void count_refused(void *userdata, scope_log_level level, const char *message, size_t len) {
    CHECK(userdata == &refused_warnings, "userdata comes back");
    CHECK(strlen(message) == len, "len is the message's length");
    if (level == SCOPE_LOG_LEVEL_WARN && strstr(message, "cabi.service") && strstr(message, "is not a slice")) {
        pthread_mutex_lock(&log_lock);
        refused_warnings++;
        pthread_mutex_unlock(&log_lock);
    }
}

static const char **refused_slice_env(const char *slice) {
    char *config = scratch_path("config");
    char text[128];
    snprintf(text, sizeof text, "tool_scope_slice = %s\n", slice);
    write_file(config, text);
    static char entry[300];
    snprintf(entry, sizeof entry, "SYNAPS_CONFIG=%s", config);
    free(config);
    const char *add[] = {entry, NULL};
    return env_edit(NULL, add);
}

int scenario_refused_slice(void) {
    scope_set_log_callback(count_refused, &refused_warnings);
    const char **env = refused_slice_env("cabi.service");
    for (int i = 0; i < 3; i++) {
        scope_launcher *launcher = SENTINEL;
        CHECK(scope_launcher_for_env(env, SCOPE_KIND_TOOL, &launcher) == SCOPE_RESULT_OK, "request %d", i);
        CHECK(launcher == NULL, "a refused slice means a direct launch");
    }
    CHECK(refused_warnings == 1, "%d warnings, expected exactly one", refused_warnings);
    scope_set_log_callback(NULL, NULL);
    free(env);
    return 0;
}

int scenario_default_log_stderr(void) {
    const char **env = refused_slice_env("cabistderr.service");
    scope_launcher *launcher = SENTINEL;
    CHECK(scope_launcher_for_env(env, SCOPE_KIND_TOOL, &launcher) == SCOPE_RESULT_OK && launcher == NULL, "direct");
    free(env);
    return 0;
}

static int user_switch_warnings;

static void count_user_switch(void *userdata, scope_log_level level, const char *message, size_t len) {
    CHECK(userdata == &user_switch_warnings && strlen(message) == len, "userdata and len come back");
    if (level == SCOPE_LOG_LEVEL_WARN && strstr(message, "switches user (uid=65534)") &&
        strstr(message, "cannot hold another user's process")) {
        pthread_mutex_lock(&log_lock);
        user_switch_warnings++;
        pthread_mutex_unlock(&log_lock);
    }
}

int scenario_user_switch(void) {
    scope_set_log_callback(count_user_switch, &user_switch_warnings);
    scope_launcher *launcher = must_launcher(NULL);
    for (int i = 0; i < 3; i++) {
        scope_result r = scope_launcher_user_switch(launcher, "uid=65534");
        CHECK(r == SCOPE_RESULT_OK, "child %d switches user: run directly, result %u", i, (unsigned)r);
    }
    CHECK(user_switch_warnings == 1, "%d warnings, expected one per process", user_switch_warnings);
    CHECK(scope_launcher_user_switch(NULL, "uid=1") == SCOPE_RESULT_NULL_PARAMETER, "NULL launcher");
    CHECK(scope_launcher_user_switch(launcher, NULL) == SCOPE_RESULT_NULL_PARAMETER, "NULL switches");
    CHECK(scope_launcher_user_switch(launcher, "uid=\xff") == SCOPE_RESULT_INVALID_UTF8, "not UTF-8");
    scope_launcher_free(launcher);
    const char *add[] = {"SYNAPS_PROCESS_SCOPES=required", NULL};
    const char **env = env_edit(NULL, add);
    launcher = must_launcher(env);
    scope_result r = scope_launcher_user_switch(launcher, "gid=65534");
    CHECK(r == SCOPE_RESULT_REQUIRED_UNAVAILABLE, "required mode refuses, result %u", (unsigned)r);
    CHECK(strstr(scope_last_error(), "switches user (gid=65534)") != NULL, "message: %s", scope_last_error());
    scope_launcher_free(launcher);
    scope_set_log_callback(NULL, NULL);
    free(env);
    return 0;
}

/* Issue 13, item 9: once scope_set_log_callback returns, the callback it replaced is not running
 * anywhere and never runs again, so its userdata can be freed at once. Four threads log without
 * pause (a DEBUG line a request) while the main thread installs a callback whose userdata it
 * frees right after replacing it, 300 times. The callback reads its userdata (a plain read, which
 * ASan checks) on entry and after a pause, and checks that its round is still on in a table that
 * is never freed. */
#define LOG_ROUNDS 300

struct log_box {
    int round;
};

static atomic_int round_on[LOG_ROUNDS];
static atomic_long boxed_calls;
static atomic_int log_violations;
static atomic_int logging_stop;

static void boxed_callback(void *userdata, scope_log_level level, const char *message, size_t len) {
    (void)level;
    (void)message;
    (void)len;
    const struct log_box *box = userdata;
    if (!atomic_load(&round_on[box->round])) atomic_fetch_add(&log_violations, 1);
    nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 50 * 1000}, NULL);
    if (!atomic_load(&round_on[box->round])) atomic_fetch_add(&log_violations, 1);
    atomic_fetch_add(&boxed_calls, 1);
}

static void quiet_callback(void *userdata, scope_log_level level, const char *message, size_t len) {
    (void)userdata;
    (void)level;
    (void)message;
    (void)len;
}

static void *keep_logging(void *env) {
    while (!atomic_load(&logging_stop)) {
        scope_launcher *launcher = SENTINEL;
        if (scope_launcher_for_env(env, SCOPE_KIND_TOOL, &launcher) != SCOPE_RESULT_OK || launcher != NULL) {
            atomic_fetch_add(&log_violations, 1000);
            return NULL;
        }
    }
    return NULL;
}

int scenario_log_callback_replaced(void) {
    const char *add[] = {"SYNAPS_PROCESS_SCOPES=off", NULL};
    const char **env = env_edit(NULL, add);
    CHECK(scope_set_log_level(SCOPE_LOG_LEVEL_DEBUG) == SCOPE_RESULT_OK, "debug level");
    scope_set_log_callback(quiet_callback, NULL);
    pthread_t threads[4];
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&threads[i], NULL, keep_logging, env) == 0, "pthread_create");
    for (int round = 0; round < LOG_ROUNDS; round++) {
        struct log_box *box = malloc(sizeof *box);
        CHECK(box != NULL, "malloc");
        box->round = round;
        atomic_store(&round_on[round], 1);
        scope_set_log_callback(boxed_callback, box);
        sleep_ms(1);
        /* Replaced by another callback, or by NULL (the lines go to stderr) every third round. */
        if (round % 3 == 0) {
            scope_set_log_callback(NULL, NULL);
        } else {
            scope_set_log_callback(quiet_callback, NULL);
        }
        atomic_store(&round_on[round], 0);
        free(box);
    }
    atomic_store(&logging_stop, 1);
    for (int i = 0; i < 4; i++) CHECK(pthread_join(threads[i], NULL) == 0, "pthread_join");
    scope_set_log_callback(NULL, NULL);
    CHECK(scope_set_log_level(SCOPE_LOG_LEVEL_WARN) == SCOPE_RESULT_OK, "warn level");
    long calls = atomic_load(&boxed_calls);
    fprintf(stderr, "log_callback_replaced: %ld calls of the boxed callbacks, %d of a replaced one\n", calls,
            atomic_load(&log_violations));
    CHECK(atomic_load(&log_violations) == 0, "%d calls of a replaced callback", atomic_load(&log_violations));
    CHECK(calls > LOG_ROUNDS, "the callback ran %ld times", calls);
    free(env);
    return 0;
}

/* The slice checks' WARN lines, counted by the callback from whichever thread logs. */
static int slice_warned, unanswered_warned;

static void count_slice_lines(void *userdata, scope_log_level level, const char *message, size_t len) {
    (void)userdata;
    (void)len;
    if (level != SCOPE_LOG_LEVEL_WARN) return;
    pthread_mutex_lock(&log_lock);
    if (strstr(message, "slice cabibusy.slice sets no limits") != NULL) slice_warned++;
    if (strstr(message, "could not check whether slice cabiflush.slice sets any limits") != NULL) unanswered_warned++;
    pthread_mutex_unlock(&log_lock);
}

static int counted(int *count) {
    pthread_mutex_lock(&log_lock);
    int value = *count;
    pthread_mutex_unlock(&log_lock);
    return value;
}

/* A launch that must be scoped, answered within 300 ms + 100 ms whatever the slice check does. */
static void request_scoped_quickly(void) {
    scope_launcher *launcher = NULL;
    double started = now_ms();
    scope_result r = scope_launcher_for_env_timeout(NULL, SCOPE_KIND_TOOL, 300, &launcher);
    if (r != SCOPE_RESULT_OK || launcher == NULL) {
        fprintf(stderr, "FAIL: a scoped launcher: result %u: %s\n", (unsigned)r, scope_last_error());
        exit(1);
    }
    if (now_ms() - started >= 400) {
        fprintf(stderr, "FAIL: a request waited %.0f ms for the slice check\n", now_ms() - started);
        exit(1);
    }
    scope_launcher_free(launcher);
}

/* The environment names cabibusy.slice, and its manager answers the first check 5 s late: the
 * check asks again on its own, with no further request, and the warning comes once. */
int scenario_busy_slice_check(void) {
    scope_set_log_callback(count_slice_lines, NULL);
    request_scoped_quickly();
    double deadline = now_ms() + 10000;
    while (counted(&slice_warned) == 0) {
        CHECK(now_ms() < deadline, "the warning never came");
        sleep_ms(50);
    }
    for (int i = 0; i < 5; i++) request_scoped_quickly();
    sleep_ms(1500);
    CHECK(counted(&slice_warned) == 1, "%d warnings, expected exactly one", counted(&slice_warned));
    scope_set_log_callback(NULL, NULL);
    return 0;
}

/* The environment names cabiflush.slice, and its manager answers every slice check 5 s late. */
int scenario_flush_warnings(void) {
    scope_set_log_callback(count_slice_lines, NULL);
    scope_launcher *launcher = NULL;
    CHECK(scope_launcher_for_env_timeout(NULL, SCOPE_KIND_TOOL, 500, &launcher) == SCOPE_RESULT_OK && launcher != NULL,
          "scoped: %s", scope_last_error());
    scope_launcher_free(launcher);
    double started = now_ms();
    scope_result r = scope_flush_warnings(300);
    CHECK(r == SCOPE_RESULT_TIMED_OUT, "result %u", (unsigned)r);
    CHECK(now_ms() - started < 500, "flushed after %.0f ms", now_ms() - started);
    CHECK(counted(&unanswered_warned) == 1, "%d warnings, expected one", counted(&unanswered_warned));
    scope_set_log_callback(NULL, NULL);
    /* The check's own bound (500 ms) ends its attempt; it then pauses before asking again. */
    CHECK(scope_flush_warnings(2000) == SCOPE_RESULT_OK, "the attempt ended by its bound");
    return 0;
}

/* The environment names an undefined slice (SYNAPS_TEST_SLICE, for tool launches); six threads
 * launch with a config naming none while the main thread makes the one request that names it:
 * the warning reaches the callback exactly once. Run in 20 fresh processes by the Rust test. */
static char concurrent_needle[160];
static int concurrent_warned;

static void count_concurrent(void *userdata, scope_log_level level, const char *message, size_t len) {
    (void)userdata;
    (void)len;
    if (level != SCOPE_LOG_LEVEL_WARN || strstr(message, concurrent_needle) == NULL) return;
    pthread_mutex_lock(&log_lock);
    concurrent_warned++;
    pthread_mutex_unlock(&log_lock);
}

static void *launch_plain(void *envp) {
    for (int i = 0; i < 5; i++) {
        scope_launcher *launcher = must_launcher(envp);
        scope_launcher_free(launcher);
    }
    return NULL;
}

int scenario_concurrent_slice_warning(void) {
    const char *slice = getenv("SYNAPS_TEST_SLICE");
    CHECK(slice != NULL, "SYNAPS_TEST_SLICE names the undefined slice");
    snprintf(concurrent_needle, sizeof concurrent_needle, "slice %s sets no limits", slice);
    char *plain = scratch_path("plain.config");
    write_file(plain, "");
    char config_entry[300];
    snprintf(config_entry, sizeof config_entry, "SYNAPS_CONFIG=%s", plain);
    const char *drop[] = {"SYNAPS_CONFIG", NULL};
    const char *add[] = {config_entry, NULL};
    const char **plain_env = env_edit(drop, add);
    scope_set_log_callback(count_concurrent, NULL);
    pthread_t threads[6];
    for (int i = 0; i < 6; i++) CHECK(pthread_create(&threads[i], NULL, launch_plain, plain_env) == 0, "pthread_create");
    scope_launcher_free(must_launcher(NULL));
    for (int i = 0; i < 6; i++) CHECK(pthread_join(threads[i], NULL) == 0, "pthread_join");
    double deadline = now_ms() + 10000;
    while (counted(&concurrent_warned) == 0 && now_ms() < deadline) sleep_ms(10);
    sleep_ms(300);
    CHECK(counted(&concurrent_warned) == 1, "the R12 warning came %d times", counted(&concurrent_warned));
    scope_set_log_callback(NULL, NULL);
    free(plain_env);
    free(plain);
    return 0;
}
