"""Summarises one `vdnn sweep` CSV for bench/planner.md (see bench/planner.sh)."""
import csv
import sys

net, path = sys.argv[1], sys.argv[2]
none_peak, half, least = (int(v) for v in sys.argv[3:6])
train_dyn_ms, train_none_ms = (float(v) for v in sys.argv[6:8])
rows = [r for r in csv.DictReader(open(path)) if r["fits"] == "1"]


def row(policy, budget):
    for r in rows:
        if r["policy"] == policy and int(r["budget_bytes"]) == budget:
            return r
    return None


def ms(r, key="measured_ms"):
    return float(r[key]) if r and r[key] else float("nan")


mib = 1 << 20
print(f"### {net}")
print()
print(f"none's peak {none_peak / mib:.1f} MiB; half of it {half / mib:.1f} MiB; "
      f"least budget of `all` {least / mib:.1f} MiB.")
print()
print("| budget MiB | policy | predicted ms | measured ms | error | peak MiB | measured peak MiB | plan s |")
print("|---|---|---|---|---|---|---|---|")
errors = []
for r in sorted(rows, key=lambda r: (int(r["budget_bytes"]), r["policy"])):
    p, m = ms(r, "predicted_ms"), ms(r)
    err = (m / p - 1) * 100 if p == p and m == m else float("nan")
    if err == err:
        errors.append(abs(err))
    mp = int(r["measured_peak_bytes"]) / mib if r["measured_peak_bytes"] else float("nan")
    print(f"| {int(r['budget_bytes']) / mib:.1f} | {r['policy']} | {p:.1f} | {m:.1f} | {err:+.1f}% "
          f"| {int(r['peak_bytes']) / mib:.1f} | {mp:.1f} | {float(r['plan_s']):.2f} |")
print()
none = row("none", none_peak)
dyn_half = row("dyn", half)
if none and dyn_half:
    print(f"- sweep's dyn (whole batch) at half of none's peak: {ms(dyn_half):.1f} ms against none (unlimited) "
          f"{ms(none):.1f} ms: throughput {100 * ms(none) / ms(dyn_half):.1f}% of none.")
print(f"- `vdnn train --policy dyn --budget {half}` (half of none's peak; micro-batches allowed): median step "
      f"{train_dyn_ms:.1f} ms against `--policy none` with unlimited memory {train_none_ms:.1f} ms: throughput "
      f"{100 * train_none_ms / train_dyn_ms:.1f}% of none (goal: at least 95%).")
dyn_least, vdnn_least = row("dyn", least), row("vdnn", least)
if dyn_least and vdnn_least:
    print(f"- at the least budget `all` fits ({least / mib:.1f} MiB): dyn {ms(dyn_least):.1f} ms, "
          f"vDNN's ladder {ms(vdnn_least):.1f} ms: dyn is {ms(vdnn_least) / ms(dyn_least):.2f}x as fast.")
if errors:
    errors.sort()
    print(f"- simulator: |measured/predicted - 1| median {errors[len(errors) // 2]:.1f}%, "
          f"max {errors[-1]:.1f}% over {len(errors)} measured points.")
dyn_plan = [float(r["plan_s"]) for r in rows if r["policy"] == "dyn"]
if dyn_plan and none:
    print(f"- dyn planning (search + verification) per budget: median {sorted(dyn_plan)[len(dyn_plan) // 2]:.2f} s, "
          f"max {max(dyn_plan):.2f} s; one iteration of none takes {ms(none):.0f} ms.")
