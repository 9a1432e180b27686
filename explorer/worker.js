// worker.js: the training loop of train.py's `fit`, in a Web Worker, so that the page never freezes while it trains.
//
// Messages from the page:
//   {type: "start", run, params | null, config, seed, settings, data}   params null: fresh weights from seed
//   {type: "pause"}, {type: "resume"}, {type: "stop"}
//   {type: "snapshot"}                     ask for the whole state (weights, Adam's moments, step, sampler state)
// Messages to the page (each carries the run number it belongs to):
//   {type: "progress", step, losses: [[step, loss], ...], tokens_per_s}   about every 100 ms
//   {type: "eval", step, val, seconds}     the validation loss at the start, every eval_every steps and at the end
//   {type: "weights", step, params}        about every 700 ms and at every evaluation, for the other panels
//   {type: "done", step, stopped}          the run finished, or was stopped
//   {type: "failed", message}              the run diverged or the code threw; the page says so
//   {type: "snapshot", ...}                the answer to "snapshot"

import { flat_tensors, unflat_tensors } from "./checkpoint.js";
import { init_params } from "./model.js";
import { draw_windows, fresh_state, story_nats, train_step } from "./train.js";

const SLICE_MS = 100; // train this long between looks at the message queue (pause, stop, snapshot)
const WEIGHTS_EVERY_MS = 700; // how often the page gets the weights while training

let run = null; // {id, seed, state, s, data, paused, stopped, wake}

// ----------------------------------------------------------------------------------------------------------------
// The loop

const yield_to_messages = () => new Promise((resolve) => setTimeout(resolve, 0));

async function fit(r) {
  const { state, s, data } = r;
  const post = (msg) => postMessage({ run: r.id, ...msg });
  const started = performance.now();
  const evaluate = () => {
    const val = story_nats(state.params, data.val_ids, s.use_positions) / data.val_tokens;
    post({ type: "eval", step: state.step, val, seconds: (performance.now() - started) / 1000 });
    post({ type: "weights", step: state.step, params: flat_tensors(state.params) });
  };
  evaluate();
  let train_ms = 0.0;
  let trained_steps = 0;
  let last_weights = performance.now();
  while (state.step < s.steps && !r.stopped) {
    if (r.paused) {
      post({ type: "weights", step: state.step, params: flat_tensors(state.params) });
      await new Promise((resolve) => (r.wake = resolve));
      continue;
    }
    const losses = [];
    const slice_end = performance.now() + SLICE_MS;
    while (performance.now() < slice_end && state.step < s.steps) {
      const t0 = performance.now();
      const { loss, norm } = train_step(state, draw_windows(state.rng, data.stream, s), s);
      train_ms += performance.now() - t0;
      if (!(Number.isFinite(loss) && Number.isFinite(norm))) {
        post({ type: "failed", message: `step ${state.step + 1}: the loss is ${loss} and the gradient norm ${norm}: the run diverged and stops, keeping the weights of step ${state.step}. HINT: a lower learning rate` });
        return;
      }
      trained_steps += 1;
      losses.push([state.step, loss]);
      if (state.step % s.eval_every === 0 || state.step === s.steps) break;
    }
    post({ type: "progress", step: state.step, losses, tokens_per_s: (trained_steps * s.batch * s.seq_len) / (train_ms / 1000) });
    if (state.step % s.eval_every === 0 || state.step === s.steps) {
      evaluate();
      last_weights = performance.now();
    } else if (performance.now() - last_weights > WEIGHTS_EVERY_MS) {
      post({ type: "weights", step: state.step, params: flat_tensors(state.params) });
      last_weights = performance.now();
    }
    await yield_to_messages();
  }
  post({ type: "weights", step: state.step, params: flat_tensors(state.params) });
  post({ type: "done", step: state.step, stopped: r.stopped });
}

// ----------------------------------------------------------------------------------------------------------------
// Messages

const handlers = {
  start(msg) {
    if (run) {
      run.stopped = true;
      run.wake?.();
    }
    const params = msg.params ? unflat_tensors(msg.params) : init_params(msg.config.vocab, msg.config.d, msg.config.hidden, msg.config.max_len, msg.seed);
    run = { id: msg.run, seed: msg.seed, state: fresh_state(params, msg.seed), s: msg.settings, data: msg.data, paused: false, stopped: false, wake: null };
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
    if (run) {
      run.stopped = true;
      run.paused = false;
      run.wake?.();
    }
  },
  snapshot() {
    if (!run) return postMessage({ type: "snapshot", run: null });
    const { state } = run;
    postMessage({ type: "snapshot", run: run.id, step: state.step, params: flat_tensors(state.params), m: flat_tensors(state.m), v: flat_tensors(state.v), rng_words: state.rng.getstate(), settings: run.s, seed: run.seed });
  },
};

onmessage = (event) => {
  const handler = handlers[event.data?.type];
  if (!handler) postMessage({ type: "failed", message: `the worker got a message it does not know: ${JSON.stringify(event.data).slice(0, 80)}` });
  else handler(event.data);
};
