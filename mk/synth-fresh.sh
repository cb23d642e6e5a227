#!/usr/bin/env bash
# synth-fresh: `make synth` as a new user runs it, on a clean copy of the
# tree: the files git tracks (plus untracked, not ignored ones), without
# build/, cdk.out/, infra/cdk.out/ or node_modules/ from this checkout.
#
# CDK writes cdk.out/performance-counters.json only when synthesis takes more
# than 10 s per stack, to a path relative to the CLI's working directory. The
# copy synthesizes with the context @aws-cdk/core.slowSynthThreshold=0, which
# makes CDK take exactly that slow-synthesis path on every run (the threshold
# is the only thing "slow" changes), and then checks that the files the CLI
# expects are where it expects them.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
keep="${SYNTH_FRESH_KEEP:-}"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/bcc-synth-fresh.XXXXXX")"
cleanup() { if [ -z "$keep" ]; then rm -rf "$tmp"; else echo "synth-fresh: kept $tmp"; fi; }
trap cleanup EXIT

cd "$root"
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "synth-fresh: $root is not a git work tree" >&2; exit 1; }
# tar, not cp --parents (GNU only: macOS's BSD cp has neither --parents
# nor -t); --null -T - is understood by GNU tar and bsdtar alike.
git ls-files -z -co --exclude-standard | while IFS= read -r -d '' f; do
	[ -e "$f" ] && printf '%s\0' "$f"
done | tar -cf - --null -T - | (cd "$tmp" && tar -xf -)
for d in build cdk.out infra/cdk.out node_modules; do
	if [ -e "$tmp/$d" ]; then echo "synth-fresh: $d leaked into the clean copy" >&2; exit 1; fi
done

echo "synth-fresh: make synth in a clean copy ($tmp), slow-synthesis path forced"
# The sandbox stack: the largest (the stand-ins' functions and API too), and
# what a newcomer deploys without owners of their own.
(cd "$tmp" && make --no-print-directory synth SANDBOX=true CDK_SYNTH_FLAGS='-c @aws-cdk/core.slowSynthThreshold=0')

stack="$(cd "$tmp" && ls cdk.out/*.template.json 2>/dev/null | head -1)"
test -n "$stack" || { echo "synth-fresh: no template in cdk.out/" >&2; exit 1; }
test -s "$tmp/cdk.out/performance-counters.json" || { echo "synth-fresh: cdk.out/performance-counters.json missing: the slow-synthesis path was not taken" >&2; exit 1; }
if [ -e "$tmp/infra/cdk.out" ]; then echo "synth-fresh: the app wrote into infra/cdk.out (paths resolved against infra/, not the root)" >&2; exit 1; fi
echo "synth-fresh: ok ($stack, performance counters written where the CLI reads them)"
