/* Check suite for vdnn/config: the strict INI reader, cfg_check's table-driven
 * validation, the getters and cfg_error.
 *
 * Every bad-input test asserts the returned status and that the message names the
 * file and line ("t.cfg:LINE:") and the key or section concerned, because a config
 * error that does not say where it is costs the user a search through the file. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/testnet.h"
#include "vdnn/config.h"
#include "vdnn/status.h"

#define NAME "t.cfg"

/* The unknown-key message lists the table in order; this one mirrors a conv layer. */
static const cfg_key conv_keys[] = {
    {.name = "filters", .type = CFG_INT, .required = 1, .min = 1, .max = 4096,
     .help = "number of output channels"},
    {.name = "size", .type = CFG_INT, .required = 1, .min = 1, .max = 11},
    {.name = "stride", .type = CFG_INT, .min = 1, .max = 8},
    {.name = "pad", .type = CFG_INT, .min = 0, .max = 5},
    {.name = "bias", .type = CFG_BOOL, .min = 0, .max = 1},
    {.name = NULL},
};

/* One key of each type, for value checks. */
static const cfg_key typed_keys[] = {
    {.name = "n", .type = CFG_INT, .min = -5, .max = 100},
    {.name = "big", .type = CFG_INT, .min = 0, .max = 1e12},
    {.name = "lr", .type = CFG_FLOAT, .min = 0, .max = 10},
    {.name = "bias", .type = CFG_BOOL, .min = 0, .max = 1},
    {.name = "act", .type = CFG_ENUM, .choices = "relu|leaky|linear"},
    {.name = "label", .type = CFG_STRING},
    {.name = "scales", .type = CFG_FLOATS, .min = 0, .max = 100, .max_items = 3},
    {.name = "budget", .type = CFG_BYTES, .min = 1024, .max = 1024.0 * 1024 * 1024},
    {.name = NULL},
};

static cfg_file *parse_ok(const char *text)
{
    cfg_file *f = NULL;
    vdnn_status st = cfg_parse(text, NAME, &f);
    ck_assert_msg(st == VDNN_OK, "cfg_parse failed: %s", vdnn_errmsg());
    ck_assert_ptr_nonnull(f);
    return f;
}

static void assert_msg_has(const char *a, const char *b)
{
    const char *msg = vdnn_errmsg();
    ck_assert_msg(strstr(msg, a) != NULL, "message '%s' lacks '%s'", msg, a);
    if (b) ck_assert_msg(strstr(msg, b) != NULL, "message '%s' lacks '%s'", msg, b);
}

/* cfg_parse must fail with EINVAL, leave *out NULL, and name `where` and `what`. */
static void parse_fails(const char *text, const char *where, const char *what)
{
    cfg_file *f = (cfg_file *)&f;
    ck_assert_int_eq(cfg_parse(text, NAME, &f), VDNN_EINVAL);
    ck_assert_ptr_null(f);
    assert_msg_has(where, what);
}

/* The text parses; checking its first section against `keys` fails naming both. */
static void check_fails(const char *text, const cfg_key *keys, const char *where,
                        const char *what)
{
    cfg_file *f = parse_ok(text);
    vdnn_status st = cfg_check(f, &f->sec[0], keys);
    cfg_free(f);
    ck_assert_int_eq(st, VDNN_EINVAL);
    assert_msg_has(where, what);
}

/* "[t]\nKEY = VALUE\n" fails cfg_check against typed_keys with a message naming line 2,
 * the key, and containing `what`. */
static void value_fails(const char *key, const char *value, const char *what)
{
    char text[CFG_VALUE_MAX + 64], where[128];
    snprintf(text, sizeof text, "[t]\n%s = %s\n", key, value);
    snprintf(where, sizeof where, NAME ":2: [t] %s: ", key);
    check_fails(text, typed_keys, where, what);
}

static void value_ok(const char *key, const char *value)
{
    char text[CFG_VALUE_MAX + 64];
    snprintf(text, sizeof text, "[t]\n%s = %s\n", key, value);
    cfg_file *f = parse_ok(text);
    vdnn_status st = cfg_check(f, &f->sec[0], typed_keys);
    cfg_free(f);
    ck_assert_msg(st == VDNN_OK, "%s = %s rejected: %s", key, value, vdnn_errmsg());
}

/* ---- syntax errors ---- */

START_TEST(test_key_before_section)
{
    parse_fails("# header comment\nsize = 3\n[net]\n", NAME ":2:", "'size'");
}
END_TEST

START_TEST(test_missing_equals)
{
    parse_fails("[net]\nbatch = 1\nsize 3\n", NAME ":3: [net] ", "'size 3'");
    parse_fails("[net]\nsize\n", NAME ":2:", "missing '='");
}
END_TEST

START_TEST(test_empty_key)
{
    parse_fails("[net]\n = 3\n", NAME ":2: [net] ", "empty key");
    parse_fails("[net]\n\n=3 # no key\n", NAME ":3: [net] ", "empty key");
}
END_TEST

START_TEST(test_empty_value)
{
    parse_fails("[net]\nsize =\n", NAME ":2: [net] size: ", "empty value");
    parse_fails("[net]\nsize =   # comment only\n", NAME ":2: [net] size: ", "empty value");
}
END_TEST

START_TEST(test_unterminated_section)
{
    parse_fails("[net]\nbatch = 1\n[convolutional\n", NAME ":3:", "[convolutional");
    parse_fails("[net # ] hidden by the comment\n", NAME ":1:", "unterminated");
}
END_TEST

START_TEST(test_junk_after_section)
{
    parse_fails("[net] extra\n", NAME ":1: [net] ", "'extra'");
    parse_fails("[net]\n[conv]size=3\n", NAME ":2: [conv] ", "'size=3'");
}
END_TEST

START_TEST(test_empty_section_name)
{
    parse_fails("[net]\nbatch = 1\n[]\n", NAME ":3:", "empty section name");
    parse_fails("[   ]\n", NAME ":1:", "empty section name");
}
END_TEST

START_TEST(test_bad_names)
{
    parse_fails("[conv olutional]\n", NAME ":1:", "'conv olutional'");
    parse_fails("[net]\nlearning rate = 0.1\n", NAME ":2: [net] ", "'learning rate'");
    parse_fails("[net]\na.b = 1\n", NAME ":2:", "'a.b'");
    parse_fails("[net]\n[a[b]]\n", NAME ":2:", "'a[b'");
}
END_TEST

START_TEST(test_name_too_long)
{
    char name[CFG_NAME_MAX + 1], text[256];
    memset(name, 'k', CFG_NAME_MAX - 1);
    name[CFG_NAME_MAX - 1] = '\0';
    snprintf(text, sizeof text, "[net]\n%s = 1\n", name);
    cfg_file *f = parse_ok(text);
    ck_assert_str_eq(f->sec[0].kv[0].key, name);
    cfg_free(f);
    strcat(name, "k");
    snprintf(text, sizeof text, "[net]\n%s = 1\n", name);
    parse_fails(text, NAME ":2: [net] ", "longer than 47");
    snprintf(text, sizeof text, "[net]\n[%s]\n", name);
    parse_fails(text, NAME ":2:", "section name");
}
END_TEST

/* Lines of any length are read (issue 16: a long comment line was refused): only a
 * value has a limit, CFG_VALUE_MAX - 1 characters; one more is an error naming the
 * line and the key, never a silent truncation. */
START_TEST(test_long_lines)
{
    static char text[64 * 1024];
    char *o = text;
    o += sprintf(o, "[net]\n#");
    memset(o, '-', 20000);
    o += 20000;
    o += sprintf(o, "\n%*sbatch = 4%*s # %*s\r\n", 3000, "", 3000, "", 9000, "tail");
    size_t vlen = CFG_VALUE_MAX - 1;
    o += sprintf(o, "label = ");
    memset(o, 'x', vlen);
    o += vlen;
    strcpy(o, "\n[next]\n");
    cfg_file *f = parse_ok(text);
    ck_assert_int_eq(f->nsec, 2);
    ck_assert_str_eq(cfg_str(&f->sec[0], "batch", ""), "4");
    ck_assert_int_eq(cfg_find(&f->sec[0], "batch")->line, 3);
    ck_assert_uint_eq(strlen(cfg_str(&f->sec[0], "label", "")), vlen);
    cfg_free(f);

    strcpy(o, "y\n[next]\n");
    parse_fails(text, NAME ":4: [net] label: ", "512 characters long; the limit is 511");
}
END_TEST

/* A file over CFG_FILE_MAX_BYTES is refused before it is read, with both sizes. */
START_TEST(test_file_size_limit)
{
    char dir[512], path[600];
    tn_tmpdir(dir, sizeof dir, "cfg-size");
    tn_join(path, sizeof path, dir, "big.cfg");
    FILE *fp = fopen(path, "w");
    ck_assert_ptr_nonnull(fp);
    ck_assert_int_eq(fputs("[net]\n", fp) >= 0, 1);
    ck_assert_int_eq(ftruncate(fileno(fp), (off_t)CFG_FILE_MAX_BYTES + 1), 0);
    fclose(fp);
    cfg_file *f = (cfg_file *)&f;
    ck_assert_int_eq(cfg_load(path, &f), VDNN_EFORMAT);
    ck_assert_ptr_null(f);
    assert_msg_has(path, "(16777217 bytes) is over the 16.00 MiB (16777216 bytes) limit for a config file");
    tn_rmtree(dir);
}
END_TEST

/* Devices and folders are refused at once (never read: /dev/zero would not end);
 * a pipe is read. */
START_TEST(test_not_a_file)
{
    cfg_file *f = (cfg_file *)&f;
    ck_assert_int_eq(cfg_load("/dev/zero", &f), VDNN_EIO);
    ck_assert_ptr_null(f);
    assert_msg_has("/dev/zero: is a character device, not a config file", NULL);
    char dir[512], path[600];
    tn_tmpdir(dir, sizeof dir, "cfg-fifo");
    tn_join(path, sizeof path, dir, "fifo.cfg");
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    pid_t pid = fork();
    if (pid == 0) {
        FILE *w = fopen(path, "w");
        fputs("[net]\nbatch = 2\n", w);
        fclose(w);
        _exit(0);
    }
    /* the writer may not have opened it yet: then the pipe reads as empty */
    for (int tries = 0; tries < 100; tries++) {
        vdnn_status st = cfg_load(path, &f);
        if (st == VDNN_OK) break;
        assert_msg_has("no [section]", NULL);
        usleep(10000);
    }
    ck_assert_ptr_nonnull(f);
    ck_assert_str_eq(cfg_str(&f->sec[0], "batch", ""), "2");
    cfg_free(f);
    waitpid(pid, NULL, 0);
    tn_rmtree(dir);
}
END_TEST

START_TEST(test_empty_file)
{
    parse_fails("", NAME ":1:", "no [section]");
    parse_fails("# only a comment\n\n   \n", NAME ":1:", "no [section]");
}
END_TEST

START_TEST(test_missing_file)
{
    const char *path = "/nonexistent-vdnn-dir/missing.cfg";
    cfg_file *f = (cfg_file *)&f;
    ck_assert_int_eq(cfg_load(path, &f), VDNN_EIO);
    ck_assert_ptr_null(f);
    assert_msg_has(path, "cannot open");
}
END_TEST

START_TEST(test_directory_is_not_a_file)
{
    cfg_file *f = (cfg_file *)&f;
    ck_assert_int_eq(cfg_load("/tmp", &f), VDNN_EIO);
    ck_assert_ptr_null(f);
    assert_msg_has("/tmp", NULL);
}
END_TEST

/* ---- cfg_check errors ---- */

START_TEST(test_unknown_key)
{
    cfg_file *f = parse_ok("[net]\nbatch = 1\n\n[convolutional]\nfiltres = 16\nsize = 3\n");
    ck_assert_int_eq(cfg_check(f, &f->sec[1], conv_keys), VDNN_EINVAL);
    ck_assert_str_eq(vdnn_errmsg(), NAME ":5: [convolutional] unknown key 'filtres' "
                                    "(known: filters, size, stride, pad, bias)");
    cfg_free(f);
}
END_TEST

START_TEST(test_unknown_key_empty_table)
{
    static const cfg_key none[] = {{.name = NULL}};
    check_fails("[maxpool]\nsize = 2\n", none, NAME ":2: [maxpool] ", "'size' (known: none)");
    check_fails("[maxpool]\nsize = 2\n", NULL, NAME ":2: [maxpool] ", "'size'");
}
END_TEST

START_TEST(test_duplicate_key)
{
    check_fails("[convolutional]\nfilters = 8\nsize = 3\n# again\nfilters = 16\n", conv_keys,
                NAME ":5: [convolutional] filters: ", "first on line 2");
}
END_TEST

START_TEST(test_missing_required_key)
{
    check_fails("[convolutional]\n# nothing yet\n", conv_keys, NAME ":1: [convolutional] filters: ",
                "required key is missing");
    cfg_file *f = parse_ok("[net]\n\n[convolutional]\nsize = 3\n");
    ck_assert_int_eq(cfg_check(f, &f->sec[1], conv_keys), VDNN_EINVAL);
    ck_assert_str_eq(vdnn_errmsg(), NAME ":3: [convolutional] filters: required key is missing "
                                    "(number of output channels)");
    cfg_free(f);
}
END_TEST

START_TEST(test_bad_int)
{
    value_fails("n", "3x", "'3x' is not an integer");
    value_fails("n", "abc", "not an integer");
    value_fails("n", "1.5", "not an integer");
    value_fails("n", "0x10", "not an integer");
    value_fails("n", "1 2", "not an integer");
    value_fails("n", "-", "not an integer");
    parse_fails("[t]\nn = \n", NAME ":2: [t] n: ", "empty value");
}
END_TEST

START_TEST(test_int_range)
{
    value_fails("n", "101", "101 is out of range [-5, 100]");
    value_fails("n", "-6", "out of range [-5, 100]");
    value_fails("n", "99999999999999999999999", "out of range [-5, 100]");
    /* cfg_int returns int, so a wider table range is clipped to int's */
    value_fails("big", "3000000000", "out of range [0, 2147483647]");
    value_ok("n", "-5");
    value_ok("n", "100");
    value_ok("n", "+7");
    value_ok("big", "2147483647");
}
END_TEST

START_TEST(test_bad_float)
{
    value_fails("lr", "abc", "'abc' is not a number");
    value_fails("lr", "0.1x", "not a number");
    value_fails("lr", "1,5", "not a number");
    value_fails("lr", "nan", "not a finite number");
    value_fails("lr", "inf", "not a finite number");
    value_fails("lr", "-Infinity", "not a finite number");
    value_fails("lr", "1e999", "not a finite number");
}
END_TEST

START_TEST(test_float_range)
{
    value_fails("lr", "10.5", "10.5 is out of range [0, 10]");
    value_fails("lr", "-0.001", "out of range [0, 10]");
    value_ok("lr", "0");
    value_ok("lr", "10");
    value_ok("lr", "1e-3");
    value_ok("lr", ".5");
}
END_TEST

START_TEST(test_bad_bool)
{
    value_fails("bias", "2", "'2' is not 0 or 1");
    value_fails("bias", "true", "'true' is not 0 or 1");
    value_fails("bias", "01", "not 0 or 1");
    value_fails("bias", "-1", "not 0 or 1");
    value_ok("bias", "0");
    value_ok("bias", "1");
}
END_TEST

START_TEST(test_bad_enum)
{
    value_fails("act", "sigmoid", "'sigmoid' is not one of: relu, leaky, linear");
    value_fails("act", "RELU", "relu, leaky, linear");
    value_fails("act", "rel", "relu, leaky, linear");
    value_fails("act", "relu|leaky", "relu, leaky, linear");
    value_ok("act", "relu");
    value_ok("act", "linear");
}
END_TEST

START_TEST(test_string_any)
{
    value_ok("label", "anything at all, even = signs");
}
END_TEST

START_TEST(test_bad_floats)
{
    value_fails("scales", "1,,2", "item 2 is empty");
    value_fails("scales", "1,2,", "item 3 is empty");
    value_fails("scales", ",1", "item 1 is empty");
    value_fails("scales", "1,2,3,4", "4 items, expected 1 to 3");
    value_fails("scales", "1, x", "item 2: 'x' is not a number");
    value_fails("scales", "1, nan", "item 2: 'nan' is not a finite number");
    value_fails("scales", "0.5, 200", "item 2: 200 is out of range [0, 100]");
    value_ok("scales", "0.5");
    value_ok("scales", "0.5,1, 100 ");
}
END_TEST

START_TEST(test_bad_bytes)
{
    value_fails("budget", "abc", "'abc' is not a size");
    value_fails("budget", "12Q", "trailing characters");
    value_fails("budget", "-1K", "not a size");
    value_fails("budget", "512", "512 is out of range [1.00 KiB, 1.00 GiB]");
    value_fails("budget", "2G", "out of range [1.00 KiB, 1.00 GiB]");
    value_fails("budget", "56MB", "'56MB' is ambiguous (MB is 1000^2 bytes to some, 1024^2 to others): write 56M "
                                  "or 56MiB for powers of 1024, or the bytes");
    value_fails("budget", "1gb", "write 1G or 1GiB");
    value_fails("budget", "64Mi", "trailing characters");
    value_ok("budget", "1K");
    value_ok("budget", "512M");
    value_ok("budget", "512MiB");
    value_ok("budget", "512mib");
    value_ok("budget", "1G");
    value_ok("budget", "1048576B");
}
END_TEST

/* The first problem in line order is the one reported. */
START_TEST(test_check_reports_first_problem)
{
    check_fails("[convolutional]\nsize = 0\nfiltres = 3\n", conv_keys,
                NAME ":2: [convolutional] size: ", "out of range [1, 11]");
}
END_TEST

START_TEST(test_check_good_section)
{
    cfg_file *f = parse_ok("[convolutional]\nfilters=16\nsize=3\nbias=0\n");
    ck_assert_int_eq(cfg_check(f, &f->sec[0], conv_keys), VDNN_OK);
    ck_assert_int_eq(cfg_int(&f->sec[0], "filters", 0), 16);
    ck_assert_int_eq(cfg_int(&f->sec[0], "stride", 1), 1);
    ck_assert_int_eq(cfg_int(&f->sec[0], "bias", 1), 0);
    cfg_free(f);
}
END_TEST

/* ---- good parsing ---- */

START_TEST(test_comments_spacing_crlf)
{
    const char *text = "# a net\r\n"
                       "[net]   # trailing comment\r\n"
                       "batch=64\r\n"
                       "  height   =\t28  # spaces and a tab\r\n"
                       "\r\n"
                       "\t[ convolutional ]\r\n"
                       "path = a=b c\r\n"
                       "last = 7"; /* no newline at the end */
    cfg_file *f = parse_ok(text);
    ck_assert_int_eq(f->nsec, 2);
    ck_assert_str_eq(f->path, NAME);
    const cfg_section *net = &f->sec[0], *conv = &f->sec[1];
    ck_assert_str_eq(net->name, "net");
    ck_assert_int_eq(net->line, 2);
    ck_assert_int_eq(net->nkv, 2);
    ck_assert_str_eq(net->kv[0].key, "batch");
    ck_assert_str_eq(net->kv[0].value, "64");
    ck_assert_int_eq(net->kv[0].line, 3);
    ck_assert_str_eq(net->kv[1].key, "height");
    ck_assert_str_eq(net->kv[1].value, "28");
    ck_assert_int_eq(net->kv[1].line, 4);
    ck_assert_str_eq(conv->name, "convolutional");
    ck_assert_int_eq(conv->line, 6);
    ck_assert_str_eq(cfg_str(conv, "path", NULL), "a=b c");
    ck_assert_str_eq(cfg_str(conv, "last", NULL), "7");
    ck_assert_int_eq(cfg_find(conv, "last")->line, 8);
    cfg_free(f);
}
END_TEST

START_TEST(test_repeated_sections)
{
    cfg_file *f = parse_ok("[net]\n[convolutional]\nfilters=8\n[convolutional]\n"
                           "filters=16\n[maxpool]\n[convolutional]\nfilters=32\n");
    ck_assert_int_eq(f->nsec, 5);
    int expect[] = {8, 16, 32}, k = 0;
    for (int i = 0; i < f->nsec; i++) {
        if (strcmp(f->sec[i].name, "convolutional") != 0) continue;
        ck_assert_int_eq(cfg_int(&f->sec[i], "filters", 0), expect[k++]);
    }
    ck_assert_int_eq(k, 3);
    ck_assert_int_eq(f->sec[3].nkv, 0);
    ck_assert_int_eq(f->sec[3].line, 6);
    cfg_free(f);
}
END_TEST

/* Enough sections and keys to make every array grow several times (ASan checks it). */
START_TEST(test_many_sections)
{
    size_t cap = 200 * (16 + 40 * 16);
    char *text = malloc(cap), *p = text;
    ck_assert_ptr_nonnull(text);
    for (int i = 0; i < 200; i++) {
        p += sprintf(p, "[s%d]\n", i);
        for (int j = 0; j < 37; j++) p += sprintf(p, "k%d = %d\n", j, i * 100 + j);
    }
    cfg_file *f = parse_ok(text);
    free(text);
    ck_assert_int_eq(f->nsec, 200);
    ck_assert_int_eq(f->sec[199].nkv, 37);
    ck_assert_int_eq(cfg_int(&f->sec[123], "k36", -1), 12336);
    ck_assert_int_eq(f->sec[199].line, 199 * 38 + 1);
    cfg_free(f);
}
END_TEST

START_TEST(test_getters)
{
    cfg_file *f = parse_ok("[t]\nn = -4\nlr = 0.25\nlabel = hello world\nbudget = 512M\n"
                           "small = 3K\nhuge = 6G\nplain = 1048576\nscales = 0.5, 1,2.5\n");
    const cfg_section *s = &f->sec[0];
    ck_assert_int_eq(cfg_int(s, "n", 0), -4);
    ck_assert_int_eq(cfg_int(s, "absent", 42), 42);
    ck_assert_double_eq(cfg_float(s, "lr", 0), 0.25);
    ck_assert_double_eq(cfg_float(s, "absent", 1.5), 1.5);
    ck_assert_double_eq(cfg_float(s, "n", 0), -4.0);
    ck_assert_str_eq(cfg_str(s, "label", NULL), "hello world");
    ck_assert_ptr_null(cfg_str(s, "absent", NULL));
    ck_assert_uint_eq(cfg_bytes(s, "budget", 0), (size_t)512 << 20);
    ck_assert_uint_eq(cfg_bytes(s, "small", 0), (size_t)3 << 10);
    ck_assert_uint_eq(cfg_bytes(s, "huge", 0), (size_t)6 << 30);
    ck_assert_uint_eq(cfg_bytes(s, "plain", 0), 1048576);
    ck_assert_uint_eq(cfg_bytes(s, "absent", 7), 7);
    cfg_free(f);
}
END_TEST

START_TEST(test_floats_getter)
{
    cfg_file *f = parse_ok("[t]\nscales = 0.5, 1,2.5\none = 3\n");
    const cfg_section *s = &f->sec[0];
    float v[4] = {0};
    ck_assert_int_eq(cfg_floats(s, "scales", v, 4), 3);
    ck_assert_float_eq(v[0], 0.5f);
    ck_assert_float_eq(v[1], 1.0f);
    ck_assert_float_eq(v[2], 2.5f);
    ck_assert_int_eq(cfg_floats(s, "scales", v, 2), 2);
    ck_assert_int_eq(cfg_floats(s, "one", v, 4), 1);
    ck_assert_float_eq(v[0], 3.0f);
    ck_assert_int_eq(cfg_floats(s, "absent", v, 4), 0);
    cfg_free(f);
}
END_TEST

START_TEST(test_find)
{
    cfg_file *f = parse_ok("[t]\na = 1\nb = 2\n[u]\na = 3\n");
    const cfg_kv *kv = cfg_find(&f->sec[0], "b");
    ck_assert_ptr_nonnull(kv);
    ck_assert_str_eq(kv->value, "2");
    ck_assert_int_eq(kv->line, 3);
    ck_assert_ptr_null(cfg_find(&f->sec[0], "c"));
    ck_assert_ptr_null(cfg_find(&f->sec[0], "B"));
    ck_assert_str_eq(cfg_find(&f->sec[1], "a")->value, "3");
    ck_assert_ptr_null(cfg_find(&f->sec[0], NULL));
    cfg_free(f);
}
END_TEST

START_TEST(test_cfg_error)
{
    cfg_file *f = parse_ok("[net]\n\n[convolutional]\nsize = 3\nfilters = 5000\n");
    const cfg_section *s = &f->sec[1];
    ck_assert_int_eq(cfg_error(f, s, "filters", "%d channels is too many for %s", 5000, "fp32"),
                     VDNN_EINVAL);
    ck_assert_str_eq(vdnn_errmsg(),
                     NAME ":5: [convolutional] filters: 5000 channels is too many for fp32");
    ck_assert_int_eq(cfg_error(f, s, NULL, "output shape goes to zero"), VDNN_EINVAL);
    ck_assert_str_eq(vdnn_errmsg(), NAME ":3: [convolutional] output shape goes to zero");
    ck_assert_int_eq(cfg_error(f, s, "stride", "needed with pad"), VDNN_EINVAL);
    ck_assert_str_eq(vdnn_errmsg(), NAME ":3: [convolutional] stride: needed with pad");
    cfg_free(f);
}
END_TEST

/* ---- real files ---- */

/* Writes `len` bytes of text to a fresh temporary file; fills path. */
static void write_temp(char *path, size_t cap, const char *text, size_t len)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, cap, "%s/vdnn_test_config_XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
    close(fd);
}

START_TEST(test_load_file)
{
    char path[512];
    const char *text = "[net]\nbatch = 32\n\n[convolutional]\nfilters = 8\nsize = 3\n";
    write_temp(path, sizeof path, text, strlen(text));
    cfg_file *f = NULL;
    vdnn_status st = cfg_load(path, &f);
    ck_assert_msg(st == VDNN_OK, "cfg_load: %s", vdnn_errmsg());
    ck_assert_str_eq(f->path, path);
    ck_assert_int_eq(f->nsec, 2);
    ck_assert_int_eq(cfg_check(f, &f->sec[1], conv_keys), VDNN_OK);
    ck_assert_int_eq(cfg_check(f, &f->sec[0], conv_keys), VDNN_EINVAL);
    char where[600];
    snprintf(where, sizeof where, "%s:2: [net] ", path);
    assert_msg_has(where, "'batch'");
    cfg_free(f);
    unlink(path);
}
END_TEST

START_TEST(test_load_file_syntax_error)
{
    char path[512], where[600];
    const char *text = "[net]\r\nbatch = 32\r\nsize 3\r\n";
    write_temp(path, sizeof path, text, strlen(text));
    cfg_file *f = (cfg_file *)&f;
    ck_assert_int_eq(cfg_load(path, &f), VDNN_EINVAL);
    ck_assert_ptr_null(f);
    snprintf(where, sizeof where, "%s:3:", path);
    assert_msg_has(where, "size 3");
    unlink(path);
}
END_TEST

START_TEST(test_load_file_with_nul)
{
    char path[512];
    const char text[] = "[net]\nbatch = 3\0junk\n";
    write_temp(path, sizeof path, text, sizeof text - 1);
    cfg_file *f = (cfg_file *)&f;
    ck_assert_int_eq(cfg_load(path, &f), VDNN_EFORMAT);
    ck_assert_ptr_null(f);
    char where[600];
    snprintf(where, sizeof where, "%s:2:", path);
    assert_msg_has(where, "NUL");
    unlink(path);
}
END_TEST

/* A file larger than the reader's first buffer, to exercise its growth. */
START_TEST(test_load_large_file)
{
    char path[512];
    size_t cap = 3000 * 16;
    char *text = malloc(cap), *p = text;
    ck_assert_ptr_nonnull(text);
    p += sprintf(p, "[big]\n");
    for (int i = 0; i < 3000; i++) p += sprintf(p, "k%d = %d\n", i, i);
    write_temp(path, sizeof path, text, (size_t)(p - text));
    free(text);
    cfg_file *f = NULL;
    ck_assert_int_eq(cfg_load(path, &f), VDNN_OK);
    ck_assert_int_eq(f->sec[0].nkv, 3000);
    ck_assert_int_eq(cfg_int(&f->sec[0], "k2999", -1), 2999);
    cfg_free(f);
    unlink(path);
}
END_TEST

START_TEST(test_null_arguments)
{
    cfg_file *f = (cfg_file *)&f;
    ck_assert_int_eq(cfg_parse(NULL, NAME, &f), VDNN_EINVAL);
    ck_assert_ptr_null(f);
    ck_assert_int_eq(cfg_load(NULL, &f), VDNN_EINVAL);
    ck_assert_int_eq(cfg_parse("[a]\n", NAME, NULL), VDNN_EINVAL);
    cfg_free(NULL);
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *syntax = tcase_create("syntax");
    tcase_add_test(syntax, test_key_before_section);
    tcase_add_test(syntax, test_missing_equals);
    tcase_add_test(syntax, test_empty_key);
    tcase_add_test(syntax, test_empty_value);
    tcase_add_test(syntax, test_unterminated_section);
    tcase_add_test(syntax, test_junk_after_section);
    tcase_add_test(syntax, test_empty_section_name);
    tcase_add_test(syntax, test_bad_names);
    tcase_add_test(syntax, test_name_too_long);
    tcase_add_test(syntax, test_long_lines);
    tcase_add_test(syntax, test_empty_file);
    tcase_add_test(syntax, test_missing_file);
    tcase_add_test(syntax, test_directory_is_not_a_file);
    suite_add_tcase(s, syntax);

    TCase *check = tcase_create("check");
    tcase_add_test(check, test_unknown_key);
    tcase_add_test(check, test_unknown_key_empty_table);
    tcase_add_test(check, test_duplicate_key);
    tcase_add_test(check, test_missing_required_key);
    tcase_add_test(check, test_bad_int);
    tcase_add_test(check, test_int_range);
    tcase_add_test(check, test_bad_float);
    tcase_add_test(check, test_float_range);
    tcase_add_test(check, test_bad_bool);
    tcase_add_test(check, test_bad_enum);
    tcase_add_test(check, test_string_any);
    tcase_add_test(check, test_bad_floats);
    tcase_add_test(check, test_bad_bytes);
    tcase_add_test(check, test_check_reports_first_problem);
    tcase_add_test(check, test_check_good_section);
    suite_add_tcase(s, check);

    TCase *good = tcase_create("good");
    tcase_add_test(good, test_comments_spacing_crlf);
    tcase_add_test(good, test_repeated_sections);
    tcase_add_test(good, test_many_sections);
    tcase_add_test(good, test_getters);
    tcase_add_test(good, test_floats_getter);
    tcase_add_test(good, test_find);
    tcase_add_test(good, test_cfg_error);
    tcase_add_test(good, test_null_arguments);
    suite_add_tcase(s, good);

    TCase *files = tcase_create("files");
    tcase_add_test(files, test_load_file);
    tcase_add_test(files, test_load_file_syntax_error);
    tcase_add_test(files, test_load_file_with_nul);
    tcase_add_test(files, test_load_large_file);
    tcase_add_test(files, test_file_size_limit);
    tcase_add_test(files, test_not_a_file);
    suite_add_tcase(s, files);
    return s;
}

int main(void) { return tn_run_suite(config_suite()); }
