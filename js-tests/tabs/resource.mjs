// A fenced resource shared by every page and worker of the origin, in IndexedDB: it
// records who holds the lock (to count overlaps) and refuses writes whose fencing token
// is lower than the last one it accepted. IndexedDB runs readwrite transactions on one
// object store one at a time, so each function below is atomic across tabs.
const DATABASE = 'tabs-test-resource';
const STATE = 'state';
const EMPTY = { holder: null, overlaps: 0, log: [], lastToken: 0, writes: [] };

let opening;
function open() {
  opening ??= new Promise((resolve, reject) => {
    const request = indexedDB.open(DATABASE, 1);
    request.onupgradeneeded = () => request.result.createObjectStore(STATE);
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
  return opening;
}

/** Runs `change(state)` in one readwrite transaction; resolves what it returned. */
async function update(change) {
  const db = await open();
  return new Promise((resolve, reject) => {
    const tx = db.transaction(STATE, 'readwrite');
    const store = tx.objectStore(STATE);
    const read = store.get('resource');
    let result;
    read.onsuccess = () => {
      const state = read.result ?? structuredClone(EMPTY);
      result = change(state);
      store.put(state, 'resource');
    };
    tx.oncomplete = () => resolve(result);
    tx.onabort = () => reject(tx.error);
  });
}

/** `name` starts holding the lock with `token`; a holder already there is an overlap. */
export const enter = (name, token) =>
  update((state) => {
    if (state.holder !== null) state.overlaps += 1;
    state.holder = name;
    state.log.push({ name, token });
  });

/** `name` stops holding the lock. */
export const leave = (name) =>
  update((state) => {
    if (state.holder !== name) state.overlaps += 1;
    state.holder = null;
  });

/** A write fenced by `token`: refused (false) when a larger token has written before. */
export const write = (name, token) =>
  update((state) => {
    const accepted = token >= state.lastToken;
    if (accepted) state.lastToken = token;
    state.writes.push({ name, token, accepted });
    return accepted;
  });

export const read = () => update((state) => state);

export const reset = () =>
  update((state) => {
    Object.assign(state, structuredClone(EMPTY));
  });
