/* The vdnn command-line program: the usage and the subcommands' dispatch (one file per
 * group of subcommands: train_cmd.c, info.c, data_cmd.c, plan_cmd.c, sweep.c,
 * manager_cmd.c, onnx_cmd.c). */
#include <stdio.h>
#include <string.h>

#include "tools/commands.h"
#include "vdnn/onednn.h"

#ifdef VDNN_ONNX
#include <protobuf-c/protobuf-c.h>
#endif

static const char usage[] =
    "usage: vdnn COMMAND ...\n"
    "  train CFG [--device auto|cpu|cuda[:N]] [--math fp32|tf32] [--nondeterministic]\n"
    "            [--budget SIZE] [--policy none|all|conv|swap|recompute|dyn]\n"
    "            [--algo perf|mem] [--in-place on|off] [--micro-batch N] [--plan FILE]\n"
    "            [--search bb|vdnn] [--profile-cache DIR] [--node-limit N] [--search-seconds S]\n"
    "            [--search-gap X] [--link-gbps X] [--sync-layers] [--trace FILE] [--data PATH]\n"
    "            [--epochs N] [--steps N] [--batch N] [--lr X] [--seed N] [--threads N] [--workers N]\n"
    "            [--save FILE] [--no-save] [--resume FILE | --init FILE] [--log FILE] [--quiet]\n"
    "            [--devices LIST] [--shares equal|auto|LIST] [--share-every K] [--bucket SIZE]\n"
    "            [--rank-timeout S] [--share-schedule FILE] [--managed [--manager PATH]]\n"
    "  test CFG [--weights FILE] [--data PATH] [--batch N] [--device D] [--threads N] [--workers N]\n"
    "           [--log FILE]\n"
    "  info CFG [--batch N] [--json] [--device D] [--threads N] [--link-gbps X]\n"
    "  data CFG [--data PATH] [--split train|test] [--batches N] [--batch N] [--workers N]\n"
    "           [--seed N] [--strict]    the data loader alone: its speed, unreadable files\n"
    "  profile CFG --budget SIZE [--json] [--search bb|vdnn] [--save-plan FILE] [--verify N]\n"
    "            [--link-gbps X] [--threads N] [--batch N] [--profile-cache DIR] [--node-limit N]\n"
    "            [--search-seconds S] [--search-gap X]\n"
    "  sweep CFG --budgets LIST --policies LIST [--out DIR] [--simulate] [--iters N]\n"
    "            [--link-gbps X] [--threads N] [--batch N] [--device D] [--profile-cache DIR]\n"
    "            [--node-limit N] [--search-seconds S] [--search-gap X]\n"
    "  manager [--log FILE] [--period S] [--sd-gap X] [--util-gap X] [--units N] [--devices LIST]\n"
    "          [--observe] [--until-idle] [--manager PATH]    share devices fairly among jobs\n"
    "  manager --status [--json] | --plot LOG [--out DIR]\n"
    "  import MODEL.onnx --cfg NET.cfg --weights NET.ckpt [--batch N]   an ONNX CNN as a config and weights\n"
    "  export CFG --weights CKPT -o MODEL.onnx [--test-data DIR] [--batch N]   the net as an ONNX inference graph\n"
    "  onnx-test DIR... [--device D] [--threads N] [--verbose]   ONNX's test layout: PASS, FAIL or UNSUPPORTED\n"
    "  devices   (or --version) the backends built and the GPUs visible\n"
    "test, info, profile and sweep take --device, --math and --nondeterministic as train does,\n"
    "and info, profile and sweep --in-place.\n"
    "See docs/cli.md.\n";

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    cli_quit_on_signal(argv[1], NULL);
    if (!strcmp(argv[1], "train")) return cmd_train(argc, argv);
    if (!strcmp(argv[1], "test")) return cmd_test(argc, argv);
    if (!strcmp(argv[1], "info")) return cmd_info(argc, argv);
    if (!strcmp(argv[1], "data")) return cmd_data(argc, argv);
    if (!strcmp(argv[1], "profile")) return cmd_profile(argc, argv);
    if (!strcmp(argv[1], "sweep")) return cmd_sweep(argc, argv);
    if (!strcmp(argv[1], "manager")) return cmd_manager(argc, argv);
    if (!strcmp(argv[1], "import")) return cmd_import(argc, argv);
    if (!strcmp(argv[1], "export")) return cmd_export(argc, argv);
    if (!strcmp(argv[1], "onnx-test")) return cmd_onnx_test(argc, argv);
    if (!strcmp(argv[1], "devices") || !strcmp(argv[1], "--version")) {
        if (argc > 2) {
            fprintf(stderr, "vdnn: %s takes no arguments\n", argv[1]);
            return 2;
        }
        printf("vdnn: backends cpu%s\n", device_cuda_built() ? ", cuda" : "");
        char dnn[64];
        onednn_describe(dnn, sizeof dnn);
        if (onednn_built())
            printf("cpu: convolution algorithms of the project's own and of %s (onednn; onednn-winograd where "
                   "the CPU has its kernels)\n", dnn);
        else
            printf("cpu: convolution algorithms of the project's own only (built without oneDNN: ONEDNN=0)\n");
#ifdef VDNN_ONNX
        printf("onnx: import, export and onnx-test (protobuf-c %s)\n", protobuf_c_version());
#else
        printf("onnx: not built (ONNX=0)\n");
#endif
        device_cuda_report(stdout);
        return 0;
    }
    fprintf(stderr, "vdnn: unknown command '%s'\n%s", argv[1], usage);
    return 2;
}
