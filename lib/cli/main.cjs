#!/usr/bin/env node
'use strict';
// `leasehold`: the command line (package.json `bin`). `inspect` reads a store and never
// writes; `release` ends one owner's lease. See lib/cli/help.cjs for what each takes.

const { parseArgs, UsageError } = require('./args.cjs');
const { helpText } = require('./help.cjs');
const { open, bounded, ConnectError } = require('./connect.cjs');
const { render, duration } = require('./table.cjs');

const EXIT = { done: 0, notReleased: 1, usage: 2, server: 3 };

/** `[{ key, inspection }]` for the KEYs named, or for the keys held (up to the limit). */
async function snapshot(store, parsed) {
  if (parsed.keys.length > 0) {
    return Promise.all(parsed.keys.map(async (key) => ({ key, inspection: await bounded(store.inspect(key), `inspecting ${key}`) })));
  }
  const keys = [];
  const iterator = store.list({ prefix: parsed.keyStart, limit: parsed.limit })[Symbol.asyncIterator]();
  for (;;) {
    const { value, done } = await bounded(iterator.next(), 'listing the held keys');
    if (done) break;
    keys.push(value);
  }
  const entries = [];
  for (const key of keys) {
    const inspection = await bounded(store.inspect(key), `inspecting ${key}`);
    if (inspection !== undefined) entries.push({ key, inspection });
  }
  return entries;
}

function asJson(entries) {
  return JSON.stringify(entries.map(({ key, inspection }) => inspection ?? { key, holders: [], waiters: [] }));
}

async function inspectOnce(conn, parsed) {
  const entries = await snapshot(conn.store, parsed);
  process.stdout.write(`${parsed.json ? asJson(entries) : render(entries, { detail: parsed.keys.length > 0 }).text}\n`);
}

/** Redraws every interval until Ctrl-C (or SIGTERM); resolves then. */
function watch(conn, parsed) {
  const color = process.stdout.isTTY === true && !process.env.NO_COLOR;
  let previous;
  let refresh = 0;
  let timer;
  let stopped = false;
  return new Promise((resolve) => {
    const stop = () => {
      stopped = true;
      clearTimeout(timer);
      if (!parsed.json && process.stdout.isTTY) process.stdout.write('\x1b[?25h\n');
      resolve();
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    const draw = async () => {
      refresh += 1;
      let body;
      try {
        const entries = await snapshot(conn.store, parsed);
        if (parsed.json) {
          body = asJson(entries);
        } else {
          const drawn = render(entries, { detail: parsed.keys.length > 0, previous, color });
          previous = drawn.frame;
          body = drawn.text;
        }
      } catch (error) {
        body = parsed.json ? JSON.stringify({ error: error.message }) : `read failed: ${error.message}`;
      }
      if (stopped) return;
      if (parsed.json) {
        process.stdout.write(`${body}\n`);
      } else {
        const clock = new Date().toTimeString().slice(0, 8);
        const header = `leasehold inspect · ${conn.what} · ${clock} · refresh ${refresh} · every ${duration(parsed.interval)} · Ctrl-C quits`;
        process.stdout.write(`${process.stdout.isTTY ? '\x1b[?25l\x1b[H\x1b[2J' : ''}${header}\n\n${body}\n`);
      }
      timer = setTimeout(draw, parsed.interval);
    };
    draw();
  });
}

async function release(conn, parsed) {
  const [key] = parsed.keys;
  const before = await bounded(conn.store.inspect(key), `inspecting ${key}`);
  const released = await bounded(conn.store.release(key, parsed.owner), `releasing ${key}`);
  // On a key held with permits, the lease released is the owner's own.
  const holder = before?.holders.find((h) => h.owner === parsed.owner) ?? before?.holders[0];
  if (parsed.json) {
    process.stdout.write(`${JSON.stringify({ key, owner: parsed.owner, released: released === true, before: before ?? null })}\n`);
  } else if (released === true) {
    const next = before?.waiters[0];
    process.stdout.write(
      `released ${key}: the lease of ${parsed.owner}${holder ? ` (token ${holder.fencingToken}, ${duration(holder.ttl)} left)` : ''} is gone.\n` +
        'Its holder learns it at its next renewal (its signal aborts with LockLostError).\n' +
        (next ? `The next waiter, ${next.owner}, gets the key.\n` : ''),
    );
  } else {
    const why = holder ? `it is held by ${holder.owner}, not ${parsed.owner}` : 'it is not held';
    process.stdout.write(`nothing released: ${why}.\n`);
  }
  return released === true ? EXIT.done : EXIT.notReleased;
}

async function main(argv) {
  let parsed;
  try {
    parsed = parseArgs(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`leasehold: ${error.message}\nTry: leasehold --help\n`);
    return EXIT.usage;
  }
  if (parsed.command === 'help') {
    process.stdout.write(helpText(parsed.topic));
    return EXIT.done;
  }
  if (parsed.command === 'version') {
    process.stdout.write(`${require('../../package.json').version}\n`);
    return EXIT.done;
  }
  let conn;
  try {
    conn = await open(parsed);
  } catch (error) {
    process.stderr.write(`leasehold: ${error instanceof ConnectError ? error.message : error?.stack ?? error}\n`);
    return error instanceof ConnectError ? EXIT.server : EXIT.usage;
  }
  try {
    if (parsed.command === 'release') return await release(conn, parsed);
    if (parsed.watch) await watch(conn, parsed);
    else await inspectOnce(conn, parsed);
    return EXIT.done;
  } catch (error) {
    process.stderr.write(`leasehold: ${conn.what}: ${error?.message ?? error}\n`);
    return EXIT.server;
  } finally {
    await conn.close().catch(() => {});
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error) => {
    process.stderr.write(`leasehold: ${error?.stack ?? error}\n`);
    process.exitCode = EXIT.server;
  },
);
