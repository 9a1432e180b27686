"""The pictures in figures/: what the trained model does, and what the position experiment found.

    python3 plots.py                    # trains two models as train.py does (about 45 s), reads positions.json
    python3 plots.py --steps 50 --out quick-figures    # a quick look: short training, another folder

Training is train.py's default run (`train.train_model`): seed 3 with learned positions, the same weights as
`python3 train.py` (validation every 100 steps instead of 500, which changes no weight), and the same run with
--positions none for the order test. The position experiment's picture reads positions.json (positions.py).
Written with matplotlib's Agg backend (no display needed), one PNG per picture:

    loss_curves.png            training and validation loss against the entropy floor
    attention.png              the attention weights on the first story of corpus.txt
    position_similarity.png    cosine similarity between the 64 learned position rows, before and after training
    order_test.png             the logit gap between two orders of the same tokens, with and without positions
    positions_experiment.png   validation loss, order probe and loss by position for the four position schemes
"""

import argparse
import json
import sys
from pathlib import Path

import machine

if "numpy" not in sys.modules:  # BLAS reads its thread count when NumPy is first imported
    machine.set_blas_threads(1)  # one thread, as train.py's default --threads (and the same bits as its runs)

np = machine.need("numpy", "plots.py")
matplotlib = machine.need("matplotlib", "plots.py")
matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

import bpe  # noqa: E402
import numpy_model  # noqa: E402
import positions  # noqa: E402
import trace_block  # noqa: E402
import train  # noqa: E402

HERE = Path(__file__).resolve().parent
FIGURES = HERE / "figures"
STYLE = {"learned": "tab:blue", "none": "tab:gray", "sinusoidal": "tab:orange", "rope": "tab:green"}  # a colour each
DPI = 120

# ----------------------------------------------------------------------------------------------------------------
# Helpers


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
    """Write fig as out/name (PNG), close it, and return the path."""
    path = out / name
    fig.savefig(path, dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------------------------------------------
# The pictures


def plot_loss_curves(history, floor, steps, out):
    fig, ax = plt.subplots(figsize=(8, 4.5))
    train_points = [(h["step"], h["train"]) for h in history if h["train"] is not None]
    ax.plot(*zip(*train_points), color="tab:blue", lw=1.2, label="training (mean over the steps since the last point)")
    ax.plot([h["step"] for h in history], [h["val"] for h in history], color="tab:red", lw=1.5,
            label="validation (300 held-out stories)")
    ax.axhline(floor, color="black", ls="--", lw=1, label=f"entropy floor of those stories ({floor:.4f})")
    log_axis(ax, [0.3, 0.4, 0.5, 0.7, 1, 2, 3, 4.5], (0.28, 5))
    ax.set_xlim(0, steps)
    ax.set_xlabel("optimiser step (16 windows of 64 tokens each)")
    ax.set_ylabel("loss (nats per token, log scale)")
    ax.set_title(f"Training the one-block model (learned positions, seed 3): final validation loss"
                 f" {history[-1]['val']:.4f}")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper right")
    return save(fig, out, "loss_curves.png")


def plot_attention(params, tok, out):
    story = (HERE / "corpus.txt").read_text(encoding="utf-8").split("\n", 1)[0]
    ids = tok.encode("\n" + story)  # (T,) the newline before it, as the model reads every story
    _, cache = numpy_model.forward(params, np.array(ids))
    weights = np.array(cache["att"]["weights"])  # (T, T)
    labels = [label(tok.vocab[i]) for i in ids]
    fig, ax = plt.subplots(figsize=(10, 9))
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
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.4), constrained_layout=True)
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


def plot_order_test(with_positions, without_positions, tok, out):
    a, b = tok.tokens(trace_block.ORDER_A), tok.tokens(trace_block.ORDER_B)
    gaps = {"learned positions": trace_block.position_gaps(with_positions, tok, True),
            "no positions": trace_block.position_gaps(without_positions, tok, False)}
    x = np.arange(len(a))
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for k, (name, values) in enumerate(gaps.items()):
        bars = ax.bar(x + (k - 0.5) * 0.38, values, width=0.38, label=f"trained with {name}",
                      color=STYLE["learned" if k == 0 else "none"])
        ax.bar_label(bars, labels=[f"{v:.2f}" if v else "0" for v in values], fontsize=7, padding=2)
    ticks = [label(ta) if ta == tb else f"{label(ta)} / {label(tb)}" for ta, tb in zip(a, b)]
    ax.set_xticks(x, ticks)
    ax.set_xlabel(f"position: token of A / token of B where they differ\nA = \"{trace_block.ORDER_A}\","
                  f"  B = \"{trace_block.ORDER_B}\"")
    ax.set_ylabel("largest |logit A - logit B| (logit units)")
    ax.set_title("Order test: without positions the last token cannot tell A from B (gap exactly 0)")
    ax.legend(loc="upper left")
    ax.margins(y=0.15)
    return save(fig, out, "order_test.png")


def plot_experiment(record, out):
    schemes = list(record["schemes"])
    seeds = record["settings"]["seeds"]
    floor = record["floor"]["validation_nats_per_token"]
    fig, axes = plt.subplots(1, 3, figsize=(17, 5), gridspec_kw={"width_ratios": [1, 1, 1.6]}, constrained_layout=True)

    ax = axes[0]  # validation loss: each seed, and the mean with one standard deviation
    for k, scheme in enumerate(schemes):
        v = record["schemes"][scheme]["val_loss"]
        ax.scatter([k] * len(v["by_seed"]), v["by_seed"], color=STYLE[scheme], alpha=0.5, s=18)
        ax.errorbar(k + 0.18, v["mean"], yerr=v["std"], fmt="o", color=STYLE[scheme], capsize=4)
    ax.axhline(floor, color="black", ls="--", lw=1, label=f"entropy floor ({floor:.4f})")
    ax.set_xticks(range(len(schemes)), schemes)
    ax.set_xlabel("position scheme")
    ax.set_ylabel("validation loss (nats per token)")
    ax.set_title(f"Validation loss: {len(seeds)} seeds (dots),\nmean ± standard deviation (bar)")
    ax.legend(loc="upper left")

    ax = axes[1]  # the order probe
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

    ax = axes[2]  # loss by position in 128-token windows
    for scheme in schemes:
        ex = record["schemes"][scheme]["extrapolation"]
        curve = ex["loss_by_position"]
        name = scheme if ex["reads_past_64"] else f"{scheme} (no row past 63: stops there)"
        ax.plot(range(len(curve)), curve, color=STYLE[scheme], lw=1.3, label=name)
    ax.axvline(positions.TRAINED - 0.5, color="black", ls=":", lw=1)
    ax.text(positions.TRAINED + 1.5, 0.03, "positions 64 to 127: never seen in training",
            transform=ax.get_xaxis_transform(), va="bottom", fontsize=9)
    ax.axhline(floor, color="black", ls="--", lw=1)
    uniform = record["floor"]["uniform_nats_per_token"]
    ax.axhline(uniform, color="black", ls="-.", lw=1)
    ax.text(2, uniform * 1.04, f"uniform guessing ({uniform:.2f})", va="bottom", fontsize=9)
    ax.set_xlim(0, positions.WINDOW)
    log_axis(ax, [0.2, 0.3, 0.5, 0.7, 1, 2, 3, 5], (0.15, 6.5))
    ax.set_xlabel(f"position in the window (token index; {record['settings']['extrapolation_windows']} windows"
                  f" of {positions.WINDOW} tokens)")
    ax.set_ylabel("loss at that position (nats per token)")
    ax.set_title("Length extrapolation: loss by position, mean over seeds\n(dashed: entropy floor)")
    ax.legend(loc="upper left", bbox_to_anchor=(0, 0.86), fontsize=9)
    fig.suptitle("The same model trained with four position schemes (same data, budget and settings)")
    return save(fig, out, "positions_experiment.png")


# ----------------------------------------------------------------------------------------------------------------
# Command line


def main(argv=None):
    parser = argparse.ArgumentParser(description="Draw the pictures of figures/ (matplotlib, PNG).")
    parser.add_argument("--out", default=str(FIGURES), metavar="DIR", help="folder for the PNGs (default: figures/"
                                                                           " next to this script)")
    parser.add_argument("--steps", type=int, default=None, metavar="N",
                        help="training steps (default: train.py's, 12000); fewer for a quick look")
    parser.add_argument("--record", default=str(positions.RECORD_FILE), metavar="PATH",
                        help="the position experiment's record (default: positions.json next to this script)")
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    record_path = Path(args.record)
    if not record_path.exists():
        print(f"error: no record at {record_path}; run python3 positions.py to make it", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    steps = ["--steps", str(args.steps)] if args.steps else []
    learned, history, data = train.train_model(["--eval-every", "100", *steps])
    without, _, _ = train.train_model(["--eval-every", "100", "--positions", "none", *steps], data=data)
    start = numpy_model.init_params(data.vocab, train.MODEL["d"], train.MODEL["hidden"], train.MODEL["max_len"], 3)
    tok = bpe.Tokenizer.load(train.TOKENIZER_FILE)
    written = [
        plot_loss_curves(history, data.val_floor, history[-1]["step"], out),
        plot_attention(learned, tok, out),
        plot_position_similarity(start["pos_emb"], learned["pos_emb"], out),
        plot_order_test(numpy_model.to_lists(learned), numpy_model.to_lists(without), tok, out),
        plot_experiment(json.loads(record_path.read_text(encoding="utf-8")), out),
    ]
    for path in written:
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    near = similarity_by_distance(learned["pos_emb"])
    print("trained position rows, mean cosine similarity by distance: "
          + ", ".join(f"{v:+.2f} at {k}" for k, v in near.items()) + f" (computing with {machine.blas(1)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
