/* The strict INI reader and the table-driven checker behind vdnn/config.h.
 *
 * Unlike Darknet's parser, nothing here is forgiven: a line that is not a header, a
 * "key = value" pair, a comment or blank is an error naming FILE:LINE, and cfg_check()
 * turns unknown keys, repeated keys and malformed or out-of-range values into errors.
 *
 * Choices made here:
 *  - '#' always starts a comment; values cannot contain '#'.
 *  - A value runs from after the first '=' to the comment or line end, trimmed; it may
 *    contain further '=' and inner spaces ("steps = 100, 200").
 *  - Spaces inside the brackets of a header are ignored ("[ net ]" is "[net]").
 *  - Lines may be of any length (a long comment, long padding); a value may hold at
 *    most CFG_VALUE_MAX - 1 characters, and a longer one is an error naming its key,
 *    never truncated. A file over CFG_FILE_MAX_BYTES is refused before it is read.
 *  - CFG_BOOL is exactly "0" or "1": cfg_int() reads booleans, and one spelling keeps
 *    configs greppable; "true" or "yes" is an error ("'true' is not 0 or 1"). */
#include "vdnn/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdnn/file.h"

/* ---- messages ---- */

/* "PATH:LINE: [section] key: message"; section and key are optional, and the colon
 * after the location goes after the key when there is one ("[net] unknown key 'x'"). */
static vdnn_status located_vfail(const cfg_file *f, int line, const char *sec, const char *key,
                                 const char *fmt, va_list ap)
{
    char msg[1024], where[700];
    vsnprintf(msg, sizeof msg, fmt, ap);
    int n = snprintf(where, sizeof where, "%s:%d:", f ? f->path : "config", line);
    if (sec && n >= 0 && (size_t)n < sizeof where)
        n += snprintf(where + n, sizeof where - n, " [%s]", sec);
    if (key && n >= 0 && (size_t)n < sizeof where)
        snprintf(where + n, sizeof where - n, " %s:", key);
    return vdnn_fail(VDNN_EINVAL, "%s %s", where, msg);
}

static vdnn_status located_fail(const cfg_file *f, int line, const char *sec, const char *key,
                                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static vdnn_status located_fail(const cfg_file *f, int line, const char *sec, const char *key,
                                const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vdnn_status st = located_vfail(f, line, sec, key, fmt, ap);
    va_end(ap);
    return st;
}

/* A syntax error: the line and, where known, the section it is in. */
static vdnn_status syntax_error(const cfg_file *f, int line, const char *sec, const char *fmt,
                                ...) __attribute__((format(printf, 4, 5)));
static vdnn_status syntax_error(const cfg_file *f, int line, const char *sec, const char *fmt,
                                ...)
{
    va_list ap;
    va_start(ap, fmt);
    vdnn_status st = located_vfail(f, line, sec, NULL, fmt, ap);
    va_end(ap);
    return st;
}

/* The message for one entry's value: names its line, section and key. */
static vdnn_status value_error(const cfg_file *f, const cfg_section *s, const cfg_kv *kv,
                               const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static vdnn_status value_error(const cfg_file *f, const cfg_section *s, const cfg_kv *kv,
                               const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vdnn_status st = located_vfail(f, kv->line, s->name, kv->key, fmt, ap);
    va_end(ap);
    return st;
}

vdnn_status cfg_error(const cfg_file *f, const cfg_section *s, const char *key,
                      const char *fmt, ...)
{
    const cfg_kv *kv = (s && key) ? cfg_find(s, key) : NULL;
    int line = kv ? kv->line : (s ? s->line : 0);
    va_list ap;
    va_start(ap, fmt);
    vdnn_status st = located_vfail(f, line, s ? s->name : NULL, key, fmt, ap);
    va_end(ap);
    return st;
}

/* ---- parsing ---- */

/* Arrays grow to 4, 8, 16, ... so the capacity follows from the count alone. */
static int grow(void **arr, int n, size_t elem)
{
    if (n != 0 && (n < 4 || (n & (n - 1)) != 0)) return 0;
    size_t cap = n == 0 ? 4 : (size_t)n * 2;
    void *p = realloc(*arr, cap * elem);
    if (!p) return -1;
    *arr = p;
    return 0;
}

static int is_name_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '-';
}

static int valid_name(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (!is_name_char(*s)) return 0;
    return 1;
}

/* Trims spaces at both ends in place; returns the new start. */
static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    return s;
}

static const char *current_name(const cfg_file *f)
{
    return f->nsec > 0 ? f->sec[f->nsec - 1].name : NULL;
}

static vdnn_status check_name(const cfg_file *f, int line, const char *sec, const char *what,
                              const char *name)
{
    if (strlen(name) >= CFG_NAME_MAX)
        return syntax_error(f, line, sec, "%s name '%.60s...' is longer than %d characters",
                            what, name, CFG_NAME_MAX - 1);
    if (!valid_name(name))
        return syntax_error(f, line, sec,
                            "bad %s name '%s' (letters, digits, '_' and '-' only)", what, name);
    return VDNN_OK;
}

static vdnn_status parse_header(cfg_file *f, char *s, int line)
{
    char *close = strchr(s, ']');
    if (!close)
        return syntax_error(f, line, NULL, "unterminated '[' in '%s' (expected '[name]')", s);
    *close = '\0';
    char *rest = trim(close + 1);
    char *name = trim(s + 1);
    if (!*name) return syntax_error(f, line, NULL, "empty section name '[]'");
    vdnn_status st = check_name(f, line, NULL, "section", name);
    if (st != VDNN_OK) return st;
    if (*rest) return syntax_error(f, line, name, "unexpected '%s' after ']'", rest);
    if (grow((void **)&f->sec, f->nsec, sizeof *f->sec) != 0)
        return vdnn_fail(VDNN_ENOMEM, "%s:%d: out of host memory", f->path, line);
    cfg_section *sec = &f->sec[f->nsec++];
    memset(sec, 0, sizeof *sec);
    strcpy(sec->name, name);
    sec->line = line;
    return VDNN_OK;
}

static vdnn_status parse_kv(cfg_file *f, char *s, char *eq, int line)
{
    *eq = '\0';
    char *key = trim(s), *value = trim(eq + 1);
    const char *sec = current_name(f);
    if (!*key) return syntax_error(f, line, sec, "empty key before '='");
    vdnn_status st = check_name(f, line, sec, "key", key);
    if (st != VDNN_OK) return st;
    if (!sec)
        return syntax_error(f, line, NULL,
                            "key '%s' comes before any [section] (add a header above it)", key);
    if (!*value) return located_fail(f, line, sec, key, "empty value");
    if (strlen(value) >= CFG_VALUE_MAX)
        return located_fail(f, line, sec, key, "the value is %zu characters long; the limit is %d", strlen(value),
                            CFG_VALUE_MAX - 1);
    cfg_section *cur = &f->sec[f->nsec - 1];
    if (grow((void **)&cur->kv, cur->nkv, sizeof *cur->kv) != 0)
        return vdnn_fail(VDNN_ENOMEM, "%s:%d: out of host memory", f->path, line);
    cfg_kv *kv = &cur->kv[cur->nkv++];
    strcpy(kv->key, key);
    strcpy(kv->value, value); /* fits: checked above */
    kv->line = line;
    return VDNN_OK;
}

static vdnn_status parse_line(cfg_file *f, char *buf, int line)
{
    char *hash = strchr(buf, '#');
    if (hash) *hash = '\0';
    char *s = trim(buf);
    if (!*s) return VDNN_OK;
    if (*s == '[') return parse_header(f, s, line);
    char *eq = strchr(s, '=');
    if (eq) return parse_kv(f, s, eq, line);
    return syntax_error(f, line, current_name(f),
                        "'%s' is neither '[section]' nor 'key = value' (missing '=')", s);
}

/* Splits text into lines (LF or CRLF) and parses each, in a buffer as long as the
 * longest line. */
static vdnn_status parse_text(cfg_file *f, const char *text)
{
    const char *p = text;
    char *buf = NULL;
    size_t cap = 0;
    vdnn_status st = VDNN_OK;
    for (int line = 1; *p && st == VDNN_OK; line++) {
        size_t len = strcspn(p, "\n");
        const char *next = p[len] ? p + len + 1 : p + len;
        if (len > 0 && p[len - 1] == '\r') len--;
        if (len >= cap) {
            char *bigger = realloc(buf, len + 1);
            if (!bigger) {
                st = vdnn_fail(VDNN_ENOMEM, "%s:%d: out of host memory for a line of %zu characters", f->path,
                               line, len);
                break;
            }
            buf = bigger;
            cap = len + 1;
        }
        memcpy(buf, p, len);
        buf[len] = '\0';
        st = parse_line(f, buf, line);
        if (st == VDNN_OK && line == INT_MAX && *next) st = syntax_error(f, line, NULL, "too many lines");
        p = next;
    }
    free(buf);
    if (st == VDNN_OK && f->nsec == 0)
        return syntax_error(f, 1, NULL, "no [section] in the file (empty config?)");
    return st;
}

vdnn_status cfg_parse(const char *text, const char *name, cfg_file **out)
{
    if (!out) return vdnn_fail(VDNN_EINVAL, "cfg_parse: out is NULL");
    *out = NULL;
    if (!text || !name) return vdnn_fail(VDNN_EINVAL, "cfg_parse: text or name is NULL");
    cfg_file *f = calloc(1, sizeof *f);
    if (!f) return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory", name);
    snprintf(f->path, sizeof f->path, "%s", name);
    vdnn_status st = parse_text(f, text);
    if (st != VDNN_OK) {
        cfg_free(f);
        return st;
    }
    *out = f;
    return VDNN_OK;
}

vdnn_status cfg_load(const char *path, cfg_file **out)
{
    if (!out) return vdnn_fail(VDNN_EINVAL, "cfg_load: out is NULL");
    *out = NULL;
    if (!path) return vdnn_fail(VDNN_EINVAL, "cfg_load: path is NULL");
    char *text = NULL;
    size_t len = 0;
    vdnn_status st = vdnn_file_read(path, "config file", CFG_FILE_MAX_BYTES, VDNN_FILE_PIPE | VDNN_FILE_TEXT,
                                    &text, &len);
    if (st != VDNN_OK) return st;
    st = cfg_parse(text, path, out);
    free(text);
    return st;
}

void cfg_free(cfg_file *f)
{
    if (!f) return;
    for (int i = 0; i < f->nsec; i++) free(f->sec[i].kv);
    free(f->sec);
    free(f);
}

/* ---- numbers ---- */

/* Whole-string integer; 0 on success, -1 if not an integer, -2 if it overflows long. */
static int parse_long(const char *t, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(t, &end, 10);
    if (end == t || *end) return -1;
    if (errno == ERANGE) return -2;
    *out = v;
    return 0;
}

/* Whole-string finite number; 0 on success, -1 if not a number, -2 if not finite. */
static int parse_double(const char *t, double *out)
{
    char *end;
    double v = strtod(t, &end);
    if (end == t || *end) return -1;
    if (!isfinite(v)) return -2;
    *out = v;
    return 0;
}

/* Copies the next comma-separated item of *p, trimmed, into item (CFG_VALUE_MAX bytes);
 * advances *p past the comma, or sets it to NULL after the last item. */
static void next_item(const char **p, char *item)
{
    size_t len = strcspn(*p, ",");
    memcpy(item, *p, len);
    item[len] = '\0';
    char *t = trim(item);
    memmove(item, t, strlen(t) + 1);
    *p = (*p)[len] ? *p + len + 1 : NULL;
}

static int count_items(const char *v)
{
    int n = 1;
    for (; *v; v++) n += *v == ',';
    return n;
}

/* ---- checking ---- */

static vdnn_status check_int(const cfg_file *f, const cfg_section *s, const cfg_kv *kv,
                             const cfg_key *k)
{
    /* The getter returns int, so the table's range is clipped to what int holds. */
    double lo = ceil(fmax(k->min, (double)INT_MIN)), hi = floor(fmin(k->max, (double)INT_MAX));
    long v;
    int r = parse_long(kv->value, &v);
    if (r == -1) return value_error(f, s, kv, "'%s' is not an integer", kv->value);
    if (r == -2 || (double)v < lo || (double)v > hi)
        return value_error(f, s, kv, "%s is out of range [%.0f, %.0f]", kv->value, lo, hi);
    return VDNN_OK;
}

static vdnn_status check_number(const cfg_file *f, const cfg_section *s, const cfg_kv *kv,
                                const cfg_key *k, const char *text, const char *what)
{
    double v;
    int r = parse_double(text, &v);
    if (r == -1) return value_error(f, s, kv, "%s'%s' is not a number", what, text);
    if (r == -2) return value_error(f, s, kv, "%s'%s' is not a finite number", what, text);
    if (v < k->min || v > k->max)
        return value_error(f, s, kv, "%s%s is out of range [%g, %g]", what, text, k->min, k->max);
    return VDNN_OK;
}

static vdnn_status check_floats(const cfg_file *f, const cfg_section *s, const cfg_kv *kv,
                                const cfg_key *k)
{
    int n = count_items(kv->value);
    if (n > k->max_items)
        return value_error(f, s, kv, "%d items, expected 1 to %d", n, k->max_items);
    const char *p = kv->value;
    char item[CFG_VALUE_MAX], what[32];
    for (int i = 1; p; i++) {
        next_item(&p, item);
        snprintf(what, sizeof what, "item %d: ", i);
        if (!*item) return value_error(f, s, kv, "item %d is empty", i);
        vdnn_status st = check_number(f, s, kv, k, item, what);
        if (st != VDNN_OK) return st;
    }
    return VDNN_OK;
}

/* A table bound as a byte count, kept inside what size_t can hold. */
static size_t clamp_bytes(double v)
{
    if (!(v > 0)) return 0;
    if (v >= (double)(SIZE_MAX / 2)) return SIZE_MAX / 2;
    return (size_t)v;
}

static vdnn_status check_bytes(const cfg_file *f, const cfg_section *s, const cfg_kv *kv,
                               const cfg_key *k)
{
    char what[700];
    snprintf(what, sizeof what, "%s:%d: [%s] %s", f->path, kv->line, s->name, kv->key);
    size_t b;
    vdnn_status st = vdnn_parse_bytes(kv->value, what, &b);
    if (st != VDNN_OK) return st;
    if ((double)b < k->min || (double)b > k->max) {
        char lo[32], hi[32];
        vdnn_fmt_bytes(clamp_bytes(k->min), lo, sizeof lo);
        vdnn_fmt_bytes(clamp_bytes(k->max), hi, sizeof hi);
        return value_error(f, s, kv, "%s is out of range [%s, %s]", kv->value, lo, hi);
    }
    return VDNN_OK;
}

/* Whether word is one of the '|'-separated choices. */
static int enum_has(const char *choices, const char *word)
{
    size_t wlen = strlen(word);
    for (const char *p = choices; p && *p;) {
        size_t len = strcspn(p, "|");
        if (len == wlen && strncmp(p, word, len) == 0) return 1;
        p += len + (p[len] == '|');
    }
    return 0;
}

static vdnn_status check_enum(const cfg_file *f, const cfg_section *s, const cfg_kv *kv,
                              const cfg_key *k)
{
    if (enum_has(k->choices, kv->value)) return VDNN_OK;
    char list[CFG_VALUE_MAX] = "", *o = list;
    for (const char *c = k->choices ? k->choices : ""; *c && o < list + sizeof list - 3; c++) {
        if (*c == '|') {
            *o++ = ',';
            *o++ = ' ';
        } else {
            *o++ = *c;
        }
    }
    *o = '\0';
    return value_error(f, s, kv, "'%s' is not one of: %s", kv->value, list);
}

static vdnn_status check_value(const cfg_file *f, const cfg_section *s, const cfg_kv *kv,
                               const cfg_key *k)
{
    switch (k->type) {
    case CFG_INT: return check_int(f, s, kv, k);
    case CFG_FLOAT: return check_number(f, s, kv, k, kv->value, "");
    case CFG_BOOL:
        if (strcmp(kv->value, "0") == 0 || strcmp(kv->value, "1") == 0) return VDNN_OK;
        return value_error(f, s, kv, "'%s' is not 0 or 1", kv->value);
    case CFG_STRING: return VDNN_OK; /* the parser already refused empty values */
    case CFG_ENUM: return check_enum(f, s, kv, k);
    case CFG_FLOATS: return check_floats(f, s, kv, k);
    case CFG_BYTES: return check_bytes(f, s, kv, k);
    }
    return value_error(f, s, kv, "key table gives an unknown type %d", (int)k->type);
}

static const cfg_key *find_key(const cfg_key *keys, const char *name)
{
    for (const cfg_key *k = keys; k && k->name; k++)
        if (strcmp(k->name, name) == 0) return k;
    return NULL;
}

static vdnn_status unknown_key(const cfg_file *f, const cfg_section *s, const cfg_kv *kv,
                               const cfg_key *keys)
{
    char known[800] = "";
    size_t n = 0;
    for (const cfg_key *k = keys; k && k->name && n < sizeof known; k++)
        n += snprintf(known + n, sizeof known - n, "%s%s", n ? ", " : "", k->name);
    return syntax_error(f, kv->line, s->name, "unknown key '%s' (known: %s)", kv->key,
                        n ? known : "none");
}

vdnn_status cfg_check(const cfg_file *f, const cfg_section *s, const cfg_key *keys)
{
    if (!f || !s) return vdnn_fail(VDNN_EINVAL, "cfg_check: file or section is NULL");
    for (int i = 0; i < s->nkv; i++) {
        const cfg_kv *kv = &s->kv[i];
        const cfg_key *k = find_key(keys, kv->key);
        if (!k) return unknown_key(f, s, kv, keys);
        const cfg_kv *first = cfg_find(s, kv->key);
        if (first != kv)
            return value_error(f, s, kv, "given twice (first on line %d)", first->line);
        vdnn_status st = check_value(f, s, kv, k);
        if (st != VDNN_OK) return st;
    }
    for (const cfg_key *k = keys; k && k->name; k++) {
        if (k->required && !cfg_find(s, k->name)) {
            cfg_kv missing = {.line = s->line};
            snprintf(missing.key, sizeof missing.key, "%s", k->name);
            return value_error(f, s, &missing, "required key is missing%s%s%s",
                               k->help ? " (" : "", k->help ? k->help : "", k->help ? ")" : "");
        }
    }
    return VDNN_OK;
}

/* ---- getters ---- */

const cfg_kv *cfg_find(const cfg_section *s, const char *key)
{
    if (!s || !key) return NULL;
    for (int i = 0; i < s->nkv; i++)
        if (strcmp(s->kv[i].key, key) == 0) return &s->kv[i];
    return NULL;
}

/* The getters fall back to dflt on a malformed value so that a caller that skipped
 * cfg_check() still gets defined behaviour; cfg_check() is what reports the error. */
int cfg_int(const cfg_section *s, const char *key, int dflt)
{
    const cfg_kv *kv = cfg_find(s, key);
    long v;
    if (!kv || parse_long(kv->value, &v) != 0 || v < INT_MIN || v > INT_MAX) return dflt;
    return (int)v;
}

double cfg_float(const cfg_section *s, const char *key, double dflt)
{
    const cfg_kv *kv = cfg_find(s, key);
    double v;
    if (!kv || parse_double(kv->value, &v) != 0) return dflt;
    return v;
}

const char *cfg_str(const cfg_section *s, const char *key, const char *dflt)
{
    const cfg_kv *kv = cfg_find(s, key);
    return kv ? kv->value : dflt;
}

size_t cfg_bytes(const cfg_section *s, const char *key, size_t dflt)
{
    const cfg_kv *kv = cfg_find(s, key);
    size_t b;
    if (!kv || vdnn_parse_bytes(kv->value, key, &b) != VDNN_OK) return dflt;
    return b;
}

int cfg_floats(const cfg_section *s, const char *key, float *out, int max)
{
    const cfg_kv *kv = cfg_find(s, key);
    if (!kv || !out) return 0;
    const char *p = kv->value;
    char item[CFG_VALUE_MAX];
    int n = 0;
    while (p && n < max) {
        next_item(&p, item);
        double v;
        if (parse_double(item, &v) != 0) return n;
        out[n++] = (float)v;
    }
    return n;
}
