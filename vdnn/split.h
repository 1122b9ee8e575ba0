/* Splitting a number of items (a mini-batch's images, the manager's units of data) over
 * devices by weights: what data-parallel training (nets/parallel/parallel.c) and the slow-down
 * manager (manager/) both use. */
#ifndef VDNN_SPLIT_H
#define VDNN_SPLIT_H

/* The split of `items` items by `weights` (count of them, >= 0, not all 0), each device
 * at most cap[k] (NULL: no cap; their sum at least items): floor of each exact share,
 * the rest one by one to the largest remainders (ties to the lower index). */
void dp_split(int items, const double *weights, const int *cap, int count, int *out);

#endif
