/* JSON values and their writing, over Jansson (see json.h). */
#include "vdnn/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The length of the UTF-8 sequence at p (1 to 4), or 0 when it is not one (overlong
 * forms, surrogates and code points past U+10FFFF included, as Jansson refuses them). */
static int utf8_length(const unsigned char *p)
{
    unsigned char c = p[0];
    if (c < 0x80) return 1;
    int n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (!n) return 0;
    unsigned char lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
    unsigned char hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
    if (p[1] < lo || p[1] > hi) return 0;
    for (int k = 2; k < n; k++)
        if (p[k] < 0x80 || p[k] > 0xbf) return 0;
    return n;
}

json_t *vdnn_json_text(const char *s)
{
    if (!s) return json_null();
    size_t len = strlen(s);
    const unsigned char *p = (const unsigned char *)s;
    size_t at = 0;
    for (int n; at < len && (n = utf8_length(p + at)) > 0;) at += (size_t)n;
    if (at == len) return json_stringn(s, len);
    /* each byte that is not UTF-8 becomes the 3 bytes of U+FFFD */
    char *clean = malloc(3 * len + 1);
    if (!clean) return NULL;
    size_t k = 0;
    for (at = 0; at < len;) {
        int n = utf8_length(p + at);
        if (n > 0) {
            memcpy(clean + k, p + at, (size_t)n);
            k += (size_t)n;
            at += (size_t)n;
        } else {
            memcpy(clean + k, "\xef\xbf\xbd", 3);
            k += 3;
            at++;
        }
    }
    json_t *v = json_stringn(clean, k);
    free(clean);
    return v;
}

/* v printed with %.*f (fixed) or %.*g and read back: the double nearest that decimal. */
static json_t *rounded(double v, int fixed, int places)
{
    if (!isfinite(v)) return json_null();
    if (!fixed && places <= 0) return json_real(v);
    if (places > 30) places = 30;
    if (places < 0) places = 0;
    char buf[400];   /* %.*f of the largest double: 309 digits and the decimals */
    if (fixed) snprintf(buf, sizeof buf, "%.*f", places, v);
    else snprintf(buf, sizeof buf, "%.*g", places, v);
    return json_real(strtod(buf, NULL));
}

json_t *vdnn_json_real(double v, int digits) { return rounded(v, 0, digits); }

json_t *vdnn_json_fixed(double v, int decimals) { return rounded(v, 1, decimals); }

json_t *vdnn_json_ints(const int *v, int n)
{
    json_t *a = json_array();
    for (int k = 0; a && k < n; k++)
        if (json_array_append_new(a, json_integer(v[k])) != 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static int dump(FILE *f, json_t *v, size_t flags)
{
    if (!v) return -1;
    int r = json_dumpf(v, f, flags);
    json_decref(v);
    if (r == 0 && fputc('\n', f) == EOF) r = -1;
    return r;
}

int vdnn_json_line(FILE *f, json_t *v) { return dump(f, v, VDNN_JSON_LINE_FLAGS); }

int vdnn_json_doc(FILE *f, json_t *v) { return dump(f, v, VDNN_JSON_DOC_FLAGS); }
