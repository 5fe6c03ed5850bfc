// Bundled in place of `ws` and `socks` (scripts/bundle.mjs). mqtt.js loads its WebSocket transport
// at the first connect, whatever the URL, and its TCP transport loads the SOCKS client: loading
// them was some 10 ms on the way to the first chair state. So `ws` is loaded here only when a
// WebSocket is opened (mqtt.url ws:// or wss://), from node_modules at run time. mqtt.js's own
// SOCKS option is never set (a socks5:// mqtt.proxy goes through agent/mqtt/socks-tunnel.ts, with
// its login), and says so if it were.
'use strict';
let real = null;
// Not require('ws'), which the bundle would resolve to this very file: a name esbuild cannot see
// (not even a constant it could fold in), so Node resolves it at run time from node_modules.
function load(name) {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a run-time require is the point
  return require(name);
}
function ws() {
  real ??= load('ws');
  return real;
}
class WebSocket {
  constructor(...args) {
    return new (ws())(...args);
  }
}
WebSocket.createWebSocketStream = (...args) => ws().createWebSocketStream(...args);
WebSocket.WebSocket = WebSocket;
module.exports = WebSocket;
module.exports.default = WebSocket;
module.exports.SocksClient = class SocksClient {
  constructor() {
    throw new Error('chair-agent connects to its broker without a SOCKS proxy');
  }
};
