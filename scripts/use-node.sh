#!/usr/bin/env bash
# Points this checkout's npm scripts at another Node.js runtime, or back at the pinned one.
#
#   scripts/use-node.sh 22.23.3     the scripts (npm test, npm run demo, ...) now run on Node 22.23.3
#   scripts/use-node.sh pinned      back to the runtime package.json pins (what the package ships)
#
# Every npm script runs on `sh scripts/node`, which prefers the link node_modules/.chair-agent-node
# to the pinned runtime package. This points that link at the registry's node-linux-<arch>@VERSION,
# kept in .runtimes/, and rebuilds the native modules that are tied to one Node ABI
# (scripts/native-deps.mjs). Nothing but the npm registry is contacted. `npm ci` also restores the
# pinned runtime (it empties node_modules).
set -euo pipefail
cd "$(dirname "$0")/.."

want="${1:?usage: scripts/use-node.sh VERSION|pinned}"
case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64|arm64) arch=arm64 ;;
  *) echo "use-node: no Node runtime package for $(uname -m)" >&2; exit 1 ;;
esac
[ -d node_modules ] || { echo "use-node: run npm ci first" >&2; exit 1; }

link=node_modules/.chair-agent-node
if [ "$want" = pinned ]; then
  [ -x "node_modules/node-linux-$arch/bin/node" ] || { echo "use-node: node_modules/node-linux-$arch is missing: npm ci" >&2; exit 1; }
  rm -f "$link"
else
  dir=".runtimes/node-linux-$arch-$want"
  if [ ! -x "$dir/bin/node" ]; then
    mkdir -p .runtimes
    tgz="$(cd .runtimes && npm pack --silent "node-linux-$arch@$want" 2>/dev/null | tail -n1)"
    [ -f ".runtimes/$tgz" ] || { echo "use-node: node-linux-$arch@$want is not on the registry" >&2; exit 1; }
    mkdir -p "$dir"
    tar -xzf ".runtimes/$tgz" -C "$dir" --strip-components=1
    rm -f ".runtimes/$tgz"
  fi
  # Node.js 25 and later are linked against libatomic, which a stock Debian or Ubuntu lacks.
  if ! err=$("$dir/bin/node" --version 2>&1 >/dev/null); then
    case "$err" in
      *libatomic*) echo "use-node: Node.js $want needs libatomic (sudo apt install libatomic1); still on $(sh scripts/node --version)" >&2 ;;
      *) echo "use-node: Node.js $want does not start here: $err" >&2 ;;
    esac
    exit 1
  fi
  ln -sfn "$(pwd)/$dir/bin/node" "$link"
fi
echo "use-node: npm scripts now run on $(sh scripts/node --version)"
sh scripts/node scripts/native-deps.mjs --quiet
