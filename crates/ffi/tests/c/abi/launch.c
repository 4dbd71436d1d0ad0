/* Launches from C: scoped and direct, argv byte for byte, required mode, the ABI and doctor. */
#include "abi.h"
int scenario_abi_version(void) {
    CHECK(scope_abi_version() == SCOPE_ABI_VERSION, "header %d, library %u", SCOPE_ABI_VERSION, scope_abi_version());
    CHECK(strlen(scope_version()) > 0, "empty version");
    CHECK(strcmp(scope_result_name(SCOPE_RESULT_OK), "ok") == 0, "%s", scope_result_name(0));
    CHECK(strcmp(scope_result_name(999), "unknown result") == 0, "%s", scope_result_name(999));
    CHECK(scope_last_error() != NULL, "scope_last_error is never NULL");
    return 0;
}

int scenario_scoped_spawn(void) {
    scope_launcher *launcher = must_launcher(NULL);
    const char *expected = getenv("SYNAPS_RIG_SYSTEMD_VERSION");
    const char *asked = getenv("SYNAPS_SCOPE_LAUNCHER");
    scope_wrapper wrapper = scope_launcher_wrapper(launcher);
    CHECK(wrapper == SCOPE_WRAPPER_EXEC || wrapper == SCOPE_WRAPPER_SYSTEMD_RUN, "wrapper %u", wrapper);
    if (asked && strcmp(asked, "synaps-scope-exec") == 0) CHECK(wrapper == SCOPE_WRAPPER_EXEC, "the launcher program");
    if (asked && strcmp(asked, "systemd-run") == 0) CHECK(wrapper == SCOPE_WRAPPER_SYSTEMD_RUN, "systemd-run");
    uint32_t version = scope_launcher_systemd_version(launcher);
    CHECK(wrapper == SCOPE_WRAPPER_EXEC ? version == 0 : expected && version == (uint32_t)atoi(expected), "version %u",
          version);
    CHECK(scope_launcher_kind(launcher) == SCOPE_KIND_TOOL, "kind");
    CHECK(scope_launcher_slice(launcher) == NULL, "no slice configured");

    char *report = scratch_path("report");
    const char *argv[] = {"sh", "-c", "grep ^0:: /proc/$$/cgroup > \"$0\"; echo $$ >> \"$0\"", report, NULL};
    scope_argv *wrapped = must_wrap(launcher, argv);
    const char *unit = scope_argv_unit(wrapped);
    CHECK(unit && strncmp(unit, "synaps-tool-", 12) == 0, "unit %s", unit ? unit : "(null)");
    CHECK(scope_argv_ptr(wrapped)[scope_argv_len(wrapped)] == NULL, "NULL-terminated");
    pid_t pid = spawn(scope_argv_ptr(wrapped), 0);
    CHECK(wait_exit(pid) == 0, "the scoped child failed");
    check_cgroup_file(report, unit);
    char *text = read_file(report, NULL);
    char pid_line[32];
    snprintf(pid_line, sizeof pid_line, "\n%d\n", (int)pid);
    CHECK(strstr(text, pid_line) != NULL, "the spawned pid %d is the command's pid: %s", (int)pid, text);
    free(text);
    free(report);
    scope_argv_free(wrapped);
    scope_launcher_free(launcher);
    return 0;
}

/* A login shell: the program is /bin/sh, its argv[0] is "-sh" (scope_wrap_program, like execv). */
int scenario_login_shell(void) {
    scope_launcher *launcher = must_launcher(NULL);
    char *report = scratch_path("argv0");
    char script[512];
    /* Without arguments after the script, sh -c sets $0 to its own argv[0]. */
    snprintf(script, sizeof script, "printf '%%s' \"$0\" > '%s'", report);
    const char *argv[] = {"-sh", "-c", script, NULL};
    scope_argv *wrapped = NULL;
    CHECK(scope_wrap_program(launcher, "sh", argv, NULL, NULL, &wrapped) == SCOPE_RESULT_OK, "wrap: %s",
          scope_last_error());
    CHECK(scope_argv_unit(wrapped) != NULL, "wrapped");
    pid_t pid = spawn(scope_argv_ptr(wrapped), 0);
    CHECK(wait_exit(pid) == 0, "the scoped login shell failed");
    char *text = read_file(report, NULL);
    const char *want = scope_launcher_wrapper(launcher) == SCOPE_WRAPPER_EXEC ? "-sh" : NULL;
    if (want) CHECK(strcmp(text, want) == 0, "argv[0] is %s", text);
    else CHECK(text[0] == '/', "systemd-run passes the program's path as argv[0]: %s", text);
    free(text);
    free(report);
    scope_argv_free(wrapped);
    scope_launcher_free(launcher);
    return 0;
}

int scenario_nonutf8_argv(void) {
    scope_launcher *launcher = must_launcher(NULL);
    char *out = scratch_path("args");
    const char *payload[] = {"\xff\xfe", "${HOME}", "", "-h", "--", "caf\xc3\xa9 \"q\" \\", "line\nbreak"};
    const size_t count = sizeof payload / sizeof payload[0];
    const char *argv[5 + sizeof payload / sizeof payload[0]];
    argv[0] = "sh";
    argv[1] = "-c";
    argv[2] = "for a; do printf '%s\\0' \"$a\"; done > \"$0\"";
    argv[3] = out;
    for (size_t i = 0; i < count; i++) argv[4 + i] = payload[i];
    argv[4 + count] = NULL;
    scope_argv *wrapped = must_wrap(launcher, argv);
    size_t len = scope_argv_len(wrapped);
    for (size_t i = 0; i < count; i++) {
        size_t got_len = 0;
        const char *got = scope_argv_get(wrapped, len - count + i, &got_len);
        CHECK(got && got_len == strlen(payload[i]) && memcmp(got, payload[i], got_len) == 0, "argv element %zu", i);
    }
    /* The whole argv in one copy: each argument NUL-terminated, byte for byte as scope_argv_get. */
    size_t size = scope_argv_size(wrapped);
    char *copy = malloc(size);
    CHECK(copy != NULL, "malloc");
    CHECK(scope_argv_copy(wrapped, (uint8_t *)copy, size - 1) == SCOPE_RESULT_INVALID_ARGUMENT, "a short buffer is refused");
    CHECK(scope_argv_copy(wrapped, NULL, size) == SCOPE_RESULT_NULL_PARAMETER, "a NULL buffer is refused");
    CHECK(scope_argv_copy(NULL, (uint8_t *)copy, size) == SCOPE_RESULT_NULL_PARAMETER, "a NULL argv is refused");
    CHECK(scope_argv_size(NULL) == 0, "NULL has no size");
    CHECK(scope_argv_copy(wrapped, (uint8_t *)copy, size) == SCOPE_RESULT_OK, "copy: %s", scope_last_error());
    size_t offset = 0;
    for (size_t i = 0; i < len; i++) {
        size_t arg_len = 0;
        const char *arg = scope_argv_get(wrapped, i, &arg_len);
        CHECK(offset + arg_len < size && memcmp(copy + offset, arg, arg_len) == 0 && copy[offset + arg_len] == '\0',
              "copied argument %zu", i);
        offset += arg_len + 1;
    }
    CHECK(offset == size, "the copy is exactly the argv");
    free(copy);
    int has_flag = 0;
    for (size_t i = 0; i < len; i++) has_flag |= strcmp(scope_argv_get(wrapped, i, NULL), "--expand-environment=no") == 0;
    CHECK(has_flag == (scope_launcher_systemd_version(launcher) >= 254), "--expand-environment=no exactly on 254");
    CHECK(wait_exit(spawn(scope_argv_ptr(wrapped), 0)) == 0, "child failed");
    size_t got_len;
    char *got = read_file(out, &got_len);
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        size_t n = strlen(payload[i]);
        CHECK(at + n < got_len + 1 && memcmp(got + at, payload[i], n) == 0 && got[at + n] == '\0', "arg %zu arrived changed", i);
        at += n + 1;
    }
    CHECK(at == got_len, "%zu bytes expected, %zu arrived", at, got_len);
    free(got);
    free(out);
    scope_argv_free(wrapped);
    scope_launcher_free(launcher);
    return 0;
}

int scenario_direct_no_manager(void) {
    const char **env = env_edit(NO_BUS, NULL);
    scope_launcher *launcher = SENTINEL;
    CHECK(scope_launcher_for_env(env, SCOPE_KIND_DAEMON, &launcher) == SCOPE_RESULT_OK, "direct is not an error");
    CHECK(launcher == NULL, "NULL means launch directly");
    free(env);
    return 0;
}

static int direct_and_required_says(const char *why);

/* Started in a pid namespace the manager is outside of, with systemd-run as the wrapper: it could
 * not reach the manager from there, so there is no launcher, and `required` says why. */
int scenario_direct_in_pid_namespace(void) { return direct_and_required_says("pid namespace"); }

/* Started with systemd-run as the wrapper and a relay in front of the manager's private socket:
 * systemd-run would make the scope, then fail to find it as the sender's (the relay's) unit and
 * never run the command, so there is no launcher, and `required` says why. */
int scenario_systemd_run_behind_a_relay(void) { return direct_and_required_says("never running the command"); }

/* No launcher for this process's environment (direct is not an error), and in `required` mode an
 * error whose message holds `why`, the out-parameter untouched. */
static int direct_and_required_says(const char *why) {
    scope_launcher *launcher = SENTINEL;
    CHECK(scope_launcher_for_env(NULL, SCOPE_KIND_TOOL, &launcher) == SCOPE_RESULT_OK, "direct is not an error");
    CHECK(launcher == NULL, "NULL means launch directly");
    const char *add[] = {"SYNAPS_PROCESS_SCOPES=required", NULL};
    const char **env = env_edit(NULL, add);
    launcher = SENTINEL;
    scope_result r = scope_launcher_for_env(env, SCOPE_KIND_TOOL, &launcher);
    CHECK(r == SCOPE_RESULT_REQUIRED_UNAVAILABLE && launcher == SENTINEL, "result %u", (unsigned)r);
    CHECK(strstr(scope_last_error(), why) != NULL, "message: %s", scope_last_error());
    free(env);
    return 0;
}

/* Started in a pid namespace the manager is outside of, with the launcher program as the wrapper,
 * through either way to the manager: "the sender" cannot be told from a relay's or a proxy's there
 * (one that passes descriptors passes the one sent to show the manager), so a manager that takes a
 * pidfd (systemd 257 on) is sent one and the child is scoped; before 257 there is no launcher, and
 * `required` says why. */
int scenario_from_a_pid_namespace(void) {
    const char *version = getenv("SYNAPS_RIG_SYSTEMD_VERSION");
    CHECK(version != NULL, "SYNAPS_RIG_SYSTEMD_VERSION is set by the rig");
    return atoi(version) >= 257 ? scenario_scoped_spawn() : direct_and_required_says("takes no pidfd");
}

int scenario_required(void) {
    const char *add[] = {"SYNAPS_PROCESS_SCOPES=required", NULL};
    const char **env = env_edit(NO_BUS, add);
    scope_launcher *launcher = SENTINEL;
    scope_result r = scope_launcher_for_env(env, SCOPE_KIND_TOOL, &launcher);
    CHECK(r == SCOPE_RESULT_REQUIRED_UNAVAILABLE, "result %u", (unsigned)r);
    CHECK(launcher == SENTINEL, "out untouched on failure");
    CHECK(strstr(scope_last_error(), "required") != NULL, "message: %s", scope_last_error());
    char message[32];
    memset(message, 'x', sizeof message);
    r = scope_launcher_for_env_r(env, SCOPE_KIND_TOOL, 3000, &launcher, message, sizeof message);
    CHECK(r == SCOPE_RESULT_REQUIRED_UNAVAILABLE && launcher == SENTINEL, "result %u", (unsigned)r);
    CHECK(strlen(message) == sizeof message - 1, "truncated and NUL-terminated: %s", message);
    CHECK(strncmp(message, "process scopes are required", 27) == 0, "the message: %s", message);
    free(env);
    /* With the manager there, a launcher that says it was made in required mode. */
    const char **with_bus = env_edit(NULL, add);
    launcher = must_launcher(with_bus);
    CHECK(scope_launcher_required(launcher), "made in required mode");
    scope_launcher_free(launcher);
    free(with_bus);
    launcher = must_launcher(NULL);
    CHECK(!scope_launcher_required(launcher), "made in on mode");
    scope_launcher_free(launcher);
    CHECK(!scope_launcher_required(NULL), "NULL is not required");
    return 0;
}

/* The doctor's report goes to stderr for the test to read, with its verdict as a value; bad input
 * gets its code and a message. */
int scenario_doctor(void) {
    char *report = NULL;
    scope_verdict verdict = 99;
    scope_result r = scope_diagnose(NULL, 3000, &report, &verdict);
    CHECK(r == SCOPE_RESULT_OK && report != NULL, "diagnose: %u %s", (unsigned)r, scope_last_error());
    const char *words = scope_verdict_words(verdict);
    char last_line[160];
    snprintf(last_line, sizeof last_line, "\nverdict:       %s (exit %u)\n", words, (unsigned)verdict);
    CHECK(strstr(report, last_line) != NULL, "the verdict %u (%s) is not the report's:\n%s", (unsigned)verdict,
          words, report);
    fputs(report, stderr);
    fprintf(stderr, "verdict value: %u\n", (unsigned)verdict);
    scope_string_free(report);
    CHECK(strcmp(scope_verdict_words(SCOPE_VERDICT_REFUSED), "required mode will refuse launches") == 0, "words");
    CHECK(strcmp(scope_verdict_words(4), "unknown verdict") == 0, "an unknown verdict");

    /* The 1.0 call gives the same report without the verdict. */
    report = NULL;
    CHECK(scope_doctor(NULL, 3000, &report) == SCOPE_RESULT_OK && report != NULL, "doctor: %s", scope_last_error());
    scope_string_free(report);

    char *untouched = (char *)"untouched";
    scope_verdict kept = 99;
    CHECK(scope_diagnose(NULL, 3000, NULL, &kept) == SCOPE_RESULT_NULL_PARAMETER, "NULL out");
    CHECK(scope_diagnose(NULL, 3000, &untouched, NULL) == SCOPE_RESULT_NULL_PARAMETER, "NULL verdict");
    CHECK(scope_doctor(NULL, 0, &untouched) == SCOPE_RESULT_INVALID_ARGUMENT, "a zero timeout");
    CHECK(strstr(scope_last_error(), "timeout_ms is 0 ms") != NULL, "message: %s", scope_last_error());
    const char *bad_env[] = {"NO_EQUALS_SIGN", NULL};
    char error[64];
    CHECK(scope_diagnose_r(bad_env, 3000, &untouched, &kept, error, sizeof error) == SCOPE_RESULT_INVALID_ARGUMENT,
          "bad envp");
    CHECK(strncmp(error, "envp: environment entry 0", 25) == 0, "error buffer: %s", error);
    CHECK(strcmp(untouched, "untouched") == 0 && kept == 99, "an out-parameter written on failure");
    return 0;
}

/* One wrapped argv spawned twice (a host that caches its wrapped line): the second launch never
 * ends the first tool. Through the launcher program the second command runs once unscoped (on), or
 * not at all with SCOPE_EXEC_FAILED_STATUS (required); systemd-run refuses the taken name. */
/* Whether the file at `path` holds a whole line. */
static int line_written(const char *path) {
    if (access(path, F_OK) != 0) return 0;
    char *text = read_file(path, NULL);
    int whole = ends_with(text, "\n");
    free(text);
    return whole;
}

static int spawned_twice(const char *mode) {
    char setting[64];
    snprintf(setting, sizeof setting, "SYNAPS_PROCESS_SCOPES=%s", mode);
    const char *add[] = {setting, NULL};
    const char **env = env_edit(NULL, add);
    scope_launcher *launcher = must_launcher(env);
    char *runs = scratch_path(mode);
    char *quick = scratch_path("quick");
    unlink(quick);
    char script[1024];
    snprintf(script, sizeof script,
             "[ -e '%s' ]; q=$?; echo \"$(grep ^0:: /proc/$$/cgroup | cut -c4-)\" >> '%s'; [ $q = 0 ] || exec sleep 60",
             quick, runs);
    const char *argv[] = {"sh", "-c", script, NULL};
    scope_argv *wrapped = must_wrap(launcher, argv);
    const char *unit = scope_argv_unit(wrapped);
    CHECK(unit != NULL, "wrapped");
    pid_t first = spawn(scope_argv_ptr(wrapped), 0);
    for (int i = 0; i < 2000 && !line_written(runs); i++) sleep_ms(5);
    check_cgroup_file(runs, unit);
    write_file(quick, "");
    int status = wait_exit(spawn(scope_argv_ptr(wrapped), 0));
    CHECK(alive(first), "%s: the first tool was ended by the second launch (status %d)", mode, status);
    char cgroup_path[64];
    snprintf(cgroup_path, sizeof cgroup_path, "/proc/%d/cgroup", (int)first);
    char *cgroups = read_file(cgroup_path, NULL);
    CHECK(strstr(cgroups, unit) != NULL, "%s: the first tool left its scope: %s", mode, cgroups);
    free(cgroups);
    char *text = read_file(runs, NULL);
    size_t lines = 0;
    for (const char *c = text; *c; c++) lines += *c == '\n';
    int exec = scope_launcher_wrapper(launcher) == SCOPE_WRAPPER_EXEC;
    if (exec && strcmp(mode, "on") == 0) {
        CHECK(status == 0 && lines == 2, "on: status %d, runs %s", status, text);
        char *second = strchr(text, '\n') + 1;
        second[strlen(second) - 1] = '\0';
        CHECK(!ends_with(second, unit), "the second ran unscoped: %s", second);
    } else if (exec) {
        CHECK(status == SCOPE_EXEC_FAILED_STATUS && lines == 1, "required: status %d, runs %s", status, text);
    } else {
        CHECK(status == 1 && lines == 1, "systemd-run: status %d, runs %s", status, text);
    }
    free(text);
    kill(first, SIGKILL);
    wait_exit(first);
    free(quick);
    free(runs);
    scope_argv_free(wrapped);
    scope_launcher_free(launcher);
    free(env);
    return 0;
}

int scenario_taken_name(void) {
    int failed = spawned_twice("on");
    const char *asked = getenv("SYNAPS_SCOPE_LAUNCHER");
    if (!failed && !(asked && strcmp(asked, "systemd-run") == 0)) failed = spawned_twice("required");
    return failed;
}
