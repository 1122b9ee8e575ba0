# Written by `vdnn sweep` (docs/sweep.md). Edit it and redraw with `gnuplot sweep.gp`
# in this folder. Rows that do not fit have empty numbers and are left out.
set datafile separator ','
# values computed as NaN (other policies' rows) are skipped without breaking a line
set datafile missing NaN
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
    set terminal pngcairo noenhanced size 1000,900 font ',10'
} else {
    set terminal png size 1000,900
}
set output 'sweep.png'
policies = 'none conv all dyn vdnn'
colors = '#000000 #009e73 #0072b2 #d55e00 #e69f00'
points = '7 5 9 13 11'
MiB = 1048576.
row(p) = strcol(2) eq p && strcol(3) eq '1'
size(i) = i < 8 ? 1.6 - 0.15 * (i - 1) : 0.6
set multiplot layout 2,1 title "alexnet-64.cfg, batch 32: measured (dashed: predicted) time per iteration and pool peak against the budget"
set grid
set key outside right top
set xlabel 'budget (MiB)'
set yrange [0:*]
set ylabel 'time per iteration (ms)'
unit = 1
plot for [i=1:words(policies)] 'sweep.csv' skip 1 using ($1/MiB):(row(word(policies,i)) ? \
         (strcol(5) ne '' ? $5 : $4)/unit : NaN) \
         with linespoints lc rgb word(colors,i) pt int(word(points,i)) \
         ps size(i) lw 1.5 * size(i) title word(policies,i), \
     for [i=1:words(policies)] 'sweep.csv' skip 1 using ($1/MiB):(row(word(policies,i)) ? $4 : NaN) \
         with lines lc rgb word(colors,i) dt 2 lw 1 notitle
set ylabel 'pool peak (MiB)'
unit = MiB
plot for [i=1:words(policies)] 'sweep.csv' skip 1 using ($1/MiB):(row(word(policies,i)) ? \
         (strcol(7) ne '' ? $7 : $6)/unit : NaN) \
         with linespoints lc rgb word(colors,i) pt int(word(points,i)) \
         ps size(i) lw 1.5 * size(i) title word(policies,i), \
     x with lines lc rgb '#808080' dt 2 lw 1 title 'budget'
unset multiplot
