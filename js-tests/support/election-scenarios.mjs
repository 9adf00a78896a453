// The election scenarios every real store runs (js-tests/election-*.test.mjs), on one
// fleet of five candidate processes per store: the leader SIGKILLed (once; three times
// under `npm run soak`, ELECTION_KILLS=3), the leader
// SIGSTOPped past its ttl and resumed, the store restarted; and, in the test process,
// resign() handing over. Bounds only catch a hang on a loaded machine; the measured
// times are printed with `t.diagnostic`.

import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { campaign } from 'leasehold';
import { within } from './async.mjs';
import { startFencedResource, startCandidates, checkFencing } from './election-fleet.mjs';

// A takeover, a pause or a restart must be over within this long: a hang, not slowness.
const HANG_MS = 20_000;
// Leaders SIGKILLed per fleet run: 1 in `npm test`, 3 in `npm run soak` (at most 3 of 5).
const KILLS = Number(process.env.ELECTION_KILLS ?? 1);

/** The leader now: the process whose write the resource accepted last. */
function currentLeader(resource) {
  const accepted = resource.attempts.filter((a) => a.accepted);
  return accepted[accepted.length - 1];
}

/** Waits for a write accepted from a process other than `pid` with a term above `term`. */
function nextLeader(resource, pid, term, what) {
  return within(HANG_MS, what, resource.next((a) => a.pid !== pid && a.term > term));
}

/**
 * Runs the fleet scenarios: `kind` and `address` of the store, the `ttl`, `restart()` (the
 * store down and back; none: skipped) and `restartWhat` saying how, `newTerm` when the
 * restart loses the leases.
 */
export async function runFleetScenarios(t, { kind, address, ttl, restart, restartWhat, newTerm = false }) {
  const resource = await startFencedResource();
  const key = `election-${kind}-${process.pid}`;
  const fleet = await startCandidates({ kind, address, key, ttl, resource });
  const measured = {};
  const forgotten = [];
  try {
    const first = await within(HANG_MS, 'a first leader', resource.next(() => true));
    const terms = [first.term];

    // SIGKILL (KILLS times; the fleet keeps at least two): the next leader writes within
    // the ttl plus the wake-up.
    measured.takeoverMs = [];
    for (let round = 0; round < Math.min(KILLS, fleet.workers.length - 2); round++) {
      await sleep(ttl / 2);
      const leader = currentLeader(resource);
      const killedAt = performance.now();
      fleet.byPid(leader.pid).child.kill('SIGKILL');
      const next = await nextLeader(resource, leader.pid, leader.term, `a leader after SIGKILL ${round + 1}`);
      measured.takeoverMs.push(Math.round(next.at - killedAt));
      terms.push(next.term);
    }

    // SIGSTOP past the ttl: another leads with a larger term; resumed, the old leader sees
    // its signal aborted at its next tick and its deliberate late write is refused.
    await sleep(ttl / 2);
    const paused = currentLeader(resource);
    const pausedWorker = fleet.byPid(paused.pid);
    pausedWorker.child.kill('SIGSTOP');
    const pausedAt = performance.now();
    const successor = await nextLeader(resource, paused.pid, paused.term, 'a leader while the old one is stopped');
    measured.pausedTakeoverMs = Math.round(successor.at - pausedAt);
    await sleep(ttl / 2);
    const resumedWall = Date.now();
    pausedWorker.child.kill('SIGCONT');
    const late = await within(
      HANG_MS,
      'the resumed leader to step down',
      (async () => {
        for (;;) {
          const found = resource.attempts.find((a) => a.pid === paused.pid && a.late && a.term === paused.term);
          if (found) return found;
          await sleep(10);
        }
      })(),
    );
    assert.equal(late.accepted, false, 'the resumed leader\'s late write is refused');
    assert.ok(successor.term > paused.term);
    // A tick that read its signal before the stop may still send its write after the
    // resume (the fence refuses it); a tick that began after the resume must not write.
    const afterResume = resource.attempts.filter((a) => a.pid === paused.pid && !a.late && a.checked > resumedWall && a.term === paused.term);
    assert.deepEqual(afterResume, [], 'the resumed leader acted on a tick after its lease ran out');
    assert.equal(pausedWorker.events.find((e) => e.deposed === paused.term)?.reason, 'LockLostError');
    terms.push(successor.term);

    // The store restarted under a leader: leadership resumes, never two with one term.
    if (restart !== undefined) {
      await sleep(ttl / 2);
      const before = currentLeader(resource);
      const restartedAt = performance.now();
      await restart();
      const backAt = performance.now();
      // Leadership resumes: a write accepted a ttl after the store is back (past the
      // renewal that tells a leader whose lease was lost), by the same leader (its lease
      // survived, as etcd's do) or by a new one with a larger term.
      const after = await within(HANG_MS, `a leader after ${restartWhat}`, resource.next((a) => a.at > backAt + ttl));
      measured.restartResumedMs = Math.round(after.at - restartedAt);
      measured.restartNewTerm = after.term !== before.term;
      if (after.term !== before.term) terms.push(after.term);
      else assert.equal(after.pid, before.pid);
      // A store that lost its data lost the lease: the leader after it has a new term.
      if (newTerm) {
        assert.notEqual(after.term, before.term, `${restartWhat}: the old term still acted a ttl later`);
        forgotten.push([restartedAt, backAt + ttl]);
      }
    }
    for (let i = 1; i < terms.length; i++) assert.ok(terms[i] > terms[i - 1], `terms rise: ${terms}`);
    // The paused leader's tick that read its signal before the stop: the fence's case.
    const inFlight = (a) => a.pid === paused.pid && a.term === paused.term && a.checked <= resumedWall;
    checkFencing(assert, resource.attempts, forgotten, inFlight);
    measured.refusedAfterDataLoss = resource.attempts.filter((a) => !a.late && !a.accepted).length;
    measured.terms = new Set(resource.attempts.filter((a) => a.accepted).map((a) => a.term)).size;
    t.diagnostic(`${kind}, ttl ${ttl} ms: ${JSON.stringify(measured)}`);
    return measured;
  } finally {
    await fleet.stop();
    await resource.close();
  }
}

/**
 * resign() in this process: the next candidate (another store instance, as another
 * process would have) leads within a round trip plus its wake-up, far below the ttl.
 */
export async function resignHandsOver(t, { kind, makeStore, ttl = 10_000 }) {
  const key = `election-resign-${kind}-${process.pid}`;
  const [a, b] = await Promise.all([makeStore(), makeStore()]);
  const first = await within(HANG_MS, 'the first campaign', campaign(key, { store: a, ttl, name: 'first' }));
  const second = campaign(key, { store: b, ttl, name: 'second' });
  // The second candidate is in line once its try has answered "held".
  await sleep(200);
  const resignedAt = performance.now();
  const [held, next] = await Promise.all([first.resign(), within(HANG_MS, 'the next leader', second)]);
  const handoverMs = performance.now() - resignedAt;
  assert.equal(held, true);
  assert.ok(first.signal.aborted);
  assert.equal(first.signal.reason.name, 'AbortError');
  assert.ok(next.term > first.term);
  assert.ok(handoverMs < ttl / 5, `resign() handed over in ${handoverMs} ms, ttl ${ttl} ms`);
  t.diagnostic(`${kind}: resign() handed over in ${handoverMs.toFixed(1)} ms (ttl ${ttl} ms)`);
  await next.resign();
  return handoverMs;
}

/**
 * A leader that stops renewing (a crashed process, as a plain lease that is never
 * renewed): the candidate in line leads once its lease lapses, woken at the lapse rather
 * than by a backed-off poll.
 */
export async function lapseHandsOver(t, { kind, makeStore, ttl = 600 }) {
  const key = `election-lapse-${kind}-${process.pid}`;
  const [a, b] = await Promise.all([makeStore(), makeStore()]);
  const { acquireLock } = await import('leasehold');
  const crashed = await acquireLock(a, key, ttl);
  const heldAt = performance.now();
  assert.ok(crashed, 'the first lease');
  // Let the candidate's polls back off first, as they would behind a long-lived leader.
  const next = await within(HANG_MS, 'a leader after the lapse', campaign(key, { store: b, ttl }));
  const afterMs = performance.now() - heldAt;
  assert.ok(next.term > crashed.fencingToken);
  t.diagnostic(`${kind}: a lease of ${ttl} ms left unrenewed: the next leader after ${afterMs.toFixed(0)} ms`);
  await next.resign();
  return afterMs;
}

/**
 * leader() and watchLeader() from a third store instance (an observer in another process
 * would have its own): names, terms and time left as the candidates hold them, each change
 * followed in order; where the store `announces` a release to nobody to every subscriber,
 * it reaches a watcher that would not look again for a minute (or the lease's end).
 */
export async function watchFollows(t, { kind, makeStore, ttl = 10_000, announces = true }) {
  const { leader, watchLeader } = await import('leasehold');
  const key = `election-watch-${kind}-${process.pid}`;
  const [a, b, observer] = await Promise.all([makeStore(), makeStore(), makeStore()]);
  assert.equal(await leader(observer, key), undefined);
  const first = await campaign(key, { store: a, ttl, name: 'web 1' });
  const now = await leader(observer, key);
  assert.equal(now.name, 'web 1');
  assert.equal(now.owner, first.owner);
  assert.equal(now.term, first.term);
  assert.ok(now.ttl > 0 && now.ttl <= ttl, `time left ${now.ttl}`);

  const stop = new AbortController();
  const seen = [];
  const follower = (async () => {
    for await (const change of watchLeader(observer, key, { signal: stop.signal, interval: 100 })) {
      seen.push(change && [change.name, change.term]);
    }
  })();
  const secondP = campaign(key, { store: b, ttl, name: 'web 2' });
  await sleep(200);
  await first.resign();
  const second = await within(HANG_MS, 'the second leader', secondP);
  const sawSecond = () => seen.some((x) => x?.[0] === 'web 2');
  await within(HANG_MS, 'the watch to see the second leader', (async () => {
    while (!sawSecond()) await sleep(10);
  })());
  const slow = new AbortController();
  let vacancySeenAt;
  let slowFirst;
  // Started once the second leads: the first thing it sees is that leader.
  const pushed = (async () => {
    for await (const change of watchLeader(observer, key, { signal: slow.signal, interval: '1m' })) {
      slowFirst ??= change;
      if (change === undefined) {
        vacancySeenAt = performance.now();
        return;
      }
    }
  })();
  await within(HANG_MS, 'the slow watcher to start', (async () => {
    while (slowFirst === undefined) await sleep(10);
  })());
  // A store's subscription becomes active a round trip after it is made.
  await sleep(100);
  const releasedAt = performance.now();
  await second.resign();
  await within(HANG_MS, 'the watch to see the vacancy', (async () => {
    while (seen[seen.length - 1] !== undefined) await sleep(10);
  })());
  await within(HANG_MS, 'the announced vacancy', pushed);
  stop.abort();
  slow.abort();
  await within(HANG_MS, 'the watch to end', follower);
  // A store that releases and then grants (PostgreSQL: the waiter takes the freed row)
  // may be seen vacant between the two leaders.
  const leaders = seen.filter((x) => x !== undefined);
  assert.deepEqual(leaders, [['web 1', first.term], ['web 2', second.term]]);
  assert.deepEqual(seen[0], ['web 1', first.term]);
  assert.equal(seen[seen.length - 1], undefined);
  assert.ok(seen.length <= 4, `each change once: ${JSON.stringify(seen)}`);
  assert.deepEqual([slowFirst.name, slowFirst.term], ['web 2', second.term]);
  const pushMs = vacancySeenAt - releasedAt;
  // Without an announcement, the watcher looks again when the leader's lease would run out.
  if (announces) assert.ok(pushMs < ttl / 2, `the vacancy came by announcement, not at the next look: ${pushMs} ms`);
  t.diagnostic(`${kind}: a vacancy reached a watcher (interval 1 min) ${pushMs.toFixed(1)} ms after the release began`);
}
