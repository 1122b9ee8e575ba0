/* Check suite for the `vdnn` program (tools/): it is run as a user would run it, with
 * its stdout and stderr captured, from the repository root. The binary is $VDNN_BIN
 * (`make test` sets it to the build's own), else build/vdnn.
 *
 * What is checked: bad command lines exit non-zero with one "vdnn: " line that names
 * the flag, file or value; `info` prints every layer and the totals (and JSON with
 * --json); `train` writes its JSON-lines log and checkpoint and, with --quiet, nothing
 * on stdout; `test` evaluates a checkpoint; resuming continues exactly; a corrupt
 * checkpoint, a tiny budget or a missing device fail cleanly, never with a crash. */
#include <check.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "tests/jsoncheck.h"
#include "tests/testnet.h"
#include "tests/tsan.h"
#include "vdnn/device.h"
#include "vdnn/onednn.h"

/* 256 training items at batch 16: 16 steps per epoch. */
#define CLI_NET TN_SMALL
/* 64 training items at batch 16, one epoch: 4 steps, then an epoch line. */
#define CLI_SHORT_NET                                                                        \
    TN_NET "[train]\nepochs = 1\nlearning_rate = 0.05\nmomentum = 0.9\nseed = 3\n"           \
           "[data]\nset = synthetic\ntrain_size = 64\ntest_size = 32\nclasses = 4\n" TN_LAYERS

typedef tn_run cli_run;

static cli_run run_cli(const char *args) { return tn_vdnn(tn_dir, "", args); }
static void run_free(cli_run *r) { tn_run_free(r); }

/* The run failed (status 1 or 2) with a message on stderr that starts with "vdnn: " and
 * contains `a` and, if non-NULL, `b`; nothing on stdout. */
static void assert_fails(const cli_run *r, const char *args, const char *a, const char *b)
{
    ck_assert_msg(r->status != 0, "`vdnn %s` exited 0; stdout:\n%s", args, r->out);
    ck_assert_msg(!strncmp(r->err, "vdnn: ", 6), "`vdnn %s`: stderr does not start with 'vdnn: ':\n%s", args,
                  r->err);
    ck_assert_msg(strstr(r->err, a) != NULL, "`vdnn %s`: stderr lacks '%s':\n%s", args, a, r->err);
    if (b) ck_assert_msg(strstr(r->err, b) != NULL, "`vdnn %s`: stderr lacks '%s':\n%s", args, b, r->err);
    ck_assert_msg(r->out[0] == 0, "`vdnn %s` failed but wrote to stdout:\n%s", args, r->out);
}

static void fails_with(const char *args, const char *a, const char *b)
{
    cli_run r = run_cli(args);
    assert_fails(&r, args, a, b);
    run_free(&r);
}

static void assert_ok(const cli_run *r, const char *args) { tn_run_ok(r, args); }

/* Writes a config into the temporary folder; its path goes to buf. */
static const char *write_cfg(char *buf, size_t len, const char *name, const char *text)
{
    tn_path(buf, len, name);
    tn_write_text(buf, text);
    return buf;
}

/* ---- bad command lines ---- */

START_TEST(test_no_args)
{
    cli_run r = run_cli("");
    ck_assert_int_ne(r.status, 0);
    ck_assert_msg(strstr(r.err, "usage: vdnn") != NULL, "stderr:\n%s", r.err);
    ck_assert_msg(strstr(r.err, "train") && strstr(r.err, "test") && strstr(r.err, "info"), "stderr:\n%s", r.err);
    ck_assert_str_eq(r.out, "");
    run_free(&r);
}
END_TEST

START_TEST(test_help)
{
    cli_run r = run_cli("--help");
    assert_ok(&r, "--help");
    ck_assert_msg(strstr(r.out, "usage: vdnn") != NULL, "stdout:\n%s", r.out);
    run_free(&r);
}
END_TEST

/* Every subcommand takes --help (or -h): its usage and every flag it knows, on stdout,
 * exit 0, before anything else is read (no config needed). */
START_TEST(test_subcommand_help)
{
    static const struct { const char *args, *flag; } cases[] = {
        {"train --help", "--budget SIZE"},   {"train configs/none.cfg -h", "--policy TEXT"},
        {"test --help", "--weights"},        {"info --help", "--json"},
        {"profile --help", "--save-plan"},   {"sweep --help", "--budgets"},
        {"manager --help", "--period"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cli_run r = run_cli(cases[k].args);
        assert_ok(&r, cases[k].args);
        ck_assert_msg(strstr(r.out, "usage: vdnn ") && strstr(r.out, cases[k].flag) && strstr(r.out, "flags:"),
                      "`vdnn %s` printed:\n%s", cases[k].args, r.out);
        run_free(&r);
    }
    cli_run r = run_cli("train --help");
    ck_assert_msg(strstr(r.out, "none, all, conv, swap, recompute or dyn"), "train's flags come without help:\n%s", r.out);
    run_free(&r);
}
END_TEST

/* Every flag of every subcommand's --help says what it does: a line "  --flag KIND" with
 * nothing after it is a flag a user can only guess at. */
START_TEST(test_help_every_flag)
{
    static const char *const commands[] = {"train", "test", "info", "data", "profile", "sweep",
                                           "manager", "import", "export", "onnx-test"};
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++) {
        char args[64];
        snprintf(args, sizeof args, "%s --help", commands[k]);
        cli_run r = run_cli(args);
        assert_ok(&r, args);
        int flags = 0;
        for (const char *line = r.out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
            if (strncmp(line, "  --", 4)) continue;
            flags++;
            /* the flag and its value's kind, then one space or more, then the help */
            const char *end = strchr(line, '\n');
            int len = end ? (int)(end - line) : (int)strlen(line);
            const char *p = line + 2;
            while (p < line + len && *p != ' ') p++;                                  /* --flag */
            if (p + 1 < line + len && p[1] >= 'A' && p[1] <= 'Z')                     /* KIND */
                for (p++; p < line + len && *p != ' '; p++) {}
            while (p < line + len && *p == ' ') p++;
            ck_assert_msg(p < line + len, "`vdnn %s` gives a flag no help: '%.*s'", args, len, line);
        }
        ck_assert_msg(flags > 0, "`vdnn %s` listed no flags:\n%s", args, r.out);
        run_free(&r);
    }
}
END_TEST

START_TEST(test_unknown_command)
{
    fails_with("frobnicate configs/fmnist.cfg", "frobnicate", NULL);
}
END_TEST

START_TEST(test_unknown_flag)
{
    char cfg[512], args[1024];
    write_cfg(cfg, sizeof cfg, "net.cfg", CLI_NET);
    snprintf(args, sizeof args, "train %s --epocs 3", cfg);
    fails_with(args, "--epocs", NULL);
    fails_with("info configs/fmnist.cfg --jsn", "--jsn", NULL);
    snprintf(args, sizeof args, "test %s --weights x --quiet", cfg);
    fails_with(args, "--quiet", NULL);
}
END_TEST

START_TEST(test_bad_flag_values)
{
    char cfg[512], args[1024];
    write_cfg(cfg, sizeof cfg, "net.cfg", CLI_NET);
    snprintf(args, sizeof args, "train %s --epochs abc", cfg);
    fails_with(args, "--epochs", "abc");
    snprintf(args, sizeof args, "train %s --epochs 0", cfg);
    fails_with(args, "--epochs", "range");
    snprintf(args, sizeof args, "train %s --steps 5x", cfg);
    fails_with(args, "--steps", "5x");
    snprintf(args, sizeof args, "train %s --lr fast", cfg);
    fails_with(args, "--lr", "fast");
    snprintf(args, sizeof args, "train %s --budget 12Q", cfg);
    fails_with(args, "--budget", NULL);
    /* MB is 10^6 bytes to some: refused, with what to write instead */
    snprintf(args, sizeof args, "train %s --budget 56MB", cfg);
    fails_with(args, "--budget: '56MB' is ambiguous", "write 56M or 56MiB");
    snprintf(args, sizeof args, "train %s --steps", cfg);
    fails_with(args, "--steps", NULL);
    snprintf(args, sizeof args, "train %s --steps 1 --steps 2", cfg);
    fails_with(args, "--steps", "twice");
    fails_with("info configs/fmnist.cfg --batch 0", "--batch", NULL);
    /* Positional arguments: none, or one too many. */
    fails_with("train", "usage", NULL);
    fails_with("info configs/fmnist.cfg configs/lenet.cfg", "configs/lenet.cfg", NULL);
}
END_TEST

START_TEST(test_missing_config)
{
    char cfg[512], args[1024];
    tn_path(cfg, sizeof cfg, "no-such.cfg");
    snprintf(args, sizeof args, "train %s --steps 1", cfg);
    fails_with(args, cfg, NULL);
    snprintf(args, sizeof args, "info %s", cfg);
    fails_with(args, cfg, NULL);
}
END_TEST

START_TEST(test_bad_config)
{
    char cfg[512], args[1024], where[600];
    write_cfg(cfg, sizeof cfg, "bad.cfg",
              TN_HEAD "[convolutional]\nfilters = 4\nsize = 3\nstride = abc\n[connected]\noutput = 4\n[softmax]\n");
    snprintf(where, sizeof where, "%s:19:", cfg);
    snprintf(args, sizeof args, "train %s --steps 1", cfg);
    fails_with(args, where, "stride");
    snprintf(args, sizeof args, "info %s", cfg);
    fails_with(args, where, "stride");
    /* A syntax error. */
    write_cfg(cfg, sizeof cfg, "syntax.cfg", "[net]\nbatch 16\n");
    snprintf(where, sizeof where, "%s:2:", cfg);
    snprintf(args, sizeof args, "info %s", cfg);
    fails_with(args, where, NULL);
}
END_TEST

/* ---- info ---- */

START_TEST(test_info_text)
{
    cli_run r = run_cli("info configs/fmnist.cfg");
    assert_ok(&r, "info configs/fmnist.cfg");
    static const char *names[] = {"conv1", "relu2", "conv3", "relu4", "maxpool5", "conv6", "relu7", "conv8",
                                  "relu9", "maxpool10", "fc11", "relu12", "dropout13", "fc14", "softmax15"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ck_assert_msg(strstr(r.out, names[i]) != NULL, "info lacks %s:\n%s", names[i], r.out);
    ck_assert_msg(strstr(r.out, "totals") != NULL, "info lacks totals:\n%s", r.out);
    ck_assert_msg(strstr(r.out, "10 classes") && strstr(r.out, "128x1x28x28"), "info:\n%s", r.out);
    ck_assert_msg(strstr(r.out, "128x64x7x7") != NULL, "info lacks maxpool10's shape:\n%s", r.out);
    /* The workspace of each convolution algorithm. */
    ck_assert_msg(strstr(r.out, "im2col") != NULL, "info lacks the algorithms:\n%s", r.out);
    ck_assert_str_eq(r.err, "");
    run_free(&r);
}
END_TEST

/* `info --device`: the CPU's algorithms by name; a bad device name and (with no GPU) a
 * GPU are clean errors. */
START_TEST(test_info_device)
{
    cli_run r = run_cli("info configs/lenet.cfg --device cpu");
    assert_ok(&r, "info --device cpu");
    ck_assert_msg(strstr(r.out, "algorithms of cpu") && strstr(r.out, "im2col"), "info:\n%s", r.out);
    run_free(&r);
    fails_with("info configs/lenet.cfg --device gpu0", "gpu0", NULL);
    fails_with("info configs/lenet.cfg --device cpu --math tf16", "--math", NULL);
    if (device_cuda_count() == 0) fails_with("info configs/lenet.cfg --device cuda", "cuda", NULL);
}
END_TEST

START_TEST(test_info_json)
{
    cli_run r = run_cli("info configs/fmnist.cfg --json");
    assert_ok(&r, "info --json");
    json_t *info = tj_parse(r.out, "info --json");
    /* One object per layer, each with its shapes and bytes. */
    ck_assert_int_eq(json_array_size(tj_get(info, "layers")), 15);
    ck_assert_str_eq(tj_str(info, "layers.14.name"), "softmax15");
    ck_assert_str_eq(tj_str(info, "layers.0.type"), "convolutional");
    ck_assert_str_eq(tj_str(info, "layers.0.inputs.0"), "data");
    ck_assert_int_gt(tj_int(info, "layers.0.param_bytes"), 0);
    ck_assert_int_eq(tj_int(info, "layers.0.workspace_bytes.forward.direct"), 0);
    ck_assert_int_eq(tj_int(info, "classes"), 10);
    ck_assert_int_eq(tj_int(info, "input.1"), 1);
    ck_assert(json_is_true(tj_get(info, "in_place")));
    ck_assert_int_gt(tj_int(info, "min_budget_bytes.none.perf"), tj_int(info, "min_budget_bytes.all.mem"));
    ck_assert_int_gt(tj_int(info, "dyn_min_budget_bytes"), 0);
    ck_assert_int_gt(tj_int(info, "micro_batch_min_budget_bytes.64"), 0);
    json_decref(info);
    run_free(&r);
}
END_TEST

START_TEST(test_info_vgg16_batch)
{
    cli_run r = run_cli("info configs/vgg16.cfg --batch 256");
    assert_ok(&r, "info configs/vgg16.cfg --batch 256");
    ck_assert_msg(strstr(r.out, "256x3x224x224") && strstr(r.out, "1000 classes"), "info:\n%s", r.out);
    ck_assert_msg(strstr(r.out, "256x512x7x7") != NULL, "info lacks the last pool's shape:\n%s", r.out);
    ck_assert_msg(strstr(r.out, "softmax39") && strstr(r.out, "totals"), "info:\n%s", r.out);
    run_free(&r);
    r = run_cli("info configs/vgg16.cfg --batch 256 --json");
    assert_ok(&r, "info configs/vgg16.cfg --batch 256 --json");
    json_t *info = tj_parse(r.out, "info --json");
    ck_assert_int_eq(tj_int(info, "input.0"), 256);
    ck_assert_int_eq(tj_int(info, "input.2"), 224);
    json_decref(info);
    run_free(&r);
}
END_TEST

START_TEST(test_info_all_configs)
{
    /* the ImageNet nets last: a sanitizer's 20 seconds, which leaves them to make test */
    static const char *cfgs[] = {"configs/lenet.cfg",      "configs/fmnist.cfg",        "configs/alexnet-64.cfg",
                                 "configs/vgg-cifar.cfg",  "configs/resnet20.cfg",      "configs/densenet40.cfg",
                                 "configs/resnet-fmnist.cfg", "configs/alexnet.cfg",    "configs/vgg16.cfg",
                                 "configs/resnet50.cfg",   "configs/googlenet.cfg"};
    size_t count = sizeof cfgs / sizeof cfgs[0];
    if (UNDER_SANITIZER) {
        count -= 4;
        printf("SKIPPED: test_info_all_configs on alexnet, vgg16, resnet50, googlenet under a sanitizer (make test "
               "runs them)\n");
    }
    for (size_t i = 0; i < count; i++) {
        char args[256];
        snprintf(args, sizeof args, "info %s", cfgs[i]);
        cli_run r = run_cli(args);
        assert_ok(&r, args);
        ck_assert_msg(strstr(r.out, "totals") && strstr(r.out, "softmax"), "%s:\n%s", args, r.out);
        run_free(&r);
        snprintf(args, sizeof args, "info %s --json", cfgs[i]);
        r = run_cli(args);
        assert_ok(&r, args);
        json_decref(tj_parse(r.out, args));
        run_free(&r);
    }
}
END_TEST

/* The config's path is a JSON string whatever its bytes: quotes, backslashes and
 * control characters escaped, UTF-8 kept, and a byte that is not UTF-8 as U+FFFD. */
START_TEST(test_info_json_escapes_path)
{
    char dir[512], cfg[600], want[600], args[1024];
    tn_path(dir, sizeof dir, "a\"b\\c\x01\t\xc3\xa9\xff");
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    tn_join(cfg, sizeof cfg, dir, "n.cfg");
    tn_write_text(cfg, CLI_NET);
    tn_path(want, sizeof want, "a\"b\\c\x01\t\xc3\xa9\xef\xbf\xbd/n.cfg");
    snprintf(args, sizeof args, "info '%s' --json", cfg);
    cli_run r = run_cli(args);
    assert_ok(&r, args);
    json_t *info = tj_parse(r.out, args);
    ck_assert_str_eq(tj_str(info, "config"), want);
    json_decref(info);
    run_free(&r);
}
END_TEST

/* ---- train and test ---- */

START_TEST(test_train_quiet_log)
{
    char cfg[512], log[512], ck[512], args[2048];
    write_cfg(cfg, sizeof cfg, "net.cfg", CLI_NET);
    tn_path(log, sizeof log, "log.jsonl");
    tn_path(ck, sizeof ck, "ck.ckpt");
    snprintf(args, sizeof args, "train %s --steps 5 --log %s --save %s --quiet --threads 1", cfg, log, ck);
    cli_run r = run_cli(args);
    assert_ok(&r, args);
    ck_assert_msg(r.out[0] == 0, "--quiet printed on stdout:\n%s", r.out);
    ck_assert_msg(r.err[0] == 0, "--quiet printed on stderr:\n%s", r.err);
    run_free(&r);
    json_t *lines = tj_lines(log);
    ck_assert_int_eq(json_array_size(lines), 7);   /* planning, 5 steps and the final record */
    ck_assert(tj_num(json_array_get(lines, 0), "plan_s") >= 0);
    for (int k = 1; k <= 5; k++) {
        json_t *step = json_array_get(lines, (size_t)k);
        ck_assert_int_eq(tj_int(step, "step"), k);
        ck_assert_int_eq(tj_int(step, "epoch"), 1);
        ck_assert(tj_num(step, "loss") > 0 && tj_num(step, "lr") == 0.05 && tj_num(step, "step_time_ms") >= 0);
    }
    json_t *final = json_array_get(lines, 6);
    ck_assert(json_is_true(tj_get(final, "final")));
    ck_assert_str_eq(tj_str(final, "stopped"), "steps");
    ck_assert_int_eq(tj_int(final, "steps"), 5);
    ck_assert_int_gt(tj_int(final, "pool_peak_bytes"), 0);
    ck_assert(json_is_number(tj_get(final, "copy_wait_s")) && !tj_has(final, "error"));
    json_decref(lines);
    /* a run that fails says why in its final record, whatever bytes the message holds
     * (a byte that is not UTF-8 as U+FFFD) */
    char bad[600], named[600];
    tn_path(bad, sizeof bad, "no\"such\\ck\x01\xc3\xa9\xff.ckpt");
    tn_path(named, sizeof named, "no\"such\\ck\x01\xc3\xa9\xef\xbf\xbd.ckpt");
    snprintf(args, sizeof args, "train %s --steps 1 --log %s --resume '%s' --no-save --quiet --threads 1", cfg, log,
             bad);
    r = run_cli(args);
    ck_assert_msg(r.status != 0, "`vdnn %s` exited 0", args);
    run_free(&r);
    lines = tj_lines(log);
    final = json_array_get(lines, json_array_size(lines) - 1);
    ck_assert_str_eq(tj_str(final, "stopped"), "error");
    ck_assert_msg(strstr(tj_str(final, "error"), named), "the error does not name %s: %s", named,
                  tj_str(final, "error"));
    json_decref(lines);
    size_t len = 0;
    char *c = tn_read(ck, &len);
    ck_assert_msg(c != NULL, "no checkpoint at %s", ck);
    ck_assert(len > 8 && !memcmp(c, "VDNNCKPT", 8));
    free(c);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", ck);
    ck_assert(!tn_exists(tmp));
}
END_TEST

START_TEST(test_train_epoch_line)
{
    char cfg[512], log[512], args[2048];
    write_cfg(cfg, sizeof cfg, "short.cfg", CLI_SHORT_NET);
    tn_path(log, sizeof log, "log.jsonl");
    snprintf(args, sizeof args, "train %s --log %s --threads 1", cfg, log);
    cli_run r = run_cli(args);
    assert_ok(&r, args);
    /* Not quiet, stderr not a terminal: the epoch line and the summary go to stdout. */
    ck_assert_msg(strstr(r.out, "epoch 1/1") && strstr(r.out, "test accuracy"), "stdout:\n%s", r.out);
    run_free(&r);
    /* planning, 4 steps, the epoch and the final record */
    json_t *lines = tj_lines(log);
    ck_assert_int_eq(json_array_size(lines), 7);
    for (int k = 1; k <= 4; k++) ck_assert_int_eq(tj_int(json_array_get(lines, (size_t)k), "step"), k);
    json_t *epoch = json_array_get(lines, 5);
    ck_assert_int_eq(tj_int(epoch, "epoch"), 1);
    ck_assert_int_eq(tj_int(epoch, "step"), 4);
    static const char *reals[] = {"train_loss", "train_acc", "test_loss", "test_acc", "images_per_s", "epoch_time_s"};
    for (int k = 0; k < 6; k++) ck_assert_msg(tj_num(epoch, reals[k]) >= 0, "%s", reals[k]);
    ck_assert_int_gt(tj_int(epoch, "pool_peak_bytes"), 0);
    ck_assert_int_eq(tj_int(epoch, "offload_bytes"), 0);
    ck_assert_str_eq(tj_str(json_array_get(lines, 6), "stopped"), "epochs");
    json_decref(lines);
    /* --epochs overrides the config: two epoch lines. */
    snprintf(args, sizeof args, "train %s --log %s --epochs 2 --quiet --threads 1", cfg, log);
    r = run_cli(args);
    assert_ok(&r, args);
    run_free(&r);
    lines = tj_lines(log);
    int epochs = 0;
    for (size_t k = 0; k < json_array_size(lines); k++) epochs += tj_has(json_array_get(lines, k), "train_loss");
    ck_assert_int_eq(epochs, 2);
    json_decref(lines);
}
END_TEST

START_TEST(test_test_command)
{
    char cfg[512], ck[512], args[2048], log[512];
    write_cfg(cfg, sizeof cfg, "short.cfg", CLI_SHORT_NET);
    tn_path(ck, sizeof ck, "ck.ckpt");
    snprintf(args, sizeof args, "train %s --save %s --quiet --threads 1", cfg, ck);
    cli_run r = run_cli(args);
    assert_ok(&r, args);
    run_free(&r);
    tn_path(log, sizeof log, "test.jsonl");
    snprintf(args, sizeof args, "test %s --weights %s --log %s --threads 1", cfg, ck, log);
    r = run_cli(args);
    assert_ok(&r, args);
    ck_assert_msg(strstr(r.out, "test accuracy") != NULL, "stdout:\n%s", r.out);
    run_free(&r);
    json_t *lines = tj_lines(log);
    ck_assert_int_eq(json_array_size(lines), 1);
    ck_assert(tj_num(json_array_get(lines, 0), "test_acc") >= 0 && tj_num(json_array_get(lines, 0), "test_loss") > 0);
    ck_assert_int_eq(tj_int(json_array_get(lines, 0), "images"), 32);
    json_decref(lines);
    /* Another batch size reads the same weights. */
    snprintf(args, sizeof args, "test %s --weights %s --batch 5 --threads 1", cfg, ck);
    r = run_cli(args);
    assert_ok(&r, args);
    ck_assert_msg(strstr(r.out, "test accuracy") != NULL, "stdout:\n%s", r.out);
    run_free(&r);
}
END_TEST

START_TEST(test_test_needs_weights)
{
    char cfg[512], args[1024], ck[512], env[700];
    write_cfg(cfg, sizeof cfg, "short.cfg", CLI_SHORT_NET);
    snprintf(args, sizeof args, "test %s", cfg);
    snprintf(env, sizeof env, "VDNN_RUNS='%s/none'", tn_dir);
    cli_run r = tn_vdnn(tn_dir, env, args);
    assert_fails(&r, args, "--weights", "kept no weights");
    run_free(&r);
    tn_path(ck, sizeof ck, "absent.ckpt");
    snprintf(args, sizeof args, "test %s --weights %s", cfg, ck);
    fails_with(args, ck, NULL);
}
END_TEST

/* Without --save, train keeps its weights in RUNS/CONFIG.ckpt and says so; a second
 * run takes CONFIG-2.ckpt and leaves the first untouched; test without --weights reads
 * the newest; --resume keeps writing to the checkpoint it resumed; --no-save keeps
 * nothing and says so; --save with --no-save is refused. */
/* Fine-tuning from the command line: `--init` starts a 3-class net from a 4-class
 * net's checkpoint, keeping every tensor but the head's and saying which it left fresh;
 * the run's own checkpoint is its default one, not the file it started from; `--init`
 * with `--resume` is refused before any work. */
START_TEST(test_init_fine_tune)
{
    char four[512], three[512], ck[600], args[2048];
    write_cfg(four, sizeof four, "four.cfg", CLI_SHORT_NET);
    write_cfg(three, sizeof three, "three.cfg",
              TN_NET "[train]\nepochs = 1\nlearning_rate = 0.05\nmomentum = 0.9\nseed = 4\n"
                     "[data]\nset = synthetic\ntrain_size = 64\ntest_size = 32\nclasses = 3\n"
                     "[convolutional]\nfilters = 4\nsize = 3\npad = 1\n[relu]\n[maxpool]\nsize = 2\n"
                     "[connected]\noutput = 3\n[softmax]\n");
    tn_path(ck, sizeof ck, "four.ckpt");
    snprintf(args, sizeof args, "train %s --steps 2 --threads 1 --quiet --save %s", four, ck);
    cli_run r = run_cli(args);
    assert_ok(&r, args);
    run_free(&r);
    size_t before = 0, after = 0;
    char *was = tn_read(ck, &before);
    snprintf(args, sizeof args, "train %s --steps 2 --threads 1 --no-save --init %s", three, ck);
    r = run_cli(args);
    assert_ok(&r, args);
    ck_assert_msg(strstr(r.out, "weights from ") && strstr(r.out, "2 of 4 tensors kept; fresh: ") &&
                  strstr(r.out, "(3x64x1x1 here, 4x64x1x1 in the file)"), "%s", r.out);
    run_free(&r);
    char *now = tn_read(ck, &after);
    ck_assert_msg(was && now && before == after && !memcmp(was, now, before), "--init changed %s", ck);
    free(was);
    free(now);
    snprintf(args, sizeof args, "train %s --steps 2 --threads 1 --init %s --resume %s", three, ck, ck);
    r = run_cli(args);
    ck_assert_msg(r.status == 1 && strstr(r.err, "--init and --resume") && !strstr(r.out, "training"),
                  "status %d\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
    run_free(&r);
}
END_TEST

START_TEST(test_default_save)
{
    char cfg[512], runs[600], env[700], args[2048], first[700], second[700];
    write_cfg(cfg, sizeof cfg, "short.cfg", CLI_SHORT_NET);
    tn_path(runs, sizeof runs, "runs");
    snprintf(env, sizeof env, "VDNN_RUNS='%s'", runs);
    snprintf(first, sizeof first, "%s/short.ckpt", runs);
    snprintf(second, sizeof second, "%s/short-2.ckpt", runs);
    snprintf(args, sizeof args, "train %s --steps 2 --threads 1", cfg);
    cli_run r = tn_vdnn(tn_dir, env, args);
    assert_ok(&r, args);
    ck_assert_msg(strstr(r.out, "keeping the weights in ") && strstr(r.out, first) && strstr(r.out, "--no-save"),
                  "%s", r.out);
    run_free(&r);
    size_t was_len = 0, now_len = 0;
    char *was = tn_read(first, &was_len);
    ck_assert_msg(was && was_len > 0, "no checkpoint at %s", first);
    r = tn_vdnn(tn_dir, env, args);
    assert_ok(&r, args);
    ck_assert_msg(strstr(r.out, second), "%s", r.out);
    run_free(&r);
    ck_assert_msg(tn_exists(second), "no second checkpoint");
    char *now = tn_read(first, &now_len);
    ck_assert_msg(now && now_len == was_len && !memcmp(was, now, was_len), "the second run changed %s", first);
    free(was);
    free(now);
    snprintf(args, sizeof args, "test %s --threads 1", cfg);
    r = tn_vdnn(tn_dir, env, args);
    assert_ok(&r, args);
    ck_assert_msg(strstr(r.out, second) && strstr(r.out, "test accuracy"), "%s", r.out);
    run_free(&r);
    snprintf(args, sizeof args, "train %s --steps 3 --threads 1 --resume %s", cfg, first);
    r = tn_vdnn(tn_dir, env, args);
    assert_ok(&r, args);
    ck_assert_msg(strstr(r.out, "resumed; keeping the weights in ") && strstr(r.out, first), "%s", r.out);
    run_free(&r);
    snprintf(args, sizeof args, "train %s --steps 1 --threads 1 --no-save", cfg);
    r = tn_vdnn(tn_dir, env, args);
    assert_ok(&r, args);
    ck_assert_msg(strstr(r.out, "keeping no weights"), "%s", r.out);
    run_free(&r);
    char third[700];
    snprintf(third, sizeof third, "%s/short-3.ckpt", runs);
    ck_assert_msg(!tn_exists(third), "--no-save wrote %s", third);
    snprintf(args, sizeof args, "train %s --steps 1 --threads 1 --no-save --save x.ckpt", cfg);
    r = tn_vdnn(tn_dir, env, args);
    assert_fails(&r, args, "--no-save", NULL);
    run_free(&r);
}
END_TEST

/* After --resume the first line says where the run resumed, and the progress bar's
 * speed is this process's own (it once counted the resumed items as done in no time:
 * 33159 img/s for a real 250). */
START_TEST(test_resume_progress)
{
    if (UNDER_SANITIZER) {
        printf("SKIPPED: test_resume_progress under a sanitizer: it compares the bar's speed with the run's, and "
               "trains 18 steps of 48x48 convolutions (make test runs it)\n");
        return;
    }
    char cfg[512], ck[512], args[2048];
    write_cfg(cfg, sizeof cfg, "bar.cfg",
              "[net]\nbatch = 16\nchannels = 3\nheight = 48\nwidth = 48\n" TN_TRAIN
              "[data]\nset = synthetic\ntrain_size = 160\ntest_size = 16\nclasses = 4\n"
              "[convolutional]\nfilters = 32\nsize = 3\npad = 1\n[relu]\n"
              "[convolutional]\nfilters = 32\nsize = 3\npad = 1\n[relu]\n[maxpool]\nsize = 2\n"
              "[connected]\noutput = 4\n[softmax]\n");
    tn_path(ck, sizeof ck, "bar.ckpt");
    snprintf(args, sizeof args, "train %s --steps 8 --threads 1 --quiet --save %s", cfg, ck);
    cli_run r = run_cli(args);
    assert_ok(&r, args);
    run_free(&r);
    snprintf(args, sizeof args, "train %s --steps 10 --threads 1 --resume %s", cfg, ck);
    r = tn_vdnn(tn_dir, "VDNN_PROGRESS_BAR=1", args);
    assert_ok(&r, args);
    ck_assert_msg(strstr(r.err, "resumed from ") && strstr(r.err, "at epoch 1, step 8 (item 128 of 160"), "%s", r.err);
    const char *done = strstr(r.err, "done: ");
    ck_assert_msg(done, "no done line:\n%s", r.err);
    double rate = strtod(strstr(done, "steps, ") + 7, NULL);
    int bars = 0;
    for (const char *at = strstr(r.err, "img/s  loss"); at && at < done; at = strstr(at + 1, "img/s  loss")) {
        const char *num = at - 2;
        while (num > r.err && num[-1] != ' ') num--;
        double shown = strtod(num, NULL);
        ck_assert_msg(shown <= 1.5 * rate, "the bar shows %.0f img/s, the run's rate is %.0f:\n%s", shown, rate, r.err);
        bars++;
    }
    ck_assert_msg(bars > 0, "no progress bar drawn:\n%s", r.err);
    run_free(&r);
}
END_TEST

START_TEST(test_resume_exact)
{
    /* 10 steps in one go, or 6 then 4 resumed: the same checkpoint. With --algo perf the
     * two runs could time their way to different algorithms; mem fixes them. */
    char cfg[512], a[512], b[512], c[512], args[2048];
    write_cfg(cfg, sizeof cfg, "net.cfg", CLI_NET);
    tn_path(a, sizeof a, "a.ckpt");
    tn_path(b, sizeof b, "b.ckpt");
    tn_path(c, sizeof c, "c.ckpt");
    snprintf(args, sizeof args, "train %s --steps 10 --save %s --quiet --threads 1 --algo mem", cfg, a);
    cli_run r = run_cli(args);
    assert_ok(&r, args);
    run_free(&r);
    snprintf(args, sizeof args, "train %s --steps 6 --save %s --quiet --threads 1 --algo mem", cfg, b);
    r = run_cli(args);
    assert_ok(&r, args);
    run_free(&r);
    snprintf(args, sizeof args, "train %s --steps 4 --resume %s --save %s --quiet --threads 1 --algo mem", cfg, b, c);
    r = run_cli(args);
    assert_ok(&r, args);
    run_free(&r);
    ck_assert_msg(tn_same_file(a, c), "resumed checkpoint %s differs from %s", c, a);
    ck_assert(!tn_same_file(a, b));
}
END_TEST

START_TEST(test_resume_corrupt)
{
    char cfg[512], ck[512], args[2048];
    write_cfg(cfg, sizeof cfg, "net.cfg", CLI_NET);
    tn_path(ck, sizeof ck, "ck.ckpt");
    snprintf(args, sizeof args, "train %s --steps 2 --save %s --quiet --threads 1", cfg, ck);
    cli_run r = run_cli(args);
    assert_ok(&r, args);
    run_free(&r);
    size_t len = 0;
    char *p = tn_read(ck, &len);
    ck_assert_ptr_nonnull(p);
    p[len / 2] ^= 0x5A;
    tn_write(ck, p, len);
    /* Resuming from it, and saving over it, fails before anything is written. */
    snprintf(args, sizeof args, "train %s --steps 2 --resume %s --save %s --quiet --threads 1", cfg, ck, ck);
    fails_with(args, ck, "checksum");
    size_t len2 = 0;
    char *q = tn_read(ck, &len2);
    ck_assert_uint_eq(len, len2);
    ck_assert_msg(memcmp(p, q, len) == 0, "a failed resume changed %s", ck);
    free(p);
    free(q);
    /* `test` refuses it too. */
    snprintf(args, sizeof args, "test %s --weights %s", cfg, ck);
    fails_with(args, ck, "checksum");
}
END_TEST

START_TEST(test_unwritable_outputs)
{
    char cfg[512], args[1024];
    write_cfg(cfg, sizeof cfg, "short.cfg", CLI_SHORT_NET);
    snprintf(args, sizeof args, "train %s --save /nonexistent/vdnn/x.ckpt --quiet --threads 1", cfg);
    fails_with(args, "/nonexistent/vdnn/x.ckpt", NULL);
    snprintf(args, sizeof args, "train %s --log /nonexistent/vdnn/x.jsonl --quiet --threads 1", cfg);
    fails_with(args, "--log", "/nonexistent/vdnn/x.jsonl");
}
END_TEST

/* A missing data set is named with where its path came from (--data, or [data] path
 * in the config, relative to the current folder) and what to do, before any profiling
 * or planning (dyn's profile cache stays empty); with several devices --data counts
 * too (the replicas are built from the config alone). */
START_TEST(test_missing_data)
{
    fails_with("train configs/lenet.cfg --data /nonexistent/vdnn --steps 1 --threads 1", "/nonexistent/vdnn",
               "comes from --data /nonexistent/vdnn");
    fails_with("test configs/lenet.cfg --data /nonexistent/vdnn --weights x.ckpt --threads 1", "/nonexistent/vdnn",
               "--data synthetic");
    fails_with("train configs/lenet.cfg --devices cpu,cpu --data /nonexistent/vdnn --steps 1 --threads 1",
               "/nonexistent/vdnn", "comes from --data");
    char cfg[512], cache[512], args[2048];
    write_cfg(cfg, sizeof cfg, "far.cfg", TN_NET TN_TRAIN "[data]\nset = mnist\npath = nowhere/mnist\n"
              TN_LAYERS);
    tn_path(cache, sizeof cache, "cache");
    snprintf(args, sizeof args, "train %s --policy dyn --budget 64M --profile-cache %s --steps 1 --threads 1", cfg,
             cache);
    cli_run r = run_cli(args);
    assert_fails(&r, args, "nowhere/mnist", "comes from [data] path = nowhere/mnist in");
    ck_assert_msg(strstr(r.err, "relative to") && strstr(r.err, "--data synthetic"), "%s", r.err);
    run_free(&r);
    ck_assert_msg(!tn_exists(cache), "the net was profiled before its data was found missing");
}
END_TEST

/* --data synthetic trains any config without its data set: eight batches of the net's
 * own input shape and classes to train on and one to test, on one device or several. */
START_TEST(test_synthetic_data)
{
    static const char *const cmds[] = {
        "train configs/resnet20.cfg --data synthetic --batch 8 --steps 2 --threads 1",
        "train configs/resnet20.cfg --data synthetic --batch 8 --steps 1 --threads 1 --devices cpu,cpu",
    };
    int count = UNDER_SANITIZER ? 1 : 2;
    if (UNDER_SANITIZER)
        printf("SKIPPED: test_synthetic_data on two devices under a sanitizer (make test runs it)\n");
    for (int k = 0; k < count; k++) {
        cli_run r = run_cli(cmds[k]);
        assert_ok(&r, cmds[k]);
        ck_assert_msg(strstr(r.out, "64 train / 8 test images") && strstr(r.out, "done: "), "`vdnn %s`:\n%s", cmds[k],
                      r.out);
        run_free(&r);
    }
}
END_TEST

/* ---- budgets and devices ---- */

START_TEST(test_budget_too_small)
{
    char cfg[512], args[1024];
    write_cfg(cfg, sizeof cfg, "net.cfg", CLI_NET);
    snprintf(args, sizeof args, "train %s --steps 2 --budget 1K --quiet", cfg);
    fails_with(args, "budget", NULL);
    /* Room for the parameters but not for an iteration. */
    snprintf(args, sizeof args, "train %s --steps 2 --budget 20K --quiet --threads 1", cfg);
    fails_with(args, "budget", NULL);
    snprintf(args, sizeof args, "test %s --weights x.ckpt --budget 1K", cfg);
    fails_with(args, "budget", NULL);
    snprintf(args, sizeof args, "train %s --steps 2 --budget 0 --quiet", cfg);
    cli_run r = run_cli(args);
    /* 0 may mean "large enough" or be refused, but never a crash (run_cli checks). */
    if (r.status != 0) assert_fails(&r, args, "budget", NULL);
    run_free(&r);
}
END_TEST

START_TEST(test_device_cuda)
{
    char cfg[512], args[1024];
    write_cfg(cfg, sizeof cfg, "net.cfg", CLI_NET);
    snprintf(args, sizeof args, "train %s --steps 1 --device cuda --quiet", cfg);
    cli_run r = run_cli(args);
    assert_fails(&r, args, "vdnn: ", NULL);
    ck_assert_msg(strstr(r.err, "cuda") || strstr(r.err, "CUDA"), "stderr:\n%s", r.err);
    run_free(&r);
}
END_TEST

START_TEST(test_device_unknown)
{
    char cfg[512], args[1024];
    write_cfg(cfg, sizeof cfg, "net.cfg", CLI_NET);
    snprintf(args, sizeof args, "train %s --steps 1 --device tpu", cfg);
    fails_with(args, "--device", "tpu");
    snprintf(args, sizeof args, "train %s --steps 1 --device cudax", cfg);
    fails_with(args, "--device", "cudax");
}
END_TEST

/* --devices: every entry parsed, none cut off, none empty. */
START_TEST(test_devices_strict)
{
    char cfg[512], args[8192];
    write_cfg(cfg, sizeof cfg, "net.cfg", CLI_NET);
    const char *empty[][2] = {{"cpu,,cpu", "entry 2 of 3"}, {",cpu", "entry 1 of 2"}, {"cpu,", "entry 2 of 2"}};
    for (int k = 0; k < 3; k++) {
        snprintf(args, sizeof args, "train %s --steps 1 --quiet --devices %s", cfg, empty[k][0]);
        fails_with(args, "--devices", empty[k][1]);
    }
    /* a bad 128th entry, past the 512 bytes the list was once cut to (the shell writes
     * the long lists: "cpu," COUNT times, then the last entry) */
    const char *many = "train %s --steps 1 --quiet --devices \"$(printf 'cpu,%%.0s' $(seq %d))%s\"";
    snprintf(args, sizeof args, many, cfg, 127, "cpu:x");
    fails_with(args, "'cpu:x' (entry 128 of 128)", NULL);
    /* 1000 devices are 1000 (not 128), refused for the batch before any is made */
    snprintf(args, sizeof args, many, cfg, 999, "cpu");
    fails_with(args, "1000 devices for a batch of 16", NULL);
    snprintf(args, sizeof args, many, cfg, DEVICE_LIST_MAX, "cpu");
    fails_with(args, "--devices", "more than 1024 devices");
    snprintf(args, sizeof args, "train %s --steps 1 --quiet --devices cpu:-1", cfg);
    fails_with(args, "--devices", "'cpu:-1'");
    snprintf(args, sizeof args, "train %s --steps 1 --quiet --device cpu:0", cfg);
    fails_with(args, "--device cpu:0", "--devices");
}
END_TEST

/* --devices cuda:0 where there is no GPU says what --device cuda says. */
START_TEST(test_devices_cuda_missing)
{
    if (device_cuda_count() > 0) {
        printf("SKIPPED: test_devices_cuda_missing: this machine has a GPU\n");
        return;
    }
    char cfg[512], args[1024];
    write_cfg(cfg, sizeof cfg, "net.cfg", CLI_NET);
    const char *why = device_cuda_built() ? "no CUDA GPU" : "without CUDA";
    snprintf(args, sizeof args, "train %s --steps 1 --quiet --device cuda", cfg);
    fails_with(args, why, NULL);
    snprintf(args, sizeof args, "train %s --steps 1 --quiet --devices cuda:0", cfg);
    cli_run r = run_cli(args);
    assert_fails(&r, args, why, NULL);
    ck_assert_msg(!strstr(r.err, "too small"), "stderr:\n%s", r.err);
    run_free(&r);
}
END_TEST

/* `vdnn devices` says which CPU convolution algorithms the build has: oneDNN's (its
 * version) or the project's own only. */
START_TEST(test_devices_cpu_algorithms)
{
    cli_run r = run_cli("devices");
    assert_ok(&r, "devices");
    ck_assert_msg(strstr(r.out, "vdnn: backends cpu") != NULL, "%s", r.out);
    if (onednn_built()) {
        char want[96], dnn[64];
        onednn_describe(dnn, sizeof dnn);
        snprintf(want, sizeof want, "cpu: convolution algorithms of the project's own and of %s", dnn);
        ck_assert_msg(strstr(r.out, want) != NULL, "%s", r.out);
    } else {
        ck_assert_msg(strstr(r.out, "cpu: convolution algorithms of the project's own only") != NULL, "%s", r.out);
    }
    run_free(&r);
}
END_TEST

/* The manager's --devices: the same grammar, and each device once. */
START_TEST(test_manager_devices)
{
    char sock[512], args[1024];
    tn_path(sock, sizeof sock, "m.sock");
    const char *bad[][2] = {{"cpu:0,cpu:0", "cpu:0 is given twice"}, {"cuda,cuda:0", "cuda:0 is given twice"},
                            {"cpu:0,,cpu:1", "entry 2 of 3 is empty"}, {"cpu", "cpu:N"}, {"gpu0", "'gpu0'"}};
    for (int k = 0; k < 5; k++) {
        snprintf(args, sizeof args, "manager --manager %s --quiet --devices %s", sock, bad[k][0]);
        /* a manager that took the list would serve until stopped */
        cli_run r = tn_vdnn(tn_dir, "timeout 10", args);
        assert_fails(&r, args, "--devices", bad[k][1]);
        run_free(&r);
    }
}
END_TEST

/* ---- the planner: profile, --plan, --policy dyn ---- */

/* A least budget `info --json` reports, at `path` ("min_budget_bytes.none.perf"). */
static size_t info_min_budget(const char *cfg, const char *path)
{
    char args[1024];
    snprintf(args, sizeof args, "info %s --json", cfg);
    cli_run r = run_cli(args);
    assert_ok(&r, args);
    json_t *info = tj_parse(r.out, args);
    size_t v = (size_t)tj_int(info, path);
    json_decref(info);
    run_free(&r);
    return v;
}

START_TEST(test_profile_plan_and_train)
{
    char cfg[512], plan_file[512], cache[512], args[2048];
    write_cfg(cfg, sizeof cfg, "net.cfg", CLI_NET);
    tn_path(cache, sizeof cache, "cache");
    tn_path(plan_file, sizeof plan_file, "net.plan");
    snprintf(args, sizeof args, "profile %s --budget 1M --threads 1 --save-plan %s --profile-cache %s", cfg, plan_file, cache);
    cli_run r = run_cli(args);
    assert_ok(&r, args);
    ck_assert_msg(strstr(r.out, "predicted") && strstr(r.out, "conv1") && strstr(r.out, "peak"),
                  "profile output lacks the plan:\n%s", r.out);
    ck_assert_msg(strstr(r.out, "profile measured"), "the first profile is measured:\n%s", r.out);
    run_free(&r);
    ck_assert(tn_exists(plan_file));
    /* the second time the profile comes from the cache; JSON is one object */
    snprintf(args, sizeof args, "profile %s --budget 1M --threads 1 --json --profile-cache %s", cfg, cache);
    r = run_cli(args);
    assert_ok(&r, args);
    ck_assert_msg(!strstr(r.out, "profile measured"), "JSON only on stdout:\n%s", r.out);
    json_t *plan = tj_parse(r.out, args);
    ck_assert_msg(tj_num(plan, "predicted_ms") > 0 && tj_int(plan, "peak_bytes") > 0, "%s", r.out);
    ck_assert_int_eq(json_array_size(tj_get(plan, "layers")), 5);
    ck_assert_str_eq(tj_str(plan, "layers.0.name"), "conv1");
    ck_assert_str_eq(tj_str(plan, "layers.0.inputs.0"), "data");
    ck_assert(json_is_number(tj_get(plan, "layers.0.fwd_ms")));
    ck_assert(json_is_string(tj_get(plan, "layers.0.algo.fwd")));
    ck_assert(json_is_boolean(tj_get(plan, "data.offload")) || json_is_null(tj_get(plan, "data.offload")));
    /* how the plan was found: the search's stop and the sizes the micro-batch choice
     * weighed, the whole batch first */
    const char *stop = tj_str(plan, "planning.stop");
    ck_assert_msg(!strcmp(stop, "complete") || !strcmp(stop, "gap") || !strcmp(stop, "time") ||
                      !strcmp(stop, "stalled") || !strcmp(stop, "nodes"),
                  "stop '%s'", stop);
    ck_assert_int_gt(tj_int(plan, "planning.simulations"), 0);
    ck_assert(tj_get(plan, "planning.profile_cached") == json_true());
    ck_assert_int_eq(tj_int(plan, "planning.sizes_weighed.0.items"), 16);
    ck_assert_str_eq(tj_str(plan, "planning.sizes_weighed.0.outcome"), "plan");
    ck_assert_int_eq(tj_int(plan, "micro_batch"), 0);
    json_decref(plan);
    run_free(&r);
    /* a budget below every plan of the whole batch: it is not searched, and the split
     * chosen is one the choice weighed and planned */
    snprintf(args, sizeof args, "info %s --json", cfg);
    r = run_cli(args);
    assert_ok(&r, args);
    json_t *info = tj_parse(r.out, args);
    const long long split_least = tj_int(info, "micro_batch_min_budget_bytes.1");
    json_decref(info);
    run_free(&r);
    snprintf(args, sizeof args, "profile %s --budget %lld --threads 1 --json --profile-cache %s", cfg, split_least, cache);
    r = run_cli(args);
    assert_ok(&r, args);
    plan = tj_parse(r.out, args);
    const long long micro = tj_int(plan, "micro_batch");
    ck_assert_msg(micro >= 1 && micro < 16, "%s", r.out);
    ck_assert_str_eq(tj_str(plan, "planning.sizes_weighed.0.outcome"), "none fits");
    ck_assert(json_is_null(tj_get(plan, "planning.sizes_weighed.0.ms")));
    ck_assert_int_gt(tj_int(plan, "planning.whole_batch_least_bytes"), split_least);
    int chosen = 0;
    json_t *sizes = tj_get(plan, "planning.sizes_weighed");
    for (size_t k = 0; k < json_array_size(sizes); k++) {
        json_t *e = json_array_get(sizes, k);
        chosen |= json_integer_value(json_object_get(e, "items")) == micro &&
                  !strcmp(json_string_value(json_object_get(e, "outcome")), "plan") &&
                  json_number_value(json_object_get(e, "ms")) > 0;
    }
    ck_assert_msg(chosen, "micro-batches of %lld chosen, not among the sizes weighed:\n%s", micro, r.out);
    json_decref(plan);
    run_free(&r);
    snprintf(args, sizeof args, "train %s --steps 2 --plan %s --quiet --threads 1", cfg, plan_file);
    r = run_cli(args);
    assert_ok(&r, args);
    run_free(&r);
    char log[512];
    tn_path(log, sizeof log, "dyn.jsonl");
    snprintf(args, sizeof args, "train %s --steps 2 --policy dyn --budget 1M --threads 1 --log %s", cfg, log);
    r = run_cli(args);
    assert_ok(&r, args);
    ck_assert_msg(strstr(r.out, "chosen plan:") && strstr(r.out, "measured"), "dyn prints its choice:\n%s", r.out);
    run_free(&r);
    /* the log's first line says how dyn's plan was found, as profile --json does */
    json_t *lines = tj_lines(log);
    json_t *first = json_array_get(lines, 0);
    ck_assert(tj_num(first, "plan_s") >= 0 && tj_num(first, "predicted_step_ms") > 0);
    ck_assert_int_gt(tj_int(first, "planning.simulations"), 0);
    ck_assert_int_eq(tj_int(first, "planning.sizes_weighed.0.items"), 16);
    ck_assert(json_is_string(tj_get(first, "planning.stop")));
    json_decref(lines);
}
END_TEST

/* `path`'s plan written to `out` with every layer's swap column (the third of a layer
 * line) set to `swap` where the layer has parameters (conv*, fc*), else 0. */
static void plan_with_swaps(const char *path, const char *out, int swap)
{
    char *text = tn_read(path, NULL);
    ck_assert(text != NULL);
    FILE *f = fopen(out, "w");
    ck_assert(f != NULL);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char name[64], map[16], rest[256];
        int was = 0;
        if (line[0] != '#' && sscanf(line, "%63s %15s %d %255[^\n]", name, map, &was, rest) == 4) {
            int params = !strncmp(name, "conv", 4) || !strncmp(name, "fc", 2);
            fprintf(f, "%s %s %d %s\n", name, map, params ? swap : 0, rest);
        } else {
            fprintf(f, "%s\n", line);
        }
    }
    fclose(f);
    free(text);
}

/* `train --plan` places the parameters as the plan says when it attaches the net: a
 * plan that swaps layers trains (train placed every parameter on the device first and
 * then refused the plan), and so does a plan that swaps none under a config whose own
 * policy swaps every layer. The plan comes from `vdnn profile --save-plan`, trained
 * with the flags its hint names. */
START_TEST(test_train_plan_places_the_parameters)
{
    char cfg[512], swap_cfg[512], plan_file[512], edited[512], args[2048];
    write_cfg(cfg, sizeof cfg, "net.cfg", CLI_NET);
    write_cfg(swap_cfg, sizeof swap_cfg, "swap.cfg", TN_HEAD "[memory]\npolicy = swap\n" TN_LAYERS);
    tn_path(plan_file, sizeof plan_file, "net.plan");
    tn_path(edited, sizeof edited, "edited.plan");
    snprintf(args, sizeof args, "profile %s --budget 1M --threads 1 --save-plan %s", cfg, plan_file);
    cli_run r = run_cli(args);
    assert_ok(&r, args);
    const char *hint = strstr(r.out, "(train with --plan ");
    ck_assert_msg(hint != NULL, "no hint:\n%s", r.out);
    char flags[256] = "";
    sscanf(hint + strlen("(train with --plan ") + strlen(plan_file), "%255[^)]", flags);
    run_free(&r);
    const char *cfgs[2] = {cfg, swap_cfg};
    for (int k = 0; k < 2; k++) {
        plan_with_swaps(plan_file, edited, k == 0);
        snprintf(args, sizeof args, "train %s --steps 2 --plan %s%s --threads 1 --no-save", cfgs[k], edited, flags);
        r = run_cli(args);
        assert_ok(&r, args);
        run_free(&r);
    }
}
END_TEST

/* A plan is for one batch and split: the hint `vdnn profile --save-plan` prints names
 * them (the plan's micro-batches: at the least budget any plan fits, this net's plan
 * splits its batch; --batch where profile was given one), and `train --plan` builds the
 * net for them when no flag says otherwise. */
START_TEST(test_save_plan_hint_names_the_split)
{
    char cfg[512], plan_file[512], args[2048];
    write_cfg(cfg, sizeof cfg, "net.cfg", CLI_NET);
    tn_path(plan_file, sizeof plan_file, "net.plan");
    const size_t least = info_min_budget(cfg, "micro_batch_min_budget_bytes.1");
    snprintf(args, sizeof args, "profile %s --budget %zu --batch 16 --threads 1 --save-plan %s", cfg, least, plan_file);
    cli_run r = run_cli(args);
    assert_ok(&r, args);
    const char *hint = strstr(r.out, "(train with --plan ");
    ck_assert_msg(hint && strstr(hint, " --batch 16 --micro-batch 1)"), "the hint lacks the split:\n%s", r.out);
    run_free(&r);
    snprintf(args, sizeof args, "train %s --steps 1 --plan %s --batch 16 --micro-batch 1 --budget %zu --threads 1 --no-save",
             cfg, plan_file, least);
    r = run_cli(args);
    assert_ok(&r, args);
    run_free(&r);
    snprintf(args, sizeof args, "train %s --steps 1 --plan %s --budget %zu --threads 1 --no-save", cfg, plan_file, least);
    r = run_cli(args);
    assert_ok(&r, args);
    ck_assert_msg(strstr(r.out, "batch 16 in micro-batches of 1,"), "not the plan's split:\n%s", r.out);
    run_free(&r);
    /* a flag that differs from the plan is still refused, naming the plan's */
    snprintf(args, sizeof args, "train %s --steps 1 --plan %s --micro-batch 2 --budget %zu --threads 1 --no-save", cfg,
             plan_file, least);
    fails_with(args, "net.plan:", "--micro-batch 1");
}
END_TEST

/* Every time *k times as long (a profile measured on a loaded machine). */
static void scale_times(profile *p, const void *k)
{
    const double f = *(const double *)k;
    for (int i = 0; i < p->nlayers; i++) {
        layer_cost *c = &p->layers[i];
        for (int a = 0; a < PLAN_MAX_ALGOS; a++) {
            if (c->fwd_s[a] < 1e29) c->fwd_s[a] *= f;
            if (c->bwd_data_s[a] < 1e29) c->bwd_data_s[a] *= f;
            if (c->bwd_filter_s[a] < 1e29) c->bwd_filter_s[a] *= f;
        }
        c->update_s *= f;
        c->accum_s *= f;
    }
}

/* Each profile in `dir` rewritten with every time `k` times as long; returns how many. */
static int scale_profiles(const char *dir, double k) { return tn_rewrite_profiles(dir, scale_times, &k); }

/* Fashion-MNIST's net at batch 8, on synthetic data. */
#define FMNIST_NET                                                                                        \
    "[net]\nbatch = 8\nchannels = 1\nheight = 28\nwidth = 28\n" TN_TRAIN                                  \
    "[data]\nset = synthetic\ntrain_size = 16\ntest_size = 8\nclasses = 10\n"                             \
    "[convolutional]\nfilters = 32\nsize = 3\npad = 1\n[relu]\n[convolutional]\nfilters = 32\nsize = 3\n" \
    "pad = 1\n[relu]\n[maxpool]\nsize = 2\n[convolutional]\nfilters = 64\nsize = 3\npad = 1\n[relu]\n"    \
    "[convolutional]\nfilters = 64\nsize = 3\npad = 1\n[relu]\n[maxpool]\nsize = 2\n"                     \
    "[connected]\noutput = 256\n[relu]\n[dropout]\nprobability = 0.5\n[connected]\noutput = 10\n[softmax]\n"

/* What favour_algos makes fastest: want[layer][pass] of net n. */
typedef struct favoured {
    const net *n;
    int (*want)[PASS_COUNT];
} favoured;

/* The fastest algorithm of every pass made the favoured one. */
static void favour_algos(profile *p, const void *arg)
{
    const favoured *f = arg;
    for (int i = 0; i < p->nlayers; i++)
        for (int q = 0; q < PASS_COUNT; q++) {
            double *t = q == PASS_FWD ? p->layers[i].fwd_s : q == PASS_BWD_DATA ? p->layers[i].bwd_data_s
                                                                                : p->layers[i].bwd_filter_s;
            const int count = layer_algo_count(f->n->layers[i], q);
            for (int a = 0; a < count && count > 1; a++) t[a] = a == f->want[i][q] ? 1e-4 : 1e-3;
        }
}

/* With no budget, a CPU device is as large as the plan it runs needs. It is sized before
 * a profile says which algorithms are fastest, for the largest-workspace ones; another
 * mix of workspaces can pack the pool worse (on an AVX-512 machine, Fashion-MNIST's net
 * under `all` at batch 8 with oneDNN's direct forward in its first layer and Winograd
 * elsewhere needed 30.3 MiB of a default 26.2). A profile is written that makes such a
 * mix the fastest (from the largest workspaces, three passes moved to the algorithms that
 * raise the need most), and training without a budget runs on a device made as large as
 * that plan needs. */
START_TEST(test_default_budget_fits_measured_algorithms)
{
    if (UNDER_SANITIZER) {
        printf("SKIPPED: test_default_budget_fits_measured_algorithms (its profile takes minutes under a sanitizer)\n");
        return;
    }
    const int saved = omp_get_max_threads();
    omp_set_num_threads(2);   /* the runs below: --threads 2, oneDNN's workspaces as for two threads */
    net *n = tn_parse(FMNIST_NET, NULL);
    n->policy = POLICY_ALL;
    const size_t bound = net_train_bytes_bound(n);   /* as tools/cli.c's default budget takes it */
    net_plan_static(n, POLICY_ALL, ALGO_PERF);
    size_t need = 0;
    ck_assert(net_fit_budget(n, 0, &need) == VDNN_OK);
    const size_t dflt = pool_round((need > bound ? need : bound) + (need > bound ? need : bound) / 8);
    /* from the largest workspaces, three times the one pass's algorithm that raises the
     * need most */
    size_t most = need;
    for (int round = 0; round < 3; round++) {
        int li = -1, pass = -1, algo = -1;
        for (int i = 0; i < n->nlayers; i++)
            for (int q = 0; q < PASS_COUNT; q++)
                for (int a = 0; a < layer_algo_count(n->layers[i], q) && layer_algo_count(n->layers[i], q) > 1; a++) {
                    const int was = n->layers[i]->algo[q];
                    n->layers[i]->algo[q] = a;
                    size_t m = 0;
                    ck_assert(net_fit_budget(n, 0, &m) == VDNN_OK);
                    if (m > most) most = m, li = i, pass = q, algo = a;
                    n->layers[i]->algo[q] = was;
                }
        if (li >= 0) n->layers[li]->algo[pass] = algo;
    }
    if (most <= dflt) {
        printf("SKIPPED: test_default_budget_fits_measured_algorithms: no mix of this machine's algorithms found "
               "that needs more than the default budget\n");
        net_free(n);
        omp_set_num_threads(saved);
        return;
    }
    int (*want)[PASS_COUNT] = calloc((size_t)n->nlayers, sizeof *want);
    ck_assert_ptr_nonnull(want);
    for (int i = 0; i < n->nlayers; i++) memcpy(want[i], n->layers[i]->algo, sizeof want[i]);
    char cfg[512], cache[512], args[2048];
    write_cfg(cfg, sizeof cfg, "fmnist.cfg", FMNIST_NET);
    tn_path(cache, sizeof cache, "cache");
    snprintf(args, sizeof args, "profile %s --budget 1G --threads 2 --link-gbps 0.1 --profile-cache %s", cfg, cache);
    cli_run r = run_cli(args);
    assert_ok(&r, args);
    run_free(&r);
    const favoured fav = {n, want};
    ck_assert_int_ge(tn_rewrite_profiles(cache, favour_algos, &fav), 1);
    free(want);
    snprintf(args, sizeof args, "train %s --policy all --steps 1 --threads 2 --link-gbps 0.1 --no-save --profile-cache %s",
             cfg, cache);
    r = run_cli(args);
    assert_ok(&r, args);
    const char *b = strstr(r.out, ", budget ");
    ck_assert_msg(b != NULL, "%s", r.out);
    double mib = strtod(b + strlen(", budget "), NULL);
    ck_assert_msg(mib * 1048576.0 >= (double)most, "a budget of %.2f MiB for a plan that needs %zu bytes:\n%s", mib,
                  most, r.out);
    run_free(&r);
    net_free(n);
    omp_set_num_threads(saved);
}
END_TEST

/* Measuring a profile says what it measures, how far it is and about how long is left,
 * on one line redrawn (as on a terminal: VDNN_PROGRESS_BAR=1) and cleared at the end. */
START_TEST(test_profile_progress)
{
    if (UNDER_SANITIZER) {
        printf("SKIPPED: test_profile_progress (a profile of seconds is minutes under a sanitizer)\n");
        return;
    }
    char cache[512], args[2048];
    tn_path(cache, sizeof cache, "cache");
    snprintf(args, sizeof args, "profile configs/lenet.cfg --batch 256 --budget 400M --threads 1 --profile-cache %s",
             cache);
    tn_run r = tn_vdnn(tn_dir, "VDNN_PROGRESS_BAR=1", args);
    tn_run_ok(&r, args);
    ck_assert_msg(strstr(r.err, "\rvdnn: profiling ") && strstr(r.err, " of 10), ") && strstr(r.err, " s so far") &&
                  strstr(r.err, "\r\033[K"), "no progress while profiling (stderr):\n%s", r.err);
    tn_run_free(&r);
    /* read from the cache: nothing to show */
    r = tn_vdnn(tn_dir, "VDNN_PROGRESS_BAR=1", args);
    tn_run_ok(&r, args);
    ck_assert_msg(!strstr(r.err, "profiling"), "%s", r.err);
    tn_run_free(&r);
}
END_TEST

/* Profiles say when and under what load they were measured, --reprofile measures them
 * again, and a run whose steps miss the plan's prediction by more than a quarter says
 * so, with the likely cause and the fix. */
START_TEST(test_profile_age_and_prediction)
{
    char cfg[512], cache[512], args[2048];
    write_cfg(cfg, sizeof cfg, "net.cfg", CLI_NET);
    tn_path(cache, sizeof cache, "cache");
    snprintf(args, sizeof args, "profile %s --budget 1M --threads 1 --profile-cache %s", cfg, cache);
    cli_run r = run_cli(args);
    assert_ok(&r, args);
    ck_assert_msg(strstr(r.out, "profile measured"), "%s", r.out);
    run_free(&r);
    r = run_cli(args);
    assert_ok(&r, args);
    ck_assert_msg(strstr(r.out, "profile cached") && strstr(r.out, "the cached profile was measured 2") &&
                  strstr(r.out, " on ") && strstr(r.out, "--reprofile"), "the cached profile's age:\n%s", r.out);
    run_free(&r);
    snprintf(args, sizeof args, "profile %s --budget 1M --threads 1 --profile-cache %s --reprofile", cfg, cache);
    r = run_cli(args);
    assert_ok(&r, args);
    ck_assert_msg(strstr(r.out, "profile measured"), "--reprofile measures again:\n%s", r.out);
    run_free(&r);
    /* a profile that says every pass takes a thousand times as long as it does */
    ck_assert_int_ge(scale_profiles(cache, 1000), 1);
    snprintf(args, sizeof args, "train %s --steps 8 --threads 1 --no-save --profile-cache %s", cfg, cache);
    r = run_cli(args);
    assert_ok(&r, args);
    ck_assert_msg(strstr(r.out, "vdnn: warning: steps take") && strstr(r.out, "faster than the plan's prediction") &&
                  strstr(r.out, "the profile ") && strstr(r.out, "--reprofile measures it again"),
                  "no warning for a prediction 1000 times too slow:\n%s", r.out);
    run_free(&r);
    /* measured again, the prediction holds (or the steps are too short to check) */
    snprintf(args, sizeof args, "train %s --steps 8 --threads 1 --no-save --profile-cache %s --reprofile", cfg, cache);
    r = run_cli(args);
    assert_ok(&r, args);
    ck_assert_msg(!strstr(r.out, "faster than the plan's prediction"), "a fresh profile still warns:\n%s", r.out);
    run_free(&r);
}
END_TEST

/* Planning runs nothing of the net: `vdnn profile` (without --verify) and `vdnn sweep
 * --simulate` make their device of what they place on it (the parameters, placed for
 * planning), not of what training the net unplanned needs. A net of 400 alike
 * convolutions of 2x16x256x256 maps needs 3.2 GiB unplanned (an arena of 3.6 GiB by
 * default on the CPU) and about a tenth of a GiB to measure its profile in (one
 * convolution's maps and workspace); under an address-space limit of what the libraries
 * map plus 1.5 GiB, training it unplanned cannot even make its device, and it is
 * planned all the same. */
START_TEST(test_planning_needs_no_room_for_the_unplanned_net)
{
    if (UNDER_SANITIZER) {
        printf("SKIPPED: test_planning_needs_no_room_for_the_unplanned_net under a sanitizer (its shadow memory "
               "reserves terabytes of address space)\n");
        return;
    }
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    len += (size_t)snprintf(text + len, cap - len,
                            "[net]\nbatch = 2\nchannels = 3\nheight = 256\nwidth = 256\n"
                            "[train]\nepochs = 1\nlearning_rate = 0.01\n"
                            "[data]\nset = synthetic\ntrain_size = 8\ntest_size = 4\nclasses = 4\n");
    for (int i = 0; i < 400; i++)
        len += (size_t)snprintf(text + len, cap - len, "[convolutional]\nfilters = 16\nsize = 3\npad = 1\n");
    len += (size_t)snprintf(text + len, cap - len, "[avgpool]\nglobal = 1\n[connected]\noutput = 4\n[softmax]\n");
    ck_assert(len < cap);
    char cfg[512], cache[512], out[512], limit[64], args[2048];
    write_cfg(cfg, sizeof cfg, "deep.cfg", text);
    free(text);
    tn_path(cache, sizeof cache, "cache");
    tn_path(out, sizeof out, "sweep");
    snprintf(limit, sizeof limit, "ulimit -v %llu;", (tn_mapped_bytes() + (3ull << 29)) >> 10);
    snprintf(args, sizeof args, "train %s --steps 1 --threads 1 --no-save", cfg);
    cli_run r = tn_vdnn(tn_dir, limit, args);
    assert_fails(&r, args, "arena", "could not be reserved");
    run_free(&r);
    snprintf(args, sizeof args, "profile %s --budget 200M --threads 1 --profile-cache %s", cfg, cache);
    r = tn_vdnn(tn_dir, limit, args);
    assert_ok(&r, args);
    ck_assert_msg(strstr(r.out, "profile measured") && strstr(r.out, "predicted:"), "%s", r.out);
    run_free(&r);
    snprintf(args, sizeof args, "sweep %s --budgets 200M --policies dyn,all --simulate --threads 1 --profile-cache %s "
                                "--out %s",
             cfg, cache, out);
    r = tn_vdnn(tn_dir, limit, args);
    assert_ok(&r, args);
    ck_assert_msg(strstr(r.out, "wrote") && strstr(r.out, "(2 rows)"), "%s", r.out);
    run_free(&r);
}
END_TEST

START_TEST(test_plan_errors)
{
    char cfg[512], other[512], plan_file[512], args[2048];
    write_cfg(cfg, sizeof cfg, "net.cfg", CLI_NET);
    write_cfg(other, sizeof other, "other.cfg", TN_HEAD "[convolutional]\nfilters = 4\nsize = 3\n[relu]\n"
                                                       "[connected]\noutput = 4\n[softmax]\n");
    tn_path(plan_file, sizeof plan_file, "net.plan");
    snprintf(args, sizeof args, "profile %s --budget 1M --threads 1 --save-plan %s", cfg, plan_file);
    cli_run r = run_cli(args);
    assert_ok(&r, args);
    const char *at = strstr(r.out, "\npredicted: ");
    at = at ? strstr(at, ", peak ") : NULL;
    at = at ? strstr(at, " (") : NULL;
    ck_assert_msg(at != NULL, "no peak:\n%s", r.out);
    const size_t peak = strtoull(at + 2, NULL, 10);
    run_free(&r);
    /* a plan of another net names the file and line of the mismatch */
    snprintf(args, sizeof args, "train %s --steps 1 --plan %s --quiet", other, plan_file);
    fails_with(args, "net.plan:", "layers");
    snprintf(args, sizeof args, "train %s --steps 1 --plan %s --batch 8 --quiet", cfg, plan_file);
    fails_with(args, "net.plan:", "batch");
    snprintf(args, sizeof args, "train %s --steps 1 --plan /nonexistent/x.plan --quiet", cfg);
    fails_with(args, "x.plan", NULL);
    /* a header whose split no net can take is not adopted: the plan is refused, named */
    char *text = tn_read(plan_file, NULL), edited[512];
    ck_assert(text && strstr(text, "\nbatch 16\nmicro_batch 0\n"));
    const char *heads[2][2] = {{"batch 16\nmicro_batch 99\n", "micro-batches of 99"},
                               {"batch 1000000\nmicro_batch 0\n", "batch 1000000"}};
    for (int k = 0; k < 2; k++) {
        char *at = strstr(text, "\nbatch 16\nmicro_batch 0\n") + 1, body[8192];
        snprintf(body, sizeof body, "%.*s%s%s", (int)(at - text), text, heads[k][0],
                 at + strlen("batch 16\nmicro_batch 0\n"));
        tn_path(edited, sizeof edited, "edited.plan");
        tn_write_text(edited, body);
        snprintf(args, sizeof args, "train %s --steps 1 --plan %s --quiet", cfg, edited);
        fails_with(args, "edited.plan:", heads[k][1]);
    }
    free(text);
    /* a plan that needs more than the budget is refused with both numbers */
    ck_assert(peak > 4096);
    snprintf(args, sizeof args, "train %s --steps 1 --plan %s --budget %zu --quiet", cfg, plan_file, peak - POOL_ALIGN);
    fails_with(args, "net.plan", "budget");
    /* flags */
    snprintf(args, sizeof args, "profile %s", cfg);
    fails_with(args, "--budget", NULL);
    snprintf(args, sizeof args, "profile %s --budget 1M --search genetic", cfg);
    fails_with(args, "--search", "genetic");
    snprintf(args, sizeof args, "train %s --policy fastest --quiet", cfg);
    fails_with(args, "--policy", "dyn");
    snprintf(args, sizeof args, "profile %s --budget 2K --threads 1", cfg);
    fails_with(args, "budget", NULL);
}
END_TEST

/* ---- beyond vDNN: swap, recompute, micro-batches ---- */

START_TEST(test_swap_recompute_micro)
{
    char cfg[512], cache[512], args[2048];
    write_cfg(cfg, sizeof cfg, "net.cfg", CLI_NET);
    tn_path(cache, sizeof cache, "cache");
    static const char *const ok[] = {"--policy swap", "--policy recompute", "--micro-batch 4",
                                     "--micro-batch 3 --policy swap"};
    for (int k = 0; k < 4; k++) {
        snprintf(args, sizeof args, "train %s --steps 2 --quiet --threads 1 %s", cfg, ok[k]);
        cli_run r = run_cli(args);
        assert_ok(&r, args);
        run_free(&r);
    }
    snprintf(args, sizeof args, "train %s --steps 1 --micro-batch 64 --quiet", cfg);
    fails_with(args, "micro_batch 64", "batch 16");
    /* info reports the new minimums */
    snprintf(args, sizeof args, "info %s", cfg);
    cli_run r = run_cli(args);
    assert_ok(&r, args);
    ck_assert_msg(strstr(r.out, "swap") && strstr(r.out, "recompute") && strstr(r.out, "micro-batches"), "%s", r.out);
    run_free(&r);
    /* below every whole-batch plan, dyn splits the batch */
    size_t whole = info_min_budget(cfg, "min_budget_bytes.none.perf");
    size_t half = info_min_budget(cfg, "micro_batch_min_budget_bytes.8");
    ck_assert_msg(half < whole / 2, "micro-batches of 8 need %zu bytes, the whole batch %zu", half, whole);
    snprintf(args, sizeof args, "train %s --steps 2 --policy dyn --budget %zu --threads 1 --profile-cache %s", cfg,
             pool_round(half + 2048), cache);
    r = run_cli(args);
    assert_ok(&r, args);
    ck_assert_msg(strstr(r.out, "micro-batches of"), "dyn in a budget only micro-batches fit:\n%s", r.out);
    run_free(&r);
}
END_TEST

static Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *bad = tcase_create("bad_input");
    tcase_add_checked_fixture(bad, tn_dir_setup, tn_dir_teardown);
    tcase_set_timeout(bad, 60);
    tcase_add_test(bad, test_no_args);
    tcase_add_test(bad, test_help);
    tcase_add_test(bad, test_subcommand_help);
    tcase_add_test(bad, test_help_every_flag);
    tcase_add_test(bad, test_unknown_command);
    tcase_add_test(bad, test_unknown_flag);
    tcase_add_test(bad, test_bad_flag_values);
    tcase_add_test(bad, test_missing_config);
    tcase_add_test(bad, test_bad_config);
    suite_add_tcase(s, bad);

    TCase *info = tcase_create("info");
    tcase_add_checked_fixture(info, tn_dir_setup, tn_dir_teardown);
    tcase_set_timeout(info, 60);
    tcase_add_test(info, test_info_text);
    tcase_add_test(info, test_info_device);
    tcase_add_test(info, test_info_json);
    tcase_add_test(info, test_info_vgg16_batch);
    tcase_add_test(info, test_info_all_configs);
    tcase_add_test(info, test_info_json_escapes_path);
    suite_add_tcase(s, info);

    TCase *train = tcase_create("train");
    tcase_add_checked_fixture(train, tn_dir_setup, tn_dir_teardown);
    tcase_set_timeout(train, 60);
    tcase_add_test(train, test_train_quiet_log);
    tcase_add_test(train, test_train_epoch_line);
    tcase_add_test(train, test_test_command);
    tcase_add_test(train, test_test_needs_weights);
    tcase_add_test(train, test_default_save);
    tcase_add_test(train, test_init_fine_tune);
    tcase_add_test(train, test_resume_progress);
    tcase_add_test(train, test_resume_exact);
    tcase_add_test(train, test_resume_corrupt);
    tcase_add_test(train, test_unwritable_outputs);
    tcase_add_test(train, test_missing_data);
    tcase_add_test(train, test_synthetic_data);
    suite_add_tcase(s, train);

    TCase *dev = tcase_create("devices");
    tcase_add_checked_fixture(dev, tn_dir_setup, tn_dir_teardown);
    tcase_set_timeout(dev, 60);
    tcase_add_test(dev, test_budget_too_small);
    tcase_add_test(dev, test_device_cuda);
    tcase_add_test(dev, test_device_unknown);
    tcase_add_test(dev, test_devices_strict);
    tcase_add_test(dev, test_devices_cuda_missing);
    tcase_add_test(dev, test_devices_cpu_algorithms);
    tcase_add_test(dev, test_manager_devices);
    tcase_add_test(dev, test_profile_plan_and_train);
    tcase_add_test(dev, test_train_plan_places_the_parameters);
    tcase_add_test(dev, test_save_plan_hint_names_the_split);
    tcase_add_test(dev, test_profile_age_and_prediction);
    tcase_add_test(dev, test_default_budget_fits_measured_algorithms);
    tcase_add_test(dev, test_profile_progress);
    tcase_add_test(dev, test_plan_errors);
    tcase_add_test(dev, test_planning_needs_no_room_for_the_unplanned_net);
    tcase_add_test(dev, test_swap_recompute_micro);
    suite_add_tcase(s, dev);
    return s;
}

int main(void) { return tn_run_suite(cli_suite()); }
