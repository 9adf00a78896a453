// Diagnosis: what each call into the engine costs, per engine, measured on the binding
// itself (no host, no promises). The calls are the ones lib/host.cjs makes per execution:
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
//                SETTLED_VALUE in the status word); none takes an effect
// Effects are decoded in the flat format (core/src/host.rs `take_flat_effects`, read by
// lib/host.cjs `drain`/`apply`), and every status and effect is checked, so a change of
// the binding API fails loudly instead of measuring something else. Each engine runs
// `rounds` times, alternating; the table shows medians, in µs per call, with the cost of
// the timestamps subtracted.
//
//   node bench/profile/binding-costs.mjs [iterations=100000]
// (needs dist/: `bash scripts/build.sh`)

import { createRequire } from 'node:module';
import { median } from '../support/stats.mjs';

const require = createRequire(import.meta.url);
const N = Number(process.argv[2] ?? 100_000);
// Store kinds, option bits and status bits (core/src/host.rs).
const MEMORY = 0;
const POLLED = 1;
const RENEW = 1;
const DIRECT = 8;
const FOREVER = -1;
const RUNNING = 1;
const SETTLED_VALUE = 2;
const STORE_CALL = 6;
const TIMER_BITS = 32 | 64 | 128;
const HANDOFF = 8;
const EFFECTS = 16;
// Flat effects: numbers[0] is how many strings there are, then EFFECT_WIDTH numbers per
// effect: [kind, exec, layer, request, store, a, b, c].
const EFFECT_WIDTH = 8;
const KINDS = [undefined, 'call', 'run', 'lost', 'settled', 'extended', 'watch', 'event'];
const METHODS = [undefined, 'acquire', 'renew', 'release'];
const OUTCOMES = [undefined, 'value', 'callbackError', 'notHeld', 'error'];

/** The effects of a flat array as text ("call acquire,run"), for checks. */
function kinds(fx) {
  const out = [];
  for (let i = 1; i < fx.length; i += EFFECT_WIDTH) {
    const kind = KINDS[fx[i]] ?? `kind ${fx[i]}`;
    if (kind === 'call') out.push(`call ${METHODS[fx[i + 5]]}`);
    else if (kind === 'settled') out.push(`settled ${OUTCOMES[fx[i + 5]]}`);
    else out.push(kind);
  }
  return out.join(',');
}

function expect(fx, what) {
  if ((fx.length - 1) % EFFECT_WIDTH !== 0) throw new Error(`bad flat effects of length ${fx.length}`);
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
  const keyLock = engine.defineLock(MEMORY, store, 'bench:key', 30_000, 0);
  check(keyLock >= 0, `defineLock returned ${keyLock}`);
  for (let i = 0; i < N; i++) {
    const a = performance.now();
    const started = engine.startDefined(id, RENEW, keyLock);
    const b = performance.now();
    const finished = engine.finish(id, true, true);
    const c = performance.now();
    t.startDefined += b - a;
    t.finish += c - b;
    check((started % 256 & 15) === RUNNING, `startDefined status ${started}`);
    check(finished < 256 && (finished & 15) === SETTLED_VALUE, `finish status ${finished}`);
    if ((started | finished) & EFFECTS) expect(engine.takeEffects(), '');
    id += 1;
  }
  // Uncontended with `start` (no defined lock); its finish is the one above.
  for (let i = 0; i < N; i++) {
    const a = performance.now();
    const started = engine.start(id, RENEW, MEMORY, store, 'bench:key', 30_000, 0);
    const b = performance.now();
    t.start += b - a;
    check((started % 256 & 15) === RUNNING, `start status ${started}`);
    const finished = engine.finish(id, true, true);
    if ((started | finished) & EFFECTS) expect(engine.takeEffects(), '');
    id += 1;
  }
  // Handoff: one holder, one waiter, repeated.
  const handoffLock = engine.defineLock(MEMORY, store, 'bench:handoff', 30_000, FOREVER);
  let holder = id++;
  check((engine.startDefined(holder, RENEW, handoffLock) % 256 & 15) === RUNNING, 'holder not running');
  let waiter = id++;
  check((engine.startDefined(waiter, RENEW, handoffLock) & 15) === 0, 'waiter not queued');
  for (let i = 0; i < N; i++) {
    const a = performance.now();
    const word = engine.finish(holder, true, true);
    const b = performance.now();
    const token = engine.token(waiter);
    const c = performance.now();
    check(
      word >= 256 && (word & 15) === (HANDOFF | SETTLED_VALUE) && Math.floor(word / 256) === waiter && !(word & EFFECTS),
      `handoff finish status ${word} (waiter ${waiter})`,
    );
    check(typeof token === 'number', `token ${token}`);
    holder = waiter;
    waiter = id++;
    const d = performance.now();
    const queued = engine.startDefined(waiter, RENEW, handoffLock);
    const e = performance.now();
    check(queued < 256 && (queued & 15) === 0, `queued start status ${queued}`);
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
    check(word < 256 && (word & 15) === SETTLED_VALUE && word & EFFECTS, `finish status ${word}`);
    expect(effects, 'run');
    check(effects[2] === waiter && effects[7] >= 0, `run effect for ${effects[2]}, token ${effects[7]}`);
    expect(empty, '');
    holder = waiter;
    waiter = id++;
    const queued = engine.startDefined(waiter, RENEW, handoffLock);
    check((queued & 15) === 0, `queued start status ${queued}`);
    if (queued & EFFECTS) expect(engine.takeEffects(), '');
    t.finishNoHandoff += b - a;
    t.takeOne += c - b;
    t.takeEmpty += d - c;
  }
  // An execution on a JS store (the Redis path): every call the host makes. The store
  // calls come back in the status words of start and finish, and the answers are
  // direct (the host runs and settles the execution from their status words); the
  // host's finish asks for a handoff, but there is no waiter to hand off to.
  const jsLock = engine.defineLock(POLLED, 1, 'bench:js', 30_000, 0);
  const x = { startJs: 0, ownerAcquire: 0, answerAcquire: 0, finishJs: 0, answerRelease: 0 };
  for (let i = 0; i < N; i++) {
    const exec = id++;
    let a = performance.now();
    let status = engine.startDefined(exec, RENEW | DIRECT, jsLock);
    let b = performance.now();
    const owner = engine.layerOwner(exec, 0);
    let c = performance.now();
    check(status % 256 === STORE_CALL, `JS start status ${status}`);
    check(typeof owner === 'string' && owner.length > 0, `owner ${owner}`);
    x.startJs += b - a;
    x.ownerAcquire += c - b;
    a = performance.now();
    status = engine.answerAcquire(Math.floor(status / 256), i + 1, true);
    b = performance.now();
    check((status & ~TIMER_BITS) === RUNNING, `answerAcquire status ${status}`);
    x.answerAcquire += b - a;
    a = performance.now();
    status = engine.finish(exec, true, true);
    b = performance.now();
    check((status % 256 & ~TIMER_BITS) === STORE_CALL, `JS finish status ${status}`);
    x.finishJs += b - a;
    a = performance.now();
    status = engine.answerRelease(Math.floor(status / 256), true, true);
    b = performance.now();
    check((status & ~TIMER_BITS) === SETTLED_VALUE, `answerRelease status ${status}`);
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

const engines = {
  native: () => require('../../lib/native.cjs').load(),
  wasm: () => require('../../lib/wasm-node.cjs').load(),
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
  answerRelease: '  answerRelease (-> SETTLED_VALUE)',
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
