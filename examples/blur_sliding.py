"""Halide's 3x3 blur with a sliding window (store_at): blur_y in tiles of BY rows x BX columns, a program
each, the tile's rows one by one in a serial loop; blur_x computed per row of blur_y and stored at the tile:

    blur_y.tile(x, y, xo, yo, xi, yi, BX, BY).parallel(yo).parallel(xo)      # yi: a serial loop
    blur_x.store_at(blur_y, xo).compute_at(blur_y, yi)

Computed per row alone, blur_x would cost 3 rows per row of blur_y. Stored at the tile, each row after the
tile's first computes only the one row of blur_x the last did not (Halide's sliding window), so a tile
costs BY + 2 rows of blur_x, as examples/blur.py's does at once; the source and the nest say so. In tilec
the inner axis of a split is a tile (a vector dimension); `split(yi, 1)` makes the rows a loop (its tile
one row). float32, as blur.py.
"""

import blur
import common

import tilec as tc

SIZES = [dict(H=40, W=300), dict(H=13, W=45), dict(H=3, W=3), dict(H=70, W=5)]


def make():
    H, W = tc.size_vars("H W")
    X = tc.placeholder((H, W), "float32", name="X")
    blur_x = tc.compute((H, W - 2), lambda y, x: (X[y, x] + X[y, x + 1] + X[y, x + 2]) / 3.0, name="blur_x")
    blur_y = tc.compute((H - 2, W - 2), lambda y, x: (blur_x[y, x] + blur_x[y + 1, x] + blur_x[y + 2, x]) / 3.0,
                        name="blur_y")
    s = tc.create_schedule(blur_y)
    y, x = blur_y.axis
    yo, xo, yi, xi = s[blur_y].tile(y, x, tc.knob("BY", [32, 64, 16]), tc.knob("BX", [128, 256]))
    row, _ = s[blur_y].split(yi, 1)  # the tile's rows, one by one: a serial loop
    s[blur_y].bind(yo, "program_id.0")
    s[blur_y].bind(xo, "program_id.1")
    s[blur_x].compute_at(s[blur_y], row)
    s[blur_x].store_at(s[blur_y], xo)
    return s, [X, blur_y]


inputs, reference = blur.inputs, blur.reference  # the same computation as examples/blur.py


if __name__ == "__main__":
    import sys
    common.run(sys.modules[__name__])
