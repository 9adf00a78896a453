// Diagnosis: what each call into the engine costs, per engine, measured on the binding
// itself (no host, no promises). The calls are the ones the host (lib/host/) makes per execution:
//   uncontended (memory store): startDefined (granted at once) + finish (settled at
//                once); also `start`, the undefined-lock form (withLock, acquireLock,
//                key functions, several locks)
//   handoff (memory store): finish(holder, true, true) granting the next waiter, which
//                comes back above the status bits (HANDOFF) instead of as a `run`
//                effect + token(next) + startDefined of a new waiter (queued); and
//                without the handoff (finish called while effects are applied):
//                finish(holder, true, false) + takeEffects() returning the waiter's
//                `run` effect, and the floor of takeEffects() returning no effect (the
//                header alone)
//   JS store (the Redis path, a polled store): every call the host makes for one
//                execution: startDefined (DIRECT: the acquire's request in the status
//                word, no effect) + layerOwner(exec, 0), answerAcquire (direct: RUNNING
//                in the status word), finish (the release's request in the status word:
//                the host kept the acquire's key and owner), answerRelease (direct:
//                ANSWERED_VALUE in the status word); none takes an effect
// Status words and effects are decoded by lib/host/protocol.cjs, as the host decodes them,
// and every one is checked, so a change of the binding API fails loudly instead of
// measuring something else. Each engine runs
// `rounds` times, alternating; the table shows medians, in µs per call, with the cost of
// the timestamps subtracted.
//
//   node bench/profile/binding-costs.mjs [iterations=100000]
// (needs dist/: `bash scripts/build.sh`)

import { createRequire } from 'node:module';
import { median } from '../support/stats.mjs';

const require = createRequire(import.meta.url);
const N = Number(process.argv[2] ?? 100_000);
const {
  STORE_MEMORY: MEMORY,
  STORE_POLLED: POLLED,
  OPTION_RENEW: RENEW,
  OPTION_DIRECT: DIRECT,
  STATUS_EFFECTS: EFFECTS,
  STATUS_HOST_BITS,
  STARTED_RUNNING,
  STARTED_STORE_CALL,
  FINISHED_VALUE,
  ANSWERED_RUNNING,
  ANSWERED_VALUE,
  EFFECT_WIDTH,
  EFFECT_FIRST,
  statusOf,
  payloadOf,
  resultOf,
  finishSettlement,
  finishHandsOff,
  finishCallsStore,
  describeEffect,
  effectExec,
  runToken,
} = require('../../lib/host/protocol.cjs');
const FOREVER = -1;
// The timer actions a status may carry beside a call's result.
const TIMER_BITS = STATUS_HOST_BITS & ~EFFECTS;

/** The effects of a flat array as text ("call acquire,run"), for checks. */
function kinds(fx) {
  const out = [];
  for (let i = EFFECT_FIRST; i < fx.length; i += EFFECT_WIDTH) out.push(describeEffect(fx, i));
  return out.join(',');
}

function expect(fx, what) {
  if ((fx.length - EFFECT_FIRST) % EFFECT_WIDTH !== 0) throw new Error(`bad flat effects of length ${fx.length}`);
  if (kinds(fx) !== what) throw new Error(`expected [${what}], got [${kinds(fx)}]`);
  return fx;
}

function check(ok, what) {
  if (!ok) throw new Error(`unexpected: ${what}`);
}

function measure(binding) {
  const seed = new Uint8Array(32);
  const engine = new binding.Engine(false, 0, seed);
  const store = engine.createMemoryStore();
  const t = {
    startDefined: 0, finish: 0, start: 0, finishHandoff: 0, token: 0, startQueued: 0,
    finishNoHandoff: 0, takeOne: 0, takeEmpty: 0,
  };
  let id = 1;
  // Uncontended: startDefined + finish, as a pipeline with one fixed key runs.
  const keyLock = engine.defineLock(MEMORY, store, 'bench:key', 30_000, 0, '', 1, 1);
  check(keyLock >= 0, `defineLock returned ${keyLock}`);
  for (let i = 0; i < N; i++) {
    const a = performance.now();
    const started = engine.startDefined(id, RENEW, keyLock);
    const b = performance.now();
    const finished = engine.finish(id, true, true);
    const c = performance.now();
    t.startDefined += b - a;
    t.finish += c - b;
    check(resultOf(statusOf(started)) === STARTED_RUNNING, `startDefined status ${started}`);
    check(payloadOf(finished) === 0 && finishSettlement(finished) === FINISHED_VALUE, `finish status ${finished}`);
    if ((started | finished) & EFFECTS) expect(engine.takeEffects(), '');
    id += 1;
  }
  // Uncontended with `start` (no defined lock); its finish is the one above.
  for (let i = 0; i < N; i++) {
    const a = performance.now();
    const started = engine.start(id, RENEW, MEMORY, store, 'bench:key', 30_000, 0, '', 1, 1);
    const b = performance.now();
    t.start += b - a;
    check(resultOf(statusOf(started)) === STARTED_RUNNING, `start status ${started}`);
    const finished = engine.finish(id, true, true);
    if ((started | finished) & EFFECTS) expect(engine.takeEffects(), '');
    id += 1;
  }
  // Handoff: one holder, one waiter, repeated.
  const handoffLock = engine.defineLock(MEMORY, store, 'bench:handoff', 30_000, FOREVER, '', 1, 1);
  let holder = id++;
  check(resultOf(statusOf(engine.startDefined(holder, RENEW, handoffLock))) === STARTED_RUNNING, 'holder not running');
  let waiter = id++;
  check(resultOf(statusOf(engine.startDefined(waiter, RENEW, handoffLock))) === 0, 'waiter not queued');
  for (let i = 0; i < N; i++) {
    const a = performance.now();
    const word = engine.finish(holder, true, true);
    const b = performance.now();
    const token = engine.token(waiter);
    const c = performance.now();
    check(
      finishHandsOff(statusOf(word)) &&
        finishSettlement(statusOf(word)) === FINISHED_VALUE &&
        payloadOf(word) === waiter &&
        !(word & EFFECTS),
      `handoff finish status ${word} (waiter ${waiter})`,
    );
    check(typeof token === 'number', `token ${token}`);
    holder = waiter;
    waiter = id++;
    const d = performance.now();
    const queued = engine.startDefined(waiter, RENEW, handoffLock);
    const e = performance.now();
    check(payloadOf(queued) === 0 && resultOf(queued) === 0, `queued start status ${queued}`);
    if (queued & EFFECTS) expect(engine.takeEffects(), '');
    t.finishHandoff += b - a;
    t.token += c - b;
    t.startQueued += e - d;
  }
  // The same without the handoff: the waiter's `run` comes as an effect.
  for (let i = 0; i < N; i++) {
    const a = performance.now();
    const word = engine.finish(holder, true, false);
    const b = performance.now();
    const effects = engine.takeEffects();
    const c = performance.now();
    const empty = engine.takeEffects();
    const d = performance.now();
    check(payloadOf(word) === 0 && resultOf(word) === FINISHED_VALUE && word & EFFECTS, `finish status ${word}`);
    expect(effects, 'run');
    const [exec, token] = [effectExec(effects, EFFECT_FIRST), runToken(effects, EFFECT_FIRST)];
    check(exec === waiter && token >= 0, `run effect for ${exec}, token ${token}`);
    expect(empty, '');
    holder = waiter;
    waiter = id++;
    const queued = engine.startDefined(waiter, RENEW, handoffLock);
    check(resultOf(queued) === 0, `queued start status ${queued}`);
    if (queued & EFFECTS) expect(engine.takeEffects(), '');
    t.finishNoHandoff += b - a;
    t.takeOne += c - b;
    t.takeEmpty += d - c;
  }
  // An execution on a JS store (the Redis path): every call the host makes. The store
  // calls come back in the status words of start and finish, and the answers are
  // direct (the host runs and settles the execution from their status words); the
  // host's finish asks for a handoff, but there is no waiter to hand off to.
  const jsLock = engine.defineLock(POLLED, 1, 'bench:js', 30_000, 0, '', 1, 1);
  const x = { startJs: 0, ownerAcquire: 0, answerAcquire: 0, finishJs: 0, answerRelease: 0 };
  for (let i = 0; i < N; i++) {
    const exec = id++;
    let a = performance.now();
    let status = engine.startDefined(exec, RENEW | DIRECT, jsLock);
    let b = performance.now();
    const owner = engine.layerOwner(exec, 0);
    let c = performance.now();
    check(statusOf(status) === STARTED_STORE_CALL, `JS start status ${status}`);
    check(typeof owner === 'string' && owner.length > 0, `owner ${owner}`);
    x.startJs += b - a;
    x.ownerAcquire += c - b;
    a = performance.now();
    status = engine.answerAcquire(payloadOf(status), i + 1, true);
    b = performance.now();
    check((status & ~TIMER_BITS) === ANSWERED_RUNNING, `answerAcquire status ${status}`);
    x.answerAcquire += b - a;
    a = performance.now();
    status = engine.finish(exec, true, true);
    b = performance.now();
    check(finishCallsStore(statusOf(status)) && !(status & EFFECTS), `JS finish status ${status}`);
    x.finishJs += b - a;
    a = performance.now();
    status = engine.answerRelease(payloadOf(status), true, true);
    b = performance.now();
    check((status & ~TIMER_BITS) === ANSWERED_VALUE, `answerRelease status ${status}`);
    x.answerRelease += b - a;
  }
  Object.assign(t, x);
  // The floor of a call: no argument, a number back.
  t.armAt = 0;
  for (let i = 0; i < N; i++) {
    const a = performance.now();
    engine.armAt();
    const b = performance.now();
    t.armAt += b - a;
  }
  // The cost of the timestamps themselves, to subtract.
  let clock = 0;
  for (let i = 0; i < N; i++) {
    const a = performance.now();
    const b = performance.now();
    clock += b - a;
  }
  const us = (v) => ((v - clock) / N) * 1000;
  return Object.fromEntries(Object.entries(t).map(([k, v]) => [k, us(v)]));
}

// Each binding with the fast paths the host installs (lib/host/fast-calls.cjs).
const { withFastCalls } = require('../../lib/host/fast-calls.cjs');
const engines = {
  native: () => withFastCalls(require('../../lib/entries/native.cjs').load()),
  wasm: () => withFastCalls(require('../../lib/entries/wasm-node.cjs').load()),
};
const rounds = 3;
const results = { native: [], wasm: [] };
for (let r = 0; r < rounds; r++) for (const [name, load] of Object.entries(engines)) results[name].push(measure(load()));
console.log(`µs per call (median of ${rounds} rounds of ${N}, timestamp cost subtracted)`);
const names = {
  armAt: 'armAt() (a call, no argument)',
  startDefined: 'startDefined (granted at once)',
  finish: 'finish (settled at once)',
  start: 'start (granted at once, no defined lock)',
  finishHandoff: 'finish, handoff (runs the next waiter)',
  token: 'token(next)',
  startQueued: 'startDefined (queued behind a holder)',
  finishNoHandoff: 'finish, no handoff (wakes the waiter)',
  takeOne: '  takeEffects() -> [run]',
  takeEmpty: '  takeEffects() -> [] (header alone)',
  startJs: 'JS store: startDefined (-> STORE_CALL)',
  ownerAcquire: '  layerOwner(exec, 0)',
  answerAcquire: '  answerAcquire (-> RUNNING)',
  finishJs: '  finish (-> STORE_CALL)',
  answerRelease: '  answerRelease (-> ANSWERED_VALUE)',
};
const keys = Object.keys(names);
const jsKeys = keys.slice(keys.indexOf('startJs'));
const width = 42;
console.log(`${'call'.padEnd(width)} ${'native'.padStart(8)} ${'wasm'.padStart(8)}`);
for (const k of keys) {
  const m = (e) => median(results[e].map((x) => x[k])).toFixed(2);
  console.log(`${names[k].padEnd(width)} ${m('native').padStart(8)} ${m('wasm').padStart(8)}`);
}
const sum = (e) => jsKeys.reduce((n, k) => n + median(results[e].map((x) => x[k])), 0).toFixed(2);
console.log(`${'JS store: all calls of one execution'.padEnd(width)} ${sum('native').padStart(8)} ${sum('wasm').padStart(8)}`);
