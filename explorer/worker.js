// worker.js: the training loop of train.py's `fit`, in a Web Worker: one worker trains one model. The page's "Load
// weights" reads and checks a file in a worker of its own too, which answers "load" only.
//
// Messages from the page:
//   {type: "start", run, task, params | null, config, seed, settings, data, follow}
//       task "stories": train on data.stream's windows, validate on data.val_ids (and, with data.long, measure the
//         loss by position on those windows, positions.js); task "induction": train on fresh periodic sequences
//         (induction.js) and measure copying on data.test_count test sequences. config: the model's (model.js's
//         model_config: its sizes, blocks, heads and position scheme); params null: fresh weights of config drawn
//         from seed. follow: send the weights now and then, for the panels that follow them.
//   {type: "pause"}, {type: "resume"}, {type: "stop"}
//   {type: "snapshot"}                     ask for the whole state (weights, Adam's moments, step, sampler state)
//   {type: "load", file, manifest, vocab}       read a checkpoint File and check it (checkpoint.read_weights)
// Messages to the page (each carries the run number it belongs to):
//   {type: "progress", step, losses: [[step, loss], ...], tokens_per_s}   about every 100 ms
//   {type: "eval", step, seconds, ...}     at the start, every eval_every steps and at the end: val (and
//                                          by_position) for stories, measures and weights for induction
//   {type: "weights", step, params}        with follow: about every 700 ms and at every evaluation
//   {type: "done", step, stopped}          the run finished, or was stopped
//   {type: "failed", message}              the run diverged or the code threw; the page says so
//   {type: "snapshot", ...}                the answer to "snapshot"
//   {type: "loaded", ckpt}                 the answer to "load": read_weights' result, its tensors' buffers moved
//   {type: "refused", message}             ... or why the file is refused (read_weights' message)

import { flat_tensors, read_weights, unflat_tensors } from "./checkpoint.js";
import * as induction from "./induction.js";
import { checked, init_params, model_config } from "./model.js";
import { loss_by_position } from "./positions.js";
import { Random } from "./random.js";
import { draw_windows, fresh_state, story_nats, train_step } from "./train.js";

const SLICE_MS = 100; // train this long between looks at the message queue (pause, stop, snapshot)
const WEIGHTS_EVERY_MS = 700; // how often the page gets the weights while training, with follow

let run = null; // {id, seed, task, config, state, s, data, follow, paused, stopped, wake}

// ----------------------------------------------------------------------------------------------------------------
// The tasks: what a step trains on, and what an evaluation measures

const TASKS = {
  stories: {
    windows: (r) => draw_windows(r.state.rng, r.data.stream, r.s),
    measure(r) {
      const out = { val: story_nats(r.state.params, r.data.val_ids, r.config) / r.data.val_tokens };
      if (r.data.long) {
        out.by_position = loss_by_position(r.state.params, r.config, r.data.long.inputs, r.data.long.targets);
      }
      return out;
    },
  },
  induction: {
    windows: (r) => induction.sequences(r.state.rng, r.s.batch, r.s.seq_len + 1).rows,
    measure(r) {
      r.test ??= induction.periodic(new Random(induction.TEST_SEED), r.data.test_count);
      const { weights, ...measures } = induction.induction_measures(r.state.params, r.config, r.test, 0);
      return { measures, weights, period: r.test.periods[0] }; // (weights: model.js matrices, as structured clones)
    },
  },
};

// ----------------------------------------------------------------------------------------------------------------
// The loop

async function fit(r) {
  const { state, s } = r;
  const task = TASKS[r.task];
  const post = (msg) => postMessage({ run: r.id, ...msg });
  const send_weights = () => post({ type: "weights", step: state.step, params: flat_tensors(state.params) });
  const started = performance.now();
  const evaluate = () => {
    post({ type: "eval", step: state.step, seconds: (performance.now() - started) / 1000, ...task.measure(r) });
    if (r.follow) send_weights();
  };
  evaluate();
  let train_ms = 0.0;
  let trained_steps = 0;
  let last_weights = performance.now();
  while (state.step < s.steps && !r.stopped) {
    if (r.paused) {
      if (r.follow) send_weights();
      await new Promise((resolve) => (r.wake = resolve));
      continue;
    }
    const losses = [];
    const slice_end = performance.now() + SLICE_MS;
    while (performance.now() < slice_end && state.step < s.steps) {
      const t0 = performance.now();
      const { loss, norm } = train_step(state, task.windows(r), r.config, s);
      train_ms += performance.now() - t0;
      if (!(Number.isFinite(loss) && Number.isFinite(norm))) {
        post({ type: "failed", message: `step ${state.step + 1}: the loss is ${loss} and the gradient norm ${norm}:`
          + ` the run diverged and stops, keeping the weights of step ${state.step}. HINT: a lower learning rate` });
        return;
      }
      trained_steps += 1;
      losses.push([state.step, loss]);
      if (state.step % s.eval_every === 0 || state.step === s.steps) break;
    }
    const tokens_per_s = (trained_steps * s.batch * s.seq_len) / (train_ms / 1000);
    post({ type: "progress", step: state.step, losses, tokens_per_s });
    if (state.step % s.eval_every === 0 || state.step === s.steps) {
      evaluate();
      last_weights = performance.now();
    } else if (r.follow && performance.now() - last_weights > WEIGHTS_EVERY_MS) {
      send_weights();
      last_weights = performance.now();
    }
    await new Promise((resolve) => setTimeout(resolve, 0)); // let the messages in (pause, stop, snapshot)
  }
  send_weights();
  post({ type: "done", step: state.step, stopped: r.stopped });
}

// ----------------------------------------------------------------------------------------------------------------
// Messages

const handlers = {
  start(msg) {
    handlers.stop(); // the run before, if any
    const config = checked(model_config(msg.config)); // (frozen again: a message carries a copy)
    const params = msg.params ? unflat_tensors(msg.params) : init_params(config, msg.seed);
    run = { id: msg.run, seed: msg.seed, task: msg.task, config, state: fresh_state(params, msg.seed), s: msg.settings,
      data: msg.data, follow: msg.follow ?? true, paused: false, stopped: false, wake: null };
    const r = run;
    fit(r).catch((e) => postMessage({ run: r.id, type: "failed", message: `the training code failed: ${e.message}` }));
  },
  pause() {
    if (run) run.paused = true;
  },
  resume() {
    if (run) {
      run.paused = false;
      run.wake?.();
    }
  },
  stop() {
    if (run) run.stopped = true;
    handlers.resume();
  },
  async load({ file, manifest, vocab }) {
    let ckpt;
    try {
      const bytes = new Uint8Array(await file.arrayBuffer().catch((e) => {
        throw new Error(`${file.name} could not be read (${e.message})`);
      }));
      ckpt = read_weights(bytes, file.name, manifest, vocab);
    } catch (e) {
      return postMessage({ type: "refused", message: e.message });
    }
    postMessage({ type: "loaded", ckpt }, Object.values(ckpt.params).map((t) => t.values.buffer));
  },
  snapshot() {
    if (!run) return postMessage({ type: "snapshot", run: null });
    const { state } = run;
    postMessage({ type: "snapshot", run: run.id, step: state.step, params: flat_tensors(state.params),
      m: flat_tensors(state.m), v: flat_tensors(state.v), rng_words: state.rng.getstate(), settings: run.s,
      seed: run.seed });
  },
};

onmessage = (event) => {
  try {
    handlers[event.data.type](event.data); // (the page sends only the messages above)
  } catch (e) {
    const message = `the worker could not ${event.data.type}: ${e.message}`;
    postMessage({ run: event.data.run, type: "failed", message });
  }
};
