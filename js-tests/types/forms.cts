// Type test of the CommonJS forms: `require('leasehold')` and its subpaths, compiled as
// CommonJS under `moduleResolution: nodenext` (tsconfig.json).
import leasehold = require('leasehold');
import redis = require('leasehold/redis');
import postgres = require('leasehold/postgres');

export async function required(): Promise<void> {
  const which: 'native' | 'wasm' = leasehold.engine;
  const why: string | undefined = leasehold.engineFallbackReason;
  const value: number = await leasehold.withLock('k', () => 1);
  const skipped: number | undefined = await leasehold.withLock({ key: 'k', skipOnLockFailure: true }, () => 1);
  const term: number = (await leasehold.campaign('k', { store: new leasehold.MemoryLockStore() })).term;
  void term;
  const stores = [redis.RedisLockStore, postgres.PostgresLockStore];
  void [which, why, value, skipped, stores];
}
