"""The pictures in docs/figures/: what the trained model does, and what the position and depth experiments found.

    python3 -m experiments.plots        # trains three models (about a minute), reads the experiments' records
    python3 -m experiments.plots --steps 50 --out quick-figures    # a quick look: short training, another folder

Training is train.py's default run (the library's train): seed 3 with learned positions, the same weights as
`python3 train.py` (validation every 100 steps instead of 500, which changes no weight), and the same run with
--positions none for the order test; and depth.py's two-block, four-head model on periodic sequences (seed 3, at
the learning rate depth.json chose for it) for the picture of its heads. The experiments' pictures read
positions.json (positions.py), depth.json (depth.py) and scaling.json (scaling.py), the order test's sentences
block-trace.json (the trace's).
Written with matplotlib's Agg backend (no display needed), one PNG per picture:

    loss_curves.png            training and validation loss against the entropy floor
    attention.png              the attention weights on the first story of corpus.txt
    position_similarity.png    cosine similarity between the 64 learned position rows, before and after training
    order_test.png             the logit gap between two orders of the same tokens, with and without positions
    positions_experiment.png   the four position schemes: losses, order probe, loss by position, sweeps
    depth_experiment.png       what a second block and more heads buy: stories, the repeated colour, copying
    induction_heads.png        every head of a two-block model on a repeated sequence: the induction stripe
    scaling_experiment.png     the IsoFLOP curves, the compute-optimal size and tokens, and the fits judged
"""

import argparse
import random
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from atomic import folder_for, hold, name_problem, output_problem, resolved, write_together
from oneblock import machine

with machine.needed_by("python3 -m experiments.plots"):
    import matplotlib.ticker
    import numpy as np
    from matplotlib.figure import Figure

    import bpe
    import model
    from experiments.induction import (TEST_SEED, TUNE_SEED, induction_config, induction_measures, periodic,
                                       train_induction)
    from experiments.recording import given, holder, interruptible, read_record, reading, stopped, whole, writes
    from experiments.scaling_law import name_of
    from oneblock import numpy_model, training
    from oneblock.config import seed_switch
    from oneblock.data import CORPUS_FILE, TOKENIZER_FILE
    from oneblock.settings import Settings, model_config

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FIGURES = ROOT / "docs" / "figures"
POSITIONS_RECORD, DEPTH_RECORD = HERE / "positions.json", HERE / "depth.json"  # the experiments' records
SCALING_RECORD = HERE / "scaling.json"
TRACE = ROOT / "block-trace.json"  # the trace's record: the order test's two sentences
TRAINED = Settings().max_len  # 64: the positions positions.py's models train on
STYLE = {"learned": "tab:blue", "none": "tab:gray", "sinusoidal": "tab:orange", "rope": "tab:green"}  # a colour each
SIZE_STYLE = {"1x1": "tab:gray", "1x4": "tab:purple", "2x1": "tab:blue", "2x4": "tab:red"}  # depth.py's sizes
HEADS_SIZE = (2, 4)  # the model whose heads induction_heads.png shows
PICTURES = ["loss_curves.png", "attention.png", "position_similarity.png", "order_test.png",
            "positions_experiment.png", "depth_experiment.png", "induction_heads.png", "scaling_experiment.png"]
DPI = 120

# ----------------------------------------------------------------------------------------------------------------
# Helpers


def subplots(*grid, figsize, constrained_layout=False, **options):
    """(figure, axes) as matplotlib's pyplot.subplots makes them, without pyplot: a Figure of its own that saves to
    files with the Agg renderer, so no display and no backend is ever chosen."""
    fig = Figure(figsize=figsize, constrained_layout=constrained_layout)
    return fig, fig.subplots(*grid, **options)


def label(token):
    """A token as a tick label: the newline as a return arrow, the space before a word dropped.

    >>> label(" mia"), label("\\n")
    ('mia', '↵')
    """
    return "↵" if token == "\n" else token.strip() or "␣"


def cosine_matrix(rows):
    """(n, n) cosine similarity between the rows of an (n, d) array.

    >>> cosine_matrix(np.array([[1.0, 0.0], [1.0, 1.0]])).round(3)
    array([[1.   , 0.707],
           [0.707, 1.   ]])
    """
    unit = rows / np.linalg.norm(rows, axis=1, keepdims=True)  # (n, d)
    return unit @ unit.T  # (n, n)


def similarity_by_distance(rows, distances=(1, 4, 16, 32)):
    """The mean cosine similarity of two position rows at each distance: a summary of the similarity picture that
    does not depend on reading colours.

    >>> similarity_by_distance(np.array([[1.0, 0.0], [1.0, 0.0], [-1.0, 0.0]]), (1, 2))
    {1: 0.0, 2: -1.0}
    """
    c = cosine_matrix(rows)  # (n, n)
    return {k: round(float(np.mean(np.diagonal(c, k))), 3) for k in distances}


def log_axis(ax, ticks, limits):
    """A log-scale y axis with plain numbers at the given ticks only (no minor labels)."""
    ax.set_yscale("log")
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_ylim(*limits)


def save(fig, out, name):
    """Write fig as out/name (PNG) and return the path."""
    path = out / name
    fig.savefig(path, dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    return path


# ----------------------------------------------------------------------------------------------------------------
# The pictures


def plot_loss_curves(history, floor, out):
    fig, ax = subplots(figsize=(8, 4.5))
    train_points = [(h["step"], h["train"]) for h in history if h["train"] is not None]
    ax.plot(*zip(*train_points), color="tab:blue", lw=1.2, label="training (mean over the steps since the last point)")
    ax.plot([h["step"] for h in history], [h["val"] for h in history], color="tab:red", lw=1.5,
            label="validation (300 held-out stories)")
    ax.axhline(floor, color="black", ls="--", lw=1, label=f"entropy floor of those stories ({floor:.4f})")
    log_axis(ax, [0.3, 0.4, 0.5, 0.7, 1, 2, 3, 4.5], (0.28, 5))
    ax.set_xlim(0, history[-1]["step"])
    ax.set_xlabel("optimiser step (16 windows of 64 tokens each)")
    ax.set_ylabel("loss (nats per token, log scale)")
    ax.set_title(f"Training the one-block model (learned positions, seed 3): final validation loss"
                 f" {history[-1]['val']:.4f}")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper right")
    return save(fig, out, "loss_curves.png")


def plot_attention(params, config, tok, out):
    story = CORPUS_FILE.read_text(encoding="utf-8").split("\n", 1)[0]
    ids = tok.encode("\n" + story)  # (T,) the newline before it, as the model reads every story
    _, cache = numpy_model.forward(params, np.array(ids), config)
    weights = np.array(cache["att"]["weights"])  # (T, T)
    labels = [label(tok.vocab[i]) for i in ids]
    fig, ax = subplots(figsize=(10, 9))
    im = ax.imshow(weights, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(len(ids)), labels, rotation=90, fontsize=8)
    ax.set_yticks(range(len(ids)), labels, fontsize=8)
    ax.set_xlabel("key: the token read (position 0 to 36)")
    ax.set_ylabel("query: the token reading (position 0 to 36)")
    ax.set_title("Attention weights of the trained model on the first story\n(each row sums to 1; above the"
                 " diagonal is the masked future)")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.03, label="attention weight (share of the row, 0 to 1)")
    return save(fig, out, "attention.png")


def plot_position_similarity(before, after, out):
    fig, axes = subplots(1, 2, figsize=(12, 5.4), constrained_layout=True)
    for ax, rows, when in zip(axes, (before, after), ("at initialisation", "after training")):
        im = ax.imshow(cosine_matrix(rows), cmap="RdBu_r", vmin=-1, vmax=1)
        ax.set_title(f"{when}")
        ax.set_xlabel("position j (token index)")
        ax.set_ylabel("position i (token index)")
        ax.set_xticks(range(0, 64, 8))
        ax.set_yticks(range(0, 64, 8))
    fig.colorbar(im, ax=axes, shrink=0.9, label="cosine similarity of pos_emb rows i and j (-1 to 1)")
    fig.suptitle("Learned position embeddings (64 rows of 16 numbers): how alike two positions are")
    return save(fig, out, "position_similarity.png")


def order_gaps(params, config, tok, sentences):
    """The largest logit difference between the two sentences at each position, by model.py (whose exact sums give
    a bag of tokens exactly the same last logits; told config's scheme by seed_switch), rounded to 4 places, as the
    trace records them."""
    a, b = (model.forward(params, tok.encode(text), seed_switch(config))[0] for text in sentences)
    return [round(max(abs(x - y) for x, y in zip(ra, rb)), 4) for ra, rb in zip(a, b)]


def plot_order_test(with_positions, without_positions, tok, sentences, out):
    """with_positions, without_positions: each (params as lists, its ModelConfig)."""
    a, b = tok.tokens(sentences[0]), tok.tokens(sentences[1])
    gaps = {"learned positions": order_gaps(*with_positions, tok, sentences),
            "no positions": order_gaps(*without_positions, tok, sentences)}
    x = np.arange(len(a))
    fig, ax = subplots(figsize=(9, 4.5))
    for k, (name, values) in enumerate(gaps.items()):
        bars = ax.bar(x + (k - 0.5) * 0.38, values, width=0.38, label=f"trained with {name}",
                      color=STYLE["learned" if k == 0 else "none"])
        ax.bar_label(bars, labels=[f"{v:.2f}" if v else "0" for v in values], fontsize=7, padding=2)
    ticks = [label(ta) if ta == tb else f"{label(ta)} / {label(tb)}" for ta, tb in zip(a, b)]
    ax.set_xticks(x, ticks)
    ax.set_xlabel(f"position: token of A / token of B where they differ\nA = \"{sentences[0]}\","
                  f"  B = \"{sentences[1]}\"")
    ax.set_ylabel("largest |logit A - logit B| (logit units)")
    ax.set_title("Order test: without positions the last token cannot tell A from B (gap exactly 0)")
    ax.legend(loc="upper left")
    ax.margins(y=0.15)
    return save(fig, out, "order_test.png")


def seeds_and_means(ax, summaries, styles, ticks, scale=1.0):
    """For each of summaries ({name: an across_seeds summary}, recording.py), at x = k, its k-th: each seed's value
    as a dot, and at k + 0.18 the mean with one standard deviation, in the name's colour (styles); ticks: the x
    ticks' labels, one a name."""
    for k, (name, summary) in enumerate(summaries.items()):
        ax.scatter([k] * len(summary["by_seed"]), [scale * v for v in summary["by_seed"]], color=styles[name],
                   alpha=0.5, s=18)
        ax.errorbar(k + 0.18, scale * summary["mean"], yerr=scale * summary["std"], fmt="o", color=styles[name],
                    capsize=4)
    ax.set_xticks(range(len(summaries)), ticks)


def plot_sweep(ax, sweeps, styles, what):
    """Each configuration's learning-rate sweep: the mean tuning loss over seeds (one standard deviation as a bar)
    against the peak learning rate, the chosen rate ringed."""
    for name, sweep in sweeps.items():
        means, stds = [s["mean"] for s in sweep["tune"]], [s["std"] for s in sweep["tune"]]
        ax.errorbar(sweep["lrs"], means, yerr=stds, color=styles[name], marker="o", ms=4, capsize=3, label=name)
        chosen = sweep["lrs"].index(sweep["chosen"])
        ax.scatter([sweep["chosen"]], [means[chosen]], s=140, facecolors="none", edgecolors=styles[name], lw=1.5)
    ax.set_xscale("log")
    ax.set_xticks(sweep["lrs"], [f"{lr:g}" for lr in sweep["lrs"]])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("peak learning rate (cosine decay to a tenth)")
    ax.set_ylabel(f"loss on the {what} (nats per token)")
    ax.set_title(f"Learning-rate sweep: mean over seeds on the {what};\nringed: the rate each one is reported at")
    ax.legend(loc="upper right", fontsize=8)


def plot_experiment(record, out):
    schemes = list(record["schemes"])
    seeds = record["settings"]["seeds"]
    floor = record["floor"]["validation_nats_per_token"]
    fig, axes = subplots(1, 4, figsize=(22, 5), gridspec_kw={"width_ratios": [1, 1, 1, 1.6]},
                             constrained_layout=True)
    plot_sweep(axes[0], {scheme: s["sweep"] for scheme, s in record["schemes"].items()}, STYLE,
               f"{record['settings']['sweep']['tune_stories']} held-out training stories")

    ax = axes[1]  # validation loss: each seed, and the mean with one standard deviation
    seeds_and_means(ax, {s: record["schemes"][s]["val_loss"] for s in schemes}, STYLE,
                    [f"{s}\nlr {record['schemes'][s]['sweep']['chosen']:g}" for s in schemes])
    ax.axhline(floor, color="black", ls="--", lw=1, label=f"entropy floor ({floor:.4f})")
    ax.set_xlabel("position scheme, at its chosen learning rate")
    ax.set_ylabel("validation loss (nats per token)")
    ax.set_title(f"Validation loss: {len(seeds)} seeds (dots),\nmean ± standard deviation (bar)")
    ax.legend(loc="upper left")

    ax = axes[2]  # the order probe
    width = 0.38
    for k, scheme in enumerate(schemes):
        p = record["schemes"][scheme]["probe"]
        for j, (key, alpha) in enumerate((("accuracy", 1.0), ("mean_probability", 0.45))):
            s = p[key]
            ax.bar(k + (j - 0.5) * width, 100 * s["mean"], width, yerr=100 * s["std"], capsize=3,
                   color=STYLE[scheme], alpha=alpha)
            ax.scatter([k + (j - 0.5) * width] * len(s["by_seed"]), [100 * x for x in s["by_seed"]], color="black",
                       s=6, zorder=3)
    ax.bar(0, 0, color="gray", label="solid: right name ranked first (accuracy)")
    ax.bar(0, 0, color="gray", alpha=0.45, label="light: mean probability of the right name")
    ax.set_xticks(range(len(schemes)), schemes)
    ax.set_ylim(0, 128)
    ax.set_yticks(range(0, 101, 20))
    ax.set_xlabel("position scheme")
    ax.set_ylabel("percent of held-out stories / percent probability")
    ax.set_title(f"Order probe: who has it \"now\"?\n({record['settings']['probe_stories']} held-out"
                 f" stories, mean over seeds)")
    ax.legend(loc="upper center", fontsize=8)

    ax = axes[3]  # loss by position in 128-token windows
    for scheme in schemes:
        ex = record["schemes"][scheme]["extrapolation"]
        curve = ex["loss_by_position"]
        name = scheme if ex["reads_past_64"] else f"{scheme} (no row past 63: stops there)"
        ax.plot(range(len(curve)), curve, color=STYLE[scheme], lw=1.3, label=name)
    ax.axvline(TRAINED - 0.5, color="black", ls=":", lw=1)
    ax.text(TRAINED + 1.5, 0.03, "positions 64 to 127: never seen in training",
            transform=ax.get_xaxis_transform(), va="bottom", fontsize=9)
    ax.axhline(floor, color="black", ls="--", lw=1)
    uniform = record["floor"]["uniform_nats_per_token"]
    ax.axhline(uniform, color="black", ls="-.", lw=1)
    ax.text(2, uniform * 1.04, f"uniform guessing ({uniform:.2f})", va="bottom", fontsize=9)
    ax.set_xlim(0, record['settings']['window'])
    log_axis(ax, [0.2, 0.3, 0.5, 0.7, 1, 2, 3, 5], (0.15, 6.5))
    ax.set_xlabel(f"position in the window (token index; {record['settings']['extrapolation_windows']} windows"
                  f" of {record['settings']['window']} tokens)")
    ax.set_ylabel("loss at that position (nats per token)")
    ax.set_title("Length extrapolation: loss by position, mean over seeds\n(dashed: entropy floor)")
    ax.legend(loc="upper left", bbox_to_anchor=(0, 0.86), fontsize=9)
    fig.suptitle("The same model trained with four position schemes (same data, budget and settings; each at the"
                 " learning rate its sweep chose)")
    return save(fig, out, "positions_experiment.png")


def plot_depth(record, out):
    sizes_ = record["settings"]["sizes"]
    seeds = len(record["settings"]["seeds"])
    floor = record["floor"]
    fig, axes = subplots(2, 3, figsize=(18, 10), constrained_layout=True)
    stories, induction = record["stories"]["sizes"], record["induction"]["sizes"]
    ticks = lambda task: [f"{s}\nlr {task[s]['sweep']['chosen']:g}" for s in sizes_]  # noqa: E731

    plot_sweep(axes[0, 0], {s: stories[s]["sweep"] for s in sizes_}, SIZE_STYLE,
               f"{record['settings']['tune_stories']} held-out training stories")
    ax = axes[0, 1]
    seeds_and_means(ax, {s: stories[s]["val_loss"] for s in sizes_}, SIZE_STYLE, ticks(stories))
    ax.axhline(floor["validation_nats_per_token"], color="black", ls="--", lw=1,
               label=f"entropy floor ({floor['validation_nats_per_token']:.4f})")
    ax.set_xlabel("blocks x heads, at the chosen learning rate")
    ax.set_ylabel("validation loss (nats per token)")
    ax.set_title(f"Stories: validation loss, {seeds} seeds (dots), mean ± sd (bar)")
    ax.legend(loc="upper right")
    ax = axes[0, 2]
    seeds_and_means(ax, {s: stories[s]["colour_loss"] for s in sizes_}, SIZE_STYLE, ticks(stories))
    for k, s in enumerate(sizes_):
        ax.annotate(f"{stories[s]['colour_accuracy']['mean']:.0%} right", (k + 0.18, stories[s]["colour_loss"]["mean"]),
                    textcoords="offset points", xytext=(8, 0), va="center", fontsize=8)
    ax.axhline(floor["colour_guess_nats"], color="black", ls="-.", lw=1, label="guessing one of the four colours")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("blocks x heads")
    ax.set_ylabel("loss of the colour (nats)")
    ax.set_title(f"Stories: the colour \"now Y has the COLOUR O\" repeats\n({record['settings']['colour_stories']}"
                 f" validation stories; the share where it is the most likely token)")
    ax.legend(loc="lower left", fontsize=8)

    plot_sweep(axes[1, 0], {s: induction[s]["sweep"] for s in sizes_}, SIZE_STYLE,
               f"{record['settings']['induction']['tune_sequences']} tuning sequences")
    ax = axes[1, 1]
    seeds_and_means(ax, {s: induction[s]["copy_accuracy"] for s in sizes_}, SIZE_STYLE, ticks(induction), scale=100)
    ax.set_ylim(0, 105)
    ax.set_xlabel("blocks x heads, at the chosen learning rate")
    ax.set_ylabel("copyable tokens predicted right (%)")
    ax.set_title(f"Periodic sequences: copy accuracy after the first period\n"
                 f"({record['settings']['induction']['test_sequences']} test sequences, periods"
                 f" {record['settings']['periods'][0]} to {record['settings']['periods'][1]})")
    ax = axes[1, 2]
    for k, s in enumerate(sizes_):
        for key, marker, dx in (("copy_loss", "o", -0.12), ("first_period_loss", "s", 0.12)):
            v = induction[s][key]
            ax.errorbar(k + dx, v["mean"], yerr=v["std"], fmt=marker, color=SIZE_STYLE[s], capsize=3)
    ax.errorbar([], [], fmt="o", color="gray", label="copyable positions (after the first period)")
    ax.errorbar([], [], fmt="s", color="gray", label="the first period")
    ax.axhline(floor["first_period_nats"], color="black", ls="--", lw=1,
               label=f"the first period's floor ({floor['first_period_nats']:.2f}: a new token is one of 95 or fewer)")
    ax.set_ylim(bottom=0)
    ax.set_xticks(range(len(sizes_)), ticks(induction))
    ax.set_xlabel("blocks x heads")
    ax.set_ylabel("loss (nats per token), mean ± sd over seeds")
    ax.set_title("Periodic sequences: what copying saves")
    ax.legend(loc="lower left", fontsize=8)
    fig.suptitle("What a second block and more heads buy (each size at the learning rate its sweep chose)")
    return save(fig, out, "depth_experiment.png")


def plot_induction_heads(params, config, sequences, scores, out):
    """Every head of a model (params, config) on the first test sequence with a period of 6 to 9, each titled with
    its scores on all the test sequences."""
    ids, _, periods = sequences
    row = next(i for i, p in enumerate(periods) if 6 <= p <= 9)
    _, cache = numpy_model.forward(params, ids[row], config)
    blocks, heads, p = config.blocks, config.heads, int(periods[row])
    fig, axes = subplots(blocks, heads, figsize=(3.6 * heads, 3.8 * blocks), squeeze=False,
                             constrained_layout=True)
    for b in range(blocks):
        weights = np.asarray(cache["blocks"][b]["att"]["weights"])  # (nh, T, T) or (T, T)
        weights = weights[None] if heads == 1 else weights
        for h in range(heads):
            ax = axes[b, h]
            ax.imshow(weights[h], cmap="Blues", vmin=0, vmax=1)
            s = scores[b][h]
            ax.set_title(f"block {b}, head {h}\ninduction {s['induction']:.2f}, previous token"
                         f" {s['previous_token']:.2f}", fontsize=9)
            ax.set_xticks(range(0, len(weights[h]), 16))
            ax.set_yticks(range(0, len(weights[h]), 16))
            if b == blocks - 1:
                ax.set_xlabel("key: position read")
            if h == 0:
                ax.set_ylabel("query: position reading")
    fig.suptitle(f"Every head of the {config.blocks_and_heads()} model on one test sequence of period {p}: an"
                 f" induction head reads the diagonals {p - 1}, {2 * p - 1}, {3 * p - 1}, ... below the main one"
                 f"\n(the tokens after the current token's earlier occurrences), a previous-token head the diagonal"
                 f" just below it; each title gives the head's mean scores on all {len(ids)} test sequences",
                 fontsize=10)
    return save(fig, out, "induction_heads.png")


def plot_scaling(record, out):
    """The scaling experiment's four panels, from its record: docs/scaling.md, "The picture", says what each shows."""
    settings, floor = record["settings"], record["floor"]["validation_nats_per_token"]
    budgets, names = settings["budgets"], list(map(name_of, settings["sizes"]))
    n = np.array([settings["parameters"][s] for s in names], dtype=float)  # (sizes,)
    fit, free = record["fits"]["true_floor"], record["fits"]["free_floor"]
    colours = matplotlib.colormaps["viridis"](np.linspace(0.0, 0.9, len(budgets)))
    fig, ((ax, right), (cuts, held)) = subplots(2, 2, figsize=(15, 13), constrained_layout=True)
    for c, colour in zip(budgets, colours):
        cells = [record["cells"][s][str(c)] for s in names]
        ax.plot(n, [cell["reducible"] for cell in cells], "-o", color=colour, ms=4, label=f"{c / 1e9:g} GFLOP")
        for k, cell in enumerate(cells):
            ax.scatter([n[k]] * len(cell["val"]["by_seed"]), np.array(cell["val"]["by_seed"]) - floor, s=6,
                       color=colour, alpha=0.5)
        d = np.array([c / settings["flops_per_token"][s] for s in names])  # (sizes,) tokens at this budget
        law = fit["E"] + fit["A"] / n ** fit["alpha"] + fit["B"] / d ** fit["beta"]  # (sizes,)
        ax.plot(n, law - floor, "--", color=colour, lw=1)
    front = record["frontier"]
    ax.plot([settings["parameters"][f["best_size"]] for f in front], [f["reducible"] for f in front], "k*-", ms=10,
            lw=1.5, label="frontier (least loss of each budget)")
    ax.plot([], [], "k--", lw=1, label=f"fit, E the true floor: {fit['E']:.4f} + {fit['A']:.3g}/N^{fit['alpha']:.2f}"
                                       f" + {fit['B']:.3g}/D^{fit['beta']:.2f}")
    ax.plot([], [], " ", label=f"(the fit with E free: E = {free['E']:.3f}, alpha {free['alpha']:.2f}, beta"
                               f" {free['beta']:.2f})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("non-embedding parameters N")
    ax.set_ylabel(f"reducible loss L - E (nats per token; E = {floor:.4f}, the true floor)")
    seeds, more = len(settings["seeds"]), len(settings["split_seeds"])
    counts = f"{seeds} seeds, or {seeds + more} where they split" if more else f"{seeds} seeds"
    ax.set_title(f"IsoFLOP curves: {len(names)} sizes x {len(budgets)} budgets,\n{counts}"
                 f" (dots), their mean (line), the law fitted with E the true floor (dashed)")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=3)
    iso = record["isoflop"]
    c = np.array([f["budget"] for f in front], dtype=float)  # (budgets,)
    at = np.array([f["budget"] in iso["budgets"] for f in front])  # (budgets,)
    for key, exponent, marker, what, colour in (("n_opt", iso["a"], "o", "N_opt", "tab:blue"),
                                                ("d_opt", iso["b"], "s", "D_opt", "tab:orange")):
        y = np.array([f[key] for f in front])  # (budgets,)
        right.plot(c[at], y[at], marker, color=colour, label=f"{what} (parabola through the least cell and its"
                   f" neighbours)")
        if not at.all():
            right.plot(c[~at], y[~at], marker, color=colour, mfc="none", label=f"{what} where the least cell is"
                       f" the smallest or largest size (left out of the power)")
        scale = np.exp(np.mean(np.log(y[at]) - exponent * np.log(c[at])))
        right.plot(c, scale * c ** exponent, "-", color=colour, lw=1, label=f"{what} ~ C^{exponent:.2f}")
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("compute C (training FLOPs)")
    right.set_ylabel("compute-optimal parameters N_opt and tokens D_opt")
    right.set_title(f"Compute-optimal size: {iso['tokens_per_parameter']:.1f} tokens per parameter (geometric"
                    f" mean)\nChinchilla: about 20, N_opt ~ C^0.5; Kaplan: N_opt ~ C^0.73")
    right.legend(fontsize=8)

    j = record["judged"]  # the fits judged (experiments/scaling_judged.py)
    least = np.array([cut["least_budget"] for cut in j["floors_by_cut"]], dtype=float)  # (cuts,)
    for shift, name, colour in ((0.95, "least_squares", "tab:blue"), (1.05, "huber", "tab:red")):
        e = np.array([cut[name]["E"] for cut in j["floors_by_cut"]])  # (cuts,)
        lo, hi = (np.array([cut[name]["interval"][k] for cut in j["floors_by_cut"]]) for k in (0, 1))  # (cuts,)
        cuts.errorbar(least * shift, e, yerr=[e - lo, hi - e], fmt="o", color=colour, capsize=3,
                      label=f"E free, {name.replace('_', ' ')} (95% interval)")
    cuts.axhline(floor, color="k", ls="--", lw=1, label=f"the true floor, {floor:.4f}")
    cuts.set_xscale("log")
    cuts.set_xlabel("the least budget fitted (FLOPs): every budget from it up")
    cuts.set_ylabel("fitted floor E (nats per token)")
    cuts.set_title("E free, fitted without the smallest budgets")
    cuts.legend(fontsize=8)
    cut = next(c for c in j["held_out"] if len(c["held_budgets"]) == 2)
    measured = np.array([c["measured"] for c in cut["cells"]])  # (held cells,)
    for name, marker, colour in (("least_squares", "o", "tab:blue"), ("huber", "s", "tab:red"),
                                 ("true_floor", "^", "tab:green")):
        fitted = cut["fits"][name]
        held.plot(measured, [c[name] for c in cut["cells"]], marker, color=colour, mfc="none",
                  label=f"{name.replace('_', ' ')} (E {fitted['E']:.3f}): rms error {fitted['rms_error']:.1%}")
    every = [*measured, *(c[name] for c in cut["cells"] for name in ("least_squares", "huber", "true_floor"))]
    span = [min(every) * 0.98, max(every) * 1.02]
    held.plot(span, span, "k-", lw=1, label="prediction = measurement")
    held.axvline(floor, color="k", ls="--", lw=1)
    held.set_xlabel("measured loss of a held-out cell (nats per token; dashed: the true floor)")
    held.set_ylabel("the law's prediction")
    held.set_title(f"Fitted on {cut['fitted_budgets'][0] / 1e9:g} to {cut['fitted_budgets'][-1] / 1e9:g} GFLOP,"
                   f" predicting {' and '.join(f'{c / 1e9:g}' for c in cut['held_budgets'])} GFLOP\n(the seeds"
                   f" measure these cells to {cut['seed_error']:.2%})")
    held.legend(fontsize=8)
    fig.suptitle("Scaling in a teacup: loss against compute, measured against the data's true entropy")
    return save(fig, out, "scaling_experiment.png")


# ----------------------------------------------------------------------------------------------------------------
# Command line


def main(argv=None):
    parser = argparse.ArgumentParser(description="Draw the pictures of docs/figures/ (matplotlib, PNG).",
                                     allow_abbrev=False)
    parser.add_argument("--out", default=str(FIGURES), metavar="DIR", type=given("a folder"),
                        help="folder for the PNGs (default: docs/figures/); made if it is missing, and every picture"
                             " in it replaced at the end, all or none (a file there that is not a PNG never is)")
    parser.add_argument("--steps", type=whole, default=None, metavar="N",
                        help="training steps of every model (default: train.py's 12000, and depth.py's 2000 for the"
                             " two-block model); fewer for a quick look")
    parser.add_argument("--record", default=str(POSITIONS_RECORD), metavar="PATH", type=given("a record file"),
                        help="the position experiment's record (default: positions.json beside this file)")
    parser.add_argument("--depth-record", default=str(DEPTH_RECORD), metavar="PATH", type=given("a record file"),
                        help="the depth experiment's record (default: depth.json beside this file)")
    parser.add_argument("--scaling-record", default=str(SCALING_RECORD), metavar="PATH", type=given("a record file"),
                        help="the scaling experiment's record (default: scaling.json beside this file)")
    args = parser.parse_args(argv)
    out, problem = Path(args.out), None  # judged from the path alone, before anything is read or trained
    too_long = name_problem(out / max(PICTURES, key=len))  # first: a name too long cannot even be looked up
    files = [] if too_long else [folder for folder in reversed(out.parents) if folder.exists() and not folder.is_dir()]
    if too_long:
        problem = f"--out {args.out}: {too_long}; choose a shorter one"
    elif out.exists() and not out.is_dir():
        problem = f"--out {args.out} is a file; expected a folder for the pictures"
    elif files:
        problem = f"--out {args.out}: {files[0]} is a file, not a folder"
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    machine.use_threads(1, "python3 -m experiments.plots")  # one BLAS thread, as train.py's default --threads
    note = holder("python3 -m experiments.plots", argv)
    try:
        with interruptible(), ExitStack() as owned:
            staging = Path(owned.enter_context(tempfile.TemporaryDirectory(prefix="plots-")))
            return drawn(args, owned, staging, note)
    except KeyboardInterrupt as e:
        return stopped(e, args.out)


def cannot_write(e, out, what):
    """Exit status 2, after one line saying that this run could not do what (e: the OSError or ValueError why) and
    that the pictures in out are as they were."""
    why = e.strerror if isinstance(e, OSError) and e.strerror else e
    print(f"error: cannot {what} ({why}); the pictures in {out} are as they were", file=sys.stderr)
    return 2


def drawn(args, owned, staging, note):
    """The run of main, once its arguments are checked: own --out until owned closes (atomic.hold), read the
    records and draw their pictures first (a damaged one is one line before any training), train, draw the rest,
    all in staging (a temporary folder), then write every picture into --out at once; the exit status."""
    try:
        out = owned.enter_context(hold(Path(args.out), note))  # the folder, links followed
    except (ValueError, OSError) as e:
        print(f"error: --out: {e}", file=sys.stderr)
        return 2
    for name in PICTURES:  # judged while this run owns the folder: what is there is replaced only by a picture
        problem = output_problem(out / name, f"--out {args.out}:", "a PNG picture", lambda raw: raw[:4] == b"\x89PNG",
                                 name)
        if problem is not None:
            print(f"error: {problem}", file=sys.stderr)
            return 2
    steps = {"steps": args.steps} if args.steps else {}  # every model's training steps, where --steps sets them
    paths = (args.record, args.depth_record, args.scaling_record)
    scripts = [writes(f"python3 -m experiments.{name}", f"{name}.json") for name in ("positions", "depth", "scaling")]
    pictures = {}
    try:
        records = [read_record(path, script) for path, script in zip(paths, scripts)]
        with reading(TRACE, "python3 trace_block.py --write"):
            order = read_record(TRACE, "python3 trace_block.py --write")["order_test"]
            sentences = (order["a"], order["b"])
        for record, path, script, draw in zip(records, paths, scripts, (plot_experiment, plot_depth, plot_scaling)):
            with reading(path, script, also=(ValueError,)):  # every field a picture reads, before any training
                pictures[draw] = draw(record, staging)
        with reading(paths[1], scripts[1], also=(ValueError,)):
            plan = {**records[1]["settings"]["induction"], **steps}
            lr = records[1]["induction"]["sizes"][name_of(HEADS_SIZE)]["sweep"]["chosen"]
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a picture that cannot be drawn to the temporary folder: a full disk there
        return cannot_write(e, args.out, "draw the pictures in a temporary folder")

    print("1/3: train.py's default training (seed 3, learned positions)", flush=True)
    learned_settings, none_settings = (Settings(eval_every=100, positions=scheme, quiet=True, **steps)
                                       for scheme in ("learned", "none"))
    run = training.train(learned_settings)
    learned, history = run.state["params"], run.history
    config, config_none = model_config(learned_settings, run.data.vocab), model_config(none_settings, run.data.vocab)
    print("2/3: the same without positions, for the order test", flush=True)
    without = training.train(none_settings, data=run.data).state["params"]
    start = numpy_model.init_params(config, 3)
    copier_config = induction_config(HEADS_SIZE)
    print(f"3/3: the {copier_config.blocks_and_heads()} model on periodic sequences (lr {lr:g}), for"
          f" its heads", flush=True)
    tuning = periodic(random.Random(TUNE_SEED), plan["tune_sequences"])
    copier, _ = train_induction(HEADS_SIZE, lr, 3, plan, tuning)
    test = periodic(random.Random(TEST_SEED), plan["test_sequences"])
    measures, scores = induction_measures(copier, copier_config, test)
    tok = bpe.Tokenizer.load(TOKENIZER_FILE)
    try:
        staged = [
            plot_loss_curves(history, run.data.val_floor, staging),
            plot_attention(learned, config, tok, staging),
            plot_position_similarity(start["pos_emb"], learned["pos_emb"], staging),
            plot_order_test((numpy_model.to_lists(learned), config), (numpy_model.to_lists(without), config_none), tok,
                            sentences, staging),
            pictures[plot_experiment],
            pictures[plot_depth],
            plot_induction_heads(copier, copier_config, test, scores, staging),
            pictures[plot_scaling],
        ]
    except OSError as e:
        return cannot_write(e, args.out, "draw the pictures in a temporary folder")
    try:
        with folder_for(out / PICTURES[0]):  # made if missing, removed again if nothing lands in it
            write_together({resolved(out / path.name): path.read_bytes() for path in staged})  # (through a link)
    except (ValueError, OSError) as e:
        return cannot_write(e, args.out, f"write the pictures in {args.out}")
    for path in staged:
        print(f"wrote {Path(args.out) / path.name} ({path.stat().st_size:,} bytes)")
    near = similarity_by_distance(learned["pos_emb"])
    print("trained position rows, mean cosine similarity by distance: "
          + ", ".join(f"{v:+.2f} at {k}" for k, v in near.items()) + f" (computing with {machine.blas(1)})")
    by_head = {key: "; ".join(f"block {b}: " + ", ".join(f"{s[key]:.2f}" for s in block)
                              for b, block in enumerate(scores)) for key in ("induction", "previous_token")}
    print(f"{copier_config.blocks_and_heads()} on periodic sequences (seed 3, lr {lr:g}): copy accuracy"
          f" {measures['copy_accuracy']:.0%}; induction score by head: {by_head['induction']}; previous-token score"
          f" by head: {by_head['previous_token']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
