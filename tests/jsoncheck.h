/* JSON that vdnn wrote, read back in the tests with Jansson: a check fails, naming what
 * it read, when a text is not JSON or lacks what it must hold. Values returned by
 * tj_parse, tj_load and tj_lines are new references the caller json_decref()s; those of
 * tj_get are borrowed from their root. */
#ifndef VDNN_TESTS_JSONCHECK_H
#define VDNN_TESTS_JSONCHECK_H

#include <jansson.h>

/* The whole of `text`, one JSON value; `what` names it in a failure. */
json_t *tj_parse(const char *text, const char *what);
/* The whole file at `path`, one JSON value. */
json_t *tj_load(const char *path);
/* A JSON-lines file: an array of its lines, each one a JSON object (none blank). */
json_t *tj_lines(const char *path);

/* The value at `path` under v: keys and array indexes separated by '.', such as
 * "layers.0.name" or "min_budget_bytes.none.perf"; a failure when there is none. */
json_t *tj_get(json_t *v, const char *path);
/* The number, whole number or string at `path`; a failure when it is of another type. */
double tj_num(json_t *v, const char *path);
long long tj_int(json_t *v, const char *path);
const char *tj_str(json_t *v, const char *path);
/* Whether `key` is in object v. */
int tj_has(json_t *v, const char *key);

#endif
