#!/bin/sh
# vdnn on a GPU: its speed against PyTorch, what its memory policies cost, and VGG-16 at
# batch 256 in 8 GiB (bench/gpu.md says what each number means).
#   sh bench/gpu.sh info|compare|policies|big|layers|all OUTDIR
# Stages, each meant to finish within about 8 minutes on an H100 (run one per command
# where a command may take no more than 10 minutes; `all` runs them one after another):
#   info      the machine: GPU, driver, nvcc, cuDNN, vdnn's backends, PyTorch's versions
#   compare   VGG-16 at batch 64 and 128 and AlexNet at 128, `--policy none`, against
#             bench/torch_step.py on the same GPU, in strict FP32 and then in TF32
#             (MATH="fp32" or MATH="tf32" runs one of the two, for two shorter commands)
#   policies  VGG-16 at batch 64 under none, conv and all: step time, slowdown against
#             none, pool peak, bytes offloaded, compute's wait for copies; and the PCIe
#             link in each direction and both at once, as vdnn's profiler measures it
#   big       VGG-16 at batch 256 in --budget 8G planned by --policy dyn, against none
#             with the whole GPU
#   layers    where the time goes, in TF32: AlexNet at 128 and VGG-16 at 64 under none,
#             vdnn traced (each layer's passes timed in the step) beside PyTorch's
#             profiler (its operators and kernels); not part of `all`
# Every run leaves in OUTDIR its command (NAME.cmd), what it was (NAME.meta), its output
# (NAME.out), its JSON-lines log (NAME.log, vdnn) and its exit status (NAME.rc, 124 when
# it ran out of time); after every run OUTDIR/summary.md is written again from all the
# runs in OUTDIR, so stages run by separate commands add up to one summary, and a
# command cut short keeps what it finished.
# Environment: VDNN_BIN (default build/vdnn, a CUDA build: `vdnn --version` lists cuda),
# PYTHON (default python3, with torch), MATH (compare: default "fp32 tf32"), VDNN_FLAGS
# (more flags for every vdnn run, e.g. --nondeterministic; use another OUTDIR for them).
set -eu

usage() {
    echo "usage: sh bench/gpu.sh info|compare|policies|big|layers|all OUTDIR" >&2
    exit 2
}
[ $# -eq 2 ] || usage
stage=$1
out=$2
case $stage in info | compare | policies | big | layers | all) ;; *) usage ;; esac
bin=${VDNN_BIN:-build/vdnn}
py=${PYTHON:-python3}
flags=${VDNN_FLAGS:-}
maths=${MATH:-fp32 tf32}
mkdir -p "$out/configs"
# Profiles (every layer and algorithm timed, and the link) are measured once per net,
# batch and math mode, and kept with the results they explain.
export VDNN_CACHE="$out/profile-cache"

# Steps per run. vdnn's medians leave out its first three steps (cuDNN loads its kernels
# then); PyTorch runs five warm-up steps before its timed ones (its benchmark mode tries
# cuDNN's algorithms in the first).
CMP_STEPS=20
POL_STEPS=15
BIG_STEPS=8
TORCH_WARMUP=5

# synth_cfg SRC NAME BATCH STEPS: OUTDIR/configs/NAME.cfg, the config SRC at BATCH with
# synthetic data of its shape and classes, one epoch of exactly STEPS batches, so that
# the run ends with an epoch line in its log (images/s, pool peak, offloaded bytes) and
# needs no data set on disk.
synth_cfg() {
    classes=$(awk -F= '/^[ \t]*output[ \t]*=/ { gsub(/[ \t]/, "", $2); c = $2 } END { print c }' "$1")
    awk -v b="$3" -v n="$(($3 * $4))" -v k="$classes" '
        /^\[data\]/ { print "[data]\nset = synthetic\ntrain_size = " n "\ntest_size = " b "\nclasses = " k; skip = 1; sec = "[data]"; next }
        /^\[/ { skip = 0; sec = $1 }
        skip { next }
        sec == "[net]" && /^[ \t]*batch[ \t]*=/ { print "batch = " b; next }
        sec == "[train]" && /^[ \t]*epochs[ \t]*=/ { print "epochs = 1"; next }
        { print }' "$1" > "$out/configs/$2.cfg"
}

# run_vdnn NAME SECONDS META ARGS...: `vdnn ARGS --log NAME.log`, stopped after SECONDS;
# META is "key=value ..." for the summary.
run_vdnn() {
    name=$1 limit=$2 meta=$3
    shift 3
    # shellcheck disable=SC2086 # META splits into its key=value words
    printf '%s\n' tool=vdnn $meta > "$out/$name.meta"
    echo "$bin $* $flags --log $out/$name.log" > "$out/$name.cmd"
    rm -f "$out/$name.log"
    rc=0
    # shellcheck disable=SC2086 # VDNN_FLAGS splits into flags
    timeout "$limit" "$bin" "$@" $flags --log "$out/$name.log" > "$out/$name.out" 2>&1 || rc=$?
    echo "$rc" > "$out/$name.rc"
    echo "$name: exit $rc; $(tail -n 1 "$out/$name.out")"
    summarize
}

# run_torch NAME SECONDS META ARGS...: `python3 bench/torch_step.py ARGS`, likewise.
run_torch() {
    name=$1 limit=$2 meta=$3
    shift 3
    # shellcheck disable=SC2086 # likewise
    printf '%s\n' tool=torch $meta > "$out/$name.meta"
    echo "$py bench/torch_step.py $*" > "$out/$name.cmd"
    rc=0
    timeout "$limit" "$py" bench/torch_step.py "$@" > "$out/$name.out" 2>&1 || rc=$?
    echo "$rc" > "$out/$name.rc"
    echo "$name: exit $rc; $(tail -n 1 "$out/$name.out")"
    summarize
}

stage_info() {
    nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    {
        echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
        echo "host: $(uname -srm), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')," \
            "$(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) memory"
        if command -v nvidia-smi > /dev/null 2>&1; then
            nvidia-smi --query-gpu=index,name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max \
                --format=csv,noheader | sed 's/^/gpu (index, name, driver, memory, PCIe gen, width): /' || true
        else
            echo "gpu: nvidia-smi not found"
        fi
        echo "nvcc: $("$nvcc" --version 2> /dev/null | grep -i release || echo "not found at $nvcc")"
        for dir in $(sh tools/find_cuda.sh inc 2> /dev/null | sed 's/-I//g'); do
            [ -f "$dir/cudnn_version.h" ] || continue
            echo "cuDNN header ($dir): $(awk '/^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) / { printf "%s%s", s, $3; s = "." }' \
                "$dir/cudnn_version.h")"
            break
        done
        if [ -x "$bin" ]; then "$bin" --version 2>&1 || true; else echo "vdnn: $bin not built"; fi
        "$py" -c 'import torch
print("torch", torch.__version__, "built for CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version(),
      "GPU", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none visible")' 2>&1 | tail -n 1 || true
    } > "$out/info.txt"
    nvidia-smi > "$out/info-nvidia-smi.txt" 2>&1 || true
    cat "$out/info.txt"
    summarize
}

stage_compare() {
    for spec in "vgg16 64" "vgg16 128" "alexnet 128"; do
        # shellcheck disable=SC2086 # "NET BATCH" into two words
        set -- $spec
        net=$1 batch=$2
        synth_cfg "configs/$net.cfg" "$net-b$batch" "$batch" "$CMP_STEPS"
        for math in $maths; do
            tf32=0
            [ "$math" = tf32 ] && tf32=1
            run_vdnn "compare-vdnn-$net-b$batch-$math" 300 "stage=compare net=$net batch=$batch math=$math policy=none" \
                train --no-save "$out/configs/$net-b$batch.cfg" --device cuda --math "$math" --policy none --algo perf \
                --steps "$CMP_STEPS" --epochs 1
            run_torch "compare-torch-$net-b$batch-$math" 240 "stage=compare net=$net batch=$batch math=$math" \
                "$out/configs/$net-b$batch.cfg" --device cuda --tf32 "$tf32" --batch "$batch" --steps "$CMP_STEPS" \
                --warmup "$TORCH_WARMUP" --images-per-s
        done
    done
}

stage_policies() {
    synth_cfg configs/vgg16.cfg vgg16-b64-policies 64 "$POL_STEPS"
    # A profile cache of this stage's own, so that it holds one profile (vgg16 at batch
    # 64), whose link line the summary reads.
    VDNN_CACHE=$out/profile-cache-policies
    for p in none conv all; do
        run_vdnn "policies-$p" 300 "stage=policies net=vgg16 batch=64 math=fp32 policy=$p algo=perf" \
            train --no-save "$out/configs/vgg16-b64-policies.cfg" --device cuda --policy "$p" --algo perf --steps "$POL_STEPS" \
            --epochs 1
    done
    # The paper's (m) columns: the smallest workspaces. With the fastest algorithms the
    # peak can be a convolution's workspace, the same under every policy.
    for p in none conv all; do
        run_vdnn "policies-$p-mem" 300 "stage=policies net=vgg16 batch=64 math=fp32 policy=$p algo=mem" \
            train --no-save "$out/configs/vgg16-b64-policies.cfg" --device cuda --policy "$p" --algo mem --steps "$POL_STEPS" \
            --epochs 1
    done
    # dyn in half of the memory none used (its pool peak), as bench/planner.md does on the CPU
    half=$("$py" -c 'import json, sys
peak = [json.loads(l).get("pool_peak_bytes") for l in open(sys.argv[1]) if "pool_peak_bytes" in l]
print(peak[-1] // 2 if peak and peak[-1] else "")' "$out/policies-none.log" 2> /dev/null || true)
    if [ -n "$half" ]; then
        run_vdnn policies-dyn 300 "stage=policies net=vgg16 batch=64 math=fp32 policy=dyn algo=plan budget=$half" \
            train --no-save "$out/configs/vgg16-b64-policies.cfg" --device cuda --policy dyn --budget "$half" \
            --steps "$POL_STEPS" --epochs 1
    fi
    # one traced run of two steps under all: copies beside compute, a small file
    synth_cfg configs/vgg16.cfg vgg16-b64-trace 64 2
    run_vdnn policies-trace 120 "stage=trace net=vgg16 batch=64 math=fp32 policy=all" \
        train --no-save "$out/configs/vgg16-b64-trace.cfg" --device cuda --policy all --algo perf --steps 2 --epochs 1 \
        --trace "$out/policies-all-trace.json"
    for f in "$VDNN_CACHE"/profile-*.txt; do
        [ -f "$f" ] && cp "$f" "$out/policies-link-profile.txt"
    done
    VDNN_CACHE=$out/profile-cache
    summarize
}

stage_big() {
    synth_cfg configs/vgg16.cfg vgg16-b256 256 "$BIG_STEPS"
    # dyn first: none then finds the batch-256 profile it measured in the cache
    run_vdnn big-dyn 390 "stage=big net=vgg16 batch=256 math=fp32 policy=dyn budget=8G" \
        train --no-save "$out/configs/vgg16-b256.cfg" --device cuda --budget 8G --policy dyn --steps "$BIG_STEPS" --epochs 1
    run_vdnn big-none 150 "stage=big net=vgg16 batch=256 math=fp32 policy=none budget=whole-GPU" \
        train --no-save "$out/configs/vgg16-b256.cfg" --device cuda --policy none --algo perf --steps "$BIG_STEPS" --epochs 1
}

stage_layers() {
    for spec in "alexnet 128" "vgg16 64"; do
        # shellcheck disable=SC2086 # "NET BATCH" into two words
        set -- $spec
        net=$1 batch=$2
        synth_cfg "configs/$net.cfg" "$net-b$batch-layers" "$batch" 6
        run_vdnn "layers-vdnn-$net-b$batch-tf32" 200 "stage=layers net=$net batch=$batch math=tf32 policy=none" \
            train --no-save "$out/configs/$net-b$batch-layers.cfg" --device cuda --math tf32 --policy none --algo perf \
            --steps 6 --epochs 1 --trace "$out/layers-$net-b$batch-tf32-trace.json"
        run_torch "layers-torch-$net-b$batch-tf32" 200 "stage=layers net=$net batch=$batch math=tf32" \
            "$out/configs/$net-b$batch-layers.cfg" --device cuda --tf32 1 --batch "$batch" --steps 10 \
            --warmup "$TORCH_WARMUP" --images-per-s --profile "$out/layers-$net-b$batch-tf32-torch.txt"
    done
}

# OUTDIR/summary.md from every run in OUTDIR.
summarize() {
    "$py" - "$out" << 'EOF'
import glob, json, os, re, statistics, sys, time

out = sys.argv[1]
runs = {}
for meta in sorted(glob.glob(os.path.join(out, "*.meta"))):
    name = os.path.basename(meta)[:-5]
    r = dict(line.strip().split("=", 1) for line in open(meta) if "=" in line)
    r["name"] = name
    def read(ext):
        p = os.path.join(out, name + ext)
        return open(p, errors="replace").read() if os.path.exists(p) else ""
    r["cmd"] = read(".cmd").strip()
    r["out"] = read(".out")
    rc = read(".rc").strip()
    r["rc"] = int(rc) if rc else None
    steps, epoch = [], {}
    r["plan_s"] = r["predicted_ms"] = None
    for line in read(".log").splitlines():
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if "plan_s" in j:
            r["plan_s"], r["predicted_ms"] = j["plan_s"], j.get("predicted_step_ms")
        elif "step_time_ms" in j:
            steps.append(j["step_time_ms"])
        elif "train_loss" in j:
            epoch = j
    r["steps"], r["epoch"] = steps, epoch
    batch = int(r.get("batch", "0"))
    r["ms"] = r["ips"] = None
    if r["tool"] == "vdnn" and steps:
        kept = steps[3:] if len(steps) > 3 else steps   # the first steps load cuDNN's kernels
        r["ms"] = statistics.median(kept)
        r["ips"] = 1e3 * batch / r["ms"]
    m = re.search(r"([0-9.]+) ms/step ([0-9.]+) images/s", r["out"])
    if r["tool"] == "torch" and m:
        r["ms"], r["ips"] = float(m.group(1)), float(m.group(2))
    if r["tool"] == "vdnn" and r["predicted_ms"] is None:   # dyn prints its plan's prediction
        m = re.search(r"predicted +([0-9.]+) ms", r["out"])
        r["predicted_ms"] = float(m.group(1)) if m else None
    runs[name] = r

def gib(b):
    return "-" if b is None else f"{b / 2**30:.2f} GiB"

def mib(b):
    return "-" if b is None else f"{b / 2**20:.1f} MiB"

def num(v, f="{:.1f}"):
    return "-" if v is None else f.format(v)

def status(r):
    if r is None:
        return "not run"
    if r["rc"] is None:
        return "running or killed"
    if r["rc"] == 124:
        return "timed out"
    if r["rc"] != 0:
        lines = [l for l in r["out"].splitlines() if l.strip()]
        return "failed: " + (lines[-1][:200] if lines else f"exit {r['rc']}")
    return "ok"

def line(text, pattern):
    for l in text.splitlines():
        if re.search(pattern, l):
            return l.strip()
    return ""

md = ["# vdnn on a GPU: raw results", "",
      f"Written {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())} by `sh bench/gpu.sh` from the files in this folder "
      "(bench/gpu.md says what each number means).", ""]
info = os.path.join(out, "info.txt")
md += ["## Machine", "", "```"]
md += [open(info).read().rstrip()] if os.path.exists(info) else ["(run `sh bench/gpu.sh info OUTDIR`)"]
md += ["```", ""]

cmp = [r for r in runs.values() if r.get("stage") == "compare"]
if cmp:
    md += ["## compare: `--policy none` against PyTorch, same GPU, same shapes", "",
           "Median step time after warm-up; images/s = batch / step time. vdnn's step includes copying the batch to "
           "the GPU; PyTorch's data stays on the GPU.", "",
           "| net | batch | math | vdnn ms/step | vdnn images/s | PyTorch ms/step | PyTorch images/s | vdnn / PyTorch | vdnn pool peak | status |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    keys = sorted({(r["net"], int(r["batch"]), r["math"]) for r in cmp}, key=lambda k: (k[0] != "vgg16", k[0], k[1], k[2]))
    for net, batch, math in keys:
        v = runs.get(f"compare-vdnn-{net}-b{batch}-{math}")
        t = runs.get(f"compare-torch-{net}-b{batch}-{math}")
        ratio = v["ips"] / t["ips"] if v and t and v["ips"] and t["ips"] else None
        peak = v["epoch"].get("pool_peak_bytes") if v else None
        st = f"vdnn {status(v)}; PyTorch {status(t)}"
        md.append(f"| {net} | {batch} | {math} | {num(v and v['ms'])} | {num(v and v['ips'])} | {num(t and t['ms'])} | "
                  f"{num(t and t['ips'])} | {num(ratio, '{:.3f}')} | {gib(peak)} | {st} |")
    md.append("")

pol = {(r["policy"], r.get("algo", "plan" if r["policy"] == "dyn" else "perf")): r
       for r in runs.values() if r.get("stage") == "policies"}
if pol:
    base = pol.get(("none", "perf"))
    md += ["## policies: VGG-16, batch 64, FP32", "",
           "Algorithms: perf, the fastest measured (the paper's (p)); mem, the smallest workspaces (its (m)); "
           "plan, dyn's choice per layer. Slowdown against none with perf.", "",
           "| policy | algorithms | ms/step | images/s | slowdown vs none | pool peak | offloaded per step | compute waited for copies per step | status |",
           "|---|---|---|---|---|---|---|---|---|"]
    for key in (("none", "perf"), ("conv", "perf"), ("all", "perf"), ("none", "mem"), ("conv", "mem"), ("all", "mem"),
                ("dyn", "plan")):
        r = pol.get(key)
        if not r:
            continue
        p = key[0] + " | " + key[1]
        slow = r["ms"] / base["ms"] if base and base["ms"] and r["ms"] else None
        nsteps = len(r["steps"]) or None
        off = r["epoch"].get("offload_bytes")
        wait = r["epoch"].get("copy_wait_s")
        md.append(f"| {p} | {num(r['ms'])} | {num(r['ips'])} | {num(slow, '{:.3f}x')} | {gib(r['epoch'].get('pool_peak_bytes'))} | "
                  f"{mib(off / nsteps if off is not None and nsteps else None)} | "
                  f"{num(1e3 * wait / nsteps if wait is not None and nsteps else None, '{:.1f} ms')} | {status(r)} |")
    md.append("")
    prof = os.path.join(out, "policies-link-profile.txt")
    link = line(open(prof).read(), r"^link ") if os.path.exists(prof) else ""
    if link:
        h2d, d2h, both, lat = (float(x) for x in link.split()[1:5])
        md += ["The link, as `vdnn`'s profiler measured it (copies of 64 MiB between pinned host memory and the pool, "
               "on the memory stream):", "",
               "| host to device | device to host | both at once (bytes moved in all) | latency of one copy |",
               "|---|---|---|---|",
               f"| {h2d / 1e9:.2f} GB/s | {d2h / 1e9:.2f} GB/s | {both / 1e9:.2f} GB/s | {lat * 1e6:.1f} us |", ""]

big = {r["policy"]: r for r in runs.values() if r.get("stage") == "big"}
if big:
    md += ["## big: VGG-16, batch 256, FP32", "",
           "| run | budget | ms/step | images/s | pool peak | status |", "|---|---|---|---|---|---|"]
    for p in ("dyn", "none"):
        r = big.get(p)
        if r:
            md.append(f"| {p} | {r.get('budget', '-')} | {num(r['ms'])} | {num(r['ips'])} | "
                      f"{gib(r['epoch'].get('pool_peak_bytes'))} | {status(r)} |")
    d, n = big.get("dyn"), big.get("none")
    if d and n and d["ips"] and n["ips"]:
        md += ["", f"dyn in 8 GiB trains at {100 * d['ips'] / n['ips']:.1f}% of none's speed with the whole GPU."]
    elif d and n and d["ips"] and n["rc"] not in (None, 0, 124):
        md += ["", "none does not fit at batch 256 on this GPU: " + status(n)]
    if d and d["out"]:
        plan = [l.rstrip() for l in d["out"].splitlines()
                if re.search(r"planner|chosen plan|other candidate|micro-batches|offloaded:|predicted|measured|^done", l)]
        if plan:
            md += ["", "dyn's plan, as it printed it:", "", "```"] + plan[:16] + ["```"]
    md.append("")

def profile_passes(batch, nlayers):
    """Per layer of the TF32 profile of this batch and depth in OUTDIR/profile-cache: the
    fastest measured forward, and the fastest filter plus data pass (seconds)."""
    for path in sorted(glob.glob(os.path.join(out, "profile-cache", "profile-*.txt"))):
        text = open(path).read().split("\n")
        head = " ".join(text[:8])
        if f"batch {batch} " not in head + " " or f"layers {nlayers} " not in head + " " or " tf32" not in head:
            continue
        per, cur = {}, None
        for line in text:
            w = line.split()
            if w and w[0] == "layer":
                cur = int(w[1])
                per[cur] = []
            elif cur is not None and w and w[0].isdigit() and len(per[cur]) < 3:
                ts = [float(x) for x in w[1:1 + int(w[0])] if float(x) > 0]
                per[cur].append(min(ts) if ts else 0.0)
        return per
    return {}

lay = [r for r in runs.values() if r.get("stage") == "layers" and r["tool"] == "vdnn"]
for r in sorted(lay, key=lambda r: r["name"]):
    tr = os.path.join(out, f"layers-{r['net']}-b{r['batch']}-tf32-trace.json")
    try:
        ev = [e for e in json.load(open(tr))["traceEvents"] if e.get("ph") == "X" and e.get("tid") == 0]
    except (OSError, ValueError, KeyError):
        continue
    # the steps, each from a forward slice of the first layer on; the last with a backward
    first = ev[0]["name"] if ev else None
    starts = [i for i, e in enumerate(ev) if e["name"] == first and e.get("cat") == "forward"]
    steps = [ev[a:b] for a, b in zip(starts, starts[1:] + [len(ev)])
             if any(e.get("cat") == "backward" for e in ev[a:b])]
    if not steps:
        continue
    per = {}
    for e in steps[-1]:
        per.setdefault(e["name"], {}).setdefault(e.get("cat"), 0.0)
        per[e["name"]][e.get("cat")] += e["dur"] / 1e3
    prof = profile_passes(r["batch"], len(per))
    md += [f"## layers: {r['net']}, batch {r['batch']}, TF32: the last traced training step, per layer", "",
           "Step: each pass as the host waited for it in the step (tracing adds that wait). Profile: the "
           "fastest forward and the fastest filter plus data pass vdnn's profiler measured (what the "
           "planner predicts from). PyTorch's profile of the same net is in "
           f"`layers-{r['net']}-b{r['batch']}-tf32-torch.txt`.", "",
           "| layer | forward, step ms | forward, profile ms | backward, step ms | backward, profile ms |",
           "|---|---|---|---|---|"]
    tot = [0.0, 0.0, 0.0, 0.0]
    for j, (name, c) in enumerate(per.items()):
        p = prof.get(j, [])
        row = [c.get("forward", 0.0), 1e3 * p[0] if p else None, c.get("backward", 0.0),
               1e3 * sum(p[1:]) if len(p) > 1 else None]
        for k, v in enumerate(row):
            tot[k] += v or 0.0
        md.append(f"| {name} | " + " | ".join("-" if v is None else f"{v:.3f}" for v in row) + " |")
    md += ["| (all) | " + " | ".join(f"{v:.3f}" for v in tot) + " |", ""]

pred = [r for r in runs.values() if r["tool"] == "vdnn" and r["ms"]]
if pred:
    md += ["## The planner's prediction against the measured step", "",
           "Predicted: the simulator's iteration time for the plan run, from the profile vdnn measured "
           "(`predicted_step_ms` in the log; dyn's from its output). Measured: the median step above.", "",
           "| run | planning (s) | predicted ms | measured ms | measured / predicted |", "|---|---|---|---|---|"]
    for r in sorted(pred, key=lambda r: r["name"]):
        ratio = r["ms"] / r["predicted_ms"] if r["predicted_ms"] else None
        md.append(f"| {r['name']} | {num(r['plan_s'])} | {num(r['predicted_ms'])} | {num(r['ms'])} | "
                  f"{num(ratio, '{:.3f}')} |")
    md.append("")

md += ["## Every run", "", "| run | exit | command | device | last line of output |", "|---|---|---|---|---|"]
for name, r in sorted(runs.items()):
    m = re.search(r"^vdnn: training \S+ on (.*?): \d+ train / ", r["out"], re.M)
    last = [l for l in r["out"].splitlines() if l.strip()]
    cells = [name, str(r["rc"]), f"`{r['cmd']}`", m.group(1) if m else "", last[-1][:200] if last else ""]
    md.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
open(os.path.join(out, "summary.md"), "w").write("\n".join(md) + "\n")
EOF
}

case $stage in
info) stage_info ;;
compare) stage_compare ;;
policies) stage_policies ;;
big) stage_big ;;
layers) stage_layers ;;
all)
    stage_info
    stage_compare
    stage_policies
    stage_big
    ;;
esac
echo "summary: $out/summary.md"
