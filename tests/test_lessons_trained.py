"""The lessons that train (experiments/lessons_trained.py): each answer() driven with a lab of the seed's weights and
checked against a computation of its own here (the floors from floor.py's record and corpus.txt, the losses from
numpy_model, the refusal from numpy_model.check_length), and each judge on guesses either side of the answer.

The training ones are bounded: every answer here trains at most TEST_STEPS (100) steps per model, a few seconds in
all, instead of the lesson's own few hundred to a thousand; what a full-length run shows (the floor's gap, two blocks
copying) is a matter of its steps, and the shown lines say them.
"""

import json
import math
import random

import pytest

np = pytest.importorskip("numpy", reason="the lessons that train need NumPy")

from oneblock import data as data_files, floor, lessons, numpy_model, training  # noqa: E402
from experiments import lessons_trained as lt  # noqa: E402
from oneblock.settings import Settings, checked, model_config  # noqa: E402
from test_positions import TOK, VAL  # noqa: E402  (the tokenizer, and train.py's validation stories)

TEST_STEPS = 100  # the most steps any model trains in these tests (the lessons' own: 600, 400 and 1000)
ROOT = data_files.ROOT


@pytest.fixture
def lab():
    """The seed's weights, with a write that keeps the progress lines."""
    lab = lessons.build_lab()
    lab.said = []
    lab.write = lab.said.append
    return lab


def nll_per_position(logits, targets):
    """(n, T) -log softmax(logits)[target], in float64, by loss_and_dlogits one position at a time."""
    n, T, _ = logits.shape
    return np.array([[numpy_model.loss_and_dlogits(logits[i, t][None].astype(np.float64), targets[i, t:t + 1])[0]
                      for t in range(T)] for i in range(n)])


# ----------------------------------------------------------------------------------------------------------------
# 7. floor


def test_floor_trains_live_and_stays_above_the_floor(lab):
    answer = lt.FLOOR.answer(lab, steps=TEST_STEPS)
    record = json.loads((ROOT / "oneblock" / "corpus-entropy.json").read_text(encoding="utf-8"))
    assert answer["corpus_floor"] == record["nats_per_token"]
    nats, tokens = floor.story_floor(VAL, TOK)
    assert answer["val_floor"] == nats / tokens
    # the run's validation loss, again: the same run (deterministic), its weights through numpy_model story by story
    run = training.train(Settings(steps=TEST_STEPS, eval_every=TEST_STEPS, quiet=True))
    config = model_config(checked(Settings()), 96)
    total = math.fsum(numpy_model.sequence_loss(run.state["params"], np.array(ids[:-1]), np.array(ids[1:]), config)
                      * (len(ids) - 1) for ids in run.data.val_ids)
    assert answer["val_loss"] == pytest.approx(total / tokens, rel=1e-5)
    assert answer["gap"] == pytest.approx(answer["val_loss"] - nats / tokens, abs=1e-12) and answer["gap"] > 0
    assert answer["value"] == "no" and answer["steps"] == TEST_STEPS
    assert f"above the floor by {answer['gap']:.4f}" in "\n".join(answer["shown"])
    assert f"{TEST_STEPS} steps" in answer["bounds"]
    assert any(line.startswith(f"step {TEST_STEPS:>6} | train") for line in lab.said)  # its progress, through write
    assert lt.FLOOR.judge("no", answer) == "right" and lt.FLOOR.judge("yes", answer) == "off"


def test_floor_reads_the_page_models_loss(lab):
    """The seed's weights on the validation stories, through numpy_model.forward here."""
    data = data_files.prepare(checked(Settings()))
    loss, why = lt.page_val_loss(lab, data)
    params = numpy_model.from_lists(lab.params)
    total = 0.0
    for ids in data.val_ids:
        logits, _ = numpy_model.forward(params, np.array(ids[:-1]), lab.config)
        total += nll_per_position(logits[None], np.array([ids[1:]])).sum()
    assert why is None and loss == pytest.approx(total / data.val_tokens, rel=1e-12)


# ----------------------------------------------------------------------------------------------------------------
# 8. positions-past-length


def test_past_length_learned_refuses_the_others_read(lab):
    steps = TEST_STEPS // 2  # four runs of 50: 200 steps in all
    answer = lt.POSITIONS_PAST_LENGTH.answer(lab, steps=steps)
    refusal = "sequence of 101 tokens is longer than the 64 positions the model has"  # numpy_model.check_length's
    assert answer["runs"]["learned"]["refused"] == refusal
    assert f"learned: refused: {refusal}" in answer["shown"]
    assert answer["value"] == "every scheme but learned"
    assert any(line.startswith("the page's model") and line.endswith(refusal) for line in answer["shown"])
    # rope's losses again: the same run, windows of 102 tokens cut here, the loss by loss_and_dlogits
    stream = TOK.encode("\n" + "".join(s + "\n" for s in VAL))
    rows = np.array([stream[i:i + 102] for i in range(0, len(stream) - 101, 101)])
    ids, targets = rows[:, :-1], rows[:, 1:]
    assert answer["windows"] == len(rows)
    run = training.train(Settings(steps=steps, eval_every=steps, positions="rope", quiet=True))
    config = model_config(checked(Settings(positions="rope")), 96)
    logits, _ = numpy_model.forward(run.state["params"], ids, config)
    logits = logits.astype(np.float64)
    got = answer["runs"]["rope"]
    assert got["before"] == pytest.approx(numpy_model.loss_and_dlogits(logits[:, :64], targets[:, :64])[0], rel=1e-9)
    assert got["after"] == pytest.approx(numpy_model.loss_and_dlogits(logits[:, 64:], targets[:, 64:])[0], rel=1e-9)
    assert got["at"] == pytest.approx(numpy_model.loss_and_dlogits(logits[:, 100:], targets[:, 100:])[0], rel=1e-9)
    judge = lt.POSITIONS_PAST_LENGTH.judge
    assert [judge(g, answer) for g in ("every scheme but learned", "all four", "learned only", "no scheme")] == [
        "right", "close", "off", "off"]


# ----------------------------------------------------------------------------------------------------------------
# 9. second-block


def test_second_block_trains_as_the_experiment_does():
    """The lesson's loop with its progress is train_induction's: the same weights, bit for bit."""
    from experiments.induction import periodic, train_induction

    tuning = periodic(random.Random(0), 4)
    with training.use_threads(Settings()):  # the lesson's BLAS threads (train.py's one): another
        # thread count adds in another order, and the weights may then differ in their last bits
        theirs, _ = train_induction((2, 1), lt.COPY_LR[2, 1], lt.COPY_SEED,
                                    {"steps": TEST_STEPS // 2, "batch": lt.COPY_BATCH, "eval_every": TEST_STEPS},
                                    tuning)
    said = []
    ours = lt.copy_train((2, 1), TEST_STEPS // 2, said.append)
    assert set(ours) == set(theirs) and all(np.array_equal(ours[k], theirs[k]) for k in ours)
    steps = [line.split()[1].rstrip(":") for line in said]  # a progress line each quarter, and at the end
    assert steps == ["12/50", "24/50", "36/50", "48/50", "50/50"]


def test_second_block_learning_rates_are_the_depth_records():
    record = json.loads((ROOT / "experiments" / "depth.json").read_text(encoding="utf-8"))
    assert {size: record["induction"]["sizes"][f"{size[0]}x{size[1]}"]["sweep"]["chosen"] for size in lt.COPY_SIZES} \
        == lt.COPY_LR


def test_second_block_compares_copied_tokens(lab):
    from experiments.induction import periodic

    steps = TEST_STEPS // 2  # two runs of 50
    answer = lt.SECOND_BLOCK.answer(lab, steps=steps)
    test_ids, test_targets, periods = periodic(random.Random(lt.TEST_SEED), lt.TEST_SEQUENCES)
    copyable = np.arange(64)[None, :] >= periods[:, None]  # a token seen one period back
    for size, name in zip(lt.COPY_SIZES, ("one block", "two blocks")):
        params = lt.copy_train(size, steps, lambda line: None)
        config = model_config(checked(Settings(blocks=size[0], heads=size[1])), 96)
        logits, _ = numpy_model.forward(params, test_ids, config)
        right = (logits.argmax(axis=2) == test_targets)[copyable]
        got = answer["measures"][name]["copy_accuracy"]
        assert abs(got - right.mean()) <= 2 / right.size, name  # (numpy_fast's logits: a near tie may flip)
    one, two = (answer["measures"][name]["copy_accuracy"] for name in ("one block", "two blocks"))
    assert answer["value"] == lt.copy_choice(one, two) and answer["steps"] == steps
    assert f"{100 * (two - one):+.1f} points" in answer["shown"][-1]
    assert lt.SECOND_BLOCK.judge(answer["value"], answer) == "right"
    assert [lt.copy_choice(0.3, x) for x in (0.51, 0.5, 0.09)] == list(lt.COPY_CHOICES)


@pytest.mark.parametrize("lesson", lt.LESSONS[:3], ids=lambda lesson: lesson.key)
def test_training_without_threadpoolctl_is_a_skip_that_says_so(lab, monkeypatch, lesson):
    real = lt.importlib.util.find_spec
    monkeypatch.setattr(lt.importlib.util, "find_spec", lambda name: None if name == "threadpoolctl" else real(name))
    with pytest.raises(lessons.Skip, match=r"needs threadpoolctl, which is not installed; install it with"):
        lesson.answer(lab, steps=1)
    assert lab.said == []  # nothing trained
