# Helpers the bench scripts share (sourced, not run).

# synthetic IN OUT: the config IN with its [data] section replaced by synthetic data of
# the same shapes (10 classes), so that a bench needs no data set on disk.
synthetic() {
    awk 'BEGIN{skip=0}
         /^\[data\]/{print "[data]\nset = synthetic\ntrain_size = 100000\ntest_size = 64\nclasses = 10"; skip=1; next}
         /^\[/{skip=0}
         !skip{print}' "$1" > "$2"
}

# median_step LOG: the median `step_time_ms` of a `--log` JSON-lines file, the first
# three steps (warm-up, planning) left out.
median_step() {
    grep '"step_time_ms"' "$1" | tail -n +4 | sed -E 's/.*"step_time_ms": ([0-9.]+).*/\1/' | sort -n |
        awk '{a[NR]=$1} END{printf "%.1f", (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'
}
