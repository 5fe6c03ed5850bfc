// Bundled in place of `ws` and `socks` (scripts/bundle.mjs). mqtt.js loads its WebSocket transport
// at the first connect, whatever the URL, and its TCP transport loads the SOCKS client; the agent
// connects only over mqtt:// and mqtts:// (the config refuses anything else), so neither is ever
// used, and loading them was some 10 ms on the way to the first chair state. Used anyway, they say so.
'use strict';
function absent() {
  throw new Error('chair-agent connects to its broker over mqtt:// or mqtts:// only (no WebSocket, no SOCKS proxy)');
}
class WebSocket {
  constructor() {
    absent();
  }
}
WebSocket.createWebSocketStream = absent;
WebSocket.WebSocket = WebSocket;
module.exports = WebSocket;
module.exports.default = WebSocket;
module.exports.SocksClient = class SocksClient {
  constructor() {
    absent();
  }
};
