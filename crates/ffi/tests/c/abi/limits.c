/* A launch's resource limits from C: made from name/value pairs, refused with their codes (out
 * untouched), given to a launcher that keeps its own copy, read back by the manager from inside the
 * scope, and said when the rig's manager has no controller for them (refused in required mode). */
#include "abi.h"

/* Prints the launch's own scope's properties as its manager holds them, into "$0". */
static const char READ_BACK[] =
    "unit=$(grep '^0::' /proc/$$/cgroup); unit=${unit##*/}; "
    "systemctl --user show -p MemoryMax -p TasksMax -p CPUQuotaPerSecUSec -- \"$unit\" > \"$0\"";

static void refused(const scope_property *properties, size_t len, scope_result want, const char *what) {
    scope_limits *limits = SENTINEL;
    scope_result r = scope_limits_new(properties, len, &limits);
    CHECK(r == want, "%s: result %u, not %u", what, (unsigned)r, (unsigned)want);
    CHECK(limits == SENTINEL, "%s: out untouched on failure", what);
    CHECK(strlen(scope_last_error()) > 0, "%s: a message", what);
}

int scenario_limits(void) {
    const scope_property good[] = {{"MemoryMax", "64M"}, {"TasksMax", "8"}, {"CPUQuota", "50%"}};
    const scope_property unknown[] = {{"Slice", "evil.slice"}};
    const scope_property bad_value[] = {{"MemoryMax", "64X"}};
    const scope_property twice[] = {{"TasksMax", "8"}, {"TasksMax", "9"}};
    const scope_property null_name[] = {{NULL, "8"}};
    const scope_property not_utf8[] = {{"MemoryMax", "64\xffM"}};
    refused(unknown, 1, SCOPE_RESULT_INVALID_ARGUMENT, "a property no launch may set");
    CHECK(strstr(scope_last_error(), "Slice") != NULL, "names it: %s", scope_last_error());
    refused(bad_value, 1, SCOPE_RESULT_INVALID_ARGUMENT, "a bad value");
    refused(twice, 2, SCOPE_RESULT_INVALID_ARGUMENT, "a property given twice");
    refused(null_name, 1, SCOPE_RESULT_NULL_PARAMETER, "a NULL name");
    refused(not_utf8, 1, SCOPE_RESULT_INVALID_UTF8, "a value that is not UTF-8");
    refused(NULL, 1, SCOPE_RESULT_NULL_PARAMETER, "NULL properties");
    CHECK(scope_limits_new(good, 3, NULL) == SCOPE_RESULT_NULL_PARAMETER, "NULL out");
    scope_limits *none = NULL;
    CHECK(scope_limits_new(NULL, 0, &none) == SCOPE_RESULT_OK && none, "no limits: %s", scope_last_error());
    scope_limits_free(none);
    scope_limits_free(NULL);

    scope_limits *limits = NULL;
    CHECK(scope_limits_new(good, 3, &limits) == SCOPE_RESULT_OK && limits, "limits");
    scope_launcher *plain = must_launcher(NULL);
    scope_launcher *limited = SENTINEL;
    CHECK(scope_launcher_with_limits(NULL, limits, &limited) == SCOPE_RESULT_NULL_PARAMETER && limited == SENTINEL,
          "NULL launcher");
    CHECK(scope_launcher_with_limits(plain, NULL, &limited) == SCOPE_RESULT_NULL_PARAMETER && limited == SENTINEL,
          "NULL limits");
    CHECK(scope_launcher_with_limits(plain, limits, NULL) == SCOPE_RESULT_NULL_PARAMETER, "NULL out");
    CHECK(scope_launcher_with_limits(plain, limits, &limited) == SCOPE_RESULT_OK && limited != SENTINEL, "limited");
    /* The launcher keeps its own copy. */
    scope_limits_free(limits);
    CHECK(scope_launcher_unenforced_count(plain) == 0, "the plain launcher has no limits");

    /* The rig's cgroup tree has no memory, pids or cpu controller: each limit is said. */
    size_t unenforced = scope_launcher_unenforced_count(limited);
    CHECK(unenforced == 3, "%zu unenforced", unenforced);
    const char *first = scope_launcher_unenforced(limited, 0);
    CHECK(first && strstr(first, "MemoryMax will not be enforced: the user manager has no memory controller"),
          "%s", first ? first : "(null)");
    CHECK(scope_launcher_unenforced(limited, 3) == NULL, "past the end");
    CHECK(scope_launcher_unenforced(NULL, 0) == NULL && scope_launcher_unenforced_count(NULL) == 0, "NULL");

    char *report = scratch_path("limits");
    const char *argv[] = {"sh", "-c", READ_BACK, report, NULL};
    scope_argv *wrapped = must_wrap(limited, argv);
    CHECK(wait_exit(spawn(scope_argv_ptr(wrapped), 0)) == 0, "the scoped child failed");
    char *held = read_file(report, NULL);
    CHECK(strstr(held, "MemoryMax=67108864\n") && strstr(held, "TasksMax=8\n") &&
              strstr(held, "CPUQuotaPerSecUSec=500ms\n"),
          "the manager holds what was asked: %s", held);
    free(held);
    free(report);
    scope_argv_free(wrapped);
    scope_launcher_free(limited);
    scope_launcher_free(plain);

    /* required mode refuses limits that will not hold; out untouched. */
    const char *add[] = {"SYNAPS_PROCESS_SCOPES=required", NULL};
    const char **env = env_edit(NULL, add);
    scope_launcher *strict = must_launcher(env);
    CHECK(scope_limits_new(good, 1, &limits) == SCOPE_RESULT_OK, "limits");
    limited = SENTINEL;
    scope_result r = scope_launcher_with_limits(strict, limits, &limited);
    CHECK(r == SCOPE_RESULT_REQUIRED_UNAVAILABLE && limited == SENTINEL, "result %u", (unsigned)r);
    CHECK(strstr(scope_last_error(), "MemoryMax will not be enforced"), "%s", scope_last_error());
    scope_limits_free(limits);
    scope_launcher_free(strict);
    free(env);
    return 0;
}
