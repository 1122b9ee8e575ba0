#include "vdnn/split.h"

#include <math.h>
#include <stdlib.h>

void dp_split(int items, const double *weights, const int *cap, int count, int *out)
{
    /* weights past 1e9 (shares are relative: no caller means them) are scaled by the
     * largest, so that a huge one (1e308) cannot overflow the total or a share; a
     * weight that is not a finite number counts as 0 */
    double most = 0, total = 0;
    for (int k = 0; k < count; k++)
        if (isfinite(weights[k]) && weights[k] > most) most = weights[k];
    double scale = most > 1e9 ? 1 / most : 1;
    for (int k = 0; k < count; k++) total += isfinite(weights[k]) && weights[k] > 0 ? weights[k] * scale : 0;
    int left = items;
    double *frac = malloc((size_t)count * sizeof *frac);
    for (int k = 0; k < count; k++) {
        double w = isfinite(weights[k]) && weights[k] > 0 ? weights[k] * scale : 0;
        double exact = total > 0 && w > 0 ? (double)items * w / total : 0;
        out[k] = (int)floor(exact);
        if (cap && out[k] > cap[k]) out[k] = cap[k];
        if (frac) frac[k] = exact - floor(exact);
        left -= out[k];
    }
    /* the rest one by one: the largest remainder that has room (ties: lower index) */
    while (left > 0) {
        int best = -1;
        for (int k = 0; k < count; k++) {
            if (cap && out[k] >= cap[k]) continue;
            double fk = frac ? frac[k] : 0;
            if (best < 0 || fk > (frac ? frac[best] : 0)) best = k;
        }
        if (best < 0) break;
        out[best]++;
        if (frac) frac[best] = -1 - (double)out[best];   /* taken: after every untaken one */
        left--;
    }
    free(frac);
}
