'use strict';
// `inspect` and `list` of MemoryLockStore: the engine answers from its leases and wait
// queues (`memInspect`, `memList`); this module only reads the flat answer
// (core/src/inspection.rs, `Inspection::into_words`) into the objects users get.

const { checkListOptions } = require('../common/list-options.cjs');
const { permitsShown } = require('../common/permits.cjs');

/** How many keys one `memList` call returns: a page of `list`. */
const PAGE = 256;

/**
 * The flat words of `memInspect` as `{ key, holders, waiters }` (and the key's `limit`
 * when it is held with permits); `undefined` for none.
 */
function readInspection(key, words, now) {
  if (words.length === 0) return undefined;
  const limit = Number(words[0]);
  const count = Number(words[1]);
  const holders = [];
  let i = 2;
  for (let n = 0; n < count; n++, i += 4) {
    const holder = { owner: words[i], fencingToken: Number(words[i + 1]), ttl: Number(words[i + 2]) };
    holders.push(limit > 1 ? { ...holder, ...permitsShown(limit, Number(words[i + 3])) } : holder);
  }
  const waiters = [];
  for (; i + 1 < words.length; i += 2) {
    waiters.push({ owner: words[i], since: now - Number(words[i + 1]) });
  }
  return limit > 1 ? { key, holders, waiters, limit } : { key, holders, waiters };
}

/**
 * `store.inspect(key)` and `store.list(options)` of a memory store. `ask(fn)` calls
 * `fn(engine, storeId)` on the store's engine; `handOver(key)` and `handOverAll()` make
 * the engine answer for keys the host granted on its fast path (the lease stays as it
 * is: same owner record, token and expiry); `now()` is the store's clock in ms.
 */
function memoryInspector({ ask, handOver, handOverAll, now }) {
  return {
    inspect(key) {
      handOver(key);
      return readInspection(key, ask((engine, id) => engine.memInspect(id, key)), now());
    },
    list(options) {
      return pages(checkListOptions(options));
    },
  };

  async function* pages({ prefix, limit }) {
    let after;
    let left = limit;
    while (left > 0) {
      handOverAll();
      const size = Math.min(PAGE, left);
      const page = ask((engine, id) => engine.memList(id, prefix, after, size));
      for (const key of page) yield key;
      if (page.length < size) return;
      left -= page.length;
      after = page[page.length - 1];
    }
  }
}

module.exports = { memoryInspector, readInspection };
