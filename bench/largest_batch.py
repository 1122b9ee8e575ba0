"""The largest batch whose least budget (from `vdnn info --batch N --json`) fits a
budget, per family of plans (see bench/beyond.sh). With --micro, prints the largest
batch of the micro-batch family and its micro-batch size instead of a table row. With
--dyn, the row has one more column before the micro-batches: the planner's smallest
plan at the whole batch (`dyn_min_budget_bytes`)."""
import json
import subprocess
import sys

binary, cfg, budget, cap = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
micro_only = "--micro" in sys.argv
with_dyn = "--dyn" in sys.argv
cache = {}


def info(batch):
    if batch not in cache:
        out = subprocess.run([binary, "info", cfg, "--batch", str(batch), "--json"], check=True,
                             capture_output=True, text=True).stdout
        cache[batch] = json.loads(out)
    return cache[batch]


def least(batch, policies):
    t = info(batch)["min_budget_bytes"]
    return min(min(t[p].values()) for p in policies)


def micro_least(batch):
    m = info(batch).get("micro_batch_min_budget_bytes", {})
    best = min([least(batch, ALL)] + list(m.values()))
    size = min([int(k) for k, v in m.items() if v == best], default=0)
    return best, size


ALL = ["none", "all", "conv", "swap", "recompute"]
families = [
    ("none", lambda b: least(b, ["none"])),
    ("all", lambda b: least(b, ["all"])),
    ("vdnn", lambda b: least(b, ["none", "all", "conv"])),
    ("swap", lambda b: least(b, ["none", "all", "conv", "swap"])),
    ("recompute", lambda b: least(b, ALL)),
    ("micro", lambda b: micro_least(b)[0]),
]
if with_dyn:
    families.insert(-1, ("dyn", lambda b: min(info(b)["dyn_min_budget_bytes"], least(b, ALL))))


def largest(need):
    """Binary search: need() grows with the batch."""
    if need(1) > budget:
        return 0
    lo, hi = 1, 2
    while hi <= cap and need(hi) <= budget:
        lo, hi = hi, hi * 2
    hi = min(hi, cap + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if need(mid) <= budget:
            lo = mid
        else:
            hi = mid
    return lo


if micro_only:
    b = largest(families[-1][1])
    print(b, micro_least(b)[1] or b)
    sys.exit(0)
sizes = [largest(f) for _, f in families]
name = cfg.split("/")[-1].replace(".cfg", "")
cells = [str(s) + ("+" if s >= cap else "") for s in sizes]
ratio = max(sizes) / sizes[0] if sizes[0] else float("inf")
print(f"| {name} | {budget / (1 << 20):.0f} MiB | " + " | ".join(cells) + f" | {ratio:.1f}x |")
