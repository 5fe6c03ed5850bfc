#!/bin/sh
# chair-agent: runs the agent on the Node.js runtime this installation carries (runtime/bin/node),
# never the system's. Installed as /usr/bin/chair-agent (a symlink) by the .deb.
self=$(readlink -f "$0") || self=$0
top=$(dirname "$(dirname "$self")")
node="$top/runtime/bin/node"
if [ ! -x "$node" ]; then
  echo "chair-agent: the runtime $node is missing; reinstall the package" >&2
  exit 1
fi
# The runtime is built for @ARCH@ (@MACHINE@). A 32-bit system (armhf, armv7l, armv6l), or a
# 64-bit kernel under a 32-bit system, has no @LOADER@ and cannot run it.
if [ ! -e "@LOADER@" ]; then
  echo "chair-agent: this system cannot run the @ARCH@ build (it is $(uname -m), no @LOADER@); chair-agent needs a 64-bit OS (Raspberry Pi OS 64-bit on a Pi 3, 4, 5, Zero 2 W, CM4 or CM5)" >&2
  exit 1
fi
exec "$node" @NODE_FLAGS@ "$top/app/@ENTRY@" "$@"
