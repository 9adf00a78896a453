// The store kit on the Map store: every case of the LockStore contract, on fake time.
//
//   node --test map-store.test.mjs
import { FakeTimeProvider } from 'leasehold';
import { testLockStore } from 'leasehold/testing';
import { MapLockStore } from './map-store.mjs';

const clock = new FakeTimeProvider();
testLockStore('MapLockStore', { store: () => new MapLockStore({ clock }), clock });
