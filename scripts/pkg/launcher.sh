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
# Under the unit (which sets CHAIR_AGENT_CRASH_LOG), a crash loop ends here rather than by
# systemd's start limit, which would also lock out manual restarts (lib/crash-guard.sh).
if [ "${1:-}" = run ] && [ -n "${CHAIR_AGENT_CRASH_LOG:-}" ] && [ -f "$top/lib/crash-guard.sh" ]; then
  sh "$top/lib/crash-guard.sh" check || exit 78
fi
exec "$node" @NODE_FLAGS@ "$top/app/@ENTRY@" "$@"
