/* JSON out of vdnn's own data, with Jansson (libjansson-dev; https://jansson.readthedocs.io):
 * the logs (JSON lines), the traces and the --json outputs build Jansson values and
 * write them with the functions below, so that every string is escaped and every
 * number is one JSON can hold.
 *  - Text comes from users (config paths, layer and job names): bytes that are not
 *    UTF-8 become U+FFFD, as Jansson refuses them.
 *  - A number that is not finite (a NaN or infinite loss) is written as null.
 *  - Reals are written with up to VDNN_JSON_DIGITS significant digits: a value rounded
 *    by vdnn_json_real or vdnn_json_fixed prints as its rounded decimal ("0.1", not
 *    "0.10000000000000001").
 * Ownership: each function returning json_t* returns a new reference (NULL only when
 * out of memory) that the caller owns, or hands to json_pack's "o" or
 * json_object_set_new(), which take it. */
#ifndef VDNN_JSON_H
#define VDNN_JSON_H

#include <jansson.h>
#include <stdio.h>

#define VDNN_JSON_DIGITS 15
/* Jansson's dump flags for one JSON line: ", " and ": " between items, no new lines. */
#define VDNN_JSON_LINE_FLAGS JSON_REAL_PRECISION(VDNN_JSON_DIGITS)
/* For a document a person may read (`info --json`, `profile --json`): indented by 2. */
#define VDNN_JSON_DOC_FLAGS (JSON_INDENT(2) | JSON_REAL_PRECISION(VDNN_JSON_DIGITS))

/* A JSON string of `s` (NULL: null); bytes that are not UTF-8 become U+FFFD. */
json_t *vdnn_json_text(const char *s);
/* v rounded to `digits` significant digits as printf's %.*g (digits <= 0: unrounded);
 * null when v is not finite. */
json_t *vdnn_json_real(double v, int digits);
/* v rounded to `decimals` places as printf's %.*f; null when v is not finite. */
json_t *vdnn_json_fixed(double v, int decimals);
/* An array of n ints. */
json_t *vdnn_json_ints(const int *v, int n);

/* Writes v on one line and a new line (JSON lines) and takes v (a NULL v, from a
 * failed json_pack, writes nothing). 0, or -1 when v is NULL or writing failed. */
int vdnn_json_line(FILE *f, json_t *v);
/* Writes v indented (VDNN_JSON_DOC_FLAGS) and a new line, and takes v; as vdnn_json_line. */
int vdnn_json_doc(FILE *f, json_t *v);

#endif
