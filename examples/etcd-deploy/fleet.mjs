// Starts FLEET_SIZE deployers at once (separate processes) and prints what each did and
// the deploy log: one deploy at a time, in token order, every log write accepted.
//
//   ETCD_ENDPOINTS=127.0.0.1:2379 FLEET_SIZE=4 node fleet.mjs

import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Etcd3 } from 'etcd3';

const size = Number(process.env.FLEET_SIZE ?? 4);
const deployer = fileURLToPath(new URL('./deploy.mjs', import.meta.url));
const client = new Etcd3({ hosts: (process.env.ETCD_ENDPOINTS ?? '127.0.0.1:2379').split(',') });
await client.delete().prefix('deploy-log/');

const runs = Array.from({ length: size }, (_, i) =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [deployer, `deployer-${i + 1}`], { stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`deployer-${i + 1} exited with ${code}`))));
  }),
);
await Promise.all(runs);

const log = await client.getAll().prefix('deploy-log/entries/').sort('Key', 'Ascend').strings();
console.log('deploy log (by token):');
for (const [key, line] of Object.entries(log)) console.log(`  ${Number(key.slice('deploy-log/entries/'.length))}: ${line}`);
console.log(`${Object.keys(log).length} of ${size} deploys recorded`);
client.close();
