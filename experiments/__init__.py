"""The experiments: what the lab found, each recorded beside its code, with --check (a reduced run and every
summary derived again from the record) and --rerun (one cell trained again). Run them from the lab's folder:

    positions.py   what positions are for: the four schemes over seeds and a learning-rate sweep (positions.json)
    depth.py       what a second block buys: 1 or 2 blocks of 1 or 4 heads, on the stories and on copying (depth.json)
    induction.py   the copying task depth.py and plots.py share: periodic sequences and what a model learned of them
    spread.py      how far a training result moves from one machine to another (spread.json)
    chains.py      harder stories of known probability: a thing handed along a chain, for scaling.py
    scaling.py     loss against compute: 7 sizes x 9 budgets, the law fitted with its floor unknown and known
    scaling_law.py the scaling law, its least-squares and Huber fits, and the cells it is fitted to
    scaling_judged.py  the fits judged against the true floor and against budgets they never saw
    scaling_runs.py the scaling grid's runs: a size's cost, its stories, one run trained, one run as a grid task
    drops.py       when a model learns to follow the chain: each size trained the same steps, followed closely
                   (drops.json)
    grid.py        independent runs on every core (or a Dask cluster), each result a file: a killed grid resumes
    grid_dask.py   the grid's own Dask cluster, closed to other users: TLS with its own certificate, no HTTP
    recording.py   what every experiment shares: its sweep, its record's text and checks, its command line
    plots.py       the pictures of docs/figures/, from the trained models and the records
    lessons.py     predict, then check: the lessons in the terminal, each answered live (python3 -m experiments.lessons)
    lessons_trained.py  the lessons that train to answer: the floor, positions past the trained length, a second block
    lessons_scaling.py  the scaling lesson: where is the floor, and does the usual fit of the law find it?

    python3 -m experiments.positions --check
"""
