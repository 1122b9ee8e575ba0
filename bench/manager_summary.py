"""Tables of bench/manager.sh's runs: python3 bench/manager_summary.py OUT CASE...

Each job's SD is its completion time (start to exit) over its solo time (alone on one
device); the largest SD gap is max SD - min SD over the three jobs; the total completion
time runs from the first job's start to the last one's end; utilization is the busy
share of cores 0 and 1 over the run (/proc/stat)."""
import json
import os
import sys


def span(path):
    with open(path) as f:
        t0, t1 = map(float, f.read().split())
    return t0, t1


def main():
    out, cases = sys.argv[1], sys.argv[2:]
    solo = {j: span(os.path.join(out, "solo-%s.time" % j)) for j in "ABC"}
    solo = {j: t1 - t0 for j, (t0, t1) in solo.items()}
    print("| case | manager | SD A | SD B | SD C | largest SD gap | mean SD | total completion s | "
          "utilization | DR changes |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    gaps = {}
    for c in cases:
        for mode in ("observe", "manage"):
            run = os.path.join(out, "case%s-%s" % (c, mode))
            with open(os.path.join(run, "case")) as f:
                name = f.read().strip()
            spans = {j: span(os.path.join(run, "%s.time" % j)) for j in "ABC"}
            sd = {j: (t1 - t0) / solo[j] for j, (t0, t1) in spans.items()}
            gap = max(sd.values()) - min(sd.values())
            total = max(t1 for _, t1 in spans.values()) - min(t0 for t0, _ in spans.values())
            with open(os.path.join(run, "busy")) as f:
                b0, t0, b1, t1 = map(float, f.read().split())
            util = (b1 - b0) / (t1 - t0) if t1 > t0 else 0
            changes = 0
            with open(os.path.join(run, "manager.jsonl")) as f:
                for line in f:
                    changes += json.loads(line)["event"] == "decision"
            gaps[(c, mode)] = (gap, total, sum(sd.values()) / 3, util)
            print("| %s %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.0f%% | %d |" % (
                c, name, "on" if mode == "manage" else "off (observing)", sd["A"], sd["B"], sd["C"], gap,
                sum(sd.values()) / 3, total, 100 * util, changes))
    print()
    print("| case | largest SD gap cut | mean SD change | total completion time change | utilization change |")
    print("|---|---|---|---|---|")
    for c in cases:
        g0, t0, m0, u0 = gaps[(c, "observe")]
        g1, t1, m1, u1 = gaps[(c, "manage")]
        print("| %s | %.0f%% | %+.0f%% | %+.1f%% | %+.1f points |" % (
            c, 100 * (g0 - g1) / g0 if g0 > 0 else 0, 100 * (m1 - m0) / m0, 100 * (t1 - t0) / t0, 100 * (u1 - u0)))
    print()
    print("Solo times (s): " + ", ".join("%s %.1f" % (j, solo[j]) for j in "ABC"))


if __name__ == "__main__":
    main()
