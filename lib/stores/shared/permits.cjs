'use strict';
// The permit options every CommonJS store checks, written once in lib/common/permits.cjs
// (the memory store in lib/host checks them too).
module.exports = require('../../common/permits.cjs');
