"""For the lab's developers: the cross-check of every path, benchmarks, probes and paper arithmetic, none of which the
lab needs to run. Run them from the lab's folder:

    compare.py         every intermediate and gradient of both NumPy paths and PyTorch against model.py
    bench.py           one training step of every backend, side by side, against the speed targets
    bench_train.py     train.py's own tokens per second for each backend and process count
    bench_explorer.py  the browser explorer's training in a headless Chromium, against train.py's
    bench_grid.py      the scaling grid's runs with one worker and with every core: the speed-up
    bench_fits.py      the scaling record's bootstrap fits of its floors, here and through a pool of every core
    lessons_page.py    the explorer's lessons in a headless Chromium: each one's time, and the picture of a reveal
    chromium.py        what those two share: the explorer served in a headless Chromium page, and its pictures
    jit_probe.py       what a JIT (numba) would buy the tuned path's row-wise passes
    scale.py           a larger model on paper: parameters, memory, FLOPs, tokens per second per GPU

    python3 -m dev.scale --width 16 --blocks 1 --heads 1 --vocab 96 --max-len 64 --batch 16
"""
