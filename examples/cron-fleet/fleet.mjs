// Starts FLEET_SIZE instances of nightly-job.mjs at the same moment, as a deploy or a
// cron firing on every machine would, and prints what each one did.
//
//   REDIS_URL=redis://127.0.0.1:6379 FLEET_SIZE=5 node fleet.mjs
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const size = Number(process.env.FLEET_SIZE ?? 5);
const job = fileURLToPath(new URL('./nightly-job.mjs', import.meta.url));

const runs = Array.from({ length: size }, () => {
  const child = spawn(process.execPath, [job], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (chunk) => {
    out += chunk;
  });
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, out: out.trim() })));
});

const results = await Promise.all(runs);
for (const { out } of results) console.log(out);
const ran = results.filter((r) => r.out.includes(': ran ')).length;
console.log(`${ran} of ${size} instances ran the job`);
if (results.some((r) => r.code !== 0)) process.exitCode = 1;
