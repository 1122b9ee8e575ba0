#!/bin/sh
# ONNX: vdnn's importer against PyTorch's own exports of torchvision's CNNs and against
# ONNX's node conformance tests, and an imported ResNet-18 fine-tuned under two policies.
#  models    bench/onnx_models.py writes alexnet, resnet18, googlenet, densenet121,
#            mobilenet_v2, resnext50_32x4d, squeezenet1_0 and tinycnn (random weights,
#            seeded batch-norm statistics, one seeded input, PyTorch's output) at opsets
#            11, 13 and 17 in ONNX's backend test layout (OUTDIR/<model>-opset<N>/model.onnx
#            and test_data_set_0/): one line each with the op types the export holds
#  tests     `vdnn onnx-test` over all of them: PASS, FAIL with the largest error,
#            UNSUPPORTED with the node and why, and the closing count
#  nodes     `vdnn onnx-test` over ONNX's node tests (Debian's libonnx-testdata): the
#            closing count, and per operator how many tests passed, failed, were unsupported
#  finetune  `vdnn import` of resnet18-opset13 at batch 8, then STEPS training steps from its
#            weights (synthetic data) under policy none, and under dyn with half of none's
#            pool peak; `cmp` of the two checkpoints: the policies must train bit for bit
#            alike (every convolution pinned to one algorithm, PIN_ALGO below, and dyn kept
#            to the whole batch, since other algorithms or micro-batches round differently)
#
#   sh bench/onnx.sh [OUTDIR]          (default bench/out/onnx, git-ignored; about 1.5 GB;
#                                      bench/onnx.md: `THREADS=2 nice sh bench/onnx.sh`, 5 min)
# Environment: PARTS (default "models tests nodes finetune"), MODELS and OPSETS (of the
# models part; default all, and 11,13,17), THREADS (default: all cores), VDNN_BIN
# (build/vdnn), PYTHON (/usr/bin/python3: Debian's python3-torch, python3-torchvision
# and python3-onnx), ONNX_NODE_DIR (Debian's libonnx-testdata), VDNN_CACHE (default: a
# fresh folder, removed at the end, so that the profiles are measured on this run).
# Prints Markdown for bench/onnx.md; the raw outputs stay in OUTDIR (models.txt,
# onnx-test.txt, node-tests.txt, import.txt, none.txt, dyn.txt, none.log, dyn.log).
set -eu

# ---- Flags of `vdnn import` and `vdnn onnx-test` (docs/cli.md) and of the fine-tune.
# extra flags of `vdnn onnx-test DIR... --threads N` (docs/cli.md: --device D, --verbose);
# --verbose gives each PASS its largest error
ONNX_TEST_FLAGS=${ONNX_TEST_FLAGS:---verbose}
# extra flags of `vdnn import MODEL --cfg CFG --weights CKPT --batch N` (--device D)
IMPORT_FLAGS=${IMPORT_FLAGS:-}
# training data of the imported net (its config names no data set of ours)
TRAIN_DATA=${TRAIN_DATA:-synthetic}
# `vdnn train --steps N` (optimizer steps of each fine-tuning run) and the batch
STEPS=${STEPS:-2}
BATCH=${BATCH:-8}
# the CPU algorithm every convolution of the imported net is pinned to (`algo =` in its
# [convolutional] sections; docs/memory.md: runs are bit-identical only with the same
# algorithms, and dyn otherwise picks its own for the budget); empty: no pin, and the two
# checkpoints may differ by their algorithms alone. On a GPU pins are refused: set it empty.
PIN_ALGO=${PIN_ALGO-im2col}
# ----

out=${1:-bench/out/onnx}
bin=${VDNN_BIN:-build/vdnn}
py=${PYTHON:-/usr/bin/python3}
parts=${PARTS:-models tests nodes finetune}
models=${MODELS:-alexnet,resnet18,googlenet,densenet121,mobilenet_v2,resnext50_32x4d,squeezenet1_0,tinycnn}
opsets=${OPSETS:-11,13,17}
threads=${THREADS:-$(nproc)}
nodedir=${ONNX_NODE_DIR:-/usr/share/libonnx-testdata/data/node}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export VDNN_CACHE="${VDNN_CACHE:-$tmp/cache}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
mkdir -p "$out"

# has COMMAND: whether $bin knows the subcommand (else it says "unknown command")
has() { ! "$bin" "$1" --help 2>&1 | grep -q "unknown command"; }
want() { case " $parts " in *" $1 "*) return 0 ;; esac; return 1; }

echo "Machine: $(nproc) cores, $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); threads $threads"
echo "Date: $(date -u '+%Y-%m-%d %H:%M UTC'); command: sh bench/onnx.sh $*; vdnn $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "PyTorch, torchvision, onnx: $("$py" -c 'import torch, torchvision, onnx; print(torch.__version__, torchvision.__version__, onnx.__version__)' 2>/dev/null || echo '?');" \
    "node tests: libonnx-testdata $(dpkg-query -W -f '${Version}' libonnx-testdata 2>/dev/null || echo '?')"
echo

if want models; then
    echo "## Exports (\`bench/onnx_models.py $out --models $models --opsets $opsets\`)"
    echo
    echo "Model, opset, nodes, the std of PyTorch's output and of its change with another input, op types with counts:"
    echo
    echo '```'
    "$py" bench/onnx_models.py "$out" --models "$models" --opsets "$opsets" --threads "$threads" > "$out/models.txt" 2>&1 ||
        { cat "$out/models.txt"; echo '```'; exit 1; }
    cat "$out/models.txt"
    echo '```'
    echo
fi

if want tests; then
    echo "## \`vdnn onnx-test\` on the exports"
    echo
    if has onnx-test; then
        rc=0
        # shellcheck disable=SC2086 # the flags split
        "$bin" onnx-test --threads "$threads" $ONNX_TEST_FLAGS "$out"/*-opset* > "$out/onnx-test.txt" 2>&1 || rc=$?
        echo "Exit status $rc (1: some test FAILed). Per model and opset: PASS with the largest error," \
            "FAIL or UNSUPPORTED with vdnn's reason:"
        echo
        "$py" - "$out/onnx-test.txt" << 'EOF'
import os, re, sys
cells, opsets = {}, set()
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"(PASS|FAIL|UNSUPPORTED) (\S+?)(?::\s*(.*))?$", line.rstrip())
    if not m:
        continue
    kind, d, why = m.groups()
    t = re.match(r"(.+)-opset(\d+)$", os.path.basename(d.rstrip("/")))
    if not t:
        continue
    opsets.add(int(t.group(2)))
    why = (why or "").replace("largest error ", "") if kind == "PASS" else why
    cells[(t.group(1), int(t.group(2)))] = f"{kind} {why}".strip().replace("|", "\\|")
ops = sorted(opsets)
print("| model | " + " | ".join(f"opset {o}" for o in ops) + " |")
print("|---|" + "---|" * len(ops))
for model in sorted({m for m, _ in cells}):
    print(f"| {model} | " + " | ".join(cells.get((model, o), "-") for o in ops) + " |")
EOF
        echo
        echo '```'
        cat "$out/onnx-test.txt"
        echo '```'
    else
        echo "$bin has no onnx-test: skipped."
    fi
    echo
fi

if want nodes; then
    echo "## ONNX's node tests (\`vdnn onnx-test $nodedir/test_*\`)"
    echo
    if has onnx-test; then
        rc=0
        # shellcheck disable=SC2086
        "$bin" onnx-test --threads "$threads" $ONNX_TEST_FLAGS "$nodedir"/test_* > "$out/node-tests.txt" 2>&1 || rc=$?
        echo "Exit status $rc (1: some test FAILed)."
        echo
        # Per operator: each test's operator is its model's one node (an `_expanded`
        # test, the operator's function body, counts under the operator it expands);
        # vdnn's lines are matched to tests by the folder they name.
        "$py" - "$nodedir" "$out/node-tests.txt" << 'EOF'
import os, re, sys
import onnx
nodedir, results = sys.argv[1:]
tests = sorted(t for t in os.listdir(nodedir) if t.startswith("test_"))
def op_of(test):
    try:
        m = onnx.load(os.path.join(nodedir, test, "model.onnx"), load_external_data=False)
    except Exception:  # pylint: disable=broad-except
        return None
    n = m.graph.node
    if len(n) == 1:
        return (n[0].domain + "." if n[0].domain not in ("", "ai.onnx") else "") + n[0].op_type
    return None
ops = {}
for t in tests:
    op = op_of(t)
    if op is None and t.endswith("_expanded") and os.path.isdir(os.path.join(nodedir, t[:-9])):
        op = op_of(t[:-9])
        op = op + " (expanded)" if op else None
    ops[t] = op or "(several nodes)"
status, closing, fails = {}, None, []
for line in open(results, errors="replace"):
    words = line.split()
    if re.search(r"\d+ passed, \d+ failed, \d+ unsupported", line):
        closing = line.strip()
        continue
    if not words:
        continue
    kind = words[0].rstrip(":").upper()
    if kind not in ("PASS", "FAIL", "UNSUPPORTED"):
        continue
    for w in words[1:]:
        name = os.path.basename(w.strip(":,()'\"").rstrip("/"))
        if name in ops:
            status[name] = kind
            if kind == "FAIL":
                fails.append(line.rstrip())
            break
print(f"Closing line: `{closing or 'none printed'}`; {len(tests)} test folders, "
      f"{len(status)} of them named in a PASS, FAIL or UNSUPPORTED line.")
print()
table = {}
for t, op in ops.items():
    row = table.setdefault(op, {"tests": 0, "PASS": 0, "FAIL": 0, "UNSUPPORTED": 0, "-": 0})
    row["tests"] += 1
    row[status.get(t, "-")] += 1
ran = {op: r for op, r in table.items() if r["PASS"] or r["FAIL"]}
print("| operator | tests | pass | fail | unsupported | no line |")
print("|---|---|---|---|---|---|")
for op in sorted(ran):
    r = ran[op]
    print(f"| {op} | {r['tests']} | {r['PASS']} | {r['FAIL']} | {r['UNSUPPORTED']} | {r['-']} |")
print()
rest = sorted(op for op in table if op not in ran)
print(f"Operators with no test passed or failed ({len(rest)}, tests in brackets): "
      + ", ".join(f"{op} ({table[op]['tests']})" for op in rest) + ".")
if fails:
    print()
    print(f"Failures ({len(fails)}" + (", the first 40; all in " + results if len(fails) > 40 else "") + "):")
    print()
    print("```")
    print("\n".join(fails[:40]))
    print("```")
EOF
    else
        echo "$bin has no onnx-test: skipped."
    fi
    echo
fi

if want finetune; then
    echo "## Fine-tuning an imported ResNet-18 (batch $BATCH, $STEPS steps, $TRAIN_DATA data)"
    echo
    model=$out/resnet18-opset13/model.onnx
    if ! has import; then
        echo "$bin has no import: skipped."
    elif [ ! -f "$model" ]; then
        echo "$model missing (run the models part first): skipped."
    else
        cfg=$out/resnet18.cfg
        # shellcheck disable=SC2086
        "$bin" import "$model" --cfg "$cfg" --weights "$out/resnet18.ckpt" --batch "$BATCH" $IMPORT_FLAGS \
            > "$out/import.txt" 2>&1 || { echo "import failed:"; echo '```'; tail -n 5 "$out/import.txt"; echo '```'; exit 1; }
        train_cfg=$cfg
        if [ -n "$PIN_ALGO" ]; then
            train_cfg=$out/resnet18-pinned.cfg
            awk -v a="$PIN_ALGO" '{print} /^\[convolutional\]/{print "algo = " a}' "$cfg" > "$train_cfg"
        fi
        echo "\`vdnn import\`: $(grep -c '^\[' "$cfg") sections, $(grep -c '^\[convolutional\]' "$cfg") convolutions" \
            "(pinned to: ${PIN_ALGO:-nothing}); $(head -n 1 "$out/import.txt")"
        echo
        rm -f "$out/none.ckpt" "$out/none.log" "$out/dyn.ckpt" "$out/dyn.log"   # none of an earlier run
        common="--init $out/resnet18.ckpt --steps $STEPS --data $TRAIN_DATA --threads $threads"
        # peak LOG: the pool_peak_bytes of LOG's final line
        peak() { sed -nE 's/.*"final": true.*"pool_peak_bytes": ([0-9]+).*/\1/p' "$1" | tail -n 1; }
        # shellcheck disable=SC2086
        "$bin" train "$train_cfg" $common --policy none --save "$out/none.ckpt" --log "$out/none.log" \
            > "$out/none.txt" 2>&1 || { echo "none failed:"; echo '```'; tail -n 5 "$out/none.txt"; echo '```'; exit 1; }
        none_peak=$(peak "$out/none.log")
        [ -n "$none_peak" ] || { echo "none's log has no final pool_peak_bytes: $out/none.log"; exit 1; }
        half=$((none_peak / 2))
        # shellcheck disable=SC2086
        "$bin" train "$train_cfg" $common --policy dyn --budget "$half" --micro-batch "$BATCH" \
            --save "$out/dyn.ckpt" --log "$out/dyn.log" > "$out/dyn.txt" 2>&1 || true
        dyn_peak=$(peak "$out/dyn.log")
        echo "| policy | budget (bytes) | pool peak (bytes) | median step (ms) | final loss |"
        echo "|---|---|---|---|---|"
        for p in none dyn; do
            budget=-
            [ "$p" = dyn ] && budget=$half
            steps=$(grep '"step_time_ms"' "$out/$p.log" 2>/dev/null | sed -E 's/.*"step_time_ms": ([0-9.]+).*/\1/' | sort -n |
                awk '{a[NR]=$1} END{if (NR) printf "%.1f", (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; else printf "-"}')
            loss=$(grep '"loss"' "$out/$p.log" 2>/dev/null | tail -n 1 | sed -nE 's/.*"loss": ([^,]+),.*/\1/p')
            [ "$p" = none ] && pk=$none_peak || pk=${dyn_peak:--}
            echo "| $p | $budget | $pk | $steps | ${loss:--} |"
        done
        echo
        if [ ! -f "$out/dyn.ckpt" ] || [ -z "$dyn_peak" ]; then
            echo "dyn at $half bytes failed:"
            echo '```'
            tail -n 8 "$out/dyn.txt"
            echo '```'
        elif cmp "$out/none.ckpt" "$out/dyn.ckpt" > "$tmp/cmp" 2>&1; then
            echo "\`cmp none.ckpt dyn.ckpt\`: identical, bit for bit."
        else
            echo "\`cmp none.ckpt dyn.ckpt\`: they differ ($(cat "$tmp/cmp")); tensors that differ:"
            echo
            echo '```'
            "$py" - "$out/none.ckpt" "$out/dyn.ckpt" << 'EOF'
import sys
sys.path.insert(0, "tools")
import numpy as np
from ckpt_read import read_checkpoint
(ma, a), (mb, b) = read_checkpoint(sys.argv[1]), read_checkpoint(sys.argv[2])
if ma != mb:
    print("header:", ma, "against", mb)
for name in sorted(set(a) | set(b)):
    if name not in a or name not in b:
        print(f"{name}: only in {'none' if name in a else 'dyn'}")
    elif a[name].shape != b[name].shape or not np.array_equal(a[name], b[name]):
        d = np.abs(a[name].astype(np.float64) - b[name].astype(np.float64)) if a[name].shape == b[name].shape else None
        print(f"{name}: " + (f"max |diff| {d.max():.3g}" if d is not None else f"shapes {a[name].shape} {b[name].shape}"))
EOF
            echo '```'
        fi
        echo
        echo "dyn's plan (the run's own lines):"
        echo
        echo '```'
        grep -v -e '^{' -e '^vdnn: profiling' "$out/dyn.txt" | head -n 20
        echo '```'
    fi
    echo
fi
