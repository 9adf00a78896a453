// Before/after for scenario 4 (one key back to back, default options, `operationKey`,
// `wait: 0`) in one process: two copies of leasehold (this tree's lib/ and dist/, and a
// base tree: a copy of both made before a change) run side by side, in alternating
// blocks, so that the machine's load falls on both alike. Per block, the client CPU per
// execution (process.cpuUsage: user + system); the result is the median over block
// pairs of (this tree ÷ base), below 1 when this tree costs less.
//   instant  a stand-in client that answers every script at once (the JS path alone:
//            host, engine calls, store, no socket)
//   redis    a real redis-server started here, one ioredis client per tree
//
//   node bench/profile/redis-ab.mjs BASE_DIR [instant|redis] [blocks=40] [per=1000] [--this=DIR]
// (LEASEHOLD_ENGINE=wasm for the wasm engine; BASE_DIR holds lib/ and dist/, and
// node_modules or a link to it: `cp -r lib dist package.json BASE_DIR`)

import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRedisServer } from '../../js-tests/support/redis.mjs';
import { connect } from '../support/redis-client.mjs';
import { median } from '../support/stats.mjs';

const require = createRequire(import.meta.url);
const HERE = resolve(fileURLToPath(import.meta.url), '../../..');
const positional = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const [baseDir, mode = 'instant', blocksArg = '40', perArg = '1000'] = positional;
// --this=DIR: compare DIR with the base instead of this tree (one step of several).
const thisDir = process.argv.find((a) => a.startsWith('--this='))?.slice(7) ?? HERE;
if (!baseDir) throw new Error('usage: redis-ab.mjs BASE_DIR [instant|redis] [blocks] [per]');
const blocks = Number(blocksArg);
const per = Number(perArg);

/** An ioredis look-alike that answers every script at once: ACQUIRE with a token, RELEASE with 1. */
function instantClient() {
  let token = 1_795_999_229_586_969;
  return {
    evalsha(_sha, numKeys, ...given) {
      // Keys and arguments as ioredis takes them: flat, or in arrays it flattens.
      const rest = given.flat();
      // RELEASE's settings argument ("<hand-off ms> <check> ...") has a space; ACQUIRE's ttl none.
      return Promise.resolve(rest.slice(numKeys).some((a) => String(a).includes(' ')) ? 1 : token++);
    },
    eval() {
      return Promise.reject(new Error('eval is not expected: evalsha never fails here'));
    },
  };
}

async function tree(dir, client, name) {
  const api = require(join(dir, 'lib/entries/index.cjs'));
  const { RedisLockStore } = require(join(dir, 'lib/stores/redis/index.cjs'));
  const store = new RedisLockStore({ client, prefix: `ab-${name}` });
  const pipeline = new api.ResiliencePipelineBuilder().addLock({ ttl: 10_000, wait: 0, store }).build();
  const run = (key, fn) => pipeline.execute(() => fn({ token: api.getLockToken() }), { operationKey: key });
  return { engine: api.engine, run, store };
}

const noop = async () => 0;
let server;
let clients = [];
if (mode === 'redis') {
  server = await startRedisServer();
  clients = [await connect(server.port), await connect(server.port)];
} else clients = [instantClient(), instantClient()];
const trees = [await tree(resolve(baseDir), clients[0], 'base'), await tree(resolve(thisDir), clients[1], 'this')];
for (const t of trees) for (let i = 0; i < 2000; i++) await t.run('k', noop);

async function block(t) {
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < per; i++) await t.run('k', noop);
  const cpu = process.cpuUsage(cpu0);
  return (cpu.user + cpu.system) / per;
}

const ratios = [];
const us = [[], []];
for (let b = 0; b < blocks; b++) {
  // Alternate which tree goes first.
  const order = b % 2 === 0 ? [0, 1] : [1, 0];
  const got = [];
  for (const i of order) got[i] = await block(trees[i]);
  us[0].push(got[0]);
  us[1].push(got[1]);
  ratios.push(got[1] / got[0]);
}
console.log(
  `${mode}, engine ${trees[1].engine} (base ${trees[0].engine}), ${blocks} blocks × ${per}: ` +
    `base ${median(us[0]).toFixed(2)} µs, this ${median(us[1]).toFixed(2)} µs CPU per execution; ` +
    `this ÷ base, median of block pairs: ${median(ratios).toFixed(3)}`,
);
for (const t of trees) await t.store.close?.();
for (const c of clients) c.disconnect?.();
await server?.stop();
