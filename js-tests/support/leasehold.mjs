// The package under test, loaded exactly as users load it: by name, so the package
// itself picks the engine (LEASEHOLD_ENGINE=native|wasm forces one).
export * from 'leasehold';
