// One way to open an ioredis client for every library, so that none is favoured:
// loopback, quick reconnects (20 ms), and a count of the commands it sends (each one
// is a round trip: nothing here pipelines).

import Redis from 'ioredis';

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
