// A dedicated worker of js-tests/tabs-store.test.mjs: runs contender.mjs's functions on
// request, { id, method, args } in, { id, value | error } out.
import * as contender from './contender.mjs';

self.onmessage = async ({ data: { id, method, args } }) => {
  try {
    self.postMessage({ id, value: await contender[method](...args) });
  } catch (error) {
    self.postMessage({ id, error: String(error?.stack ?? error) });
  }
};
self.postMessage({ ready: true });
