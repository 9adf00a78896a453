// A fenced resource on Redis for the permit tests: a write is taken only with a token
// above the last one taken (what a database's fence column does).

const FENCED_WRITE = `local last = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > last then
  redis.call('SET', KEYS[1], ARGV[1])
  return 1
end
return 0`;

/** Writes to `resource` with `token` through an ioredis or node-redis client: 1 taken, 0 refused. */
export async function fencedWrite(client, resource, token) {
  const reply =
    typeof client.evalSha === 'function'
      ? await client.eval(FENCED_WRITE, { keys: [resource], arguments: [String(token)] })
      : await client.eval(FENCED_WRITE, 1, resource, String(token));
  return Number(reply);
}
