"""Tests of the lab: the model, its backward pass, the trace, the tokenizer and the corpus. Standard library only.

    python3 -m unittest -v test_model.py
"""

import contextlib
import doctest
import io
import json
import math
import random
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import atomic
import bpe
import make_corpus
import model
import trace_block

HERE = Path(__file__).resolve().parent
CORPUS = (HERE / "corpus.txt").read_text(encoding="utf-8")
LINES = CORPUS.splitlines(keepends=True)
FIRST_STORY = ("mia has a red hat. mia goes to the garden. at the garden, mia gives the hat to ava."
               " now ava has the red hat.")
TOK = bpe.Tokenizer.load(HERE / "tokenizer.json")
SERIES = model.init_params(vocab=96, **trace_block.SERIES)
TINY = model.init_params(vocab=96, **trace_block.TINY)


def load_tests(loader, tests, ignore):
    """unittest runs the examples in the modules' docstrings too."""
    for module in (atomic, bpe, make_corpus, model, trace_block):
        tests.addTests(doctest.DocTestSuite(module))
    return tests


def random_ids(rng, n, vocab=96):
    return [rng.randrange(vocab) for _ in range(n)]


# ----------------------------------------------------------------------------------------------------------------
# The trace and the gradient check


class TestTrace(unittest.TestCase):
    def test_recorded_trace_is_current(self):
        run = subprocess.run([sys.executable, "trace_block.py", "--check"], cwd=HERE, capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)

    def test_check_fails_on_a_stale_truncated_or_missing_record(self):
        trace = json.loads((HERE / "block-trace.json").read_text(encoding="utf-8"))
        trace["initial_loss"] += 1e-12
        stale = trace_block.to_json(trace) + "\n"
        with tempfile.TemporaryDirectory() as tmp:
            old, trace_block.TRACE_FILE = trace_block.TRACE_FILE, Path(tmp) / "block-trace.json"
            try:
                trace_block.TRACE_FILE.write_text(stale, encoding="utf-8")
                fresh = trace_block.to_json(json.loads((HERE / "block-trace.json").read_text(encoding="utf-8")))
                said = trace_block.check(fresh + "\n")
                self.assertIn("does not match this model.py (recorded: field 'initial_loss' is ", said)
                self.assertIn("unless you changed the model on purpose, the model is wrong", said)
                trace_block.TRACE_FILE.write_text(stale[: len(stale) // 2], encoding="utf-8")
                self.assertIn("not valid JSON", trace_block.check(fresh + "\n"))
                trace_block.TRACE_FILE.unlink()
                self.assertIn("missing", trace_block.check(fresh + "\n"))
            finally:
                trace_block.TRACE_FILE = old

    def test_a_wrong_backward_is_not_ok_in_verbose_and_never_written(self):
        """layer norm's backward without its xhat term: --verbose marks the tensors it spoils NOT OK and names the
        first the backward pass meets (b2: the final norm's backward hands it its gradient), exit 1; --write
        writes nothing."""
        right = model.layernorm_backward

        def wrong(dy, g, cache):
            dx, dg, db = right(dy, g, cache)
            u = [[a * gi for a, gi in zip(row, g)] for row in dy]  # (T, n)
            return [[(ui - math.fsum(ur) / len(g)) / s for ui in ur] for ur, s in zip(u, cache["std"])], dg, db

        with tempfile.TemporaryDirectory() as tmp:
            old, trace_block.TRACE_FILE = trace_block.TRACE_FILE, Path(tmp) / "block-trace.json"
            model.layernorm_backward, err = wrong, io.StringIO()
            try:
                with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                    self.assertEqual(trace_block.main(["--verbose"]), 1)
                    self.assertEqual(trace_block.main(["--write"]), 1)
                self.assertFalse(trace_block.TRACE_FILE.exists())
            finally:
                model.layernorm_backward, trace_block.TRACE_FILE = right, old
        lines = err.getvalue().splitlines()
        self.assertTrue(any(line.startswith("  b2 ") and line.endswith("NOT OK") for line in lines), lines)
        self.assertTrue(any(line.startswith("  lnf_g ") and not line.endswith("NOT OK") for line in lines), lines)
        self.assertIn("b_out, W_out, lnf_b, lnf_g come out right and b2 is the first wrong", err.getvalue())
        self.assertTrue(lines[-1].startswith("not written: the gradient check fails"), lines[-1])

    def test_every_gradient_of_the_tiny_copy_matches_central_differences(self):
        ids = TOK.encode(LINES[1])  # another story than the trace checks
        errors = trace_block.gradient_errors(TINY, ids[:8], ids[1:9])
        self.assertEqual(list(errors), list(TINY))  # every tensor was checked
        for name, err in errors.items():
            self.assertLess(err, 1e-7, name)

    def test_gradients_also_match_without_positions(self):
        rng = random.Random(1)
        ids = random_ids(rng, 6)
        x, y = ids[:5], ids[1:]
        logits, cache = model.forward(TINY, x, use_positions=False)
        _, dlogits = model.loss_and_dlogits(logits, y)
        grads = model.backward(TINY, cache, dlogits)
        self.assertTrue(all(v == 0.0 for row in grads["pos_emb"] for v in row))
        for name in ("tok_emb", "Wq", "ln1_g"):  # one tensor from each part of the model, numerically
            tensor = TINY[name]
            rows = tensor if isinstance(tensor[0], list) else [tensor]
            grad_rows = grads[name] if isinstance(tensor[0], list) else [grads[name]]
            for i, j in [(r, c) for r in range(len(rows)) for c in range(len(rows[0]))][:40]:
                saved = rows[i][j]
                rows[i][j] = saved + 1e-6
                up = model.sequence_loss(TINY, x, y, use_positions=False)
                rows[i][j] = saved - 1e-6
                down = model.sequence_loss(TINY, x, y, use_positions=False)
                rows[i][j] = saved
                self.assertLess(abs((up - down) / 2e-6 - grad_rows[i][j]), 1e-7, f"{name}[{i}][{j}]")


# ----------------------------------------------------------------------------------------------------------------
# Layer norm


class TestLayerNorm(unittest.TestCase):
    def test_forward_centres_and_scales_each_row(self):
        rng = random.Random(2)
        x = [[rng.gauss(3.0, 2.0) for _ in range(8)] for _ in range(5)]
        gain, bias = 1.5, -0.25
        out, _ = model.layernorm_forward(x, [gain] * 8, [bias] * 8)
        for row_in, row in zip(x, out):
            var_in = math.fsum((v - math.fsum(row_in) / 8) ** 2 for v in row_in) / 8
            mean = math.fsum(row) / 8
            var = math.fsum((v - mean) ** 2 for v in row) / 8
            self.assertAlmostEqual(mean, bias, places=12)  # the bias sets the mean
            self.assertAlmostEqual(var, gain**2 * var_in / (var_in + model.EPS), places=12)  # gain^2 the variance
            self.assertLess(var, gain**2)  # EPS keeps it just below

    def test_eps_is_visible_for_tiny_variance(self):
        out, _ = model.layernorm_forward([[0.001, -0.001]], [1.0, 1.0], [0.0, 0.0])
        self.assertAlmostEqual(out[0][0], 0.001 / math.sqrt(1e-6 + model.EPS), places=12)

    def test_backward_with_non_unit_gains_matches_finite_differences(self):
        rng = random.Random(3)
        n, rows = 6, 3
        x = [[rng.gauss(0.0, 1.0) for _ in range(n)] for _ in range(rows)]
        g = [rng.uniform(0.5, 2.0) for _ in range(n)]
        b = [rng.gauss(0.0, 1.0) for _ in range(n)]
        dy = [[rng.gauss(0.0, 1.0) for _ in range(n)] for _ in range(rows)]

        def objective():  # sum(dy * out), whose gradient with respect to out is dy
            out, _ = model.layernorm_forward(x, g, b)
            return math.fsum(a * o for ra, ro in zip(dy, out) for a, o in zip(ra, ro))

        def numeric(vector, j):
            saved = vector[j]
            vector[j] = saved + 1e-6
            up = objective()
            vector[j] = saved - 1e-6
            down = objective()
            vector[j] = saved
            return (up - down) / 2e-6

        _, cache = model.layernorm_forward(x, g, b)
        dx, dg, db = model.layernorm_backward(dy, g, cache)
        for r in range(rows):
            for j in range(n):
                self.assertAlmostEqual(dx[r][j], numeric(x[r], j), places=8, msg=f"dx[{r}][{j}]")
        for j in range(n):
            self.assertAlmostEqual(dg[j], numeric(g, j), places=8, msg=f"dg[{j}]")
            self.assertAlmostEqual(db[j], numeric(b, j), places=8, msg=f"db[{j}]")


# ----------------------------------------------------------------------------------------------------------------
# Causality, positions and word order


class TestCausalityAndPositions(unittest.TestCase):
    def test_a_later_token_leaves_earlier_logits_bit_identical(self):
        rng = random.Random(4)
        ids = random_ids(rng, 20)
        before, _ = model.forward(SERIES, ids)
        for t in (0, 7, 19):
            changed = list(ids)
            changed[t] = (ids[t] + 1) % 96
            after, _ = model.forward(SERIES, changed)
            self.assertEqual(after[:t], before[:t], f"changing position {t} moved an earlier logit")
            self.assertNotEqual(after[t], before[t], f"changing position {t} did not change its own logits")

    def test_attention_weights_are_zero_above_the_diagonal(self):
        _, cache = model.forward(SERIES, random_ids(random.Random(5), 10))
        weights = cache["att"]["weights"]
        for i, row in enumerate(weights):
            self.assertTrue(all(w == 0.0 for w in row[i + 1 :]))
            self.assertAlmostEqual(math.fsum(row), 1.0, places=14)

    def test_position_rows_past_the_sequence_get_exactly_zero_gradient(self):
        ids = random_ids(random.Random(6), 6)
        logits, cache = model.forward(SERIES, ids[:5])
        _, dlogits = model.loss_and_dlogits(logits, ids[1:])
        grads = model.backward(SERIES, cache, dlogits)
        for t, row in enumerate(grads["pos_emb"]):
            if t < 5:
                self.assertTrue(any(v != 0.0 for v in row), f"row {t} should have a gradient")
            else:
                self.assertTrue(all(v == 0.0 for v in row), f"row {t} is past the sequence")

    def test_repeated_tokens_accumulate_their_embedding_gradient(self):
        ids = [7, 3, 7, 7, 9]
        logits, cache = model.forward(TINY, ids)
        _, dlogits = model.loss_and_dlogits(logits, [3, 7, 7, 9, 1])
        grads = model.backward(TINY, cache, dlogits)
        untouched = [v for v in range(96) if v not in ids]
        self.assertTrue(all(x == 0.0 for v in untouched for x in grads["tok_emb"][v]))
        self.assertTrue(any(x != 0.0 for x in grads["tok_emb"][7]))

    def test_without_positions_word_order_is_invisible_at_the_last_position(self):
        a, b = TOK.encode(trace_block.ORDER_A), TOK.encode(trace_block.ORDER_B)
        self.assertEqual(sorted(a), sorted(b))  # the same tokens, in another order
        self.assertNotEqual(a, b)
        la, _ = model.forward(SERIES, a, use_positions=False)
        lb, _ = model.forward(SERIES, b, use_positions=False)
        self.assertEqual(la[-1], lb[-1])  # bit-identical
        for t in range(2, len(a) - 1):  # the positions between the swapped names see different prefixes
            self.assertNotEqual(la[t], lb[t], f"position {t}")
        pa, _ = model.forward(SERIES, a, use_positions=True)
        pb, _ = model.forward(SERIES, b, use_positions=True)
        self.assertNotEqual(pa[-1], pb[-1])
        self.assertGreater(trace_block.last_logits_gap(SERIES, TOK, use_positions=True), 0.0)
        self.assertEqual(trace_block.last_logits_gap(SERIES, TOK, use_positions=False), 0.0)


# ----------------------------------------------------------------------------------------------------------------
# Errors


class TestErrors(unittest.TestCase):
    def assertRaisesWith(self, phrase, fn, *args, **kwargs):
        with self.assertRaises(ValueError) as ctx:
            fn(*args, **kwargs)
        self.assertIn(phrase, str(ctx.exception))

    def test_empty_sequence(self):
        self.assertRaisesWith("empty sequence", model.forward, SERIES, [])

    def test_too_long(self):
        self.assertRaisesWith("sequence of 65 tokens is longer than the 64 positions the model has",
                              model.forward, SERIES, [1] * 65)

    def test_ids_outside_the_vocabulary(self):
        self.assertRaisesWith("token IDs outside the vocabulary of size 96: [96]", model.forward, SERIES, [1, 96, 2])
        self.assertRaisesWith("outside the vocabulary of size 96: [-1]", model.forward, SERIES, [-1])

    def test_targets_count_differs(self):
        self.assertRaisesWith("3 positions but 2 targets", model.sequence_loss, SERIES, [1, 2, 3], [2, 3])
        logits, _ = model.forward(SERIES, [1, 2, 3])
        self.assertRaisesWith("3 positions but 2 targets", model.loss_and_dlogits, logits, [2, 3])

    def test_ids_that_are_not_plain_ints(self):
        for bad in (True, 1.0, "1", None):
            self.assertRaisesWith(f"got {bad!r}", model.forward, SERIES, [1, bad])
        self.assertRaisesWith("should be a list of ints", model.forward, SERIES, "abc")

    def test_targets_outside_the_vocabulary_or_not_ints(self):
        self.assertRaisesWith("target IDs outside the vocabulary of size 96: [100]",
                              model.sequence_loss, SERIES, [1, 2], [3, 100])
        self.assertRaisesWith("target IDs should be plain ints", model.sequence_loss, SERIES, [1, 2], [3, 2.0])

    def test_parameter_dict_missing_a_tensor(self):
        params = dict(TINY)
        del params["Wk"]
        self.assertRaisesWith("missing tensors: ['Wk']", model.forward, params, [1, 2])

    def test_parameter_dict_with_a_misshapen_tensor(self):
        params = dict(TINY)
        params["W1"] = [row[:-1] for row in TINY["W1"]]
        self.assertRaisesWith("parameter W1 has shape (4, 7), expected (4, 8)", model.forward, params, [1, 2])
        params = dict(TINY)
        params["ln2_b"] = TINY["ln2_b"] + [0.0]
        self.assertRaisesWith("parameter ln2_b has shape (5,), expected (4,)", model.forward, params, [1, 2])
        params = dict(TINY)
        params["Wo"] = TINY["Wo"][:2] + [TINY["Wo"][2][:1]] + TINY["Wo"][3:]
        self.assertRaisesWith("parameter Wo has rows of different lengths", model.forward, params, [1, 2])



# ----------------------------------------------------------------------------------------------------------------
# Tokenizer: round trips and edge strings


class TestTokenizerRoundTrip(unittest.TestCase):

    def test_whole_corpus_line_by_line(self):
        for i, line in enumerate(LINES):
            with self.subTest(line=i + 1):
                self.assertEqual(TOK.decode(TOK.encode(line)), line)

    def test_whole_corpus_at_once(self):
        ids = TOK.encode(CORPUS)
        self.assertEqual(TOK.decode(ids), CORPUS)
        self.assertEqual(ids, [i for line in LINES for i in TOK.encode(line)])  # pieces never cross a newline

    def test_edge_strings(self):
        for text in ["a", " ", "\n", ".", "  ", " .", "\n\n", "a b", " mia", "mia ", "zzz", "now", ".,. ,"]:
            with self.subTest(text=text):
                self.assertEqual(TOK.decode(TOK.encode(text)), text)
                self.assertEqual("".join(TOK.tokens(text)), text)

    def test_every_single_character(self):
        for ch in TOK.alphabet:
            self.assertEqual(TOK.tokens(ch), [ch])

    def test_empty_string(self):
        self.assertEqual(TOK.encode(""), [])
        self.assertEqual(TOK.tokens(""), [])
        self.assertEqual(TOK.decode([]), "")


# ----------------------------------------------------------------------------------------------------------------
# Tokenizer: the required tokenisations of the shipped tokenizer


class TestTokenizerRequired(unittest.TestCase):

    def test_vocabulary_is_96(self):
        self.assertEqual(len(TOK.vocab), 96)
        self.assertEqual(len(set(TOK.vocab)), 96)
        self.assertEqual(TOK.vocab[:len(TOK.alphabet)], sorted(set(CORPUS)))

    def test_order_sentence_a(self):
        self.assertEqual(TOK.tokens("now mia gives the hat to leo."),
                         ["n", "ow", " mia", " gives", " the", " hat", " to", " leo", "."])

    def test_order_sentence_b(self):
        self.assertEqual(TOK.tokens("now leo gives the hat to mia."),
                         ["n", "ow", " leo", " gives", " the", " hat", " to", " mia", "."])

    def test_ball_and_hat_differ_at_fifth_token(self):
        ball = TOK.encode("mia has a red ball.")
        hat = TOK.encode("mia has a red hat.")
        self.assertEqual(ball[:4], hat[:4])
        self.assertNotEqual(ball[4], hat[4])
        self.assertEqual(TOK.tokens("mia has a red hat."), ["mia", " has", " a", " red", " hat", "."])

    def test_first_story_is_37_tokens(self):
        self.assertEqual(LINES[0], FIRST_STORY + "\n")
        self.assertEqual(len(TOK.encode(LINES[0])), 37)


# ----------------------------------------------------------------------------------------------------------------
# Tokenizer: errors


class TestTokenizerErrors(unittest.TestCase):

    def test_unknown_character_names_it_and_its_position(self):
        with self.assertRaises(ValueError) as ctx:
            TOK.encode("mia has a Red hat.")
        self.assertIn("'R'", str(ctx.exception))
        self.assertIn("position 10", str(ctx.exception))

    def test_unknown_character_first_one_reported(self):
        with self.assertRaises(ValueError) as ctx:
            TOK.encode("ok\t!")
        self.assertIn("'\\t'", str(ctx.exception))
        self.assertIn("position 2", str(ctx.exception))

    def test_encode_rejects_non_string(self):
        with self.assertRaises(ValueError):
            TOK.encode([1, 2])

    def test_decode_out_of_range(self):
        for bad in (96, -1, 1000):
            with self.subTest(bad=bad):
                with self.assertRaises(ValueError) as ctx:
                    TOK.decode([0, bad])
                self.assertIn(str(bad), str(ctx.exception))
                self.assertIn("position 1", str(ctx.exception))

    def test_decode_non_int(self):
        for bad in (1.0, "3", None, True):
            with self.subTest(bad=bad):
                with self.assertRaises(ValueError):
                    TOK.decode([bad])

    def test_vocab_size_smaller_than_alphabet(self):
        with self.assertRaises(ValueError) as ctx:
            bpe.Tokenizer.train("abc\n", 3)
        self.assertIn("vocab_size 3", str(ctx.exception))

    def test_vocab_size_larger_than_possible(self):
        with self.assertRaises(ValueError):
            bpe.Tokenizer.train("ab", 10)


# ----------------------------------------------------------------------------------------------------------------
# Tokenizer: saving and loading


class TestTokenizerSaveLoad(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def test_save_load_round_trip(self):
        path = self.dir / "tok.json"
        TOK.save(path)
        again = bpe.Tokenizer.load(path)
        self.assertEqual(again.vocab, TOK.vocab)
        self.assertEqual(again.merges, TOK.merges)
        self.assertEqual(again.encode(LINES[1]), TOK.encode(LINES[1]))
        self.assertEqual(path.read_bytes(), (HERE / "tokenizer.json").read_bytes())
        self.assertEqual(sorted(p.name for p in self.dir.iterdir()), ["tok.json"])  # no temp file left behind

    def assert_load_fails(self, text, *phrases):
        path = self.dir / "bad.json"
        path.write_text(text, encoding="utf-8")
        with self.assertRaises(ValueError) as ctx:
            bpe.Tokenizer.load(path)
        message = str(ctx.exception)
        self.assertIn("bad.json", message)
        for phrase in phrases:
            self.assertIn(phrase, message)

    def test_malformed_json(self):
        self.assert_load_fails("{not json", "not valid JSON")

    def test_truncated_json(self):
        text = (HERE / "tokenizer.json").read_text(encoding="utf-8")
        self.assert_load_fails(text[:len(text) // 2], "not valid JSON", "truncated")

    def test_empty_file(self):
        self.assert_load_fails("", "not valid JSON")

    def test_wrong_top_level(self):
        self.assert_load_fails("[1, 2]", "model.vocab")

    def test_vocab_ids_with_a_gap(self):
        doc = TOK.to_dict()
        doc["model"]["vocab"][TOK.vocab[-1]] = 500
        self.assert_load_fails(json.dumps(doc), "model.vocab IDs")

    def test_merge_of_unknown_token(self):
        doc = TOK.to_dict()
        doc["model"]["merges"][0] = ["q", "x"]
        self.assert_load_fails(json.dumps(doc), "merge 0")

    def test_vocab_and_merges_disagree(self):
        doc = TOK.to_dict()
        doc["model"]["merges"].pop()
        self.assert_load_fails(json.dumps(doc), "field")

    def test_other_pre_tokenizer_pattern(self):
        doc = TOK.to_dict()
        doc["pre_tokenizer"]["pattern"]["Regex"] = r"\w+|\W"
        self.assert_load_fails(json.dumps(doc), "pre_tokenizer.pattern.Regex")


# ----------------------------------------------------------------------------------------------------------------
# Tokenizer: training


class TestTokenizerTraining(unittest.TestCase):

    def test_hand_derived_known_answer(self):
        # "aaab aab\n" -> pieces "aaab", " aab", "\n"; alphabet (sorted) "\n", " ", "a", "b" = IDs 0-3.
        # Round 1: (a,a) 2 + 1 = 3, (a,b) 1 + 1 = 2, (" ",a) 1  -> merge (a,a), ID 4.
        #          pieces now [aa,a,b], [" ",aa,b], ["\n"]
        # Round 2: (aa,a) 1, (a,b) 1, (" ",aa) 1, (aa,b) 1: a four-way tie; the smallest pair in string
        #          order wins and " " < "a", so (" ",aa), ID 5.  Pieces [aa,a,b], [" aa",b]
        # Round 3: (aa,a) 1, (a,b) 1, (" aa",b) 1: tie again, (" aa",b) is smallest, ID 6.
        tok = bpe.Tokenizer.train("aaab aab\n", 7)
        self.assertEqual(tok.merges, [("a", "a"), (" ", "aa"), (" aa", "b")])
        self.assertEqual(tok.vocab, ["\n", " ", "a", "b", "aa", " aa", " aab"])
        # encoding "aaab": rank 0 (a,a) merges the leftmost pair only -> [aa, a, b]; no other merge applies
        self.assertEqual(tok.tokens("aaab aab\n"), ["aa", "a", "b", " aab", "\n"])
        self.assertEqual(tok.encode("aaaa"), [4, 4])

    def test_merges_never_cross_pieces(self):
        # pieces "ab" x3, "." x3, "\n": after (a,b) the only pairs left ("b." and ".a") would cross pieces
        tok = bpe.Tokenizer.train("ab.ab.ab.\n", 5)
        self.assertEqual(tok.merges, [("a", "b")])
        with self.assertRaises(ValueError):
            bpe.Tokenizer.train("ab.ab.ab.\n", 6)

    def test_vocab_size_equal_to_alphabet_means_no_merges(self):
        tok = bpe.Tokenizer.train("ba\n", 3)
        self.assertEqual(tok.vocab, ["\n", "a", "b"])
        self.assertEqual(tok.merges, [])

    def test_retraining_reproduces_tokenizer_json(self):
        self.assertIsNone(bpe.check(HERE / "tokenizer.json", CORPUS))  # (byte for byte)

    def test_check_reports_a_changed_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "tokenizer.json"
            path.write_text(TOK.to_json().replace('"version": "1.0"', '"version": "1.1"'), encoding="utf-8")
            self.assertIn("differs", bpe.check(path, CORPUS))


# ----------------------------------------------------------------------------------------------------------------
# The corpus and its generator


class TestCorpus(unittest.TestCase):

    def test_make_corpus_reproduces_corpus_txt(self):
        self.assertIsNone(make_corpus.check(HERE / "corpus.txt"))  # (byte for byte)

    def test_check_reports_a_changed_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "corpus.txt"
            path.write_text(CORPUS.replace("ava", "eve", 1), encoding="utf-8")
            self.assertIn("line 1", make_corpus.check(path))

    def test_size_and_line_endings(self):
        self.assertTrue(2000 <= len(LINES) <= 5000, len(LINES))
        self.assertTrue(all(line.endswith("\n") and line.count("\n") == 1 for line in LINES))
        self.assertEqual(CORPUS, CORPUS.lower())

    def test_every_story_parses_back_to_its_choices(self):
        logps = [logp for _, logp in make_corpus.generate()]
        for i, line in enumerate(LINES):
            shape, choices = make_corpus.parse_story(line)
            self.assertEqual(make_corpus.render(shape, choices) + "\n", line)
            self.assertEqual(make_corpus.story_log_prob(line), logps[i])

    def test_every_story_has_a_transfer_then_who_has_it(self):
        for line in LINES:
            shape, c = make_corpus.parse_story(line)
            last = c["z"] if shape == "pass" else c["y"]
            self.assertIn(f"{c['x']} gives the {c['thing']} to {c['y']}.", line)
            self.assertIn(f"now {last} has the", line)
            self.assertLess(line.index(" gives the "), line.index("now "))

    def test_first_story_log_prob(self):
        # walk shape: 1/4 shapes, then x (6 names), colour (4), thing (5), place (4), y (5 names left)
        want = -make_corpus.math.log(4 * 6 * 4 * 5 * 4 * 5)
        self.assertAlmostEqual(make_corpus.story_log_prob(FIRST_STORY), want, places=12)

    def test_story_not_from_the_generator_is_rejected(self):
        for text in ["mia has a red hat.", "mia has a red hat. mia gives the hat to mia. now mia has the hat.",
                     "mia has a red car. mia gives the car to ava. now ava has the car."]:
            with self.subTest(text=text):
                with self.assertRaises(ValueError):
                    make_corpus.story_log_prob(text)

    def test_entropy_matches_mean_log_prob_of_shapes(self):
        self.assertGreater(make_corpus.generator_entropy(), 0.0)
        by_shape = {}
        for line in LINES:
            by_shape[make_corpus.parse_story(line)[0]] = make_corpus.story_log_prob(line)
        self.assertEqual(sorted(by_shape), sorted(make_corpus.SHAPES))
        mean = -sum(by_shape.values()) / len(by_shape)
        self.assertAlmostEqual(make_corpus.generator_entropy(), mean, places=12)


if __name__ == "__main__":
    unittest.main()
