// Lock keys for tests that share one server within a file.

let serial = 0;

/** `${name}-N`, with N counting up in this process: a key no other test here uses. */
export const uniqueKey = (name) => `${name}-${++serial}`;
