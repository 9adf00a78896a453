// Declarations of the ES module entries (`import 'leasehold'`). index.d.ts is the
// contract; this file hands it to `import` as an ES module, as lib/entries/index.mjs is one
// (index.d.ts alone would type an ES module as CommonJS).
export * from './index.js';
export { default } from './index.js';
