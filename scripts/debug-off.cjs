// Bundled in place of the `debug` package (scripts/bundle.mjs). mqtt-packet calls it several times
// for every packet it parses or writes; each call costs a rest-arguments array and an `enabled`
// getter, for lines a service never turns on (the agent logs through pino). Nothing here writes.
'use strict';
function createDebug(namespace) {
  const debug = function () {};
  debug.enabled = false;
  debug.namespace = String(namespace ?? '');
  debug.extend = (sub) => createDebug(`${debug.namespace}:${sub}`);
  debug.log = debug;
  debug.destroy = () => true;
  return debug;
}
createDebug.enable = () => undefined;
createDebug.disable = () => '';
createDebug.enabled = () => false;
createDebug.debug = createDebug;
createDebug.default = createDebug;
module.exports = createDebug;
