/* Config files: a strict INI reader.
 *
 * A file is a list of sections in order ("[convolutional]"), each a list of
 * "key = value" lines; '#' starts a comment anywhere on a line. The reader keeps
 * every section, key, value and line number; it knows nothing about nets.
 *
 * Validation is table-driven: each section type lists its keys (cfg_key) with type,
 * range and whether it is required; cfg_check() reports the first unknown key, missing
 * key, non-number or out-of-range value as "FILE:LINE: [section] key: what is wrong".
 * After a successful cfg_check(), the getters cannot fail. */
#ifndef VDNN_CONFIG_H
#define VDNN_CONFIG_H

#include <stddef.h>

#include "vdnn/status.h"

#define CFG_NAME_MAX 48
#define CFG_VALUE_MAX 512
/* The largest config file read (a pipe is read up to it): far above any net's. */
#define CFG_FILE_MAX_BYTES ((size_t)16 << 20)

typedef struct cfg_kv {
    char key[CFG_NAME_MAX];
    char value[CFG_VALUE_MAX];
    int line;
} cfg_kv;

typedef struct cfg_section {
    char name[CFG_NAME_MAX];
    int line;                 /* line of the "[name]" header */
    int nkv;
    cfg_kv *kv;               /* owned by the file */
} cfg_section;

typedef struct cfg_file {
    char path[512];           /* as given, for messages */
    int nsec;
    cfg_section *sec;         /* owned */
} cfg_file;

typedef enum { CFG_INT, CFG_FLOAT, CFG_BOOL, CFG_STRING, CFG_ENUM, CFG_FLOATS, CFG_BYTES } cfg_type;

/* One allowed key. For CFG_INT/CFG_FLOAT/CFG_FLOATS values must lie in [min, max];
 * CFG_BOOL accepts 0/1; CFG_ENUM accepts one of the '|'-separated words in `choices`;
 * CFG_FLOATS is a comma-separated list of 1..`max_items` numbers; CFG_BYTES is a size
 * with K/M/G suffix. A table ends with an entry whose name is NULL. */
typedef struct cfg_key {
    const char *name;
    cfg_type type;
    int required;
    double min, max;
    const char *choices;      /* CFG_ENUM */
    int max_items;            /* CFG_FLOATS */
    const char *help;         /* one line, for docs and messages */
} cfg_key;

/* Reads and parses a file (a regular file or a pipe, at most CFG_FILE_MAX_BYTES; lines
 * of any length). Syntax errors (missing '=', a key before any section, an unterminated
 * '[', an empty key, a name or a value too long, a NUL byte) name FILE:LINE.
 * Free with cfg_free(). */
vdnn_status cfg_load(const char *path, cfg_file **out);
/* The same from a string; `name` stands for the path in messages. */
vdnn_status cfg_parse(const char *text, const char *name, cfg_file **out);
void cfg_free(cfg_file *f);

/* Checks a section against a key table: every key known, every required key present,
 * no key twice, every value of the right type and in range. */
vdnn_status cfg_check(const cfg_file *f, const cfg_section *s, const cfg_key *keys);

/* The entry for `key`, or NULL. */
const cfg_kv *cfg_find(const cfg_section *s, const char *key);

/* Getters: the value if present, else `dflt`. Call only after cfg_check(). */
int cfg_int(const cfg_section *s, const char *key, int dflt);
double cfg_float(const cfg_section *s, const char *key, double dflt);
const char *cfg_str(const cfg_section *s, const char *key, const char *dflt);
size_t cfg_bytes(const cfg_section *s, const char *key, size_t dflt);
/* CFG_FLOATS: fills up to `max` values; returns how many (0 if absent). */
int cfg_floats(const cfg_section *s, const char *key, float *out, int max);

/* An error for a value that passed cfg_check but is wrong in context (a shape that goes
 * to zero, an output count that does not match the data's classes): names FILE:LINE,
 * the section and the key; pass key NULL to name the section header. */
vdnn_status cfg_error(const cfg_file *f, const cfg_section *s, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
