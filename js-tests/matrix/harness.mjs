// The matrix scenario in a runtime with a command line (Node, Bun, Deno): imports the
// package by name, as users do, runs js-tests/matrix/scenario.mjs and prints one line
// `MATRIX_RESULT <json>`. Configured by LEASEHOLD_MATRIX_CONFIG (JSON, see run.mjs).
import { prepare, runScenario } from './scenario.mjs';

const env = (name) => (globalThis.Deno ? globalThis.Deno.env.get(name) : globalThis.process.env[name]);
const config = JSON.parse(env('LEASEHOLD_MATRIX_CONFIG'));

function runtimeVersion() {
  if (globalThis.Deno) return `Deno ${globalThis.Deno.version.deno}`;
  if (globalThis.Bun) return `Bun ${globalThis.Bun.version}`;
  return `Node ${globalThis.process.version}`;
}

let results;
try {
  // Static specifiers, so every runtime resolves them through the package's exports.
  const api = config.specifier === 'leasehold/node' ? await import('leasehold/node') : await import('leasehold');
  results = await runScenario(api, config, prepare(api));
} catch (error) {
  let detail = String(error?.stack ?? error);
  for (let cause = error?.cause; cause; cause = cause.cause) detail += `\ncaused by: ${cause?.stack ?? cause}`;
  results = [{ name: 'load', ok: false, detail }];
}
// The file the runtime resolved the package to, relative to the package root (run.mjs
// passes it: the repository, or the installed copy).
let entry;
try {
  const url = import.meta.resolve(config.specifier);
  const rootUrl = config.packageRoot ?? new URL('../../', import.meta.url).href;
  entry = url.startsWith(rootUrl) ? url.slice(rootUrl.length) : url;
} catch {
  entry = undefined;
}
const line = `MATRIX_RESULT ${JSON.stringify({ version: runtimeVersion(), entry, results })}\n`;
// No explicit exit: run.mjs checks that the process ends on its own (no engine timer or
// handle keeps it alive once every execution has settled).
if (globalThis.Deno) {
  await globalThis.Deno.stdout.write(new TextEncoder().encode(line));
} else {
  globalThis.process.stdout.write(line);
}
