// One way to open an ioredis client for every library, so that none is favoured:
// loopback, quick reconnects (20 ms), and a count of the commands it sends (each one
// is a round trip: nothing here pipelines).

import Redis from 'ioredis';
import { info } from '../../js-tests/support/redis.mjs';

const noop = () => {};

export async function connect(port) {
  const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, retryStrategy: () => 20 });
  client.on('error', noop);
  await client.connect();
  const send = client.sendCommand.bind(client);
  client.benchCommands = 0;
  client.sendCommand = (command, stream) => {
    client.benchCommands += 1;
    return send(command, stream);
  };
  return client;
}

/**
 * Meets the other processes of a fleet at `name`, through Redis on `client`: resolves
 * once all `parties` have arrived, for all of them at once. The last to arrive runs
 * `whenAllArrived` first and resolves to its result; the others resolve to undefined.
 * It blocks `client` meanwhile (BLPOP), so nothing else may be waiting on it.
 */
export async function meet(client, name, parties, { whenAllArrived, timeoutS = 60 } = {}) {
  let result;
  if ((await client.incr(`${name}:arrived`)) === parties) {
    result = await whenAllArrived?.();
    await client.rpush(`${name}:go`, ...Array.from({ length: parties }, () => '1'));
  }
  if ((await client.blpop(`${name}:go`, timeoutS)) === null) {
    throw new Error(`${name}: not all ${parties} processes arrived within ${timeoutS} s`);
  }
  return result;
}

/** CPU ms the Redis server at `port` has used so far, all its threads (INFO cpu). */
export async function serverCpuMs(port) {
  const cpu = await info(port, 'cpu');
  return (Number(cpu.used_cpu_user) + Number(cpu.used_cpu_sys)) * 1000;
}
