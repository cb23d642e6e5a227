#!/usr/bin/env bash
# npm-platforms: `npm ci` (dry run) of package.json/package-lock.json as a
# Mac (darwin/arm64, darwin/x64) and a Graviton or x86 Linux host
# (linux/arm64, linux/x64) would run it. npm's --os/--cpu flags do not
# exercise its platform check on required packages, so npm's own CLI runs
# here with process.platform and process.arch overridden, exactly as on
# such a host: a required package pinned to one platform (EBADPLATFORM)
# fails this check.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
command -v node >/dev/null || { echo "npm-platforms: node is not in PATH (install Node 20 or newer)" >&2; exit 1; }
command -v npm >/dev/null || { echo "npm-platforms: npm is not in PATH (it comes with Node)" >&2; exit 1; }
cli="$(node -e 'const p=require("path"),fs=require("fs");const n=fs.realpathSync(process.argv[1]);console.log(n.endsWith(".js")?n:p.join(p.dirname(n),"..","lib","node_modules","npm","bin","npm-cli.js"))' "$(command -v npm)")"
test -f "$cli" || { echo "npm-platforms: cannot find npm's npm-cli.js (from $(command -v npm))" >&2; exit 1; }
tmp="$(mktemp -d "${TMPDIR:-/tmp}/bcc-npm-platforms.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
cp "$root/package.json" "$root/package-lock.json" "$tmp/"
fail=0
for pa in ${NPM_PLATFORMS:-darwin/arm64 darwin/x64 linux/arm64 linux/x64}; do
	if (cd "$tmp" && node -e '
		const [platform, arch, cli, ...args] = process.argv.slice(1);
		Object.defineProperty(process, "platform", { value: platform });
		Object.defineProperty(process, "arch", { value: arch });
		process.argv = [process.argv[0], cli, ...args];
		require(cli);' "${pa%/*}" "${pa#*/}" "$cli" ci --dry-run --ignore-scripts --no-audit --no-fund --loglevel=error) >"$tmp/out.$$" 2>&1; then
		echo "npm-platforms: npm ci passes npm's platform check as $pa"
	else
		echo "npm-platforms: npm ci FAILS as $pa:" >&2
		sed 's/^/  /' "$tmp/out.$$" | grep -v 'complete log' >&2 || true
		fail=1
	fi
done
exit $fail
