// The page's code as the app writes it for Vite, webpack and Rollup: nothing about wasm.
import { run, report } from './scenario.js';

report(run());
