/* JSON read back in the tests (see jsoncheck.h). */
#include "tests/jsoncheck.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testnet.h"

json_t *tj_parse(const char *text, const char *what)
{
    json_error_t err;
    json_t *v = json_loads(text, 0, &err);
    ck_assert_msg(v != NULL, "%s is not JSON: %s at line %d, column %d:\n%.2000s", what, err.text, err.line,
                  err.column, text);
    return v;
}

json_t *tj_load(const char *path)
{
    json_error_t err;
    json_t *v = json_load_file(path, 0, &err);
    ck_assert_msg(v != NULL, "%s is not JSON: %s at line %d, column %d", path, err.text, err.line, err.column);
    return v;
}

json_t *tj_lines(const char *path)
{
    char *text = tn_read(path, NULL);
    ck_assert_msg(text != NULL, "cannot read %s", path);
    json_t *lines = json_array();
    int n = 0;
    for (char *at = text, *end; *at; at = end + 1) {
        end = strchr(at, '\n');
        ck_assert_msg(end != NULL, "%s: its last line has no line end:\n%s", path, at);
        *end = 0;
        n++;
        json_error_t err;
        json_t *v = json_loads(at, 0, &err);
        ck_assert_msg(v != NULL, "%s:%d is not JSON (%s, column %d):\n%s", path, n, err.text, err.column, at);
        ck_assert_msg(json_is_object(v), "%s:%d is not a JSON object:\n%s", path, n, at);
        json_array_append_new(lines, v);
    }
    free(text);
    return lines;
}

json_t *tj_get(json_t *v, const char *path)
{
    char key[256];
    for (const char *at = path; v && *at;) {
        size_t len = strcspn(at, ".");
        ck_assert_msg(len < sizeof key, "tj_get: key too long in %s", path);
        memcpy(key, at, len);
        key[len] = 0;
        if (json_is_array(v)) {
            char *end;
            long k = strtol(key, &end, 10);
            v = *end || k < 0 ? NULL : json_array_get(v, (size_t)k);
        } else {
            v = json_object_get(v, key);
        }
        at += len + (at[len] == '.');
    }
    ck_assert_msg(v != NULL, "no %s in the JSON", path);
    return v;
}

double tj_num(json_t *v, const char *path)
{
    json_t *x = tj_get(v, path);
    ck_assert_msg(json_is_number(x), "%s is not a number", path);
    return json_number_value(x);
}

long long tj_int(json_t *v, const char *path)
{
    json_t *x = tj_get(v, path);
    ck_assert_msg(json_is_integer(x), "%s is not a whole number", path);
    return (long long)json_integer_value(x);
}

const char *tj_str(json_t *v, const char *path)
{
    json_t *x = tj_get(v, path);
    ck_assert_msg(json_is_string(x), "%s is not a string", path);
    return json_string_value(x);
}

int tj_has(json_t *v, const char *key) { return json_object_get(v, key) != NULL; }
