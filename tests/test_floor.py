"""floor.py and corpus-entropy.json: the loss floor is the generator's own -log p per token, and the file is current."""

import json
import math
import shutil
from math import fsum

import bpe
from oneblock import floor
import make_corpus
from run_helpers import ROOT

TOK = bpe.Tokenizer.load(ROOT / "tokenizer.json")
RECORD = json.loads(floor.RECORD.read_text(encoding="utf-8"))


def test_floor_from_the_generators_own_log_probabilities():
    # independent of floor.py's parsing: generate() hands out each story's log-probability as it draws it
    stories = make_corpus.generate()
    nats = fsum(-logp for _, logp in stories)
    tokens = sum(len(TOK.encode(text + "\n")) for text, _ in stories)
    assert tokens == len(TOK.encode((ROOT / "corpus.txt").read_text(encoding="utf-8"))) == RECORD["tokens"]
    assert RECORD["stories"] == len(stories) == 3000
    assert math.isclose(RECORD["nats_per_token"], nats / tokens, rel_tol=1e-12)
    assert math.isclose(RECORD["nats_per_story"], make_corpus.generator_entropy(), rel_tol=0.01)
    assert 0.2 < RECORD["nats_per_token"] < 0.4 < math.log(96) == RECORD["uniform_nats_per_token"]


def test_the_file_is_current_and_check_reports_a_stale_one(tmp_path):
    """(python3 -m oneblock.floor --check, as docs/model.md shows it, runs in tests/test_readme.py.)"""
    for name in ("corpus.txt", "tokenizer.json"):
        shutil.copy(ROOT / name, tmp_path / name)
    record = tmp_path / "corpus-entropy.json"
    shutil.copy(floor.RECORD, record)
    assert floor.check(tmp_path, record) is None
    record.write_text(json.dumps({**RECORD, "tokens": 1}, indent=2) + "\n")
    assert "differs" in floor.check(tmp_path, record)
    record.unlink()
    assert "missing" in floor.check(tmp_path, record)
