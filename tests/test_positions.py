"""positions.py: the reduced experiment runs and has the full one's shape; the committed positions.json has the shape
and the settings of the code; the probe and the windows read the validation stories as described."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

np = pytest.importorskip("numpy")

import bpe  # noqa: E402
import make_corpus  # noqa: E402
import positions  # noqa: E402

TOK = bpe.Tokenizer.load(ROOT / "tokenizer.json")
VAL = (ROOT / "corpus.txt").read_text(encoding="utf-8").splitlines()[-300:]  # train.py's validation stories


def test_reduced_experiment_runs_and_has_the_shape_of_the_full_one(tmp_path, capsys):
    out = tmp_path / "reduced.json"
    assert positions.main(["--check", "--out", str(out), "--quiet"]) == 0, capsys.readouterr().out
    assert capsys.readouterr().out.splitlines()[-1].startswith("OK: the reduced run has the shape of the full one")
    record = json.loads(out.read_text(encoding="utf-8"))
    positions.check_record(record, positions.REDUCED)
    learned = record["schemes"]["learned"]["extrapolation"]
    assert not learned["reads_past_64"] and len(learned["loss_by_position"]) == 64
    assert "sequence of 128 tokens is longer than the 64 positions the model has" in learned["why_not"]
    for scheme in ("none", "sinusoidal", "rope"):
        ex = record["schemes"][scheme]["extrapolation"]
        assert ex["reads_past_64"] and ex["why_not"] is None and len(ex["loss_by_position"]) == 128


def test_committed_record_has_the_shape_and_settings_of_this_code():
    record = json.loads(positions.RECORD_FILE.read_text(encoding="utf-8"))
    positions.check_record(record, positions.FULL)
    assert record["command"] == "python3 positions.py" and 0 < record["seconds"] < 15 * 60
    floor = record["floor"]["validation_nats_per_token"]
    for scheme, r in record["schemes"].items():
        assert r["gap_to_floor"] == pytest.approx(r["val_loss"]["mean"] - floor, abs=2e-6), scheme
        assert r["val_loss"]["mean"] == pytest.approx(np.mean(r["val_loss"]["by_seed"]), abs=2e-6), scheme
        assert [c[-1][1] for c in r["val_curves"]] == r["val_loss"]["by_seed"]  # the last point of each curve


def test_check_record_names_what_is_wrong():
    record = json.loads(positions.RECORD_FILE.read_text(encoding="utf-8"))
    record["schemes"]["rope"]["val_loss"]["by_seed"].pop()
    with pytest.raises(ValueError, match="rope val_loss: expected 5 seeds"):
        positions.check_record(record, positions.FULL)
    with pytest.raises(ValueError, match="settings .* are not this code's"):
        positions.check_record(record, positions.REDUCED)


def test_probe_items_cover_every_validation_story_with_the_name_after_now():
    inputs, answers, shapes = positions.probe_items(TOK, VAL)
    assert len(inputs) == len(answers) == len(shapes) == 300
    names = {TOK.encode(" " + name)[0] for name in make_corpus.CAST}
    now = TOK.encode(" now")[0]
    for ids, answer, text in zip(inputs, answers, VAL):
        assert ids[0] == TOK.encode("\n")[0] and ids[-1] == now and answer in names
        assert text.startswith(TOK.decode(ids[1:] + [answer]) + " has the")  # "... now Y has the ..."
    assert set(shapes) == set(make_corpus.SHAPES)


def test_windows_are_consecutive_stretches_of_the_validation_stories():
    inputs, targets = positions.windows(TOK, VAL, 128)
    stream = TOK.encode("\n" + "".join(s + "\n" for s in VAL))
    assert inputs.shape == targets.shape == ((len(stream) - 1) // 128, 128)
    assert inputs.reshape(-1).tolist() == stream[:inputs.size]
    assert targets.reshape(-1).tolist() == stream[1:inputs.size + 1]


def test_json_text_keeps_lists_of_numbers_on_one_line():
    text = positions.json_text({"a": {"curve": [[0, 4.56789012], [500, 0.5]], "x": [1.0, 2.0]}})
    assert '"curve": [[0, 4.56789], [500, 0.5]]' in text and '"x": [1.0, 2.0]' in text
    assert json.loads(text) == {"a": {"curve": [[0, 4.56789], [500, 0.5]], "x": [1.0, 2.0]}}
