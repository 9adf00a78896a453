// The page's code for esbuild, which does not copy files that `new URL(…, import.meta.url)`
// names: the app imports the package's .wasm (esbuild's `file` loader copies it and gives
// its URL) and passes that URL to init().
import wasm from 'leasehold/leasehold.wasm';
import { init } from 'leasehold';
import { run, report } from './scenario.js';

init({ wasm });
report(run());
